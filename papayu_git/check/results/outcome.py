"""What a check run says about each test: the value objects every reader returns."""

from __future__ import annotations

from dataclasses import dataclass, field
from enum import StrEnum
from typing import Any, ClassVar, NamedTuple

EXIT_CODE_ONLY = "exit code only"
# Raised whenever a reader names tests differently: a base run stored under other ids is not
# compared with a plan's (every test would look missing), it runs again (check/base.py).
IDS_VERSION = 4  # 4: an id reported more than once is a group (its worst outcome, its count)
MESSAGE_CHARS = 2000
# Messages kept per run: every failing test keeps its outcome, only the first ones their output.
MAX_MESSAGES = 1000
MAX_COLLISIONS = 20  # colliding ids named per run; the rest are counted
# How a run's error from papayu's shield begins (results/shield.py): what the checked code did
# that it may not, so its results, whatever they say, are not the verdict's.
SHIELD_ERROR = "papayu's shield refused the checked code"


class Outcome(StrEnum):
    PASSED = "passed"
    FAILED = "failed"
    SKIPPED = "skipped"
    ERROR = "error"  # the test could not run to a verdict: setup, collection, build, a crash


# The worse of two outcomes of one test (its phases, pytest's two JUnit entries for a failure and
# a teardown error): a failure over an error over a pass over a skip.
RANK = {Outcome.SKIPPED: 0, Outcome.PASSED: 1, Outcome.ERROR: 2, Outcome.FAILED: 3}


class CaseResult(NamedTuple):
    test_id: str
    outcome: Outcome
    message: str = ""


class ReportUnreadable(Exception):
    """A report is there but cannot be read (malformed, too large, a symbolic link)."""


@dataclass(frozen=True)
class TestResults:
    """One run's per-test results, and what papayu found wrong with where they came from
    (docs/DESIGN.md, "A verdict per test")."""

    __test__: ClassVar[bool] = False  # not a pytest test class, whatever its name

    source: str  # "pytest junit", "cargo libtest", "junit:<path>", ... joined by " + "; or EXIT_CODE_ONLY
    outcomes: dict[str, Outcome] = field(default_factory=dict)
    failures: dict[str, str] = field(default_factory=dict)  # failed or errored id -> its message, clipped
    unreadable: tuple[str, ...] = ()  # reports that were there and could not be read, and why
    # Why these results cannot be trusted: a report rewritten after the runner ended, a garbled
    # channel. Such a run does not land (results/provenance.py).
    errors: tuple[str, ...] = ()
    collisions: tuple[str, ...] = ()  # ids two results claimed ("id: by A and by B"), said (the first ones)
    sources: tuple[str, ...] = ()  # what was read, one name each; empty: split from ``source``
    # Where the run's own code reached for frames or objects, allowed as the tip's ("file::function::
    # event", results/shield.py): a plan's run may reach there too.
    reaching: tuple[str, ...] = ()
    # papayu's fail-first order as the runner said it ran ("first", "total", "stopped": why it
    # stopped after the first part); said in the output, never trusted (check/selection/).
    order: dict[str, Any] = field(default_factory=dict)
    # Ids reported more than once, and how many times: each is one group, its outcome the worst
    # of its reports (docs/DESIGN.md, "A verdict per test": ids reported more than once).
    counts: dict[str, int] = field(default_factory=dict)
    # Files of the checked tree the runner loaded as test support: its plugins (`-p`,
    # `pytest_plugins`, registered by a conftest) and the modules its tests' fixtures come from
    # (judge_support.py: taken from the tip, whatever the import graph says).
    support: tuple[str, ...] = ()

    def count(self, test_id: str) -> int:
        """How many times the run reported ``test_id`` (0: not at all)."""
        return self.counts.get(test_id, 1 if test_id in self.outcomes else 0)

    @property
    def exit_code_only(self) -> bool:
        return self.source == EXIT_CODE_ONLY

    @property
    def read_from(self) -> tuple[str, ...]:
        """The sources read, by name (a run is compared with the base's by these)."""
        if self.sources or self.exit_code_only:
            return self.sources
        return tuple(self.source.split(" + "))

    @property
    def trusted(self) -> bool:
        return not self.errors and not self.collisions

    def to_dict(self) -> dict[str, Any]:
        return {
            "source": self.source,
            "sources": list(self.read_from),
            "outcomes": {k: str(v) for k, v in self.outcomes.items()},
            "failures": dict(self.failures),
            "unreadable": list(self.unreadable),
            "errors": list(self.errors),
            "collisions": list(self.collisions),
            **({"reaching": list(self.reaching)} if self.reaching else {}),
            **({"order": dict(self.order)} if self.order else {}),
            **({"counts": dict(self.counts)} if self.counts else {}),
            **({"support": list(self.support)} if self.support else {}),
        }

    @classmethod
    def from_dict(cls, data: dict[str, Any]) -> TestResults:
        return cls(
            str(data["source"]),
            {str(k): Outcome(v) for k, v in data["outcomes"].items()},
            {str(k): str(v) for k, v in data.get("failures", {}).items()},
            tuple(data.get("unreadable", ())),
            tuple(data.get("errors", ())),
            tuple(data.get("collisions", ())),
            tuple(data.get("sources", ())),
            tuple(data.get("reaching", ())),
            dict(data.get("order") or {}),
            {str(k): int(v) for k, v in (data.get("counts") or {}).items()},
            tuple(str(p) for p in data.get("support") or ()),
        )


