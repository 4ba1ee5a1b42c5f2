"""`git papayu plan GOAL`: ask the model for a plan, validate it, store it."""

from __future__ import annotations

import json
from pathlib import Path
from typing import TYPE_CHECKING, Any

import click

from papayu_git import output, prewarm, settings
from papayu_git.commands import apply as apply_command
from papayu_git.commands.show import step_lines
from papayu_git.context import read_log_file
from papayu_git.error_handler import handle_errors
from papayu_git.git import find_toplevel, run_git
from papayu_git.llm.planner import PlanRequest, base_of, make_plan
from papayu_git.llm.readiness import require_model
from papayu_git.llm.routing import resolve
from papayu_git.llm.session import open_client
from papayu_git.objects import BRANCH_PREFIX
from papayu_git.secrets import PLAN_VERBATIM, mask_data, safe_text
from papayu_git.transaction import ApplyOptions

if TYPE_CHECKING:
    from papayu_git.llm.planner import PlanOutcome
    from papayu_git.llm.routing import Route
    from papayu_git.retry import Feedback

MODE_HELP = (
    "plan/fix-plan: a plan, applied later; chat: discuss and plan; fixit: the fix at once; "
    "apply: the change at once (default: from the goal, else PAPAYU_LLM_MODE)."
)


# Everything the model wrote is printed through safe_text (masked, control characters escaped).
def _bullets(title: str, items: Any) -> list[str]:
    rows = [safe_text(i) for i in items or () if str(i).strip()]
    return [output.colour(title, "bold"), *(f"  - {r}" for r in rows)] if rows else []


def next_command(outcome: PlanOutcome) -> str:
    """The command that applies the plan, as it works when pasted: on a detached HEAD `apply`
    needs a branch to land on (the one at that commit, else a new one)."""
    plan = outcome.plan
    if outcome.response.is_no_changes:
        return "nothing to apply (NO_CHANGES)"
    if plan.branch or not plan.base_commit:
        return f"git papayu apply {plan.id}"
    args = ["for-each-ref", "--points-at", plan.base_commit, "--format=%(refname:short)", "refs/heads/"]
    at = [b for b in run_git(args, check=False).stdout.split() if not b.startswith(BRANCH_PREFIX)]
    if len(at) == 1:
        return f"git papayu apply {plan.id} --onto {at[0]}"
    return f"git switch -c fix-{plan.id[-6:]} && git papayu apply {plan.id}"


def render(outcome: PlanOutcome, *, say_next: bool = True) -> None:
    """The plan for a human; ``say_next``: end with the command that applies it (not in `fix`,
    which goes on by itself)."""
    plan, response = outcome.plan, outcome.response
    head = f"plan {plan.id} ({plan.extra.get('prompt_mode', plan.mode)}, protocol v{plan.protocol})"
    lines = [
        output.colour(head, "cyan"),
        f"against {plan.branch or 'detached HEAD'} @ {plan.base_commit[:12]}",
        output.colour("Summary:", "bold"),
        *(f"  {line}" for line in safe_text(response.summary.strip() or "-", multiline=True).split("\n")),
    ]
    lines += step_lines(response.plan)
    lines += _bullets("Questions:", response.questions)
    lines += _bullets("Risks:", response.risks)
    lines += _bullets("Proposed actions:", [f"{a.kind.value} {a.path}" for a in response.ordered_actions()])
    lines += _bullets("Commands proposed by the model (papayu does not run them):", response.commands_to_run)
    for line in lines:
        output.result(line)
    for warning in outcome.warnings:
        output.warn(safe_text(warning, multiline=True))
    for flag in outcome.flags:
        output.warn(f"behaviour contract: {safe_text(flag['message'], multiline=True)}")
    if say_next:
        output.result(f"next: {next_command(outcome)}")


def as_dict(outcome: PlanOutcome) -> dict[str, Any]:
    response = outcome.response
    return {
        "ok": True,
        "plan_id": outcome.plan.id,
        "path": str(outcome.path),
        "mode": outcome.plan.mode,
        "prompt_mode": outcome.plan.extra.get("prompt_mode"),
        "protocol": outcome.plan.protocol,
        "base_commit": outcome.plan.base_commit,
        "trace_id": outcome.plan.trace_id,
        "summary": response.summary,
        "plan": list(response.plan),
        "questions": list(response.questions),
        "risks": list(response.risks),
        "actions": [a.to_dict() for a in response.actions],
        "commands_to_run": list(response.commands_to_run),
        "no_changes": response.is_no_changes,
        "warnings": list(outcome.warnings),
        "behaviour_flags": list(outcome.flags),
        "timings": {k: round(v, 4) for k, v in outcome.timings.items()},
        "next": next_command(outcome),
    }


