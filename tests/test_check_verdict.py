"""Whether a plan lands (papayu_git/check/verdict.py): the base run, the regression run (the tip's
tests on the plan's code) and the plan's own run as per-test results, table-driven over every rule
the verdict follows, then the base re-run for flakes, the trailer and the report lines."""

from __future__ import annotations

import json
from types import EllipsisType
from typing import Any, NamedTuple

import pytest

from papayu_git.check.results import EXIT_CODE_ONLY, Outcome, TestResults
from papayu_git.check.run import CheckResult
from papayu_git.check.verdict import Run, Verdict, judge, plan_lands
from papayu_git.errors import ERROR_CODES

P, F, S, E = Outcome.PASSED, Outcome.FAILED, Outcome.SKIPPED, Outcome.ERROR
UNREADABLE: dict[str, Outcome] = {}  # marker: the run left no per-test results


def run(outcomes: dict[str, Outcome], exit_code: int | EllipsisType | None = ...) -> Run:
    """A run with these outcomes; by default (...) it exits 1 when a test failed, 0 otherwise."""
    failing = {t: "assert 1 == 2" for t, o in outcomes.items() if o in (F, E)}
    code = (1 if failing else 0) if isinstance(exit_code, EllipsisType) else exit_code
    if outcomes is UNREADABLE:
        return Run(TestResults(EXIT_CODE_ONLY), code)
    return Run(TestResults("pytest junit", dict(outcomes), failing), code)


GREEN = {"a": P, "b": P}


class Case(NamedTuple):
    base: Run
    regression: Run
    own: Run | None
    expect: dict[str, Any]
    approved: tuple[str, ...] = ()


