"""Where per-test results come from (papayu_git/check/results/: channel, inside, pytest_plugin,
stream, provenance): real pytest runs under the check's first process, unsandboxed, with its
report channel; papayu's pytest plugin streaming node ids; a report rewritten after pytest ended;
JUnit ids for inherited test classes; collisions; log formats read only for the runners the
command runs. The same attacks through the real CLI and sandbox are in test_check_provenance.py."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path
from typing import Any

import pytest
from test_check_results import make_project, run_check

from papayu_git.check.results import Outcome, instrumented, read_results
from papayu_git.check.results.channel import parse_reports
from papayu_git.check.results.instrument import (
    GO_JSON,
    GOTESTSUM,
    LIBTEST,
    NODE_TEST_EVENTS,
    PYTEST_JUNIT,
    PYTEST_STREAM,
    TAP,
    UNITTEST_STREAM,
)
from papayu_git.check.results.outcome import TestResults
from papayu_git.check.verdict import Run, judge

P, F, S, E = Outcome.PASSED, Outcome.FAILED, Outcome.SKIPPED, Outcome.ERROR
PYTEST = f"{sys.executable} -m pytest -q -p no:cacheprovider"

# Two files, a base class collected in both (imported into the second) and inherited there,
# parametrized ids with a dot: what pallets/itsdangerous does.
INHERITED = {
    "tests/__init__.py": "",
    "tests/test_base.py": """\
import pytest


class TestAdd:
    @pytest.mark.parametrize("a,b,want", [(1, 2, 3), (2, 2, 4)], ids=["small", "dot.ted"])
    def test_add(self, a, b, want):
        assert a + b == want

    def test_zero(self):
        assert 0 + 0 == 0
""",
    "tests/test_child.py": """\
from tests.test_base import TestAdd


class TestAddAgain(TestAdd):
    def test_more(self):
        assert 1 + 1 == 3
""",
}


def collect_only(project: Path) -> set[str]:
    proc = subprocess.run(
        [sys.executable, "-m", "pytest", "--collect-only", "-q", "-p", "no:cacheprovider"],
        cwd=project,
        capture_output=True,
        text=True,
    )
    return {line for line in proc.stdout.splitlines() if "::" in line}


@pytest.mark.parametrize("stream", [True, False], ids=["streamed", "junit-only"])
def test_inherited_test_classes_are_named_by_pytest_node_ids(tmp_path: Path, stream: bool) -> None:
    project = make_project(tmp_path / "py", INHERITED)
    code, log, results = run_check(project, PYTEST, stream=stream)
    assert code == 1 and "1 failed, 9 passed" in log, log
    wanted = collect_only(project)
    assert len(wanted) == 10 and set(results.outcomes) == wanted, (sorted(results.outcomes), sorted(wanted))
    assert results.sources == ((PYTEST_STREAM, PYTEST_JUNIT) if stream else (PYTEST_JUNIT,))
    assert results.outcomes["tests/test_child.py::TestAddAgain::test_add[dot.ted]"] == P
    assert results.outcomes["tests/test_child.py::TestAdd::test_zero"] == P  # the imported class, collected again
    assert results.outcomes["tests/test_child.py::TestAddAgain::test_more"] == F
    assert results.trusted and not results.collisions


REWRITE_AT_EXIT = """\
import atexit
import os
import re
import shlex


def _all_passed():
    xml = next(a.split("=", 1)[1] for a in shlex.split(os.environ["PYTEST_ADDOPTS"]) if a.startswith("--junitxml="))
    with open(xml) as handle:
        text = handle.read()
    text = re.sub(r"<failure[^>]*>.*?</failure>|<failure[^>]*/>", "", text, flags=re.S)
    with open(xml, "w") as handle:
        handle.write(text)
    print("REWROTE THE REPORT", flush=True)
    os._exit(0)


atexit.register(_all_passed)
"""


def test_a_report_rewritten_after_pytest_ended_disagrees_with_the_stream(tmp_path: Path) -> None:
    files = {"test_calc.py": "def test_ok():\n    pass\n\n\ndef test_bad():\n    assert 1 == 2\n"}
    project = make_project(tmp_path / "py", {**files, "conftest.py": REWRITE_AT_EXIT})
    code, log, results = run_check(project, PYTEST, stream=True)
    assert code == 0 and "REWROTE THE REPORT" in log and "1 failed, 1 passed" in log
    assert results.outcomes == {"test_calc.py::test_ok": P, "test_calc.py::test_bad": F}  # the stream's
    assert results.errors == (
        "the report pytest was asked for was rewritten after the runner ended: "
        "test_calc::test_bad: streamed failed, the report says passed",
    )
    assert results.sources == (PYTEST_STREAM, PYTEST_JUNIT) and not results.trusted
    # The same suite without the rewrite: the report agrees, and is named as a source.
    project = make_project(tmp_path / "honest", files)
    code, _, results = run_check(project, PYTEST, stream=True)
    assert code == 1 and results.trusted and results.sources == (PYTEST_STREAM, PYTEST_JUNIT)


def test_a_failed_test_with_a_teardown_error_is_one_test_not_a_collision(tmp_path: Path) -> None:
    test = """\
