"""`git papayu fix GOAL`: `plan`, then `apply` after confirmation.

One model serves both rounds (the embedded server starts once). Takes every option of
`apply`; `-y` skips the confirmation (and confirms deletions).
"""

from __future__ import annotations

import dataclasses
import sys
from typing import TYPE_CHECKING

import click

from papayu_git import output, prewarm
from papayu_git.commands import apply as apply_command
from papayu_git.commands import plan as plan_command
from papayu_git.commands.apply import transaction_options
from papayu_git.error_handler import handle_errors
from papayu_git.git import find_toplevel
from papayu_git.llm.routing import resolve
from papayu_git.llm.session import open_client
from papayu_git.transaction import apply_plan

if TYPE_CHECKING:
    from papayu_git.transaction import ApplyOptions


def confirmed(plan_id: str, yes: bool, question: str = "") -> bool:
    """-y, else a yes on a terminal; without one the plan stays stored for `apply ID`."""
    if yes:
        return True
    if not sys.stdin.isatty():
        output.info(f"papayu: not confirmed (no terminal); apply later with: git papayu apply {plan_id}")
        return False
    return click.confirm(question or f"Apply plan {plan_id}?", default=False, err=True)


def run(
    goal: str,
    options: ApplyOptions,
    mode: str | None = None,
    from_file: str | None = None,
    protocol: int | None = None,
    accept_memory: bool = False,
    as_json: bool = False,
) -> int:
    route = resolve(goal, mode)
    if route.confirm:
        return apply_command.run(None, options, protocol, as_json)
    root = find_toplevel()
    # The check's checkout is prepared while the model (and an embedded one's start) takes its time.
    prewarm.start(root, check=options.check, no_check=options.no_check, onto=options.onto)
    with open_client(root) as client:
        outcome = plan_command.make(goal, route, protocol, from_file, accept_memory, client)
        if not as_json:
            plan_command.render(outcome)
        if outcome.response.is_no_changes or not confirmed(outcome.plan.id, options.yes):
            if as_json:
                output.emit_json({"ok": True, "plan": plan_command.as_dict(outcome), "apply": None})
            return 0
        plan, response = apply_command.response_of(root, outcome.plan, protocol, options.onto, client)
    # The user confirmed the fix (or passed -y); existing tests it edits get their own question.
    allow = apply_command.confirm_test_edits(root, plan, response, options)
    options = dataclasses.replace(options, yes=True, allow_test_edits=allow)
    result = apply_plan(root, plan, response, options)
    if as_json:
        output.emit_json(
            {
                "ok": apply_command.exit_code(result) == 0,
                "plan": plan_command.as_dict(outcome),
                "apply": result.to_dict(),
            }
        )
    else:
        apply_command.report(result, False)
    return apply_command.exit_code(result)


@click.command("fix")
@click.argument("goal")
@click.option(
    "--mode",
    type=click.Choice(["plan", "apply", "fix-plan", "chat", "fixit"]),
    help="How the model is asked first (default: from the goal, else PAPAYU_LLM_MODE).",
)
@click.option("--from-file", "from_file", metavar="LOG", help="A log or test output to diagnose ('-' = stdin).")
@transaction_options(yes_help="Apply without asking (deletions included).")
@click.option("--protocol", type=click.Choice(["1", "2"]), help="Protocol version (default PAPAYU_PROTOCOL_VERSION).")
@click.option("--accept-memory", is_flag=True, help="Apply the model's memory_patch (else only on 'remember …').")
@click.option("--json", "as_json", is_flag=True, help="Machine-readable plan and apply result.")
def command(
    goal: str,
    mode: str | None,
    from_file: str | None,
    options: ApplyOptions,
    protocol: str | None,
    accept_memory: bool,
    as_json: bool,
) -> None:
    """Plan GOAL with the model, then apply the plan after confirmation.

    \b
    Same as `git papayu plan GOAL` followed by `git papayu apply <ID>`: the change
    is committed on papayu/<id>, checked in a temporary worktree and lands on your
    branch only if the check passes; otherwise it is rolled back and your branch,
    index and working tree are untouched. Exit 0 landed/review/not applied, 1 rolled back.
    """
    with handle_errors(as_json):
        raise SystemExit(
            run(goal, options, mode, from_file, int(protocol) if protocol else None, accept_memory, as_json)
        )
