"""`git papayu agent GOAL`: the model works through tools on a private workspace, then the result
goes through the transaction like any plan (docs/DESIGN.md, "Agent mode").

Takes every transaction option of `fix` (and `--from-file`), plus --max-steps and
--max-tool-output. Heavy libraries (pygit2, httpx) stay lazy: `agent --help` stays light.
"""

from __future__ import annotations

from typing import Any

import click

from papayu_git import agent, output, prewarm
from papayu_git.commands import apply as apply_command
from papayu_git.commands.apply import transaction_options
from papayu_git.commands.fix import may_apply, refuse_unlandable
from papayu_git.context import read_log_file
from papayu_git.error_handler import handle_errors
from papayu_git.housekeeping import open_checkout
from papayu_git.llm.session import open_client
from papayu_git.report import Landing, exit_code
from papayu_git.report import report as report_outcome
from papayu_git.secrets import printable, safe_text
from papayu_git.transaction import ApplyOptions, apply_plan


def run(
    goal: str,
    options: ApplyOptions,
    max_steps: int,
    max_output: int,
    from_file: str | None = None,
    as_json: bool = False,
) -> int:
    repo, root, pdir = open_checkout()
    log_text = read_log_file(from_file) if from_file else None
    refuse_unlandable(root, options.onto)
    prewarm.start(root, check=options.check, no_check=options.no_check, onto=options.onto)
    with open_client(root) as client:
        done = agent.run_agent(
            repo, root, pdir, goal, options, client, max_steps=max_steps, max_output=max_output, log_text=log_text
        )
    report: dict[str, Any] = {
        "plan_id": done.plan.id,
        "end": done.end,
        "changes": [{"status": s, "path": p} for s, p in done.changes],
        "steps": done.plan.extra["agent"]["steps"],
        "behaviour_flags": done.flags,
        "questions": done.questions,
        "warnings": done.warnings,
    }
    if not as_json:
        for line in agent.describe(done):
            output.result(line)
    for warning in done.warnings:  # on stderr, also with --json: a claim without evidence must be seen
        output.warn(safe_text(warning))
    if done.response is None:  # the agent asks before it changes anything: nothing is committed
        if as_json:
            output.emit_json({"ok": True, "agent": report, "apply": None})
        else:
            output.result("the agent asks (answer in a new goal; nothing was committed):")
            for question in done.questions:
                output.result(f"  ? {printable(question)}")
        return 0
    response = done.response
    if response.actions and not may_apply(done.plan.id, options.yes):
        if as_json:
            output.emit_json({"ok": True, "agent": report, "apply": None})
        return 0
    allow = apply_command.confirm_test_edits(root, done.plan, response, options)
    # Checked first; the question comes with the diff and the verdict (report.Landing).
    landing = Landing(root, options.yes, as_json)
    options = options._replace(yes=True, allow_test_edits=allow, confirm_landing=landing.confirm)
    try:
        result = apply_plan(root, done.plan, response, options)
    finally:
        agent.restore_command(pdir, done.plan.trace_id)
    if as_json:
        output.emit_json({"ok": exit_code(result) == 0, "agent": report, "apply": result.to_dict()})
    else:
        report_outcome(result, False, diffstat_shown=landing.diffstat_shown, check_shown=landing.check_shown)
    return exit_code(result)


@click.command("agent")
@click.argument("goal")
@click.option("--from-file", "from_file", metavar="LOG", help="A log or test output for the task ('-' = stdin).")
@transaction_options(yes_help="Apply the agent's change without asking (deletions included).")
@click.option(
    "--max-steps",
    type=click.IntRange(1, 200),
    default=24,
    show_default=True,
    help="At most N model turns; still calling tools then: ERR_AGENT_MAX_STEPS, nothing lands.",
)
@click.option(
    "--max-tool-output",
    "max_output",
    type=click.IntRange(1000, 1_000_000),
    default=20_000,
    show_default=True,
    metavar="CHARS",
    help="Cut each tool result at CHARS characters (with a note saying so).",
)
@click.option("--json", "as_json", is_flag=True, help="Machine-readable agent run and apply result.")
def command(
    goal: str,
    from_file: str | None,
    options: ApplyOptions,
    max_steps: int,
    max_output: int,
    as_json: bool,
) -> None:
    """Let the model work on GOAL with tools (read, search, patch, run the check), then
    apply its change like a plan.

    \b
    The model reads and patches a private copy of your branch's tip; your branch, index
    and working tree are untouched while it works. Its final change is committed on
    papayu/<id>, checked, and lands only if the check passes (else rolled back).
    Commands other than the check run only with --run-proposed, sandboxed.
    Exit 0 landed/review/nothing to apply, 1 rolled back, refused or ERR_AGENT_MAX_STEPS.
    """
    with handle_errors(as_json):
        raise SystemExit(run(goal, options, max_steps, max_output, from_file, as_json))
