"""The order of a run's candidates, and why each lost (docs/DESIGN.md, "Best of N").

Pure: scores in, an order and sentences out. Lexicographic, most important first:
1. the gate lets it land: the transaction's verdict, taken as it is (never re-derived here);
2. more tests fixed: those the goal names first, then every test that failed on the tip;
3. no flaky signal: fewer tests the verdict found flaky;
4. a smaller change: fewer files, then fewer lines.
What is still tied after that is a tie (a judge model may break it among green candidates, else
the lower number wins).
"""

from __future__ import annotations

import re
from collections.abc import Iterable, Sequence
from dataclasses import dataclass

from papayu_git.check.verdict import FILE_SEPARATORS

CRITERIA = ("the gate", "tests fixed (named by the goal, then all)", "no flaky signal", "smaller change")


@dataclass(frozen=True)
class Score:
    index: int
    green: bool  # the gate lets it land: checked, nothing held, no regression
    goal_fixed: int  # fixed tests the goal names
    fixed: int  # tests that failed on the tip and pass on the candidate
    flaky: int  # tests the verdict found flaky
    files: int
    lines: int

    def key(self) -> tuple[int, ...]:
        return (int(self.green), self.goal_fixed, self.fixed, -self.flaky, -self.files, -self.lines)


def order(scores: Iterable[Score]) -> list[Score]:
    """Best first; equal keys by number."""
    return sorted(scores, key=lambda s: (tuple(-k for k in s.key()), s.index))


def tied_at_top(ordered: Sequence[Score]) -> list[Score]:
    """The green candidates that share the best key (one or none when there is no tie)."""
    if not ordered or not ordered[0].green:
        return []
    return [s for s in ordered if s.key() == ordered[0].key()]


def why_lost(loser: Score, winner: Score) -> str:
    """The first criterion on which a green ``loser`` is behind ``winner`` ("" when they tie)."""
    if (loser.goal_fixed, loser.fixed) != (winner.goal_fixed, winner.fixed):
        return (
            f"fixes {_tests(loser.fixed)} ({loser.goal_fixed} named by the goal), "
            f"#{winner.index} fixes {_tests(winner.fixed)} ({winner.goal_fixed} named by the goal)"
        )
    if loser.flaky != winner.flaky:
        return f"flaky signal: {_tests(loser.flaky)} flaky, #{winner.index} {winner.flaky}"
    if (loser.files, loser.lines) != (winner.files, winner.lines):
        return f"larger change: {_size(loser.files, loser.lines)}, #{winner.index} {_size(winner.files, winner.lines)}"
    return ""


def _tests(n: int) -> str:
    return f"{n} test" + ("" if n == 1 else "s")


def _size(files: int, lines: int) -> str:
    return f"{files} file{'' if files == 1 else 's'}, {lines} line{'' if lines == 1 else 's'}"


_WORD = re.compile(r"[A-Za-z_][A-Za-z0-9_]{3,}")


def goal_named(goal: str, tests: Iterable[str]) -> list[str]:
    """The tests ``goal`` names: by id, by their file, or by the test's own name as a word
    (`test_add`; at least four characters, so that `add` alone names nothing)."""
    words = set(_WORD.findall(goal))
    named = []
    for test in tests:
        file = test
        for separator in FILE_SEPARATORS:
            file = file.split(separator, 1)[0]
        leaf = re.split(r"::| > |[./]", test.split("[", 1)[0])[-1]  # test_add of tests/x.py::T::test_add[1]
        if test in goal or (file != test and file in goal) or leaf in words:
            named.append(test)
    return named