CASES = {
    "green base, clean plan: lands": Case(
        run(GREEN), run(GREEN), None, {"lands": True, "code": None, "passed": 2, "fixed": ()}
    ),
    "green base, plan breaks a test: rolls back naming it": Case(
        run(GREEN),
        run({"a": P, "b": F}),
        None,
        {"lands": False, "review": False, "code": "ERR_CHECK_REGRESSION", "broken": ("b",), "passed": 1},
    ),
    "an error counts as a failure": Case(
        run(GREEN), run({"a": P, "b": E}), None, {"code": "ERR_CHECK_REGRESSION", "broken": ("b",)}
    ),
    "red base, plan fixes one: lands, the other already failing": Case(
        run({"a": F, "b": E, "c": P}),
        run({"a": P, "b": E, "c": P}),
        None,
        {"lands": True, "code": None, "fixed": ("a",), "already_failing": ("b",), "passed": 2},
    ),
    "fixes one, breaks another: rolls back naming the broken one": Case(
        run({"a": F, "c": P}),
        run({"a": P, "c": F}),
        None,
        {"lands": False, "code": "ERR_CHECK_REGRESSION", "broken": ("c",), "fixed": ("a",)},
    ),
    "a passing test file's tests are gone: missing": Case(
        run({"t/x.py::one": P, "t/x.py::two": P, "a": P}),
        run({"a": P}),
        None,
        {"lands": False, "code": "ERR_CHECK_REGRESSION", "missing": ("t/x.py::one", "t/x.py::two"), "broken": ()},
    ),
    "passed on the base, skipped on the plan: missing": Case(
        run(GREEN), run({"a": P, "b": S}), None, {"code": "ERR_CHECK_REGRESSION", "missing": ("b",)}
    ),
    "skipped on both: neither pass nor fail": Case(
        run({"a": P, "s": S}), run({"a": P, "s": S}), None, {"lands": True, "passed": 1, "missing": ()}
    ),
    "a failing test skipped on the plan is not fixed": Case(
        run({"a": F, "b": P}),
        run({"a": S, "b": P}),
        None,
        {"lands": False, "review": True, "code": "ERR_CHECK_FIXES_NOTHING", "already_failing": ("a",)},
    ),
    "not on the base, fails on the plan's code: newly failing": Case(
        run(GREEN), run({**GREEN, "p[new]": F}), None, {"code": "ERR_CHECK_REGRESSION", "broken": ("p[new]",)}
    ),
    "red base with a collection error, the plan's run green: the error is fixed": Case(
        run({"pytest > tests.test_x": E}, 2),
        run({"tests/test_x.py::a": P, "tests/test_y.py::b": P}),
        None,
        {"lands": True, "fixed": ("pytest > tests.test_x",), "passed": 2, "already_failing": ()},
    ),
    "red base with a collection error, a test it hid fails: newly failing": Case(
        run({"pytest > tests.test_x": E}, 2),
        run({"tests/test_x.py::a": P, "tests/test_y.py::b": F}),
        None,
        {
            "code": "ERR_CHECK_REGRESSION",
            "broken": ("tests/test_y.py::b",),
            "already_failing": ("pytest > tests.test_x",),
        },
    ),
    "a failing test gone from a red plan's run is not fixed": Case(
        run({"a": F, "b": F, "c": P}),
        run({"b": F, "c": P}),
        None,
        {"review": True, "code": "ERR_CHECK_FIXES_NOTHING", "fixed": (), "already_failing": ("a", "b")},
    ),
    "red base, fixes nothing, breaks nothing: review": Case(
        run({"a": F, "b": P}),
        run({"a": F, "b": P}),
        None,
        {"lands": False, "review": True, "code": "ERR_CHECK_FIXES_NOTHING", "already_failing": ("a",)},
    ),
    "own run: a new test passes": Case(
        run(GREEN),
        run(GREEN),
        run({**GREEN, "t/new.py::x": P}),
        {"lands": True, "new_passing": 1, "passed": 2, "new_failing": ()},
    ),
    "own run: a new test fails": Case(
        run(GREEN),
        run(GREEN),
        run({**GREEN, "t/new.py::x": F, "t/new.py::y": P}),
        {"lands": False, "review": False, "code": "ERR_CHECK_NEW_TESTS_FAIL", "new_failing": ("t/new.py::x",)},
    ),
    "own run: the plan's test changes break a tip test": Case(
        run(GREEN),
        run(GREEN),
        run({"a": F, "b": P, "t/conftest_user.py::x": P}),
        {"code": "ERR_CHECK_NEW_TESTS_FAIL", "new_failing": ("a",)},
    ),
    "own run: already failing tip tests are not new failures": Case(
        run({"a": F, "b": F}),
        run({"a": P, "b": F}),
        run({"a": P, "b": F, "t/new.py::x": P}),
        {"lands": True, "fixed": ("a",), "already_failing": ("b",), "new_passing": 1},
    ),
    "own run os._exit(0) in a new test file: the regression run still decides": Case(
        run(GREEN),
        run({"a": P, "b": F}),
        run(UNREADABLE, 0),
        {"lands": False, "code": "ERR_CHECK_REGRESSION", "broken": ("b",)},
    ),
    "own run unreadable on a clean plan: its new tests are not shown to pass": Case(
        run(GREEN), run(GREEN), run(UNREADABLE, 0), {"lands": False, "code": "ERR_CHECK_NEW_TESTS_FAIL"}
    ),
    "own run exits nonzero with no test failing": Case(
        run(GREEN),
        run(GREEN),
        run({**GREEN, "t/new.py::x": P}, 1),
        {"lands": False, "code": "ERR_CHECK_NEW_TESTS_FAIL"},
    ),
    "approved file: judged by the own run only": Case(
        run({"t/x.py::old": P, "a": P}),
        run({"t/x.py::old": F, "a": P}),  # the tip's version of the test, which the plan updated
        run({"t/x.py::old": P, "a": P}),
        {"lands": True, "broken": (), "passed": 2},
        approved=("t/x.py",),
    ),
    "approved file: a test deleted with approval is not missing": Case(
        run({"t/x.py::gone": P, "a": P}),
        run({"t/x.py::gone": P, "a": P}),
        run({"a": P}),
        {"lands": True, "missing": (), "passed": 1},
        approved=("t/x.py",),
    ),
    "approved file: a test failing in the own run is a new failure": Case(
        run({"t/x.py::old": P, "a": P}),
        run({"t/x.py::old": P, "a": P}),
        run({"t/x.py::old": F, "a": P}),
        {"lands": False, "code": "ERR_CHECK_NEW_TESTS_FAIL", "new_failing": ("t/x.py::old",)},
        approved=("t/x.py",),
    ),
    "approved file: a red test fixed in the own run fixes the red base": Case(
        run({"t/x.py::old": F, "a": P}),
        run({"t/x.py::old": F, "a": P}),
        run({"t/x.py::old": P, "t/x.py::added": P, "a": P}),
        {"lands": True, "fixed": ("t/x.py::old",), "new_passing": 1, "already_failing": ()},
        approved=("t/x.py",),
    ),
    "approved file: red on the base and in the own run is already failing": Case(
        run({"t/x.py::old": F, "a": F}),
        run({"t/x.py::old": F, "a": P}),
        run({"t/x.py::old": F, "a": P}),
        {"lands": True, "fixed": ("a",), "already_failing": ("t/x.py::old",), "new_failing": ()},
        approved=("t/x.py",),
    ),
    "approval is by whole file: a longer name is not approved": Case(
        run({"t/x.py2::a": P, "t/x.pyc > a": P}),
        run({"t/x.py2::a": F, "t/x.pyc > a": F}),
        run({"t/x.py2::a": P, "t/x.pyc > a": P}),
        {"code": "ERR_CHECK_REGRESSION", "broken": ("t/x.py2::a", "t/x.pyc > a")},
        approved=("t/x.py",),
    ),
    "approval matches node's file > test ids and whole ids": Case(
        run({"t/x.test.js > suite > a": P, "t/y.py::b": P}),
        run({"t/x.test.js > suite > a": F, "t/y.py::b": F}),
        run({"t/x.test.js > suite > a": P, "t/y.py::b": P}),
        {"lands": True},
        approved=("t/x.test.js", "t/y.py::b"),
    ),
    "without an own run, approval changes nothing": Case(
        run({"t/x.py::old": P}), run({"t/x.py::old": F}), None, {"code": "ERR_CHECK_REGRESSION"}, approved=("t/x.py",)
    ),
    "base exits nonzero with every test passing, so does the plan: review": Case(
        run(GREEN, 2),
        run(GREEN, 2),
        None,
        {"lands": False, "review": True, "code": "ERR_CHECK_FIXES_NOTHING", "fixed": ()},
    ),
    "base exits nonzero with every test passing, the plan's run exits 0: fixed, lands": Case(
        run(GREEN, 2), run(GREEN, 0), None, {"lands": True, "code": None, "fixed": ()}
    ),
    "regression run exits nonzero with no test failing: does not land": Case(
        run(GREEN), run(GREEN, 1), None, {"lands": False, "review": False, "code": "ERR_CHECK_REGRESSION"}
    ),
    "regression run unreadable on a readable base: every passing test is missing": Case(
        run(GREEN), run(UNREADABLE, 0), None, {"lands": False, "code": "ERR_CHECK_REGRESSION", "missing": ("a", "b")}
    ),
    "regression run unreadable on an all-red base: still does not land": Case(
        run({"a": F}), run(UNREADABLE, 0), None, {"lands": False, "code": "ERR_CHECK_REGRESSION"}
    ),
    "regression run timed out": Case(
        run(GREEN), run({"a": P}, None), None, {"lands": False, "code": "ERR_CHECK_TIMEOUT", "missing": ("b",)}
    ),
    "own run timed out": Case(
        run(GREEN), run(GREEN), run(UNREADABLE, None), {"lands": False, "code": "ERR_CHECK_TIMEOUT"}
    ),
    "exit code only: the plan's run exits 0": Case(
        run(UNREADABLE, 1), run(UNREADABLE, 0), None, {"lands": True, "code": None, "exit_code_only": True}
    ),
    "exit code only: the plan's run exits 1": Case(
        run(UNREADABLE, 0),
        run(UNREADABLE, 1),
        None,
        {"lands": False, "review": False, "code": "ERR_CHECK_FAILED", "exit_code_only": True},
    ),
    "exit code only: the own run exits 1": Case(
        run(UNREADABLE, 0), run(UNREADABLE, 0), run(UNREADABLE, 1), {"lands": False, "code": "ERR_CHECK_FAILED"}
    ),
    "exit code only: a timeout": Case(
        run(UNREADABLE, 0), run(UNREADABLE, None), None, {"lands": False, "code": "ERR_CHECK_TIMEOUT"}
    ),
    "exit code only when the base is, even if the plan's run is readable": Case(
        run(UNREADABLE, 0), run({"a": F}), None, {"lands": False, "code": "ERR_CHECK_FAILED", "exit_code_only": True}
    ),
    # Ids that name a value of their run (results/ids.py): the same tests under new ids.
    "a Go subtest named after t.TempDir(): the same test next run, lands": Case(
        run({"m.TestWalk//tmp/TestWalk123/001": P, "m.TestAdd": P}),
        run({"m.TestWalk//tmp/TestWalk987/001": P, "m.TestAdd": P}),
        None,
        {"lands": True, "missing": (), "passed": 2},
    ),
    "ids with a port and an address: breaking one names the tip's id of it": Case(
        run({"t.py::test_get[http://127.0.0.1:41234]": P, "t.py::test_repr[<A at 0x7f01020304>]": P}),
        run({"t.py::test_get[http://127.0.0.1:39999]": F, "t.py::test_repr[<A at 0x7fffeeddcc>]": P}),
        None,
        {"code": "ERR_CHECK_REGRESSION", "broken": ("t.py::test_get[http://127.0.0.1:41234]",), "missing": ()},
    ),
    "two ids of one test by the time: paired in report order": Case(
        run({"t::x[2024-01-01 10:00:01]": P, "t::x[2024-01-01 10:00:02]": F}),
        run({"t::x[2025-02-02 11:00:05]": P, "t::x[2025-02-02 11:00:06]": P}),
        None,
        {"lands": True, "fixed": ("t::x[2024-01-01 10:00:02]",)},
    ),
    "a value nobody names: judged by the stable part, never missing": Case(
        run({"t::x[kq3v]": P, "t::x[zz9a]": P, "t::y": P}),
        run({"t::x[m1n2]": P, "t::y": P}),
        None,
        {"lands": True, "missing": ()},
    ),
    "a value nobody names, failing: named under its own id": Case(
        run({"t::x[kq3v]": P, "t::x[zz9a]": P}),
        run({"t::x[m1n2]": P, "t::x[abcd]": F}),
        None,
        {"code": "ERR_CHECK_REGRESSION", "broken": ("t::x[zz9a]",)},
    ),
    "a test gone with no new id of its kind is still missing": Case(
        run({"t::x[kq3v]": P, "t::y[1]": P}), run({"t::y[1]": P}), None, {"missing": ("t::x[kq3v]",)}
    ),
}