SUMMARY_IDS = 50


def summary(results: TestResults) -> dict[str, Any]:
    """What a check result says about its tests in JSON, traces and records: the counts and the
    failing ids (the first SUMMARY_IDS), not every test."""
    counts = {str(o): 0 for o in Outcome}
    for outcome in results.outcomes.values():
        counts[str(outcome)] += 1
    failing = sorted(k for k, v in results.outcomes.items() if v in (Outcome.FAILED, Outcome.ERROR))
    return {
        "source": results.source,
        "counts": counts,
        "failing": failing[:SUMMARY_IDS],
        "failing_total": len(failing),
        "unreadable": list(results.unreadable),
        "errors": list(results.errors),
        "collisions": list(results.collisions),
        **({"first": int(results.order.get("first") or 0)} if results.order.get("first") else {}),
    }


def clip(text: str, limit: int = MESSAGE_CHARS) -> str:
    text = text.strip()
    return text if len(text) <= limit else text[: limit - 1] + "…"


class Collected:
    """The outcomes of one run as the readers find them, by test id. An id reported more than
    once (two tests of one title, two readers, two sessions of one runner) is a collision: said,
    and kept as one group whose outcome is the worst of its reports and whose count is kept, so
    neither a failure nor a test gone missing hides behind its namesake (docs/DESIGN.md)."""

    def __init__(self) -> None:
        self.outcomes: dict[str, Outcome] = {}
        self.failures: dict[str, str] = {}
        self.by: dict[str, str] = {}  # id -> the source that reported it first
        self.counts: dict[str, int] = {}  # ids reported more than once -> how many times
        self.collisions: list[str] = []
        self.collided = 0

    def add(self, case: CaseResult, source: str = "", count: int = 1) -> None:
        test = case.test_id
        failing = case.outcome in (Outcome.FAILED, Outcome.ERROR)
        if failing and test not in self.failures and len(self.failures) < MAX_MESSAGES:
            self.failures[test] = clip(case.message)
        if test not in self.outcomes:
            self.outcomes[test] = case.outcome
            self.by[test] = source
            if count > 1:
                self.counts[test] = count
            return
        self.counts[test] = self.counts.get(test, 1) + count
        if RANK[case.outcome] > RANK[self.outcomes[test]]:
            self.outcomes[test] = case.outcome
        self.collided += 1
        if len(self.collisions) < MAX_COLLISIONS:
            first = self.by[test]
            said = f"by {first} twice" if first == source else f"by {first} and by {source}"
            self.collisions.append(f"{test}: {said}")

    def extend(self, cases: list[CaseResult], source: str = "") -> None:
        for case in cases:
            self.add(case, source)

    def results(self, sources: list[str], unreadable: list[str], errors: list[str] | None = None) -> TestResults:
        collisions = list(self.collisions)
        if self.collided > len(collisions):
            collisions.append(f"... and {self.collided - len(collisions)} more")
        if not sources:
            return TestResults(EXIT_CODE_ONLY, unreadable=tuple(unreadable), errors=tuple(errors or ()))
        return TestResults(
            " + ".join(sources),
            dict(self.outcomes),
            dict(self.failures),
            tuple(unreadable),
            tuple(errors or ()),
            tuple(collisions),
            tuple(sources),
            counts=dict(self.counts),
        )
