"""`git papayu show ID`: the plan and its diff, coloured on a terminal (SPEC §1)."""

from __future__ import annotations

import sys
from typing import TYPE_CHECKING, Any

import click

from papayu_git import output
from papayu_git.error_handler import handle_errors

if TYPE_CHECKING:
    import pygit2


def plan_diff(repo: "pygit2.Repository", plan_id: str, recorded_commit: str | None, colour: bool) -> str:
    """`git diff` of papayu/<id> (or of the recorded commit once landed) against its parent."""
    from papayu_git.git import run_git
    from papayu_git.worktree import commit_of, generated_branches

    commit = generated_branches(repo).get(plan_id) or recorded_commit
    if not commit or commit not in repo:
        return ""
    parent = str(commit_of(repo, commit).parents[0].id)
    args = ["diff", "--stat", "--patch", f"--color={'always' if colour else 'never'}", parent, commit]
    return str(run_git(args, cwd=repo.workdir).stdout)


def run(plan_id: str, as_json: bool = False) -> int:
    from papayu_git import plans
    from papayu_git.commands.drop import resolve_generated
    from papayu_git.housekeeping import open_checkout

    repo, _root, pdir = open_checkout()
    resolved = resolve_generated(repo, pdir, plan_id)
    try:
        plan: Any = plans.load(pdir, resolved)
    except Exception:  # noqa: BLE001 - a branch without a plan record still has a diff
        plan = None
    outcome = (plan.extra.get("apply") or {}) if plan else {}
    colour = output.use_colour(sys.stdout) and not as_json
    diff = plan_diff(repo, resolved, outcome.get("commit"), colour)
    if as_json:
        output.emit_json({"ok": True, "plan": plan.to_json() if plan else None, "diff": diff})
        return 0
    if plan is not None:
        _print_plan(plan, outcome)
    output.result(diff or "(no commit yet: apply the plan to see its diff)")
    return 0


def _print_plan(plan: Any, outcome: dict[str, Any]) -> None:
    data: dict[str, Any] = plan.response if isinstance(plan.response, dict) else {"actions": plan.response or []}
    output.result(output.colour(f"plan {plan.id}", "bold") + f"  state: {outcome.get('state', 'not applied')}")
    if plan.goal:
        output.result(f"goal: {plan.goal}")
    if data.get("summary"):
        output.result(f"summary: {data['summary']}")
    for step in data.get("plan") or []:
        output.result(f"  - {step.get('step', step) if isinstance(step, dict) else step}")
    for action in data.get("actions") or (data.get("proposed_changes") or {}).get("actions") or []:
        output.result(f"  {action.get('kind')} {action.get('path')}")
    for risk in data.get("risks") or []:
        output.result(output.colour(f"  risk: {risk}", "yellow"))
    if outcome.get("test_edits"):
        output.result(output.colour("edits existing tests: "
                                    + ", ".join(outcome["test_edits"]), "yellow"))
    output.result("")


@click.command("show")
@click.argument("plan_id", metavar="ID")
@click.option("--json", "as_json", is_flag=True, help="Machine-readable output (plan record + plain diff).")
def command(plan_id: str, as_json: bool) -> None:
    """Show a plan (goal, summary, steps, actions, risks) and the diff of its commit."""
    with handle_errors(as_json):
        raise SystemExit(run(plan_id, as_json))