@pytest.mark.parametrize("case", CASES.values(), ids=CASES.keys())
def test_verdict(case: Case) -> None:
    verdict = judge(case.base, case.regression, case.own, approved_edits=case.approved)
    assert {k: getattr(verdict, k) for k in case.expect} == case.expect, verdict
    assert verdict.lands == (verdict.code is None)
    assert verdict.code is None or verdict.code in ERROR_CODES
    assert not verdict.review or verdict.code == "ERR_CHECK_FIXES_NOTHING"


class Recorder:
    """A base re-run: the given outcomes for the ids asked about, and every call kept."""

    def __init__(self, outcomes: dict[str, Outcome] | None = None) -> None:
        self.outcomes = outcomes
        self.calls: list[list[str]] = []

    def __call__(self, ids: list[str]) -> Run:
        self.calls.append(ids)
        if self.outcomes is None:
            return run(UNREADABLE, 1)
        return run({t: o for t, o in self.outcomes.items() if t in ids})


def test_a_test_failing_on_the_base_again_is_flaky_and_not_held_against_the_plan() -> None:
    rerun = Recorder({"b": F})
    verdict = judge(run(GREEN), run({"a": P, "b": F}), None, rerun_base=rerun)
    assert (verdict.lands, verdict.flaky, verdict.broken) == (True, ("b",), ())
    assert rerun.calls == [["b"]]
    assert verdict.trailer() == "passed 1, fixed 0, already failing 0, flaky 1"
    assert "flaky (failed on the tip too when re-run): b" in verdict.lines()


