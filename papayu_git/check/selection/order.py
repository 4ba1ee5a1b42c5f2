"""Which tests run first (docs/DESIGN.md, "Fail first").

First: the tests the change reaches, every test that did not pass on the tip, every test that
failed in a recent check, and the tests of the test files the run's tree changes. What the change
reaches comes from a record of what each test read (a base run's, inputs.py) where there is one
and it knows the test, else from the signals that cost nothing (signals.py).

By the record, a test is reached when a function it ran changed, a file it opened changed, or
the module-level code of a file whose functions it ran changed (whatever that code made, those
tests are the likeliest to read it). A change the record cannot place (a function that ran
outside any test, a runner's configuration) reaches the tests that ran that file's code, and
the signals' tests. None of this decides anything: the rest of the suite runs after the first
part, and the plan lands only on the whole suite's verdict. A wrong first part costs time.
"""

from __future__ import annotations

from collections.abc import Iterable, Sequence
from dataclasses import dataclass, field

from papayu_git.check.results.outcome import Outcome
from papayu_git.check.selection.changes import Change as PythonChange
from papayu_git.check.selection.changes import python_change
from papayu_git.check.selection.inputs import Recorded
from papayu_git.check.selection.signals import Reader, Touched, reached_files

Change = tuple[str, bytes | None, bytes | None]  # (path, on the tip, in the run's tree); None: absent
SEPARATOR = "::"


@dataclass(frozen=True)
class FirstPart:
    tests: frozenset[str] = frozenset()  # the tip's tests to run first
    files: frozenset[str] = frozenset()  # test files every test of which runs first (the run's tree changes them)
    why: dict[str, int] = field(default_factory=dict)  # a reason -> how many tests it put first
    by: str = ""  # what placed the change: "the record" or the signals, and why not the record
    notes: tuple[str, ...] = ()  # what could not be placed, and why (said in the log)

    def __bool__(self) -> bool:
        return bool(self.tests or self.files)

    def to_dict(self) -> dict[str, object]:
        return {
            "first": len(self.tests),
            "first_files": sorted(self.files)[:20],
            "why": dict(list(self.why.items())[:20]),
            "by": self.by,
            **({"notes": list(self.notes)} if self.notes else {}),
        }


def test_file(test: str) -> str:
    return test.split(SEPARATOR, 1)[0]


def first_part(
    recorded: Recorded | None,
    outcomes: dict[str, Outcome],
    changes: Sequence[Change],
    read: Reader,
    *,
    recent: Iterable[str] = (),
    test_files: Iterable[str] = (),
) -> FirstPart:
    """``outcomes``: the tip's results; ``changes``: what the run's tree changes from the tip;
    ``read``: the tip's files; ``recent``: tests that failed in recent checks; ``test_files``:
    the files among ``changes`` that are tests (their tests run first, new ones included)."""
    why: dict[str, int] = {}
    notes: list[str] = []
    first: set[str] = set()

    def add(reason: str, tests: Iterable[str]) -> None:
        new = (set(tests) & outcomes.keys()) - first
        if new:
            first.update(new)
            why[reason] = why.get(reason, 0) + len(new)

    add("did not pass on the tip", (t for t, o in outcomes.items() if o in (Outcome.FAILED, Outcome.ERROR)))
    add("failed in a recent check", recent)
    usable = recorded is not None and not recorded.problem
    unknown = set(outcomes) - set(recorded.tests if usable and recorded is not None else ())
    touched = []
    for path, old, new in changes:
        change = python_change(old, new) if path.endswith(".py") else None
        if change is not None and change.problem:
            notes.append(f"{path}: {change.problem}; placed by its name and imports")
        touched.append(Touched(path, change.units if change is not None else frozenset()))
        if usable and recorded is not None:
            add("reached by the change (the record)", _recorded(recorded, path, old, new, change))
    files_first = set(test_files)
    signalled = unknown if usable else set(outcomes)
    if signalled:
        files = {test_file(t) for t in signalled}
        reached = reached_files(touched, files - files_first, read)
        add("reached by the change (imports, names)", (t for t in signalled if test_file(t) in reached))
    if usable and recorded is not None:
        by = "the record" + (f" (it stopped early: {recorded.off})" if recorded.off else "")
        by += f", and imports and names for {len(unknown)} tests it does not know" if unknown else ""
    else:
        why_not = recorded.problem if recorded is not None else "no record of what each test reads"
        by = f"imports and names ({why_not})"
    if files_first:
        why["in test files the run changes"] = sum(1 for t in outcomes if test_file(t) in files_first)
    return FirstPart(frozenset(first), frozenset(files_first), why, by, tuple(notes))


def _recorded(
    recorded: Recorded, path: str, old: bytes | None, new: bytes | None, change: PythonChange | None
) -> set[str]:
    """The tests the record says ``path``'s change reaches."""
    out = {t for t, inputs in recorded.tests.items() if path in inputs.opened}
    if change is None:
        return out
    whole = change.module or old is None or new is None
    outside = any((path, u) in recorded.shared.units for u in change.units)
    for test, inputs in recorded.tests.items():
        ran = {unit for file, unit in inputs.units if file == path}
        if ran & change.units or (ran and (whole or outside)):
            out.add(test)
    if change.docstrings or change.units:  # the file's own tests (its doctests)
        out |= {t for t in recorded.tests if t.startswith(path + SEPARATOR)}
    return out
