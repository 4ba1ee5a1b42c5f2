"""A verdict per test: the check's results as its test runners report them.

Two steps around one check run. `instrument` makes the runner write machine-readable results
into a report directory (a changed command line, extra variables); `read_results` reads them
back, and the runners' own lines in the log, into `TestResults`: an `Outcome` per test id, and
a short message for each failure. Ids are stable across runs, so the same test can be compared
on the tip and on a plan. One room per runner format: `junit` (pytest, node, vitest, any JUnit
XML), `jest`, `libtest` (cargo), `gotest`, `tap`. Where nothing can be read, the result says so:
its source is "exit code only" (plain `python -m unittest`, a runner papayu does not know).
"""

from papayu_git.check.results.gotest import go_plain_text
from papayu_git.check.results.instrument import instrument, junit_patterns
from papayu_git.check.results.outcome import EXIT_CODE_ONLY, Outcome, TestResults, summary
from papayu_git.check.results.read import read_results

__all__ = [
    "EXIT_CODE_ONLY",
    "Outcome",
    "TestResults",
    "go_plain_text",
    "instrument",
    "junit_patterns",
    "read_results",
    "summary",
]
