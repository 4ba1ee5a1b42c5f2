"""The selective check in the gate (check/gate.py): which tests a run of a plan's tree runs
(select.py, from the base run's record), the base's passes it reuses, the tripwire, and what
observe mode says selection would have missed (docs/DESIGN.md, "Pay for what the plan changed").
"""

from __future__ import annotations

from dataclasses import replace
from pathlib import Path
from typing import TYPE_CHECKING, Any

from papayu_git import settings
from papayu_git.check.base import BaseRun, inputs_path
from papayu_git.check.results import ids
from papayu_git.check.results.channel import PluginAsk
from papayu_git.check.results.outcome import Outcome
from papayu_git.check.selection.inputs import read_inputs
from papayu_git.check.selection.select import Change, Selection, full_run, select
from papayu_git.errors import PapayuError
from papayu_git.objects import GitTree, changed_paths, commit_of

if TYPE_CHECKING:
    import pygit2

    from papayu_git.check.run import CheckResult

MODES = ("off", "observe", "on")
NO_TESTS_COLLECTED = 5  # pytest's exit code when every test was left out


def mode(root: Path) -> str:
    value = settings.get("check_select", str(root)).strip().lower() or "observe"
    if value not in MODES:
        raise PapayuError(
            "ERR_CONFIG_INVALID",
            f"papayu.check.select is {value!r}",
            path="papayu.check.select",
            hint="Use off, observe or on.",
        )
    return value


def tree_changes(repo: pygit2.Repository, tip: str, commit: str) -> list[Change] | None:
    """What ``commit``'s tree changes from ``tip``'s, file by file; None: a submodule moved or a
    file became a directory."""
    before, after = GitTree(repo, commit_of(repo, tip).tree), GitTree(repo, commit_of(repo, commit).tree)
    paths = changed_paths(repo, before.tree, after.tree)
    if paths is None:
        return None
    return [(path, before.read_blob(path), after.read_blob(path)) for path in paths]


def plan(repo: pygit2.Repository, pdir: Path, base: BaseRun, tip: str, commit: str, seed: str) -> Selection:
    """The selection of a run of ``commit`` (a plan's tree, or its regression tree) on ``base``."""
    if base.results.exit_code_only or not base.results.trusted:
        return full_run("the base run has no per-test results papayu trusts")
    if "pytest stream" not in base.results.read_from:
        return full_run("the check is not pytest with papayu's plugin: every test runs")
    try:
        data = inputs_path(pdir, base.key).read_bytes()
    except OSError:
        data = b""
    changes = tree_changes(repo, tip, commit)
    if changes is None:
        return full_run("a submodule moved or a file became a directory")
    return select(read_inputs(data), dict(base.results.outcomes), changes, seed=seed)


def ask(selection: Selection) -> PluginAsk:
    return PluginAsk(reuse=selection.reused, skip_files=selection.skip_files) if selection.selective else PluginAsk()


def with_reused(run: CheckResult, base: BaseRun, selection: Selection) -> CheckResult:
    """The run's results with the base's passes it left out, marked reused."""
    if run.tests is None or not selection.selective:
        return run
    outcomes = dict(run.tests.outcomes)
    reused = sorted(t for t in selection.reused if t not in outcomes and base.results.outcomes.get(t) == Outcome.PASSED)
    outcomes.update(dict.fromkeys(reused, Outcome.PASSED))
    tests = replace(run.tests, outcomes=outcomes, reused=tuple(reused))
    code = 0 if run.exit_code == NO_TESTS_COLLECTED and not run.tests.outcomes else run.exit_code
    return replace(run, tests=tests, exit_code=code)


def tripped(run: CheckResult, selection: Selection) -> list[str]:
    """The sampled tests (no recorded input of theirs changed) that did not pass: the record
    missed something."""
    outcomes = run.tests.outcomes if run.tests is not None else {}
    return sorted(t for t in selection.sampled if outcomes.get(t) != Outcome.PASSED)


def missed(run: CheckResult, base: BaseRun, selection: Selection) -> list[str]:
    """Observe mode: the tests that passed on the base and did not pass in this full run, which
    the selection would have reused."""
    outcomes = run.tests.outcomes if run.tests is not None else {}
    renamed = ids.renamed(base.results.outcomes, outcomes)  # ids naming a value of the run
    passed = [t for t, o in base.results.outcomes.items() if o == Outcome.PASSED and t not in renamed]
    return sorted(t for t in passed if t in selection.reused and outcomes.get(t) != Outcome.PASSED)


def record(selection: Selection, how: str, **more: Any) -> dict[str, Any]:
    """What a run's record says of its selection (the check record, the trace, `stats`)."""
    ran, everything = selection.seconds
    return {
        "mode": how,
        "full": selection.full,
        "selected": len(selection.run),
        "reused": len(selection.reused),
        "sampled": len(selection.sampled),
        "seconds_selected": ran,
        "seconds_all": everything,
        "why": dict(list(selection.why.items())[:20]),
        **more,
    }