@pytest.mark.parametrize(
    "rerun",
    [Recorder({"b": P}), Recorder({"b": S}), Recorder({}), Recorder(None)],
    ids=["pass", "skip", "gone", "unreadable"],
)
def test_a_test_not_failing_on_the_base_again_is_broken(rerun: Recorder) -> None:
    verdict = judge(run(GREEN), run({"a": P, "b": F}), None, rerun_base=rerun)
    assert (verdict.lands, verdict.code, verdict.broken, verdict.flaky) == (False, "ERR_CHECK_REGRESSION", ("b",), ())


def test_without_a_rerun_a_test_failing_on_the_plan_is_broken() -> None:
    verdict = judge(run(GREEN), run({"a": P, "b": F}), None)
    assert (verdict.code, verdict.broken) == ("ERR_CHECK_REGRESSION", ("b",))


def test_with_live_services_shared_a_test_failing_on_the_plan_is_never_excused_as_flaky() -> None:
    """The plan's run may have changed the service (papayu.check.localPorts) so that the tip fails
    too: the base is not asked again, and the lines say why."""
    rerun = Recorder({"b": F})
    verdict = judge(run(GREEN), run({"a": P, "b": F}), None, rerun_base=rerun, shared="papayu.check.localPorts 5432")
    assert (verdict.lands, verdict.code, verdict.broken, verdict.flaky) == (False, "ERR_CHECK_REGRESSION", ("b",), ())
    assert rerun.calls == []
    assert "same live services (papayu.check.localPorts 5432)" in verdict.lines()[0]
    assert judge(run(GREEN), run(GREEN), None, rerun_base=rerun, shared="papayu.check.network").notes == ()


