"""`doctor`: the check command the current branch would get and how its results are read; with
`--check`, the check on the tip sandboxed against the same command run directly (check/tip.py)."""

from __future__ import annotations

from pathlib import Path
from typing import TYPE_CHECKING, Any

from papayu_git import settings
from papayu_git.check import CheckCommand, resolve_command, safe_path
from papayu_git.check.results import junit_patterns
from papayu_git.commands.doctor.items import FAIL, INFO, OK, WARN, Here, Item
from papayu_git.errors import PapayuError
from papayu_git.objects import GitTree

if TYPE_CHECKING:
    from papayu_git.check.tip import TipCheck


def check_command_item(here: Here) -> Item:
    configure = (
        "`git config papayu.check.command 'CMD'` (or PAPAYU_CHECK_COMMAND), "
        "`git papayu memory set project.default_test_command 'CMD'`, or `--check CMD` per apply."
    )
    if here.repo is None or here.root is None:
        return Item("check command", INFO, "not tried: not in a repository")
    if here.repo.head_is_unborn:
        return Item(
            "check command", WARN, "not tried: the branch has no commit yet", "Commit, then `git papayu doctor`."
        )
    tip = here.repo.head.target
    tree = GitTree(here.repo, here.repo[tip].tree)
    found = resolve_command(here.root, tree, None)
    if found is None:
        return Item(
            "check command",
            WARN,
            "none found: applies stop at review",
            configure,
            data={"command": None, "source": None},
        )
    source = found.source
    flat = safe_path.flat_modules(tree)
    if found.python_safe_path:
        python = "Python runs with PYTHONSAFEPATH=1 (the working directory is not on sys.path)"
    else:
        why = f"flat layout: {', '.join(flat[:3])}" if flat else "papayu.check.pythonSafePath=false"
        python = f"Python imports from the working directory ({why})"
    reads, unread = _results_read(found, here.root)
    return Item(
        "check command",
        OK,
        f"{found.command}  (source: {source}); {python}; {reads}"
        + (f"; not read per test: {'; '.join(unread)}" if unread else ""),
        data={
            "command": found.command,
            "source": source,
            "commit": str(tip),
            "python_safe_path": found.python_safe_path,
            "flat_modules": flat,
            "readers": reads,
            "unread": unread,
        },
    )


def _results_read(found: CheckCommand, root: Path) -> tuple[str, list[str]]:
    """How the check's results will be read (docs/DESIGN.md, "What the check runs"): the
    runners found in the command and its package scripts, and what papayu cannot read."""
    from papayu_git.check.results import runners
    from papayu_git.check.results.instrument import (
        GOTESTSUM,
        PYTEST_JUNIT,
        PYTEST_STREAM,
        UNITTEST_STREAM,
        instrumented,
    )

    assert root is not None
    try:
        done = instrumented(found.command, "/report", runs=found.runs, junit=junit_patterns(root))
    except PapayuError as exc:
        return f"results: {exc.reason}", []
    # Read wherever they run (a recipe papayu does not read included): named as found when seen.
    named = sorted(done.readers - {PYTEST_STREAM, PYTEST_JUNIT, UNITTEST_STREAM, GOTESTSUM})
    seen = runners.GOTESTSUM in done.runners
    if seen:
        named.append("gotestsum's go test -json events (GOTESTSUM_JSONFILE)")
    always = "pytest and unittest wherever they run" + ("" if seen else ", gotestsum's go test -json events too")
    junit = " and papayu.check.junit's files" if settings.get("check_junit", str(root)).strip() else ""
    return f"results per test from {', '.join([*named, always])}{junit}", list(done.notes)


def tip_check_item(here: Here) -> Item:
    """`--check`: the check on the tip in the sandbox, against the same command run directly."""
    from papayu_git.check.tip import run_on_tip

    name = "check on the tip"
    if here.repo is None or here.root is None or here.repo.head_is_unborn:
        return Item(name, INFO, "not tried: no commit in a repository here")
    try:
        report = run_on_tip(here.repo, here.root)
    except PapayuError as exc:
        return Item(name, FAIL, f"{exc.code}: {exc.reason}", exc.hint, code=exc.code)
    if report is None:
        return Item(name, WARN, "not tried: no check command found", "See the check command item above.")
    data = report.to_dict()
    timing = f"{report.seconds:.1f}s"
    if report.direct_seconds:
        ratio = report.seconds / report.direct_seconds if report.direct_seconds > 0 else 0.0
        direct = "passed" if report.direct_passed else "failed"
        timing += f" vs {report.direct_seconds:.1f}s run directly ({ratio:.2f}x; directly it {direct})"
    seen = f"; environment: {', '.join(report.env_dirs)}" if report.env_dirs else "; no environment directory"
    seen += _per_test(report.tests)
    if report.passed:
        hint = _results_hint(report.tests)
        return Item(
            name, WARN if hint else OK, f"passed in the sandbox ({report.sandbox}) in {timing}{seen}", hint, data=data
        )
    return _tip_failed(
        name, report, f"FAILED in the sandbox ({report.sandbox}, exit {report.exit_code}) in {timing}{seen}"
    )


def _tip_failed(name: str, report: TipCheck, failed: str) -> Item:
    """A red check on the tip: the sandbox lacks something (it passes in the user's tree), or the tip
    itself is red, where plans still land by fixing a failing test."""
    data = report.to_dict()
    missing = "; ".join(report.environment) or "nothing recognisable: read the log"
    if report.direct_passed:  # the sandbox lacks something the tests need: every plan's check would fail
        return Item(
            name,
            FAIL,
            f"{failed}; missing: {missing}",
            f"Read {report.log}: the check passes in your tree but not where plans are checked, so no plan can "
            "pass it until the check gets what it needs (README: What the tests need).",
            code="ERR_CHECK_FAILED",
            data=data,
        )
    red = "; it fails in your tree too: the tip is red" if report.direct_passed is False else ""
    noticed = f"; noticed: {missing}" if report.environment else ""
    return Item(
        name,
        WARN,
        f"{failed}{red}{noticed}",
        f"Read {report.log}. A plan still lands on a red tip when it makes at least one of the failing tests pass "
        "and breaks none (otherwise it is kept for review: ERR_CHECK_FIXES_NOTHING).",
        code="ERR_CHECK_FAILED",
        data=data,
    )


def _per_test(tests: dict[str, Any]) -> str:
    """ "; per test: 41 passed, 1 failed (jest json)", or why the verdict is the exit code's."""
    counts = {k: v for k, v in (tests.get("counts") or {}).items() if v}
    if counts:
        return f"; per test: {', '.join(f'{n} {k}' for k, n in counts.items())} ({tests.get('source')})"
    return "; verdict by exit code only" + (f" ({'; '.join(tests['unreadable'])})" if tests.get("unreadable") else "")


def _results_hint(tests: dict[str, Any]) -> str:
    """What to set when papayu cannot read the check's tests (docs/DESIGN.md, "What the check runs")."""
    if any((tests.get("counts") or {}).values()) or not tests:
        return ""
    return (
        "Plans are judged by the exit code alone: set `git config papayu.check.command` to a runner papayu reads "
        "(README: What the check runs), or `git config papayu.check.junit GLOB` to the JUnit XML files the check writes."
    )