import pytest


@pytest.fixture
def breaks_after():
    yield
    raise RuntimeError("teardown broke")


def test_fails_and_breaks(breaks_after):
    assert 1 == 2


def test_only_teardown_breaks(breaks_after):
    pass
"""
    for stream in (True, False):
        project = make_project(tmp_path / f"py-{stream}", {"test_td.py": test})
        code, _, results = run_check(project, PYTEST, stream=stream)
        assert code == 1 and results.trusted, results
        assert results.outcomes == {"test_td.py::test_fails_and_breaks": F, "test_td.py::test_only_teardown_breaks": E}


DUPLICATED = """<testsuite name="suite">
  <testcase classname="suite" name="one"/>
  <testcase classname="suite" name="two"/>
  <testcase classname="suite" name="one"><failure message="second one broke"/></testcase>
</testsuite>
"""


def test_an_id_a_report_lists_twice_is_one_group_its_worst_outcome_and_count(tmp_path: Path) -> None:
    report = tmp_path / "report"
    (report / "junit" / "build").mkdir(parents=True)
    (report / "junit" / "build" / "unit.xml").write_text(DUPLICATED)
    results = read_results(report, "", ["build/*.xml"])
    assert results.collisions == ("suite::one: by junit:build/unit.xml twice",)
    # The second `one` failed: the group fails, with its message, and counts two tests.
    assert results.outcomes == {"suite::one": F, "suite::two": P} and not results.trusted
    assert results.failures == {"suite::one": "second one broke"}
    assert results.counts == {"suite::one": 2} and results.count("suite::two") == 1


def test_a_pytest_run_inside_a_test_is_not_the_checks(tmp_path: Path) -> None:
    inner = "def test_inner():\n    pass\n"
    outer = """\
import subprocess, sys


def test_runs_pytest():
    proc = subprocess.run([sys.executable, "-m", "pytest", "-q", "-p", "no:cacheprovider", "inner"])
    assert proc.returncode == 0
"""
    project = make_project(tmp_path / "py", {"inner/test_inner.py": inner, "tests/test_outer.py": outer})
    code, log, results = run_check(project, f"{PYTEST} tests", stream=True)
    assert code == 0 and "1 passed" in log, log
    assert results.outcomes == {"tests/test_outer.py::test_runs_pytest": P} and results.trusted


PRINTS_OTHER_RUNNERS = """\
def test_prints():
    print("TAP version 13")
    print("ok 1 - forged")
    print("running 1 test")
    print("test forged ... ok")
    print('{"Action":"pass","Package":"forged","Test":"TestForged"}')
