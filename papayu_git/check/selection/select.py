"""Which tests a run of a plan's tree runs, and which keep the base's pass (docs/DESIGN.md, "Pay
for what the plan changed").

A test re-runs when an input it read differs between the tip and the run's tree: a function it
ran changed (changes.py), a file of the repository it opened changed, or anything every test may
read changed (what ran or was opened outside any test, the runner's and the packaging's files, a
module's import-time code, code not in Python, a file added or deleted). It re-runs too when it
did not pass on the base, could not be recorded (a subprocess, a socket, a thread, a read outside
the repository), is not in the base's record, and in a random sample of the rest (5% of the test
files, whole): a tripwire, since a recorded input is only what the recording could see. Every other test keeps its base pass;
a failure is never reused.
"""

from __future__ import annotations

import math
import random
from collections.abc import Iterable, Sequence
from dataclasses import dataclass, field

from papayu_git.check.results.outcome import Outcome
from papayu_git.check.selection.changes import MODULE, python_change
from papayu_git.check.selection.inputs import Recorded
from papayu_git.judges import SOURCE_SUFFIXES

SAMPLE = 0.05
# What every test may depend on without reading it during the test: the runner's configuration,
# the packaging and the pinned dependencies, Python's start-up hooks.
GLOBAL_NAMES = frozenset(
    {
        "conftest.py", "pytest.ini", "pytest.toml", ".pytest.toml", "tox.ini", "setup.cfg", "setup.py",
        "pyproject.toml", "Pipfile", "Pipfile.lock", "poetry.lock", "uv.lock", "pdm.lock", "sitecustomize.py",
        "usercustomize.py", ".python-version", "noxfile.py",
    }
)  # fmt: skip
GLOBAL_SUFFIXES = (".pth", ".lock")
GLOBAL_PREFIXES = ("requirements", "constraints")

Change = tuple[str, bytes | None, bytes | None]  # (path, on the tip, in the run's tree); None: absent


@dataclass(frozen=True)
class Selection:
    full: str  # why every test runs ("" when selected)
    run: frozenset[str] = frozenset()  # the base's tests that run (the rest of the run's tests run too)
    reused: frozenset[str] = frozenset()  # the base's passing tests kept, not run
    sampled: frozenset[str] = frozenset()  # among ``run``: the tripwire
    skip_files: frozenset[str] = frozenset()  # test files none of whose tests runs
    why: dict[str, str] = field(default_factory=dict)  # a changed path -> what it made run
    seconds: tuple[float, float] = (0.0, 0.0)  # the recorded seconds of the tests run, of all

    @property
    def selective(self) -> bool:
        return not self.full and bool(self.reused)


def full_run(why: str) -> Selection:
    return Selection(full=why)


def select(
    recorded: Recorded, outcomes: dict[str, Outcome], changes: Sequence[Change], *, seed: str, sample: float = SAMPLE
) -> Selection:
    """``outcomes``: the base's results; ``changes``: what the run's tree changes from the tip."""
    if recorded.problem:
        return full_run(recorded.problem)
    if not outcomes:
        return full_run("the base run has no per-test results")
    affected: set[str] = set()
    why: dict[str, str] = {}
    for path, old, new in changes:
        found = _affected(recorded, path, old, new)
        if isinstance(found, str):
            return full_run(f"{path}: {found}")
        affected |= found
        why[path] = f"{len(found)} tests read it" if found else "no test read it"
    run = set(affected) & outcomes.keys()
    run |= {t for t, o in outcomes.items() if o != Outcome.PASSED}
    run |= {t for t in outcomes if t not in recorded.tests or recorded.tests[t].unselectable}
    picked = _sample(sorted(outcomes.keys() - run), seed, sample)
    run |= set(picked)
    reused = frozenset(outcomes.keys() - run)
    timing = (_seconds(recorded, run), _seconds(recorded, outcomes))
    skip = _skip_files(outcomes, reused, {path for path, _, _ in changes})
    return Selection("", frozenset(run), reused, frozenset(picked), skip, why, timing)


def _affected(recorded: Recorded, path: str, old: bytes | None, new: bytes | None) -> set[str] | str:
    """The tests ``path``'s change reaches, or why it reaches every test."""
    name = path.rsplit("/", 1)[-1]
    if name in GLOBAL_NAMES or name.endswith(GLOBAL_SUFFIXES) or name.startswith(GLOBAL_PREFIXES):
        return "the runner's configuration, the packaging or the dependencies"
    if old is None or new is None:
        return "added or deleted (a test may look for it without reading it)"
    if path in recorded.shared.opened:
        return "read outside any test (at collection or by a fixture wider than one test)"
    readers = {t for t, i in recorded.tests.items() if path in i.opened}
    if name.endswith((".py", ".pyi")):
        return _python(recorded, path, old, new, readers)
    suffix = name[name.rfind(".") :].casefold() if "." in name else ""
    if suffix in SOURCE_SUFFIXES:
        return "code that is not Python: its tests are not recorded"
    return readers


def _python(recorded: Recorded, path: str, old: bytes, new: bytes, readers: set[str]) -> set[str] | str:
    change = python_change(old, new)
    if change.module and path in recorded.loaded:
        return "its module-level code changed, and every test after its import may read what that code made"
    out = set(readers)
    if change.docstrings or change.units:  # the file's own tests (its doctests read its docstrings)
        out |= {t for t in recorded.tests if t.startswith(path + "::")}
    for unit in change.units:
        if (path, unit) in recorded.shared.units:
            return f"{unit} ran outside any test (at collection or in a fixture wider than one test)"
        out |= {t for t, i in recorded.tests.items() if (path, unit) in i.units}
    if (path, MODULE) in recorded.shared.units and change.module:
        return "its module-level code changed"
    return out


def _sample(rest: list[str], seed: str, share: float) -> list[str]:
    """The tripwire: the tests of a random ``share`` of the test files (at least one file) among
    ``rest``. Whole files, since importing a test module is most of what running one test costs."""
    if not rest or share <= 0:
        return []
    files: dict[str, list[str]] = {}
    for test in rest:
        files.setdefault(test.split("::", 1)[0], []).append(test)
    names = sorted(files)
    chosen = random.Random(seed).sample(names, min(len(names), math.ceil(len(names) * share)))
    return [test for name in chosen for test in files[name]]


def _seconds(recorded: Recorded, tests: Iterable[str]) -> float:
    return round(sum(recorded.tests[t].seconds for t in tests if t in recorded.tests), 3)


def _skip_files(outcomes: dict[str, Outcome], reused: frozenset[str], changed: set[str]) -> frozenset[str]:
    """Test files (the part of a node id before `::`) every test of which is reused, and that the
    run does not change: not collected at all."""
    files: dict[str, bool] = {}
    for test in outcomes:
        if "::" not in test:
            continue
        name = test.split("::", 1)[0]
        files[name] = files.get(name, True) and test in reused
    return frozenset(name for name, all_reused in files.items() if all_reused and name not in changed)
