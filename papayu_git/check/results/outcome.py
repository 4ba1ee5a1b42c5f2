"""What a check run says about each test: the value objects every reader returns."""

from __future__ import annotations

from dataclasses import dataclass, field
from enum import StrEnum
from typing import Any, ClassVar, NamedTuple

EXIT_CODE_ONLY = "exit code only"
# Raised whenever a reader names tests differently: a base run stored under other ids is not
# compared with a plan's (every test would look missing), it runs again (check/base.py).
IDS_VERSION = 2
MESSAGE_CHARS = 2000
# Messages kept per run: every failing test keeps its outcome, only the first ones their output.
MAX_MESSAGES = 1000


class Outcome(StrEnum):
    PASSED = "passed"
    FAILED = "failed"
    SKIPPED = "skipped"
    ERROR = "error"  # the test could not run to a verdict: setup, collection, build, a crash


# When one id is reported twice (same-named tests in two files where the runner names no
# file), the worst outcome stands.
RANK = {Outcome.SKIPPED: 0, Outcome.PASSED: 1, Outcome.ERROR: 2, Outcome.FAILED: 3}


class CaseResult(NamedTuple):
    test_id: str
    outcome: Outcome
    message: str = ""


class ReportUnreadable(Exception):
    """A report is there but cannot be read (malformed, too large, a symbolic link)."""


@dataclass(frozen=True)
class TestResults:
    __test__: ClassVar[bool] = False  # not a pytest test class, whatever its name

    source: str  # "pytest junit", "cargo libtest", "junit:<path>", ... joined by " + "; or EXIT_CODE_ONLY
    outcomes: dict[str, Outcome] = field(default_factory=dict)
    failures: dict[str, str] = field(default_factory=dict)  # failed or errored id -> its message, clipped
    unreadable: tuple[str, ...] = ()  # reports that were there and could not be read, and why

    @property
    def exit_code_only(self) -> bool:
        return self.source == EXIT_CODE_ONLY

    def to_dict(self) -> dict[str, Any]:
        return {
            "source": self.source,
            "outcomes": {k: str(v) for k, v in self.outcomes.items()},
            "failures": dict(self.failures),
            "unreadable": list(self.unreadable),
        }


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
    }


def clip(text: str, limit: int = MESSAGE_CHARS) -> str:
    text = text.strip()
    return text if len(text) <= limit else text[: limit - 1] + "…"


class Collected:
    """The outcomes of one run as the readers find them, merged by test id."""

    def __init__(self) -> None:
        self.outcomes: dict[str, Outcome] = {}
        self.failures: dict[str, str] = {}

    def add(self, case: CaseResult) -> None:
        old = self.outcomes.get(case.test_id)
        if old is None or RANK[case.outcome] > RANK[old]:
            self.outcomes[case.test_id] = case.outcome
        if case.outcome in (Outcome.FAILED, Outcome.ERROR):
            known = self.failures.get(case.test_id)
            if (known is None and len(self.failures) < MAX_MESSAGES) or known == "":
                self.failures[case.test_id] = clip(case.message)

    def extend(self, cases: list[CaseResult]) -> None:
        for case in cases:
            self.add(case)

    def results(self, sources: list[str], unreadable: list[str]) -> TestResults:
        if not sources:
            return TestResults(EXIT_CODE_ONLY, unreadable=tuple(unreadable))
        return TestResults(" + ".join(sources), dict(self.outcomes), dict(self.failures), tuple(unreadable))
