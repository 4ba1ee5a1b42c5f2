"""`show RUN`, `land RUN[:N]`, `drop RUN[:N]`: a best-of run through the plan commands
(docs/DESIGN.md, "Best of N"). `show`, `land` and `drop` hand an argument that names a run
(`best-…`) here; a candidate's own plan id works with them as any plan's does."""

from __future__ import annotations

from typing import Any

from papayu_git import output
from papayu_git.bestof import matrix, runs
from papayu_git.bestof.matrix import Row
from papayu_git.errors import PapayuError
from papayu_git.housekeeping import open_checkout
from papayu_git.report import report
from papayu_git.secrets import safe_text


def show(arg: str, as_json: bool) -> int:
    _repo, _root, pdir = open_checkout()
    run_id, number = runs.resolve(pdir, arg)
    record = runs.load(pdir, run_id)
    if number is not None:
        from papayu_git.commands import show as show_command  # the candidate is a plan like any other

        return show_command.run(str(runs.candidate(record, number)["plan_id"]), as_json)
    if as_json:
        output.emit_json({"ok": True, "run": record})
        return 0
    with output.paged():
        for line in lines(record):
            output.result(line)
    return 0


def lines(record: dict[str, Any]) -> list[str]:
    rows = [_row(data) for data in record["candidates"] if isinstance(data, dict)]
    winner = record.get("winner")
    out = [
        output.colour(f"run {record['id']}", "bold") + f"  state: {safe_text(record.get('state', '?'))}",
        f"goal: {safe_text(record.get('goal', ''), multiline=True)}",
        f"on {safe_text(record.get('target', ''))} @ {str(record.get('tip', ''))[:12]}; ranked by: "
        + "; ".join(record.get("ranking") or []),
        "",
        *matrix.final(rows),
    ]
    judge = record.get("judge") or {}
    if judge:
        said = judge.get("error", {}).get("code") if judge.get("error") else f"chose #{judge.get('choice')}"
        out.append(f"judge {safe_text(judge.get('model', ''))}: {safe_text(said)}")
    for offer in record.get("retry") or []:
        out.append(f"retry: {safe_text(offer)}")
    if any(row.kept for row in rows):
        land = (
            f"land one: git papayu land {record['id']}:{winner}    "
            if winner and record.get("state") != "landed"
            else ""
        )
        out.append(f"{land}drop them: git papayu drop {record['id']}")
    return out


def _row(data: dict[str, Any]) -> Row:
    known = {k: v for k, v in data.items() if k in Row.__dataclass_fields__}
    return Row(**known)


def land(arg: str, onto: str | None, force: bool, as_json: bool) -> int:
    from papayu_git.transaction import land_branch  # see commands/land.py

    repo, _root, pdir = open_checkout()
    run_id, number = runs.resolve(pdir, arg)
    record = runs.load(pdir, run_id)
    number = number or record.get("winner")
    if not number:
        raise PapayuError("ERR_RUN_NOT_FOUND", f"run {run_id} has no winner; name a candidate: {run_id}:N")
    row = runs.candidate(record, int(number))
    result = land_branch(
        repo, pdir, str(row["plan_id"]), onto, force=force, branch=runs.branch_key(run_id, int(number))
    )
    row.update(state=matrix.LANDED, kept=False)
    record.update(state="landed", landed=result.to_dict())
    runs.save(pdir, record)
    report(result, as_json)
    return 0


def drop(arg: str, as_json: bool) -> int:
    repo, _root, pdir = open_checkout()
    run_id, number = runs.resolve(pdir, arg)
    dropped = runs.drop(repo, pdir, run_id, None if number is None else [number])
    if as_json:
        output.emit_json({"ok": True, "run": run_id, "dropped": dropped})
    elif dropped:
        output.result(f"dropped {', '.join(f'papayu/{runs.branch_key(run_id, n)}' for n in dropped)}")
    else:
        output.result(f"run {run_id}: no candidate branch to drop")
    return 0
