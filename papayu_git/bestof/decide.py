"""After the checks: the order, why each other candidate lost, and the winner's landing
(docs/DESIGN.md, "Best of N").

The winner lands exactly as a kept plan does (`land_branch`: only the checked commit, a
compare-and-swap from the pinned tip, the verdict already in its trailer, `undo ID` after), after
the same question as `fix` asks (its diff and verdict, then "Land?"; -y: the diffstat). Without a
green candidate nothing lands, and the best red ones are offered to `retry` with their failures.
"""

from __future__ import annotations

import sys
from typing import TYPE_CHECKING, Any

import click

from papayu_git import output, plans, settings, traces
from papayu_git.bestof import matrix, ranking, runs
from papayu_git.errors import PapayuError
from papayu_git.git import run_git
from papayu_git.report import Landing, report
from papayu_git.secrets import safe_text
from papayu_git.transaction import LandingPreview, land_branch

if TYPE_CHECKING:
    from papayu_git.bestof.judge import Ruling
    from papayu_git.bestof.matrix import Row
    from papayu_git.bestof.session import Session
    from papayu_git.transaction import ApplyResult

RETRY_OFFERED = 2  # red candidates named with their `retry` command when none is green


def rank(session: Session) -> Row | None:
    """Rank the checked candidates, let a judge break a tie at the top, say why each lost."""
    checked = {row.index: row for row in session.rows if row.state in matrix.CHECKED}
    ordered = ranking.order(row.score() for row in checked.values())
    tied = ranking.tied_at_top(ordered)
    ruling = _judge(session, [checked[s.index] for s in tied]) if len(tied) > 1 else None
    if ruling is not None and ruling.choice is not None:
        ordered.sort(key=lambda s: s.index != ruling.choice)  # stable: the tie's order is otherwise kept
    for number, score in enumerate(ordered, 1):
        checked[score.index].rank = number
    winner = checked[ordered[0].index] if ordered and ordered[0].green else None
    for row in session.rows:
        row.lost = "" if row is winner else _why(row, winner, ruling)
    session.record.update(
        winner=winner.index if winner else None,
        ranking=list(ranking.CRITERIA),
        judge=ruling.to_dict() if ruling else None,
    )
    return winner


def _why(row: Row, winner: Row | None, ruling: Ruling | None) -> str:
    if row.state not in (matrix.GREEN, matrix.LANDED) or winner is None:
        return row.why_not()
    behind = ranking.why_lost(row.score(), winner.score())
    if behind:
        return behind
    if ruling is not None and ruling.choice == winner.index:
        return f"tied with #{winner.index}; the judge ({ruling.model}) chose #{winner.index}: {ruling.reason}"
    if ruling is not None and ruling.error:
        return f"tied with #{winner.index}; the judge failed ({ruling.error['code']}), so the lower number wins"
    return f"tied with #{winner.index}; the lower number wins"


def _judge(session: Session, tied: list[Row]) -> Ruling | None:
    spec = settings.get("candidates_judge", str(session.root)).strip()
    if not spec:
        return None
    from papayu_git.bestof.judge import rule  # lazy: a model only for a tie

    numbers = ", ".join(f"#{row.index}" for row in tied)
    output.info(f"papayu: {numbers} tie on every criterion; asking the judge {safe_text(spec)}")
    diffs = {row.index: _diff(session, row.commit) for row in tied}
    ruling = rule(session.root, spec, session.question.route.goal, diffs)
    if ruling.error:  # shown, never silent
        output.warn(
            f"the judge failed: {ruling.error['code']}: {safe_text(ruling.error['reason'])}; the lower number wins"
        )
    return ruling


def _diff(session: Session, commit: str) -> str:
    args = ["diff", "--no-ext-diff", "--no-textconv", "--no-color", session.target.tip, commit]
    return str(run_git(args, cwd=session.root, check=False).stdout)


def conclude(session: Session, winner: Row | None) -> int:
    """Land the winner (or keep it), print the matrix and the outcome; the exit code."""
    landed: ApplyResult | None = None
    error: PapayuError | None = None
    if winner is None:
        error = _no_green(session)
    else:
        landed, error = _land(session, winner)
    state = "landed" if landed else "no_green" if winner is None else "kept"
    session.save(state)
    _trace(session, state)
    _report(session, winner, landed, error)
    return 1 if error else 0


