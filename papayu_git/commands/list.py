"""`git papayu list`: stored plans and generated branches with their state."""

from __future__ import annotations

from typing import Any

import click

from papayu_git import output, plans
from papayu_git.error_handler import handle_errors
from papayu_git.housekeeping import open_checkout
from papayu_git.objects import branch_name, generated_branches
from papayu_git.outcomes import ApplyState
from papayu_git.protocol import raw_actions
from papayu_git.secrets import safe_text


def _state(plan: Any, has_branch: bool) -> str:
    outcome = plan.extra.get("apply") or {}
    state = outcome.get("state")
    if state:
        return f"{state} (branch kept)" if has_branch and state == ApplyState.ROLLED_BACK else state
    if has_branch:
        return "committed"
    return "ready" if raw_actions(plan.response) else "planned"


def rows() -> list[dict[str, Any]]:
    repo, _root, pdir = open_checkout()
    branches = generated_branches(repo)
    out = []
    for plan in plans.list_plans(pdir):
        summary = plan.response.get("summary", "") if isinstance(plan.response, dict) else ""
        out.append(
            {
                "id": plan.id,
                "state": _state(plan, plan.id in branches),
                "branch": branch_name(plan.id) if plan.id in branches else "",
                "target": (plan.extra.get("apply") or {}).get("target") or plan.branch,
                "summary": (summary or plan.goal).splitlines()[0] if (summary or plan.goal) else "",
            }
        )
    known = {row["id"] for row in out}
    for plan_id in sorted(set(branches) - known):
        out.append({"id": plan_id, "state": "branch only", "branch": branch_name(plan_id), "target": "", "summary": ""})
    return out


def run(as_json: bool = False) -> int:
    table = rows()
    if as_json:
        output.emit_json({"ok": True, "plans": table})
        return 0
    if not table:
        output.result("no plans yet (git papayu plan GOAL, or git papayu apply FILE)")

    for row in table:  # the summary is the model's; masked before it is cut (a cut token no longer matches)
        row = {k: safe_text(v) for k, v in row.items()}
        branch = f"  [{row['branch']}]" if row["branch"] else ""
        output.result(f"{row['id']}  {row['state']:<12} {row['target'] or '-':<12} {row['summary'][:60]}{branch}")
    return 0


@click.command("list")
@click.option("--json", "as_json", is_flag=True, help="Machine-readable output.")
def command(as_json: bool) -> None:
    """List stored plans and papayu/* branches: id, state (planned, ready, committed,
    review, landed, rolled_back, dropped), target branch and summary."""
    with handle_errors(as_json):
        raise SystemExit(run(as_json))
