"""`git papayu retry ID`: plan again for a plan whose check failed, telling the model how
(docs/DESIGN.md, "Retrying a red check").

The new plan is built on the current tip with the previous plan's change, the verdict and the
failing tests' output in the request; it is applied like `fix` (see, then land). Takes every
option of `apply`.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

import click

from papayu_git import plans, prewarm, retry
from papayu_git.commands.apply import transaction_options
from papayu_git.commands.drop import resolve_generated
from papayu_git.commands.fix import YES_HELP, Loop, refuse_unlandable
from papayu_git.error_handler import handle_errors
from papayu_git.errors import PapayuError
from papayu_git.housekeeping import open_checkout
from papayu_git.llm.routing import resolve
from papayu_git.llm.session import open_client
from papayu_git.outcomes import ApplyState
from papayu_git.secrets import safe_text
from papayu_git.transaction import ApplyOptions

MODES = ("plan", "apply", "fix-plan", "chat", "fixit")


def run(plan_id: str, options: ApplyOptions, attempts: int, as_json: bool = False) -> int:
    repo, root, pdir = open_checkout()
    plan = plans.load(pdir, resolve_generated(repo, pdir, plan_id))
    outcome = plan.extra.get("apply") or {}
    refuse_superseded(pdir, plan.id, outcome)
    if not retry.retryable(outcome):
        state = outcome.get("state") or "not applied"
        code = (outcome.get("error") or {}).get("code")
        raise PapayuError(
            "ERR_NOT_RETRYABLE",
            f"plan {plan.id} is {safe_text(state)}{f' ({code})' if code else ''}: no failed check to tell the model",
            path=plan.id,
            hint=f"'git papayu show {plan.id}' shows it; ask anew with: git papayu fix GOAL",
        )
    if not plan.goal:
        raise PapayuError("ERR_NOT_RETRYABLE", f"plan {plan.id} has no goal to plan again for", path=plan.id)
    mode = plan.extra.get("prompt_mode")
    route = resolve(plan.goal, mode if mode in MODES else None)
    refuse_unlandable(root, options.onto)
    prewarm.start(root, check=options.check, no_check=options.no_check, onto=options.onto)
    summary = plan.response.get("summary", "") if isinstance(plan.response, dict) else ""
    with open_client(root) as client:
        loop = Loop(root, route, options, plan.protocol, False, as_json, client)
        previous = retry.feedback(root, plan.id, str(summary or ""), outcome, loop.window())
        return loop.run(attempts, previous=previous, before=outcome)


def refuse_superseded(pdir: Path, plan_id: str, outcome: dict[str, Any]) -> None:
    """A later attempt of the same `fix` landed in this plan's place, and is still on its branch:
    asking the model again would end in a change the branch already has."""
    later = str(outcome.get("superseded_by") or "")
    try:
        landed = (plans.load(pdir, later).extra.get("apply") or {}) if later else {}
    except PapayuError:
        return
    if landed.get("state") != ApplyState.LANDED or landed.get("undone_to"):
        return
    raise PapayuError(
        "ERR_NOT_RETRYABLE",
        f"plan {plan_id} was tried again already: plan {later} landed on {safe_text(landed.get('target', ''))} "
        "in its place",
        path=plan_id,
        hint=f"'git papayu show {later}' shows what landed; 'git papayu undo {later}' takes it back",
    )


@click.command("retry")
@click.argument("plan_id", metavar="ID")
@click.option(
    "--attempts",
    type=click.IntRange(1, 10),
    default=1,
    show_default=True,
    metavar="N",
    help="Plans to try; each red one is told to the next.",
)
@transaction_options(yes_help=YES_HELP)
@click.option("--json", "as_json", is_flag=True, help="Machine-readable attempts, the last plan and its result.")
def command(plan_id: str, attempts: int, options: ApplyOptions, as_json: bool) -> None:
    """Plan again for plan ID, whose check failed: the model gets the goal, the previous plan's
    change, the verdict and the failing tests' output (masked), then the new plan is applied like
    `fix` (checked, shown, landed on your yes).

    \b
    ID: a plan id, a unique prefix of it or of its hash part, @ (the newest), @~N.
    Exit 0 landed / kept / not applied, 1 rolled back.
    """
    with handle_errors(as_json):
        raise SystemExit(run(plan_id, options, attempts, as_json))
