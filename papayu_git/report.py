"""What a transaction did, for a human (or as JSON), and the question before a landing
(docs/TRANSACTION.md, "What next").

``report`` says the outcome of ``transaction.apply_plan`` or ``land_branch``: landed (with its
diffstat and how to undo it), kept for review, rolled back (the check's tail and the error), and
the ``next_steps`` that go on from a plan that did not land; ``exit_code`` is the command's.
``Landing`` asks before a landing (``ApplyOptions.confirm_landing``). `apply`, `fix`, `retry`,
`agent`, `land` and best-of's winner all report through here.
"""

from __future__ import annotations

import sys
from pathlib import Path
from typing import TYPE_CHECKING, Any

import click

from papayu_git import output
from papayu_git.diffs import diffstat, plan_diff, render_diff
from papayu_git.error_handler import Terminated
from papayu_git.outcomes import ApplyState
from papayu_git.repository import open_repo
from papayu_git.secrets import safe_text

if TYPE_CHECKING:
    from papayu_git.transaction import ApplyResult, LandingPreview


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
    from papayu_git import retry  # see next_steps

    if steps and error.get("code") in retry.RETRY_CODES:
        hint = ""
    where = f" ({STAGES[result.stage]})" if result.state != ApplyState.REVIEW and result.stage in STAGES else ""
    return f"{error.get('code', 'ERR_CHECK_FAILED')}{where}: {reason}" + (f" ({hint})" if hint else "")


def next_steps(result: ApplyResult) -> list[str]:
    """What goes on from a plan that did not land, each command as it would work when pasted: a red
    check is asked again (`retry`), a kept branch lands (with --force where `land` would refuse
    it: a red or unchecked commit, checked.py) or is dropped (docs/TRANSACTION.md, "What next")."""
    if result.state == ApplyState.LANDED:
        return []  # nothing goes on from a landing
    # Loaded for a plan that did not land, not by every `apply` (docs/DESIGN.md, "Start-up and cost").
    from papayu_git import checked, retry

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


class Landing:
    """The question before a landing (ApplyOptions.confirm_landing): with -y the diffstat; else the
    coloured diff (paged on a terminal) and the check's verdict, then "Land?"."""

    def __init__(self, root: Path, yes: bool, as_json: bool) -> None:
        self.root, self.yes, self.as_json = root, yes, as_json
        self.diffstat_shown = False  # the landing report then leaves it out
        self.check_shown = False  # the same for the check's lines (shown with the diff)

    def confirm(self, preview: LandingPreview) -> bool:
        if self.yes:
            if not self.as_json:
                output.result(f"landing plan {preview.plan_id} on {preview.target}:")
                output.result(diffstat(preview.commit))
                self.diffstat_shown = True
            return True
        diff = plan_diff(open_repo(self.root), preview.plan_id, preview.commit)
        try:
            with output.paged():
                output.result(render_diff(diff, output.use_colour(sys.stdout)))
                for line in check_lines(preview.check) if preview.check else ["no check ran"]:
                    output.result(line)
            self.diffstat_shown = self.check_shown = True  # the diff starts with its stat
            return output.confirm(f"Land plan {preview.plan_id} on {preview.target}?")
        except (click.Abort, KeyboardInterrupt) as exc:
            return not_answered(exc)


def not_answered(exc: BaseException) -> bool:
    """Ctrl-C or Ctrl-D at the landing question is a no: the checked plan stays on papayu/<id> for
    `land ID` (docs/TRANSACTION.md, "Landing"). A termination signal is not an answer."""
    if isinstance(exc, Terminated):
        raise exc
    key = "Ctrl-D" if isinstance(exc.__context__, EOFError) else "Ctrl-C"
    output.info("")  # the question's line ends here
    output.info(f"papayu: {key} at the question: not landing")
    return False
