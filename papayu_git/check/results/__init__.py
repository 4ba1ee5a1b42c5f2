"""A verdict per test: the check's results as its test runners report them.

Around one check run: `instrumented` makes the runners write machine-readable results into a
report directory (a changed command line, extra variables) and says which sources the run may
have; the check's first process (`inside`) sends the reports once the command ended, papayu's
pytest plugin (`pytest_plugin`) streams pytest's results as they come, both through `channel`;
`read` turns that, and the log's lines of the command's own runners, into `TestResults`: an
`Outcome` per test id, a short message for each failure, and what makes them untrustworthy.
Ids are stable across runs, so the same test can be compared on the tip and on a plan, and
`provenance` says when two runs cannot be compared. One room per format: `stream` (pytest's
records), `junit` (pytest, node, vitest, any JUnit XML), `jest`, `libtest` (cargo), `gotest`,
`tap`. Where nothing can be read, the result says so: its source is "exit code only" (plain
`python -m unittest`, a runner papayu does not know).
"""

from papayu_git.check.results.gotest import go_plain_text
from papayu_git.check.results.instrument import instrument, instrumented, junit_patterns
from papayu_git.check.results.outcome import EXIT_CODE_ONLY, Outcome, TestResults, summary
from papayu_git.check.results.read import read_results

__all__ = [
    "EXIT_CODE_ONLY",
    "Outcome",
    "TestResults",
    "go_plain_text",
    "instrument",
    "instrumented",
    "junit_patterns",
    "read_results",
    "summary",
]
