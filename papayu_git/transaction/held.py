"""Why a checked plan does not land (docs/DESIGN.md, "The transaction and its guarantees"): each
``held_for_*`` is None when nothing holds the plan, else the PapayuError its review records (its
warning added to the run's); ``check_error`` is a red check's rollback error, in the verdict's
words."""

from __future__ import annotations

from pathlib import Path
from typing import TYPE_CHECKING, Protocol

from papayu_git import output, settings
from papayu_git.errors import PapayuError, hint_for
from papayu_git.plans import StoredPlan
from papayu_git.secrets import safe_text
from papayu_git.transaction.values import ApplyOptions

if TYPE_CHECKING:
    import pygit2

    from papayu_git.check import CheckCommand, CheckResult
    from papayu_git.check.gate import Gate


class Run(Protocol):
    """What these read of a transaction's run (run.Run), and the warnings they add to it."""

    repo: pygit2.Repository
    root: Path
    plan: StoredPlan
    options: ApplyOptions
    tip: str
    command: CheckCommand | None
    check: CheckResult | None
    gate: Gate | None
    test_edits: tuple[str, ...]
    reach: tuple[str, ...]
    warnings: list[str]

    @property
    def branch(self) -> str: ...

    def warn(self, text: str) -> None: ...


def held_for_test_edits(run: Run) -> PapayuError | None:
    """A plan that modifies or deletes existing tests needs a human (testfiles.py): the
    interactive yes or --allow-test-edits; else it stops at review with the branch kept."""
    if not run.test_edits or run.options.allow_test_edits:
        return None

    output.event("TEST_EDITS_HELD", plan_id=run.plan.id, paths=",".join(run.test_edits))
    edited = safe_text(", ".join(run.test_edits))  # the plan's paths
    ways = (
        f"review it (git papayu show {run.plan.id}), then land it: git papayu land {run.plan.id} "
        f"(--allow-test-edits lands such plans without asking)"
    )
    verdict = run.gate.verdict if run.gate else None
    said = "; ".join(verdict.lines()[:3]) if verdict is not None and verdict.held_for_a_human else ""
    reason = f"the plan edits tests or how they run: {edited}" + (f"; {safe_text(said)}" if said else "")
    run.warnings.append(f"{reason}; NOT landed. {ways[0].upper()}{ways[1:]}")
    return PapayuError("ERR_TEST_EDITS_HELD", reason, path=run.branch, hint=ways)


def held_for_runner_reach(run: Run) -> PapayuError | None:
    """Code under test runs inside the test process: a plan whose code reaches for the runner
    or its report, or whose new test module changes other modules at import, waits for a human
    with the lines named, whatever its verdict says (check/reach.py)."""
    if not run.reach:
        return None
    output.event("RUNNER_REACH_HELD", plan_id=run.plan.id, lines=len(run.reach))
    shown = "; ".join(run.reach[:5]) + (f"; ... and {len(run.reach) - 5} more" if len(run.reach) > 5 else "")
    ways = (
        f"read those lines (git papayu show {run.plan.id}); land it if they are harmless: git papayu land {run.plan.id}"
    )
    run.warnings.append(
        f"the plan reaches past what its check can judge: {shown}; NOT landed. {ways[0].upper()}{ways[1:]}"
    )
    return PapayuError(
        "ERR_RUNNER_REACH_HELD",
        "the plan reaches past what its check can judge: " + shown,
        path=run.branch,
        hint=ways,
    )


def held_for_user_tree_links(run: Run) -> PapayuError | None:
    """An unsandboxed check whose environment links into the user's tree (editable installs,
    workspace symlinks) may have tested the user's code, not the plan's: no silent green
    (docs/DESIGN.md, "The check's environment")."""
    links = run.check.user_tree_links if run.check else ()
    if not links or settings.get_bool("check_allow_user_tree_links", str(run.root)):
        return None
    ways = (
        f"review it (git papayu show {run.plan.id}) and land it yourself (git papayu land {run.plan.id}), "
        "or make the sandbox work here (`git papayu doctor`), or accept such checks with "
        "`git config papayu.check.allowUserTreeLinks true`"
    )
    shown = safe_text("; ".join(links[:3]) + ("; ..." if len(links) > 3 else ""))
    run.warnings.append(f"the check ran unsandboxed and your environment links into your work tree; NOT landed. {ways}")
    return PapayuError(
        "ERR_CHECK_ENV_LINKED",
        f"the unsandboxed check may have run your work tree's code, not the plan's: {shown}",
        path=run.branch,
        hint=ways,
    )