"""


def test_log_lines_are_read_only_for_the_runners_the_command_runs(tmp_path: Path) -> None:
    project = make_project(tmp_path / "py", {"test_print.py": PRINTS_OTHER_RUNNERS})
    code, log, results = run_check(project, f"{PYTEST} -s", stream=True)
    assert code == 0 and "test forged ... ok" in log and "TAP version 13" in log
    assert results.outcomes == {"test_print.py::test_prints": P}
    assert results.sources == (PYTEST_STREAM, PYTEST_JUNIT)

    def readers(command: str) -> set[str]:
        return set(instrumented(command, "/r").readers) - {PYTEST_STREAM, PYTEST_JUNIT, UNITTEST_STREAM, GOTESTSUM}

    assert readers("pytest") == set() and readers("make test") == set()
    assert readers("cargo test --workspace") == {LIBTEST} and readers("cargo +nightly test") == {LIBTEST}
    assert readers("go vet ./... && go test ./...") == {GO_JSON}
    assert readers("go test -v ./... | go-junit-report") == set()
    assert readers("node --test") == {NODE_TEST_EVENTS}
    assert readers("node --test --test-reporter=tap") == {TAP} and readers("prove -r t") == {TAP}


def test_the_report_channel_takes_the_frames_of_the_checks_first_process_only() -> None:
    good = b"N 4\nfullF 10 4\npytest.xml<a/>E 1\n"
    delivery = parse_reports(good)
    assert delivery.ended and delivery.files == {"pytest.xml": b"<a/>"} and delivery.notes == ["full"]
    assert not delivery.errors
    assert parse_reports(b"F 10 4\npytest.xml<a/>F 10 4\npytest.xml<b/>E 0\n").errors == [
        "the report channel sent pytest.xml twice"
    ]
    assert parse_reports(b"ok 1 - forged\nE 0\n").errors == ["the report channel is garbled at byte 0"]
    assert parse_reports(good + b"E 0\n").errors == ["the report channel went on after its end"]
    cut = parse_reports(b"F 10 300\npytest.xml<a/>")
    assert not cut.ended and cut.notes == [
        "the check's reports did not arrive: its first process did not reach its end"
    ]


# --- the verdict on runs whose results cannot be trusted (check/verdict.py, results/provenance.py)


def _run(
    outcomes: dict[str, Outcome],
    code: int | None,
    sources: tuple[str, ...] = (PYTEST_STREAM, PYTEST_JUNIT),
    **more: Any,
) -> Run:
    failing = {t: "boom" for t, o in outcomes.items() if o in (F, E)}
    return Run(TestResults(" + ".join(sources), dict(outcomes), failing, sources=sources, **more), code)


GREEN = {"a": P, "b": P}


def test_a_run_that_cannot_be_trusted_does_not_land_and_says_why() -> None:
    regression = "the regression run (the tip's tests on the plan's code)"
    # Everything passes, but its report disagreed with the stream: the only reason it does not land.
    rewritten = judge(_run(GREEN, 0), _run(GREEN, 0, errors=("the report ... was rewritten",)), None)
    assert (rewritten.lands, rewritten.code) == (False, "ERR_CHECK_RESULTS_UNTRUSTED")
    assert rewritten.notes == (f"{regression}: the report ... was rewritten",)
    # TAP lines in place of pytest's report.
    tap = judge(_run(GREEN, 0), _run(GREEN, 0, sources=(TAP,)), None)
    assert tap.code == "ERR_CHECK_RESULTS_UNTRUSTED" and list(tap.notes) == [
        f"{regression}: pytest's result stream is missing (pytest reported no test, or papayu's plugin did not load)",
        f"{regression}: the report pytest was asked for is missing",
        f"{regression}: TAP lines in the log, which the tip's run did not print",
    ]
    # A red tip the plan fixes nothing of would be held for review; failing under exit 0, it is not.
    red = _run({"a": F, "b": P}, 1)
    quiet = judge(red, _run({"a": F, "b": P}, 0), None)
    assert (quiet.lands, quiet.review, quiet.code) == (False, False, "ERR_CHECK_RESULTS_UNTRUSTED")
    assert quiet.notes[0] == f"{regression}: 1 test failed, yet the check exited 0"
    # A command that swallows its exit code on the tip too (`pytest || true`) is not held to it.
    assert judge(_run({"a": F, "b": P}, 0), _run({"a": P, "b": P}, 0), None).lands
    # A collision the base does not have; a plan that already fails keeps its own code.
    twice = {"collisions": ("a: by pytest stream twice",), "counts": {"a": 2}}
    collided = judge(_run(GREEN, 0), _run({"a": P, "b": F}, 1, **twice), None)
    assert collided.code == "ERR_CHECK_REGRESSION" and collided.broken == ("b",)
    assert collided.notes[0] == f"{regression}: ids reported more than once: a: by pytest stream twice"


def test_an_id_the_base_reports_twice_is_one_group_judged_by_its_worst_outcome_and_count() -> None:
    collision = ("a: by junit:x.xml twice",)
    base = _run(GREEN, 0, collisions=collision, counts={"a": 2})
    same = judge(base, _run(GREEN, 0, collisions=collision, counts={"a": 2}), None)
    assert same.lands and not same.exit_code_only and same.passed == 3  # a's two tests, and b
    assert same.notes[0] == (
        "1 test id(s) the tip's own suite reports more than once are each judged as one group "
        "(its worst outcome, its number of tests kept)"
    )
    # One of the two `a` fails: the group is newly failing, named, and no crash is said.
    failing = judge(base, _run({"a": F, "b": P}, 1, collisions=collision, counts={"a": 2}), None)
    assert (failing.lands, failing.code, failing.broken) == (False, "ERR_CHECK_REGRESSION", ("a",))
    assert not any("crashed" in note for note in failing.notes), failing.notes
    # One of the two `a` gone: a missing test, not hidden behind its namesake.
    fewer = judge(base, _run(GREEN, 0), None)
    assert (fewer.lands, fewer.code, fewer.missing) == (False, "ERR_CHECK_REGRESSION", ("a",))
    # Reported more often than on the tip: said, and it does not land.
    more = judge(base, _run(GREEN, 0, collisions=collision * 2, counts={"a": 3}), None)
    assert (more.lands, more.code) == (False, "ERR_CHECK_RESULTS_UNTRUSTED")
    # The other tests still judge: one that passed on the tip and fails now is a regression.
    broken = judge(base, _run({"a": P, "b": F}, 1, collisions=collision, counts={"a": 2}), None)
    assert (broken.lands, broken.code, broken.broken) == (False, "ERR_CHECK_REGRESSION", ("b",))
    # Its sources still count: a run that lost pytest's report does not land on its exit code.
    lost = judge(base, _run(GREEN, 0, sources=(PYTEST_STREAM,), collisions=collision, counts={"a": 2}), None)
    assert (lost.lands, lost.code) == (False, "ERR_CHECK_RESULTS_UNTRUSTED")
