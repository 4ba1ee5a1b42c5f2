"""Whether a run's results can be trusted next to the base's (docs/DESIGN.md, "A verdict per
test"): the verdict compares tests only between runs read the same way, from the same sources.

Code under test runs inside the test process: it can print a runner's lines, rewrite a report
after the runner wrote it, exit 0 after a failure. What papayu can see of that is said here,
and a run with any of it does not land:
- the run's own errors (a report rewritten after the runner ended, a garbled channel) and ids
  reported twice (never merged: a merge would hide a missing test behind its namesake);
- a source the base had and the run lacks (the report pytest was asked for is missing), or one
  the base did not have (TAP lines in the log of a run the base read from pytest);
- tests failing in a run that exited 0, unless the base did the same (a command that swallows
  its exit code, `pytest || true`).
A base with errors or collisions of its own is judged by its exit code (`readable_base`). Ids
the tip's own suite reports twice (two tests of one name, one runner run twice) cannot be
compared test by test, so they are said, and a run is not held to them; an id colliding in a
run and not in the base still is. Its sources are still compared: the base's collisions say
nothing against where its results came from.
"""

from __future__ import annotations

from dataclasses import replace

from papayu_git.check.results.instrument import (
    GO_JSON,
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
    LIBTEST: "cargo test's result lines are missing from the log",
    TAP: "the TAP lines are missing from the log",
}
_NEW = {
    PYTEST_JUNIT: "a pytest report the tip's run did not write",
    PYTEST_STREAM: "pytest's result stream, which the tip's run did not have",
    UNITTEST_STREAM: "unittest results, which the tip's run did not report",
    GO_JSON: "go test -json events in the log, which the tip's run did not print",
    LIBTEST: "cargo test result lines in the log, which the tip's run did not print",
    TAP: "TAP lines in the log, which the tip's run did not print",
}


def readable_base(base: TestResults) -> TestResults:
    """The base as the verdict reads it: exit code only when its own results cannot be trusted;
    without the ids its own suite reports twice (two tests of one title), which no run can
    tell apart, when it names them all (`collided_ids`)."""
    if base.trusted:
        return base
    if not base.errors and collided_ids(base) is not None:
        kept = {t: o for t, o in base.outcomes.items() if t not in (collided_ids(base) or ())}
        return replace(
            base, outcomes=kept, failures={t: m for t, m in base.failures.items() if t in kept}, collisions=()
        )
    return TestResults(EXIT_CODE_ONLY, unreadable=(*base.errors, *_collided(base)))


def collided_ids(base: TestResults) -> frozenset[str] | None:
    """The ids the base reported more than once, when every one is named (None: some are only
    counted, or the base has errors)."""
    if base.errors or any(c.startswith("... and ") for c in base.collisions):
        return None
    return frozenset(_collision_id(c) for c in base.collisions)


def base_notes(base: TestResults) -> list[str]:
    if base.trusted:
        return []
    if not base.errors and collided_ids(base) is not None:
        count = len(collided_ids(base) or ())
        return [f"{count} test id(s) the tip's own suite reports more than once are left out of the comparison"]
    return [f"the run on the tip cannot be judged per test: {'; '.join((*base.errors, *_collided(base)))}"]


def problems(base: TestResults, base_exit: int | None, run: TestResults, run_exit: int | None) -> list[str]:
    """Why ``run`` cannot be trusted next to ``base`` (a run that timed out has exit code None:
    its results are partial, and the timeout is what the verdict says)."""
    out = list(run.errors)
    known = {_collision_id(c) for c in base.collisions}
    new = [c for c in run.collisions if _collision_id(c) not in known]
    if new:
        out.append(f"ids reported more than once: {', '.join(new)}")
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


def _collision_id(collision: str) -> str:
    return collision.rsplit(": by ", 1)[0]


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