def held_for_no_check(run: Run) -> PapayuError | None:
    """No check found: nothing lands automatically; the commit stays for review."""
    if run.options.no_check or run.command is not None:
        return None
    ways = (
        f"review it (git papayu show {run.plan.id}) and land it: git papayu land {run.plan.id} --force; "
        "or configure a check (git config papayu.check.command 'CMD', or --check CMD) and apply again; "
        "or pass --no-check to land without one"
    )
    run.warn(
        f"no check command found (--check, papayu.check.command, .papa-yu/project.json, "
        f"pytest/npm/cargo/go on {run.repo[run.tip].short_id if run.tip else 'the tip'}); "
        f"NOT landed. Next: {ways}"
    )
    return PapayuError(
        "ERR_NO_CHECK", "no check command was found; the commit is kept for review", path=run.branch, hint=ways
    )


def held_for_verdict(run: Run) -> PapayuError | None:
    """The verdict stops at review (check/verdict.py): a red tip the plan neither fixes nor
    breaks, tests passing only with the plan's own versions of what judges it, or tests the
    plan removes. A human decides; unapproved test edits say so in their own words
    (held_for_test_edits)."""
    verdict = run.gate.verdict if run.gate else None
    if verdict is None or not verdict.review:
        return None
    if verdict.held_for_a_human and run.test_edits and not run.options.allow_test_edits:
        return None
    said = safe_text("; ".join(verdict.lines()[:3]))  # test ids and paths come from the plan's run
    if verdict.held_for_a_human:
        ways = f"review it (git papayu show {run.plan.id}), then land it: git papayu land {run.plan.id}"
        what = "the plan changes what judges it" if verdict.code == "ERR_JUDGE_EDITS_HELD" else "the plan removes tests"
        run.warnings.append(f"{what}: {said}; NOT landed. {ways[0].upper()}{ways[1:]}")
        return PapayuError(verdict.code or "ERR_JUDGE_EDITS_HELD", said, path=run.branch, hint=ways)
    ways = hint_for("ERR_CHECK_FIXES_NOTHING", run.plan.id)
    run.warnings.append(f"the tip's check is red and the plan fixes none of its failures; NOT landed. {ways}")
    return PapayuError(verdict.code or "ERR_CHECK_FIXES_NOTHING", said, path=run.branch, hint=ways)


def check_error(run: Run) -> PapayuError:
    assert run.check is not None
    verdict = run.gate.verdict if run.gate else None
    if verdict is not None and verdict.code not in (None, "ERR_CHECK_FAILED"):
        said = "; ".join(verdict.lines()) or verdict.trailer()
        code = verdict.code or "ERR_CHECK_FAILED"
        return PapayuError(code, f"{said}; full output: {run.check.log}", hint=hint_for(code, run.plan.id))
    if run.check.timed_out:
        return PapayuError(
            "ERR_CHECK_TIMEOUT",
            f"`{run.check.command}` ran past {settings.get_int('check_timeout_sec', str(run.root))}s and was killed",
            hint=hint_for("ERR_CHECK_TIMEOUT", run.plan.id),
        )
    if run.check.environment:
        failed, which = failed_run(run)
        return PapayuError(
            "ERR_CHECK_FAILED",
            f"`{failed.command}`{which} exited {failed.exit_code}, and the cause may be the check's "
            f"environment, not the plan: {run.check.environment[0]}; full output: {failed.log}",
            hint="; ".join([*run.check.environment[1:3], "`git papayu doctor --check` runs the check on the tip"]),
        )
    from papayu_git.check.results.runners import why_exit_code_only  # see Run.resolve_check

    failed, which = failed_run(run)
    why = why_exit_code_only(failed.tests)  # the runners papayu could not read, and what to set
    return PapayuError(
        "ERR_CHECK_FAILED",
        f"`{failed.command}`{which} exited {failed.exit_code}{f' (verdict by exit code only: {why})' if why else ''}; "
        f"full output: {failed.log}",
        hint=hint_for("ERR_CHECK_FAILED", run.plan.id),
    )


def failed_run(run: Run) -> tuple[CheckResult, str]:
    """The run of the check that failed, and which it was when there were two: the regression run
    (the tip's tests on the plan's code), else the plan's own run (its tree as is), whose exit code
    and log are then the ones to read (check/gate.py)."""
    assert run.check is not None
    own = run.gate.own if run.gate else None
    if own is None:
        return run.check, ""
    if run.check.exit_code == 0 and not run.check.timed_out and (own.exit_code != 0 or own.timed_out):
        return own, " in the plan's own run (its tree as is)"
    return run.check, " in the regression run (the tip's tests on the plan's code)"
