"""`git papayu apply [ID|FILE|-]`: run the transaction for a plan (docs/DESIGN.md,
"The transaction and its guarantees").

FILE or `-` is a model response (JSON); it is stored as a plan first so it gets an
id and a `papayu/<id>` branch. ID is a stored plan; a stored plan without actions
(a PLAN-round answer) first gets its APPLY round from the model (answers.py).
"""

from __future__ import annotations

import dataclasses
import functools
import sys
from collections.abc import Callable
from pathlib import Path
from typing import TYPE_CHECKING, Any

import click

from papayu_git import output, plans, settings
from papayu_git.answers import response_of
from papayu_git.diffs import diffstat
from papayu_git.error_handler import handle_errors
from papayu_git.errors import PapayuError
from papayu_git.outcomes import ApplyState
from papayu_git.protocol import DELETING_KINDS, parse_json_text
from papayu_git.secrets import safe_text  # every line quoting the model or the check
from papayu_git.traces import now_iso

if TYPE_CHECKING:
    import pygit2

    from papayu_git.plans import StoredPlan
    from papayu_git.protocol import Response
    from papayu_git.transaction import ApplyOptions, ApplyResult


def plan_from_json(
    pdir: Path, repo: pygit2.Repository, raw: bytes, protocol: int | None, onto: str | None
) -> StoredPlan:
    """A response file becomes a stored plan (id, base commit, target branch)."""
    data = parse_json_text(raw)
    if plans.is_plan_record(data):
        plan = plans.import_record(pdir, data)
    else:
        version = protocol or (1 if isinstance(data, list) else settings.get_int("protocol_version", repo.workdir))
        head = None if repo.head_is_unborn else str(repo.head.target)
        branch = onto or ("" if repo.head_is_detached else str(repo.references["HEAD"].target)[len("refs/heads/") :])
        plan = plans.StoredPlan(
            id=plans.new_id(),
            mode="apply",
            protocol=version,
            base_commit=head or "",
            branch=branch,
            response=data,
            created_at=now_iso(),
        )
    plans.save(pdir, plan)
    return plan


def load_plan(
    pdir: Path, repo: pygit2.Repository, source: str | None, protocol: int | None, onto: str | None
) -> StoredPlan:
    if source == "-":
        return plan_from_json(pdir, repo, sys.stdin.buffer.read(), protocol, onto)
    if source and Path(source).is_file():
        return plan_from_json(pdir, repo, Path(source).read_bytes(), protocol, onto)
    if source is None:
        stored = sorted(plans.list_plans(pdir), key=lambda p: (p.created_at, p.id))
        if not stored:
            raise PapayuError("ERR_PLAN_NOT_FOUND", "no stored plan; pass a response FILE or `-`")
        return stored[-1]
    return plans.load(pdir, source)


def _confirm_deletions(response: Response, yes: bool) -> bool:
    doomed = [a.path for a in response.actions if a.kind in DELETING_KINDS]
    if yes or not doomed:
        return yes
    if not sys.stdin.isatty():
        return False  # the transaction refuses with ERR_DELETE_NOT_CONFIRMED
    return output.confirm(f"The plan deletes {safe_text(', '.join(doomed))}. Continue?")


def confirm_test_edits(root: Path, plan: StoredPlan, response: Response, options: ApplyOptions) -> bool:
    """allow_test_edits for the transaction: the flag, or a yes on a terminal (without -y) to a
    question naming the existing tests the plan modifies or deletes. No (or no terminal, or -y):
    the transaction commits and checks, then stops at review (transaction.held_for_test_edits)."""
    if options.allow_test_edits or options.yes or options.review or not sys.stdin.isatty():
        return options.allow_test_edits
    from papayu_git.objects import branch_name  # see run
    from papayu_git.transaction import planned_test_edits

    try:
        edited = planned_test_edits(root, plan, response, options.onto)
    except PapayuError:
        return False  # the transaction raises (and records) it
    if not edited:
        return False
    return output.confirm(
        f"The plan edits tests or how they run: {safe_text(', '.join(edited))}. Land it "
        f"if the check passes? (no: keep {branch_name(plan.id)} for review)"
    )


def run(source: str | None, options: ApplyOptions, protocol: int | None = None, as_json: bool = False) -> int:
    # The transaction and the repository load when a plan is applied, not for `apply --help`
    # (docs/DESIGN.md, "Start-up and cost").
    from papayu_git.housekeeping import open_checkout
    from papayu_git.transaction import apply_plan

    repo, root, pdir = open_checkout()
    plan = load_plan(pdir, repo, source, protocol, options.onto)
    plan, response = response_of(root, plan, protocol, options.onto)
    if response.commands_to_run:
        output.info(
            "The model proposes these commands ("
            + (
                "--run-proposed: they run in the worktree after the check):"
                if options.run_proposed
                else "NOT run; --run-proposed runs them in the worktree after the check):"
            )
        )
        for command in response.commands_to_run:
            output.info(f"  $ {safe_text(command)}")
    yes = _confirm_deletions(response, options.yes)
    refused = not yes and any(a.kind in DELETING_KINDS for a in response.actions)  # ERR_DELETE_NOT_CONFIRMED
    allow = options.allow_test_edits if refused else confirm_test_edits(root, plan, response, options)
    options = dataclasses.replace(options, yes=yes, allow_test_edits=allow)
    result = apply_plan(root, plan, response, options)
    report(result, as_json)
    return exit_code(result)