def test_the_base_is_rerun_once_with_exactly_the_tests_that_passed_there_and_failed_on_the_plan() -> None:
    rerun = Recorder({"a": F, "b": F})
    base = run({"a": P, "b": P, "c": F, "d": P, "t/x.py::e": P})
    regression = run({"a": F, "b": E, "c": F, "d": P, "new[param]": F, "t/x.py::e": F})
    own = run({"a": F, "b": F, "c": F, "d": F, "t/x.py::e": F, "t/new.py::f": F})
    verdict = judge(base, regression, own, approved_edits=["t/x.py"], rerun_base=rerun)
    # Not re-run: c (failed on the base), new[param] (not on the base), d (failed on the plan's
    # own run only), the approved file's test, the new test: the plan's side is never re-run.
    assert rerun.calls == [["a", "b"]]
    assert verdict.flaky == ("a", "b") and verdict.broken == ("new[param]",)
    assert verdict.new_failing == ("d", "t/new.py::f", "t/x.py::e")


def test_no_rerun_when_nothing_that_passed_on_the_base_fails() -> None:
    rerun = Recorder({})
    judge(run({"a": F, "b": P}), run({"a": F, "b": P, "n": F}), run({"a": F, "b": P, "t/n.py::x": F}), rerun_base=rerun)
    assert rerun.calls == []


TRAILERS = {
    "green": (run(GREEN), run(GREEN), None, "passed 2, fixed 0, already failing 0"),
    "the issue's example": (
        run({**{f"p{i}": P for i in range(40)}, "f": F, "g": F, "h": F}),
        run({**{f"p{i}": P for i in range(40)}, "f": P, "g": F, "h": F}),
        None,
        "passed 41, fixed 1, already failing 2",
    ),
    "new tests": (
        run(GREEN),
        run(GREEN),
        run({**GREEN, "t/n.py::x": P, "t/n.py::y": P}),
        "passed 2, fixed 0, already failing 0, new 2",
    ),
    "a rollback": (
        run({"a": P, "b": P, "c": P}),
        run({"a": P, "b": F}),
        run({"a": P, "b": F, "t/n.py::x": F}),
        "passed 1, fixed 0, already failing 0, newly failing 1, missing 1, new failing 1",
    ),
    "exit code only": (run(UNREADABLE, 0), run(UNREADABLE, 0), None, "exit code only"),
}


@pytest.mark.parametrize("runs", TRAILERS.values(), ids=TRAILERS.keys())
def test_trailer(runs: tuple[Run, Run, Run | None, str]) -> None:
    base, regression, own, trailer = runs
    assert judge(base, regression, own).trailer() == trailer


def test_lines_name_every_test_by_what_happened_to_it() -> None:
    verdict = judge(
        run({"a": F, "b": F, "c": P, "d": P}),
        run({"a": P, "b": F, "c": F}),
        run({"a": P, "b": F, "c": F, "t/n.py::x": F}),
    )
    assert verdict.lines() == [
        "newly failing: c",
        "missing: d",
        "failing in the plan's own run: t/n.py::x",
        "fixed: a",
        "already failing on the tip: b",
    ]