def online_context(root: Path, research_id: str | None) -> str:
    """The ONLINE_CONTEXT block of a stored research (`--use-research ID`); nothing is fetched."""
    if not research_id:
        return ""
    from papayu_git import research
    from papayu_git.git import papayu_dir
    from papayu_git.repository import open_repo

    return research.load(papayu_dir(open_repo(root)), research_id).context_block()


def make(
    goal: str,
    route: Route,
    protocol: int | None,
    from_file: str | None,
    accept_memory: bool,
    client: Any = None,
    use_research: str | None = None,
    previous: Feedback | None = None,
) -> PlanOutcome:
    """The PLAN cycle for ``route`` (opens the model unless ``client`` is given); ``previous``: a
    plan whose check failed, told to the model (retry.py)."""
    root = find_toplevel()
    log_text = None
    if from_file:
        log_text = read_log_file(from_file)
    if previous is not None and previous.log:  # the failing output feeds the context's heuristics too
        log_text = f"{log_text}\n{previous.log}" if log_text else previous.log
    request = PlanRequest(
        route.goal,
        route.prompt_mode,
        protocol or settings.get_int("protocol_version", str(root)),
        log_text,
        accept_memory,
        online_context(root, use_research),
        previous.text if previous else "",
        previous.plan_id if previous else "",
    )
    if client is not None:
        return make_plan(root, request, client)
    with open_client(root) as opened:
        return make_plan(root, request, opened)


def run(
    goal: str,
    mode: str | None = None,
    from_file: str | None = None,
    out: str | None = None,
    protocol: int | None = None,
    accept_memory: bool = False,
    as_json: bool = False,
    use_research: str | None = None,
) -> int:
    route = resolve(goal, mode)
    if route.confirm:
        output.info(f"papayu: '{goal}' confirms: applying the latest stored plan")
        return apply_command.run(None, ApplyOptions(), None, as_json)
    root = find_toplevel()
    base_of(root)  # a repository without a commit is refused first, as `fix` refuses one it cannot land on
    require_model(str(root))  # then the model, before anything runs: no model, nothing to prepare
    prewarm.start(root)  # the check's checkout, prepared while the model thinks
    outcome = make(goal, route, protocol, from_file, accept_memory, use_research=use_research)
    if out:  # masked like the stored plan (plans.save)
        record = mask_data(outcome.plan.to_json(), keep=PLAN_VERBATIM)
        Path(out).write_text(json.dumps(record, ensure_ascii=False, indent=2) + "\n", encoding="utf-8")
    if as_json:
        output.emit_json(as_dict(outcome))
    else:
        render(outcome)
    return 0


@click.command("plan")
@click.argument("goal")
@click.option("--mode", type=click.Choice(["plan", "apply", "fix-plan", "chat", "fixit"]), help=MODE_HELP)
@click.option("--from-file", "from_file", metavar="LOG", help="A log or test output to diagnose ('-' = stdin).")
@click.option("-o", "--output", "out", metavar="FILE", help="Also write the stored plan record to FILE.")
@click.option(
    "--protocol", type=click.Choice(["1", "2"]), help="Protocol version (default PAPAYU_PROTOCOL_VERSION, 2)."
)
@click.option("--accept-memory", is_flag=True, help="Apply the model's memory_patch (else only on 'remember …').")
@click.option(
    "--use-research", "use_research", metavar="ID", help="Add a stored online research (untrusted) to the context."
)
@click.option("--json", "as_json", is_flag=True, help="Machine-readable output.")
def command(
    goal: str,
    mode: str | None,
    from_file: str | None,
    out: str | None,
    protocol: str | None,
    accept_memory: bool,
    use_research: str | None,
    as_json: bool,
) -> None:
    """Ask the model for a plan for GOAL and store it as .git/papayu/plans/<id>.json.

    \b
    Gathers context (files from stack traces, the failing test, ...), asks the model
    (up to 2 rounds of its context_requests), validates the answer locally and prints
    the summary, plan steps, questions, risks and proposed actions. Nothing is applied.
    Goal prefixes: 'plan: …' / 'apply: …'. A goal that is only a confirmation
    (ok, ок, apply, применяй, да) applies the latest stored plan.
    Then: git papayu apply <ID>.
    """
    with handle_errors(as_json):
        raise SystemExit(
            run(goal, mode, from_file, out, int(protocol) if protocol else None, accept_memory, as_json, use_research)
        )