def exit_code(result: ApplyResult) -> int:
    """0 landed / no changes / a requested review; 1 rolled back, or stopped at review for a
    reason the user must act on (no check found: ERR_NO_CHECK; existing tests edited under -y:
    ERR_TEST_EDITS_HELD)."""
    return 1 if result.state in FAILED_STATES or result.error else 0


FAILED_STATES = frozenset(
    {ApplyState.ROLLED_BACK, ApplyState.REFUSED, ApplyState.REFUSED_BRANCH_MOVED, ApplyState.INTERRUPTED}
)


def report(
    result: ApplyResult,
    as_json: bool,
    *,
    diffstat_shown: bool = False,
    check_shown: bool = False,
    say_next: bool = True,
) -> None:
    """The outcome for a human (or as JSON); ``diffstat_shown``/``check_shown``: the confirmation
    printed them already; ``say_next``: end a plan that did not land with the commands that go on
    from it (not when `fix` asks the model again by itself), said last."""
    if as_json:
        output.emit_json(result.to_dict())
        return
    steps = next_steps(result) if say_next else []
    short = (result.commit or "")[:12]
    if result.state == ApplyState.LANDED:
        output.result(f"landed plan {result.plan_id} on {result.target} ({short}, {result.landed_by})")
        if not diffstat_shown:
            output.result(diffstat(result.commit or ""))
        if result.landed_by == "fast-forward":  # like after git merge: ORIG_HEAD is the old tip
            output.result(f"  undo: git reset --keep ORIG_HEAD   (or: git papayu undo {result.plan_id})")
        else:  # a branch checked out nowhere: no ORIG_HEAD of its own
            output.result(f"  undo: git papayu undo {result.plan_id}")
    elif result.state == ApplyState.REVIEW and result.declined:
        output.result(f"plan {result.plan_id} not landed; kept as {short} on {result.branch}")
    elif result.state == ApplyState.REVIEW:
        if result.error:  # said once, here: the transaction only records it (one message per event)
            output.error(_error_line(result, steps))
        output.result(f"plan {result.plan_id} committed as {short} on {result.branch} (not landed)")
    elif result.state == ApplyState.NO_CHANGES:
        output.result(f"plan {result.plan_id}: nothing to apply")
    else:
        _report_rollback(result, steps)
    if result.check and not check_shown:
        # A refusal already named every test in its error.
        for line in check_lines(result.check, tests_named=result.state == ApplyState.LANDED):
            output.info(line)
    for line in steps:
        output.result(f"  {line}")


def _error_line(result: ApplyResult, steps: list[str]) -> str:
    """`CODE (where): reason (hint)`; a red check's hint is left out where the next steps below say
    the same commands."""
    error = result.error or {}
    reason, hint = (safe_text(error.get(k, ""), multiline=True) for k in ("reason", "hint"))
    from papayu_git import retry  # see run

    if steps and error.get("code") in retry.RETRY_CODES:
        hint = ""
    where = f" ({STAGES[result.stage]})" if result.state != ApplyState.REVIEW and result.stage in STAGES else ""
    return f"{error.get('code', 'ERR_CHECK_FAILED')}{where}: {reason}" + (f" ({hint})" if hint else "")


def next_steps(result: ApplyResult) -> list[str]:
    """What goes on from a plan that did not land, each command as it would work when pasted: a red
    check is asked again (`retry`), a kept branch lands (with --force where `land` would refuse
    it: a red or unchecked commit, checked.py) or is dropped (docs/TRANSACTION.md, "What next")."""
    from papayu_git import checked, retry  # see run

    plan_id, outcome = result.plan_id, result.to_dict()
    steps = [f"ask the model again: git papayu retry {plan_id}"] if retry.retryable(outcome) else []
    if result.state == ApplyState.REVIEW and result.commit:
        refused = checked.verdict_of(plan_id, outcome, result.commit).problem is not None
        land = (
            f"land it anyway: git papayu land {plan_id} --force" if refused else f"land it: git papayu land {plan_id}"
        )
        steps += [land, f"drop it: git papayu drop {plan_id}"]
    elif result.state in FAILED_STATES and result.commit and steps:
        steps.append(f"see its change: git papayu show {plan_id}")
    if result.branch_kept and result.state != ApplyState.REVIEW:
        steps.append(f"drop it: git papayu drop {plan_id}")
    return steps