def test_lines_name_a_crash_and_a_red_base_that_nothing_fixed() -> None:
    crashed = judge(run(GREEN), run({"a": P}, 139), None)
    assert crashed.lines() == [
        "the regression run (the tip's tests on the plan's code) exited 139 with no test failing: crashed or stopped early",
        "missing: b",
    ]
    held = judge(run(GREEN, 1), run(GREEN, 1), None)
    assert held.lines() == [
        "the run on the tip exited 1 with no test failing",
        "the regression run (the tip's tests on the plan's code) exited 1 with no test failing: crashed or stopped early",
        "the tip was already red and the plan fixes none of its failing tests",
    ]


def test_an_exit_code_only_verdict_says_so() -> None:
    verdict = judge(run(UNREADABLE, 0), run(UNREADABLE, 0), run(UNREADABLE, 3))
    assert verdict.lines() == [
        "the verdict is exit-code only: the check's per-test results could not be read",
        "the regression run (the tip's tests on the plan's code) exited 0",
        "the plan's own run (its tree as is) exited 3",
    ]


def test_each_list_names_twenty_and_counts_the_rest() -> None:
    ids = [f"t{i:02}" for i in range(25)]
    verdict = judge(run(dict.fromkeys(ids, P)), run(dict.fromkeys(ids, F)), None)
    assert verdict.lines() == ["newly failing: " + ", ".join(ids[:20]) + " ... and 5 more"]
    assert len(verdict.broken) == 25


def test_to_dict_is_json_with_the_trailer_and_lines() -> None:
    verdict = judge(run({"a": F, "b": P}), run({"a": P, "b": P}), None)
    data = json.loads(json.dumps(verdict.to_dict()))
    assert data["lands"] is True and data["fixed"] == ["a"] and data["passed"] == 2
    assert data["trailer"] == "passed 2, fixed 1, already failing 0" and data["lines"] == ["fixed: a"]
    fields: dict[str, Any] = {k: tuple(v) if isinstance(v, list) else v for k, v in data.items()}
    del fields["trailer"], fields["lines"], fields["named"]
    assert Verdict(**fields) == verdict


def _checked(exit_code: int | None, verdict: Verdict | None, timed_out: bool = False) -> CheckResult:
    return CheckResult("pytest", "detected", exit_code, 1.0, "check.log", "", timed_out=timed_out, verdict=verdict)


def test_one_rule_says_whether_a_plan_lands_and_every_reader_asks_it() -> None:
    """plan_lands is the only place deciding: the verdict's own decision, a plan held only for a
    human's approval of what it changes besides its code (its landing is that approval), and the
    exit code where the gate did not judge; CheckResult.passed and the record's `passed` agree."""
    red_tip = judge(run({"a": F, "b": P}), run({"a": F, "b": P}), None)
    broken = judge(run(GREEN), run({"a": P, "b": F}), None)
    clean = judge(run(GREEN), run(GREEN), None)
    assert red_tip.review and not red_tip.held_for_a_human and not broken.review
    for code in ("ERR_JUDGE_EDITS_HELD", "ERR_TESTS_REMOVED_HELD"):
        held = Verdict(lands=False, review=True, code=code, exit_code_only=False)
        assert held.held_for_a_human and plan_lands(held, 0, False)
        assert plan_lands(held, 1, False)  # the verdict decides, not the run's exit code
    untrusted = Verdict(lands=False, review=False, code="ERR_CHECK_RESULTS_UNTRUSTED", exit_code_only=False)
    cases = [
        (clean, 1, False, True),
        (broken, 0, False, False),
        (red_tip, 1, False, False),
        (untrusted, 0, False, False),
        (None, 0, False, True),
        (None, 3, False, False),
        (None, None, True, False),
        (None, 0, True, False),
    ]
    for verdict, exit_code, timed_out, lands in cases:
        assert plan_lands(verdict, exit_code, timed_out) is lands, (verdict, exit_code, timed_out)
        result = _checked(exit_code, verdict, timed_out)
        record = json.loads(json.dumps(result.to_dict()))
        assert result.passed is lands and record["passed"] is lands
        assert record["verdict"] == (json.loads(json.dumps(verdict.to_dict())) if verdict else None)
    failing = CheckResult(
        "pytest", "detected", 1, 1.0, "check.log", "", verdict=broken,
        tests=TestResults("pytest junit", {"a": P, "b": F}, {"b": "assert 1 == 2"}),
    )  # fmt: skip
    assert failing.to_dict()["failures"] == {"b": "assert 1 == 2"}  # the verdict's broken tests first
