"""Whether a run's results can be trusted next to the base's (docs/DESIGN.md, "A verdict per
test"): the verdict compares tests only between runs read the same way, from the same sources.

Code under test runs inside the test process: it can print a runner's lines, rewrite a report
after the runner wrote it, exit 0 after a failure. What papayu can see of that is said here,
and a run with any of it does not land:
- the run's own errors (a report rewritten after the runner ended, a garbled channel) and ids
  reported more times than on the tip (a runner's line printed from elsewhere);
- a source the base had and the run lacks (the report pytest was asked for is missing), or one
  the base did not have (TAP lines in the log of a run the base read from pytest);
- tests failing in a run that exited 0, unless the base did the same (a command that swallows
  its exit code, `pytest || true`).
A base with errors of its own is judged by its exit code (`readable_base`). An id the tip's own
suite reports more than once (two tests of one title, one runner run twice) is one group, its
outcome the worst of its reports and its count kept (outcome.py, `Collected`): the verdict
compares it as one test, and a run that reports it fewer times misses a test (verdict.py). A run
reporting an id more times than the base did is said here. Its sources are still compared.
"""

from __future__ import annotations

from papayu_git.check.results.instrument import (
    GO_JSON,
    GOTESTSUM,
    GRADLE,
    JEST,
    JUNIT_COPY,
    LIBTEST,
    MAVEN,
    NODE_TEST_EVENTS,
    PYTEST_JUNIT,
    PYTEST_STREAM,
    TAP,
    UNITTEST_STREAM,
    VITEST,
)
from papayu_git.check.results.outcome import EXIT_CODE_ONLY, Outcome, TestResults

FAILING = (Outcome.FAILED, Outcome.ERROR)
_MISSING = {
    PYTEST_JUNIT: "the report pytest was asked for is missing",
    PYTEST_STREAM: "pytest's result stream is missing (pytest reported no test, or papayu's plugin did not load)",
    UNITTEST_STREAM: "unittest's results are missing (papayu's reporter did not load, or unittest reported no test)",
    NODE_TEST_EVENTS: "the report papayu's reporter for node --test writes is missing",
    JEST: "the reports jest was asked for are missing",
    VITEST: "the reports vitest was asked for are missing",
    MAVEN: "Maven's test reports (surefire, failsafe) are missing",
    GRADLE: "Gradle's test results are missing",
    GO_JSON: "go test's -json events are missing from the log",
    GOTESTSUM: "the go test -json events gotestsum was asked to write (GOTESTSUM_JSONFILE) are missing",
    LIBTEST: "cargo test's result lines are missing from the log",
    TAP: "the TAP lines are missing from the log",
}
_NEW = {
    PYTEST_JUNIT: "a pytest report the tip's run did not write",
    PYTEST_STREAM: "pytest's result stream, which the tip's run did not have",
    UNITTEST_STREAM: "unittest results, which the tip's run did not report",
    GO_JSON: "go test -json events in the log, which the tip's run did not print",
    GOTESTSUM: "a gotestsum file of go test -json events, which the tip's run did not write",
    LIBTEST: "cargo test result lines in the log, which the tip's run did not print",
    TAP: "TAP lines in the log, which the tip's run did not print",
}


def readable_base(base: TestResults) -> TestResults:
    """The base as the verdict reads it: exit code only when its own results cannot be trusted
    (its ids reported more than once are groups, compared as such: not a reason)."""
    if not base.errors:
        return base
    return TestResults(EXIT_CODE_ONLY, unreadable=(*base.errors, *_collided(base)))


def base_notes(base: TestResults) -> list[str]:
    if base.errors:
        return [f"the run on the tip cannot be judged per test: {'; '.join((*base.errors, *_collided(base)))}"]
    if base.counts:
        count = len(base.counts)
        return [
            f"{count} test id(s) the tip's own suite reports more than once are each judged as one group "
            "(its worst outcome, its number of tests kept)"
        ]
    return []


def problems(base: TestResults, base_exit: int | None, run: TestResults, run_exit: int | None) -> list[str]:
    """Why ``run`` cannot be trusted next to ``base`` (a run that timed out has exit code None:
    its results are partial, and the timeout is what the verdict says)."""
    out = list(run.errors)
    if more := _reported_more(base, run):
        out.append(f"ids reported more than once: {', '.join(more)}")
    comparable = not base.errors and not base.exit_code_only and base_exit is not None
    # A run that failed before any result (a build error: a crate its tip's manifest lacks) lies
    # about nothing: it crashed, and the verdict says so. One that exited 0 without any is what
    # `os._exit(0)` looks like.
    crashed = run_exit not in (None, 0) and not run.outcomes
    if comparable and run_exit is not None and not crashed:
        out += _sources_differ(base, run)
    if run_exit == 0 and _failing(run) and not (base_exit == 0 and _failing(base)):
        count = len(_failing(run))
        out.append(f"{count} test{'s' if count != 1 else ''} failed, yet the check exited 0")
    return out


def _collided(results: TestResults) -> list[str]:
    if not results.collisions:
        return []
    return [f"ids reported more than once: {', '.join(results.collisions)}"]


def _reported_more(base: TestResults, run: TestResults) -> list[str]:
    """The run's ids it reported more times than the base (at least twice): as its collisions
    say them, or with the two counts where they name them no more."""
    more = {t for t, n in run.counts.items() if n > max(base.count(t), 1)}
    said = [c for c in run.collisions if c.rsplit(": by ", 1)[0] in more]
    named = {c.rsplit(": by ", 1)[0] for c in said}
    counted = [f"{t}: {run.counts[t]} times, {base.count(t)} on the tip" for t in run.counts if t in more - named]
    return said + counted


def _failing(results: TestResults) -> list[str]:
    return [t for t, o in results.outcomes.items() if o in FAILING]


def _sources_differ(base: TestResults, run: TestResults) -> list[str]:
    had, has = base.read_from, run.read_from
    context = f" ({'; '.join(run.unreadable)})" if run.unreadable else ""
    out = [(_MISSING.get(s) or _missing_copy(s)) + context for s in had if s not in has]
    out += [_NEW.get(s) or f"results from {s}, which the tip's run did not have" for s in has if s not in had]
    return out


def _missing_copy(source: str) -> str:
    if source.startswith(JUNIT_COPY):
        return f"{source.removeprefix(JUNIT_COPY)} (papayu.check.junit) is missing"
    return f"the results from {source} are missing"
