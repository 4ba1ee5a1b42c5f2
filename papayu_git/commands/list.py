"""`git papayu list`: stored plans and generated branches with their state."""

from __future__ import annotations

from typing import Any

import click

from papayu_git import output, plans
from papayu_git.bestof.runs import parse_key
from papayu_git.error_handler import handle_errors
from papayu_git.housekeeping import open_checkout
from papayu_git.objects import BRANCH_PREFIX, branch_name, generated_branches
from papayu_git.outcomes import ApplyState, check_word
from papayu_git.plans import plan_name
from papayu_git.protocol import raw_actions
from papayu_git.secrets import safe_text


def _state(plan: Any, has_branch: bool, repo: Any = None) -> str:
    outcome = plan.extra.get("apply") or {}
    state = outcome.get("state")
    if state == ApplyState.LANDED and repo is not None:
        return _landed_now(repo, outcome)
    if state == ApplyState.REVIEW and not has_branch:
        return "review (branch deleted)"  # by hand (git branch -D): nothing is left to land
    if state:
        return f"{state} (branch kept)" if has_branch and state != ApplyState.REVIEW else state
    if has_branch:
        return "committed"
    return "ready" if raw_actions(plan.response) else "planned"


def _landed_now(repo: Any, outcome: dict[str, Any]) -> str:
    """A landing re-checked against its branch today: still there, reverted (a `git revert` of it
    on the branch since), or no longer on the branch (reset away)."""
    commit, target = outcome.get("commit"), outcome.get("target")
    try:
        tip = repo.references[f"refs/heads/{target}"].target
        landed = repo[commit].id
    except (KeyError, ValueError, TypeError):
        return "landed"
    if tip != landed and not repo.descendant_of(tip, landed):
        return "landed (undone)" if outcome.get("undone_to") else "landed (not on branch)"
    short = str(landed)[:12]
    for entry in repo.walk(tip):  # a revert of it since? (only the commits after it are read)
        if entry.id == landed:
            break
        if f"This reverts commit {landed}" in entry.message or f"This reverts commit {short}" in entry.message:
            return "landed (reverted)"
    return "landed"


def _check(outcome: dict[str, Any]) -> str:
    """The verdict on the plan, in the report's words (outcomes.check_word): "passed" and "fixes
    nothing" are both kept for review, and read apart here."""
    if outcome.get("check"):
        return check_word(outcome["check"])
    if (outcome.get("error") or {}).get("code") == "ERR_NO_CHECK":
        return "none found"
    if outcome.get("check_skipped"):
        return "skipped"
    return "interrupted" if outcome.get("state") == ApplyState.INTERRUPTED else "-"


def _branch_key(plan: Any) -> str:
    """The plan's branch under papayu/: its id, or a best-of candidate's `<run>/<i>`."""
    recorded = str((plan.extra.get("apply") or {}).get("branch") or "").removeprefix(BRANCH_PREFIX)
    return recorded if parse_key(recorded) else plan.id


def rows() -> list[dict[str, Any]]:
    repo, _root, pdir = open_checkout()
    branches = generated_branches(repo)
    out = []
    claimed = set()
    for plan in plans.list_plans(pdir):
        summary = plan.response.get("summary", "") if isinstance(plan.response, dict) else ""
        key = _branch_key(plan)
        claimed.add(key)
        outcome = plan.extra.get("apply") or {}
        out.append(
            {
                "id": plan.id,
                "name": plan_name(plan.id, branch_name(key)),  # a best-of candidate's RUN:N
                "state": _state(plan, key in branches, repo),
                "check": _check(outcome),
                "branch": branch_name(key) if key in branches else "",
                "target": outcome.get("target") or plan.branch,
                "trace_id": plan.trace_id,  # its latest: the apply's, else the PLAN round's
                "summary": (summary or plan.goal).splitlines()[0] if (summary or plan.goal) else "",
            }
        )
    for plan_id in sorted(set(branches) - claimed):
        row = {"id": plan_id, "name": plan_name(plan_id, branch_name(plan_id)), "state": "branch only", "check": "-"}
        row.update(branch=branch_name(plan_id), target="", trace_id="")
        out.append({**row, "summary": ""})
    return out


def run(as_json: bool = False) -> int:
    table = rows()
    if as_json:
        output.emit_json({"ok": True, "plans": table})
        return 0
    if not table:
        output.result("no plans yet (git papayu plan GOAL, or git papayu apply FILE)")

    shown = [{k: safe_text(v) for k, v in row.items()} for row in table]  # the summary is the model's
    ids = max([len("ID"), *(len(r["name"]) for r in shown)])
    width = max([len("STATE"), *(len(r["state"]) for r in shown)])
    check = max([len("CHECK"), *(len(r["check"]) for r in shown)])
    target = max([len("TARGET"), *(len(r["target"] or "-") for r in shown)])
    if shown:  # TRACE: a prefix for `trace show` (which also takes the plan's own id)
        output.result(
            f"{'ID':<{ids}}  {'STATE':<{width}}  {'CHECK':<{check}}  {'TARGET':<{target}}  {'TRACE':<8}  SUMMARY"
        )
    for row in shown:  # masked before it is cut (a cut token no longer matches)
        branch = f"  [{row['branch']}]" if row["branch"] else ""
        summary = row["summary"][:60]
        trace = row["trace_id"][:8] or "-"
        output.result(
            f"{row['name']:<{ids}}  {row['state']:<{width}}  {row['check']:<{check}}  "
            f"{row['target'] or '-':<{target}}  {trace:<8}  {summary}{branch}"
        )
    return 0


@click.command("list")
@click.option("--json", "as_json", is_flag=True, help="Machine-readable output.")
def command(as_json: bool) -> None:
    """List stored plans and papayu/* branches: id (a best-of candidate's RUN:N), state
    (planned, ready, committed, review, landed, rolled_back, dropped), the check's verdict
    (passed, fixes nothing, FAILED, TIMED OUT, none found, skipped, interrupted), target
    branch, trace (`git papayu trace show ID`) and summary."""
    with handle_errors(as_json):
        raise SystemExit(run(as_json))
