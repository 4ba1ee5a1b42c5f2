"""What a transaction did, for a human (or as JSON), and the question before a landing
(docs/TRANSACTION.md, "What next").

``report`` tells the outcome of ``transaction.apply_plan`` or ``land_branch`` as one story, in
order and once: the check (its output's tail when it failed, then how it ended and the verdict
with its tests named, capped), then what that made of the plan (landed with its diffstat and how
to undo it, kept for review, rolled back, with the error), then the ``next_steps`` that go on from
a plan that did not land. ``check_lines`` are the check's own lines; ``exit_code`` is the
command's. ``Landing`` asks before a landing (``ApplyOptions.confirm_landing``). `apply`, `fix`,
`retry`, `agent`, `land` and best-of's winner all report through here.
"""

from __future__ import annotations

import sys
from pathlib import Path
from typing import TYPE_CHECKING, Any

import click

from papayu_git import output
from papayu_git.diffs import diffstat, plan_diff, render_diff
from papayu_git.error_handler import Terminated
from papayu_git.errors import format_error
from papayu_git.outcomes import TREE_UNCHANGED, ApplyState, check_word
from papayu_git.plans import plan_name, plan_subject
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
    from it, said last (not when `fix` asks the model again by itself: then the plan's error
    leaves its hint out too, since the loop goes on instead)."""
    if as_json:
        output.emit_json(result.to_dict())
        return
    steps = next_steps(result) if say_next else []
    said = _verdict_error(result)  # the verdict's notes, said by the error line instead
    if result.check and not check_shown:
        check_story(result.check, tail=result.state in FAILED_STATES, notes=not said)
    if result.error and not (result.state == ApplyState.REVIEW and result.declined):
        # said once, here: the transaction only records it (one message per event)
        output.error(_error_line(result, said, hint=say_next and not _hint_in_steps(result, steps)))
    for line in _outcome_lines(result, diffstat_shown=diffstat_shown):
        output.result(line)
    for line in steps:
        output.result(f"  {line}")


def _outcome_lines(result: ApplyResult, *, diffstat_shown: bool) -> list[str]:
    """What the transaction made of the plan, after the check that decided it."""
    short, who = (result.commit or "")[:12], plan_subject(result.plan_id, result.branch)
    name = plan_name(result.plan_id, result.branch)
    if result.state == ApplyState.LANDED:
        lines = [f"landed {who} on {result.target} ({short}, {result.landed_by})"]
        if not diffstat_shown:
            lines.append(diffstat(result.commit or ""))
        if result.landed_by == "fast-forward":  # like after git merge: ORIG_HEAD is the old tip
            return [*lines, f"  undo: git reset --keep ORIG_HEAD   (or: git papayu undo {name})"]
        return [*lines, f"  undo: git papayu undo {name}"]  # a branch checked out nowhere: no ORIG_HEAD of its own
    if result.state == ApplyState.REVIEW and result.declined:
        return [f"{who} not landed; kept as {short} on {result.branch}"]
    if result.state == ApplyState.REVIEW:
        return [f"{who} committed as {short} on {result.branch} (not landed)"]
    if result.state == ApplyState.NO_CHANGES:
        return [_nothing_to_apply(result, who)]
    kept = f"; branch {result.branch} kept" if result.branch_kept else ""
    done = {
        ApplyState.REFUSED: "refused",
        ApplyState.REFUSED_BRANCH_MOVED: "refused (the branch moved)",
        ApplyState.INTERRUPTED: "interrupted, rolled back",
    }.get(result.state, "rolled back")
    return [f"{done} {who}: {result.target} unchanged{kept}"]


def _nothing_to_apply(result: ApplyResult, who: str) -> str:
    """A plan with no change to make: the model said so, or its change is on the branch already."""
    if TREE_UNCHANGED in result.warnings:
        return f"{who}: {result.target} already has this change; nothing to land"
    return f"{who}: the model found nothing to change; nothing to land"


def check_story(check: dict[str, Any], *, tail: bool, notes: bool = True) -> None:
    """The check as it ended: the output's tail when it failed (``tail``), then its own lines
    (``notes``: with the verdict's notes, unless the error line says them)."""
    if tail and check.get("tail") and not check.get("passed"):
        output.info(output.colour("--- check output (tail) ---", "dim", sys.stderr))
        output.info(safe_text(check["tail"], multiline=True))
        output.info(output.colour("---", "dim", sys.stderr))
    for line in check_lines(check, notes=notes):
        output.info(line)


def _hint_in_steps(result: ApplyResult, steps: list[str]) -> bool:
    """A red check's hint names the commands the steps below say (the record and --json keep it)."""
    from papayu_git import retry  # see next_steps

    return bool(steps) and (result.error or {}).get("code") in retry.RETRY_CODES


def _verdict_error(result: ApplyResult) -> str:
    """The error of a plan the verdict kept off, in words without the tests' names (the check's
    lines name them); "" for any other error."""
    error = result.error or {}
    verdict = (result.check or {}).get("verdict") or {}
    if not error or verdict.get("code") != error.get("code") or verdict.get("exit_code_only"):
        return ""
    return verdict_said(verdict)


def _error_line(result: ApplyResult, said: str, *, hint: bool) -> str:
    """The error in the one format (errors.format_error); ``said``: a verdict's error in words."""
    error = result.error or {}
    reason = said or safe_text(error.get("reason", ""), multiline=True)
    where = STAGES.get(result.stage, "") if result.state != ApplyState.REVIEW else ""
    code = error.get("code", "ERR_CHECK_FAILED")
    return format_error(code, reason, safe_text(error.get("hint", ""), multiline=True) if hint else "", where=where)


def verdict_said(verdict: dict[str, Any]) -> str:
    """What kept a plan off, from its verdict (``Verdict.to_dict()``), without the names
    ``check_lines`` gives: the verdict's notes, then how many tests fail."""
    failing = (
        ("broken", "that passed on the tip fail on the plan's code"),
        ("missing", "that passed on the tip are missing"),
        ("new_failing", "fail in the plan's own run"),
    )
    counts = [f"{_tests(len(verdict.get(key) or ()))} {what}" for key, what in failing if verdict.get(key)]
    return "; ".join(safe_text(str(note)) for note in [*(verdict.get("notes") or ()), *counts])


def _tests(n: int) -> str:
    return f"{n} test" if n == 1 else f"{n} tests"


def next_steps(result: ApplyResult) -> list[str]:
    """What goes on from a plan that did not land, each command as it would work when pasted: a red
    check is asked again (`retry`), a kept branch lands (with --force where `land` would refuse
    it: a red or unchecked commit, checked.py) or is dropped, an interrupted one is applied again
    (docs/TRANSACTION.md, "What next"). A candidate is named by its `RUN:N`."""
    if result.state == ApplyState.LANDED:
        return []  # nothing goes on from a landing
    # Loaded for a plan that did not land, not by every `apply` (docs/DESIGN.md, "Start-up and cost").
    from papayu_git import checked, retry

    outcome, name = result.to_dict(), plan_name(result.plan_id, result.branch)
    steps = [f"ask the model again: git papayu retry {name}"] if retry.retryable(outcome) else []
    if result.state == ApplyState.REVIEW and result.commit:
        refused = checked.verdict_of(result.plan_id, outcome, result.commit).problem is not None
        land = f"land it anyway: git papayu land {name} --force" if refused else f"land it: git papayu land {name}"
        steps += [land, f"drop it: git papayu drop {name}"]
    elif result.state in FAILED_STATES and result.commit and steps:
        steps.append(f"see its change: git papayu show {name}")
    elif result.state == ApplyState.INTERRUPTED:
        steps.append(f"apply it again: git papayu apply {name}")
    if result.branch_kept and result.state != ApplyState.REVIEW:
        steps.append(f"drop it: git papayu drop {name}")
    return steps


NAMES_SHOWN = 8  # tests named per list of the verdict; the rest are counted


def check_lines(check: dict[str, Any], *, notes: bool = True) -> list[str]:
    """The check's own lines: how it ended (outcomes.check_word: the verdict's word) and where
    its log is, then the verdict against the tip (``notes``: with its notes) and every test it
    turned on, each list capped at NAMES_SHOWN with the count of the rest. A runner's raw counts
    are not said beside a verdict: "passed" with "7 failed" next to it would contradict the
    verdict that weighed them."""
    verdict = check.get("verdict") or None
    results = "" if verdict and not verdict.get("exit_code_only") else tests_said(check.get("tests"))
    took = f" ({float(check['duration_sec']):.1f}s)" if check.get("duration_sec") is not None else ""
    log = f"; log: {check['log']}" if check.get("log") else ""  # a record may lack what it did not have
    lines = [f"check: {check_word(check)}{took}{results}{log}"]
    lines += [f"  {line}" for line in runs_lines(check.get("runs") or [])]
    if not verdict:
        return lines
    lines.append(f"verdict against the tip: {verdict.get('trailer', '')}")
    lines += [f"  {safe_text(note)}" for note in verdict.get("notes") or () if notes]
    for label, ids in _named(verdict):
        lines += _name_list(safe_text(label), [safe_text(t) for t in ids])
    return lines


def _named(verdict: dict[str, Any]) -> list[tuple[str, list[str]]]:
    """The verdict's named tests (``Verdict.named``); a record written before it kept only its
    lines, which are read back as they are."""
    if isinstance(verdict.get("named"), list):
        return [(str(label), [str(t) for t in ids]) for label, ids in verdict["named"]]
    notes = set(verdict.get("notes") or ())
    said = [line for line in verdict.get("lines") or () if line not in notes]
    return [(label, [names]) for label, _, names in (line.partition(": ") for line in said)]


def _name_list(label: str, ids: list[str]) -> list[str]:
    if len(ids) == 1:
        return [f"  {label}: {ids[0]}"]
    more = [f"    ... and {len(ids) - NAMES_SHOWN} more (the log names them)"] if len(ids) > NAMES_SHOWN else []
    return [f"  {label} ({len(ids)}):", *(f"    {t}" for t in ids[:NAMES_SHOWN]), *more]


# How the check's runs are named in its lines (check/failfirst.py names them in its record).
RUN_NAMES = {
    "tip": "the tip's tests",
    "plan": "the plan's run",
    "regression": "the regression run",
    "own": "the plan's own run",
    "tip again": "failing tests again on the tip",
    "rest": "the rest",
}


def runs_lines(runs: list[dict[str, Any]]) -> list[str]:
    """Where the check's time went, one run a line: what ran, why, and its parts (docs/DESIGN.md,
    "Fail first")."""
    out = []
    for entry in runs:
        name = RUN_NAMES.get(str(entry.get("run")), str(entry.get("run")))
        seconds = float(entry.get("seconds") or 0.0)
        timing = entry.get("timing") or {}
        parts = [f"{label} {float(timing[key]):.1f}s" for key, label in TIMING_LABELS if key in timing]
        said = f"{name}: {seconds:.1f}s" + (f" ({', '.join(parts)})" if parts else "")
        out.append(f"{said}: {safe_text(_run_why(entry))}")
    return out


TIMING_LABELS = (("setup", "sandbox set-up"), ("command", "the command"), ("reading", "reading results"))


def _run_why(entry: dict[str, Any]) -> str:
    run, why = entry.get("run"), str(entry.get("why") or "")
    if run in ("plan", "regression", "own") and entry.get("first"):
        tests, first = int(entry.get("tests") or 0), int(entry["first"])
        if entry.get("stopped"):
            return f"{first} first, stopped there: {entry['stopped']}"
        return f"{tests} tests, all reached first" if first >= tests else f"{tests} tests, {first} first, then the rest"
    return why


def tests_said(tests: dict[str, Any] | None) -> str:
    """ ", 41 passed, 1 failed (pytest junit)" or ", verdict by exit code only"."""
    if not tests:
        return ""
    counts = {k: v for k, v in tests.get("counts", {}).items() if v}
    if not counts:
        return "; verdict by exit code only (no per-test results could be read)"
    said = ", ".join(f"{n} {name}" for name, n in counts.items())
    return f"; {said} ({tests.get('source')})"


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
                if preview.check:  # the verdict first: it is why the plan lands
                    check_story(preview.check, tail=False)
                    self.check_shown = True
                output.result(f"landing {plan_subject(preview.plan_id, preview.branch)} on {preview.target}:")
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
            return output.confirm(f"Land {plan_subject(preview.plan_id, preview.branch)} on {preview.target}?")
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