def _land(session: Session, winner: Row) -> tuple[ApplyResult | None, PapayuError | None]:
    where = f"{session.run_id}:{winner.index}"
    if not session.options.as_json:
        output.result("\n".join(matrix.final(session.rows)))
    if session.options.review or not (session.options.yes or sys.stdin.isatty()):
        why = "--review" if session.options.review else "no terminal, no -y"
        output.info(f"papayu: #{winner.index} wins, not landed ({why}); land it with: git papayu land {where}")
        return None, None
    check = (plans.load(session.pdir, winner.plan_id).extra.get("apply") or {}).get("check")
    landing = Landing(session.root, session.options.yes, session.options.as_json)
    preview = LandingPreview(winner.plan_id, winner.branch, winner.commit, session.target.branch, check)
    try:
        confirmed = landing.confirm(preview)
    except click.exceptions.Abort:  # Ctrl-C at the question reaches us as click's Abort
        raise KeyboardInterrupt from None
    if not confirmed:
        output.result(f"#{winner.index} not landed; kept on {winner.branch}: git papayu land {where}")
        return None, None
    key = runs.branch_key(session.run_id, winner.index)
    try:
        result = land_branch(session.repo, session.pdir, winner.plan_id, session.options.onto, branch=key)
    except PapayuError as exc:
        return None, exc
    winner.state, winner.kept = matrix.LANDED, False
    session.record["landed"] = result.to_dict()
    if not session.options.as_json:
        report(result, False, diffstat_shown=landing.diffstat_shown, check_shown=landing.check_shown)
    return result, None


def _no_green(session: Session) -> PapayuError:
    reds = sorted((r for r in session.rows if r.state in matrix.CHECKED and r.plan_id), key=lambda r: r.rank)
    offers = [
        f"git papayu retry {session.run_id}:{row.index}   (#{row.index}: {row.code or row.state}"
        + (f"; failing: {', '.join(row.broken[:3])}" if row.broken else "")
        + ")"
        for row in reds[:RETRY_OFFERED]
    ]
    session.record["retry"] = offers
    if not session.options.as_json:
        output.result("\n".join(matrix.final(session.rows)))
    hint = f"git papayu show {session.run_id}" + "".join(f"; {offer}" for offer in offers)
    checked = sum(1 for r in session.rows if r.state in matrix.CHECKED)
    return PapayuError(
        "ERR_BEST_OF_NO_GREEN",
        f"none of the {len(session.rows)} candidates passed the gate ({checked} checked); nothing landed",
        path=session.run_id,
        hint=hint,
    )


def _report(session: Session, winner: Row | None, landed: ApplyResult | None, error: PapayuError | None) -> None:
    if session.options.as_json:
        output.emit_json(
            {
                "ok": error is None,
                "run": session.record,
                "landed": landed.to_dict() if landed else None,
                **({"error": error.to_dict()} if error else {}),
            }
        )
        return
    if error is not None:
        output.error(safe_text(error.format(), multiline=True))
    if winner is not None:
        output.info(
            f"papayu: run {session.run_id}: git papayu show {session.run_id} (the matrix), drop {session.run_id}"
        )


def _trace(session: Session, state: str) -> None:
    """One trace for the run (its candidates' plans and applies have theirs): `stats` counts
    each candidate from it, and the judge's tokens."""
    judge: dict[str, Any] = session.record.get("judge") or {}
    provider, _, model = str(judge.get("model", "")).partition("/")
    request: dict[str, Any] = {
        "mode": "judge", "provider": provider, "model": model, "calls": 1, "usage": judge.get("usage") or [{}],
    }  # fmt: skip
    traces.write_record(
        session.pdir,
        traces.new_trace_id(),
        "best-of",
        None,
        goal=session.question.route.goal,
        best_of={
            "run": session.run_id,
            "state": state,
            "winner": session.record.get("winner"),
            "candidates": [
                {k: row.to_dict()[k] for k in ("index", "model", "plan_id", "state", "code", "tokens", "seconds")}
                for row in session.rows
            ],
        },
        **({"request": request} if judge else {}),
    )