def check_lines(check: dict[str, Any], *, tests_named: bool = True) -> list[str]:
    """The check's run and its verdict against the tip, for a human; ``tests_named``: also every
    test the verdict turned on (exit-code only has none to name)."""
    state = "passed" if check["passed"] else "FAILED"
    lines = [
        f"check `{safe_text(check['command'])}` ({check['source']}): {state} "
        f"in {check['duration_sec']:.1f}s{tests_said(check.get('tests'))}; log: {check['log']}"
    ]
    verdict = check.get("verdict")
    if verdict:
        lines.append(f"verdict against the tip: {verdict.get('trailer', '')}")
        if tests_named and not verdict.get("exit_code_only"):
            lines += [f"  {safe_text(line)}" for line in verdict.get("lines", [])]
    return lines


def tests_said(tests: dict[str, Any] | None) -> str:
    """ ", 41 passed, 1 failed (pytest junit)" or ", verdict by exit code only"."""
    if not tests:
        return ""
    counts = {k: v for k, v in tests.get("counts", {}).items() if v}
    if not counts:
        return "; verdict by exit code only (no per-test results could be read)"
    said = ", ".join(f"{n} {name}" for name, n in counts.items())
    return f"; {said} ({tests.get('source')})"


def _report_rollback(result: ApplyResult, steps: list[str]) -> None:
    if result.check and result.check.get("tail"):
        output.info(output.colour("--- check output (tail) ---", "dim", sys.stderr))
        output.info(safe_text(result.check["tail"], multiline=True))
        output.info(output.colour("---", "dim", sys.stderr))
    output.error(_error_line(result, steps))
    kept = f"; branch {result.branch} kept" if result.branch_kept else ""
    done = {
        ApplyState.REFUSED: "refused",
        ApplyState.REFUSED_BRANCH_MOVED: "refused (the branch moved)",
        ApplyState.INTERRUPTED: "interrupted, rolled back",
    }.get(result.state, "rolled back")
    output.result(f"{done} plan {result.plan_id}: {result.target} unchanged{kept}")


# Where an error came from, as the report says it (ApplyResult.stage).
STAGES = {
    "validate": "at validation",
    "build_commit": "while building the commit",
    "preflight": "before the check",
    "check": "at the check",
    "land": "at landing",
}


_OPTION_NAMES = {
    "check_cmd": "check",
    "no_check": "no_check",
    "review": "review",
    "keep_failed": "keep_failed",
    "onto": "onto",
    "rebase": "rebase",
    "yes": "yes",
    "run_proposed": "run_proposed",
    "allow_test_edits": "allow_test_edits",
}


def transaction_options(yes_help: str) -> Callable[[Callable[..., Any]], Callable[..., Any]]:
    """The transaction's options, shared by `apply` and `fix` (which takes every option of
    apply); the callback receives them as one ``options: ApplyOptions``."""

    def decorate(callback: Callable[..., Any]) -> Callable[..., Any]:
        @functools.wraps(callback)
        def wrapper(*args: Any, **kwargs: Any) -> Any:
            values = {field: kwargs.pop(name) for name, field in _OPTION_NAMES.items()}
            from papayu_git.transaction import ApplyOptions  # see run

            return callback(*args, options=ApplyOptions(**values), **kwargs)

        for option in reversed(
            [
                click.option(
                    "--check",
                    "check_cmd",
                    metavar="CMD",
                    help="Check command to run in the worktree "
                    "(overrides papayu.checkCommand, project.json and detection).",
                ),
                click.option("--no-check", is_flag=True, help="Land without running a check."),
                click.option(
                    "--review", is_flag=True, help="Stop after the commit (and check); keep branch papayu/<id>."
                ),
                click.option("--keep-failed", is_flag=True, help="Keep papayu/<id> when the check fails."),
                click.option("--onto", metavar="BRANCH", help="Land on BRANCH instead of the current branch."),
                click.option(
                    "--rebase", is_flag=True, help="If the branch moved, re-apply on its new tip when bases match."
                ),
                click.option("-y", "--yes", is_flag=True, help=yes_help),
                click.option(
                    "--run-proposed", is_flag=True, help="Also run the model's commands_to_run in the worktree."
                ),
                click.option(
                    "--allow-test-edits",
                    is_flag=True,
                    help="Land plans that modify or delete existing tests without asking (else they stop at review).",
                ),
            ]
        ):
            wrapper = option(wrapper)
        return wrapper

    return decorate


@click.command("apply")
@click.argument("source", required=False, metavar="[ID|FILE|-]")
@transaction_options(yes_help="Confirm deletions without asking.")
@click.option("--protocol", type=click.Choice(["1", "2"]), help="Protocol of the response (default: the plan's).")
@click.option("--json", "as_json", is_flag=True, help="Machine-readable result with per-stage timings.")
def command(source: str | None, options: ApplyOptions, protocol: str | None, as_json: bool) -> None:
    """Apply a plan as a commit on papayu/<id>, run the check in a temporary
    worktree, and fast-forward your branch only if it passes.

    \b
    SOURCE: a stored plan ID (or unique prefix), a response FILE, or `-` (stdin);
    default: the newest stored plan. Your branch, index and working tree stay
    untouched unless the check passes; on failure papayu/<id> is deleted.
    Exit 0 landed/review, 1 rolled back or refused (ERR_* printed).
    """
    with handle_errors(as_json):
        raise SystemExit(run(source, options, int(protocol) if protocol else None, as_json))
