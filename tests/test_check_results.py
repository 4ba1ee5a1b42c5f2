"""Per-test results of a check run (papayu_git/check/results/): the real runners (pytest, node
--test, cargo test, go test, jest, vitest, Maven) run on small projects with passing, failing and
skipped tests, through `instrument`, and `read_results` must name every test by a stable id with
its outcome. jest, vitest and pnpm come from the npm registry, surefire from Maven Central: they
are installed once per machine into a cache (toolchains.py); Gradle's reports are read from
files a real Gradle wrote."""

from __future__ import annotations

import json
import os
import re
import shutil
import subprocess
import sys
import time
from pathlib import Path

import pytest
import toolchains
from helpers import write

from papayu_git.check.results import (
    EXIT_CODE_ONLY,
    Outcome,
    go_plain_text,
    instrument,
    instrumented,
    junit_patterns,
    read_results,
)
from papayu_git.check.results.channel import Channel, node_options, plugin_path, wrapper_argv, write_helpers
from papayu_git.check.results.instrument import (
    GOTESTSUM_VAR,
    GRADLE_DIR,
    GRADLE_REPORTS,
    JEST,
    JUNIT_COPY,
    MAVEN,
    MAVEN_DIR,
    MAVEN_REPORTS,
    NODE_REPORTS_VAR,
    NODE_RUNNERS_VAR,
    NODE_TEST_EVENTS,
    NODE_TEST_VAR,
    REPORT_FILES,
    VITEST,
)
from papayu_git.check.results.outcome import TestResults
from papayu_git.check.results.read import read_delivery
from papayu_git.check.scripts import resolve
from papayu_git.errors import PapayuError

P, F, S, E = Outcome.PASSED, Outcome.FAILED, Outcome.SKIPPED, Outcome.ERROR
# The toolchains live under the real HOME; the hermetic fixture replaces HOME per test, so they
# are found now, at import. go shares the machine's build cache (a cold one costs ~20 s).
REAL_HOME = Path(os.path.expanduser("~"))
TOOL_ENV = {
    "CARGO_HOME": os.environ.get("CARGO_HOME", str(REAL_HOME / ".cargo")),
    "RUSTUP_HOME": os.environ.get("RUSTUP_HOME", str(REAL_HOME / ".rustup")),
    "GOCACHE": os.environ.get("GOCACHE", str(REAL_HOME / ".cache" / "go-build")),
    "GOTOOLCHAIN": "local",
    "GOFLAGS": "-mod=mod",
    "CARGO_NET_OFFLINE": "true",
}
TOOL_PATH = os.pathsep.join([str(REAL_HOME / ".cargo" / "bin"), "/usr/local/go/bin", os.environ.get("PATH", "")])


def run_check(
    project: Path, command: str, junit_globs: tuple[str, ...] = (), *, stream: bool = False, path: str = TOOL_PATH
) -> tuple[int, str, TestResults]:
    """``command`` as the check runs it, unsandboxed: instrumented (its package scripts read in
    ``project``'s files), under the check's first process (results/inside.py) with its report
    channel, output and errors in one log, read with the readers the command allows. ``stream``:
    papayu's pytest plugin on PYTHONPATH (else pytest's results come from its JUnit file)."""
    report = project.parent / "report"
    report.mkdir(exist_ok=True)
    helpers = write_helpers(project.parent)
    done = instrumented(command, str(report), runs=resolve(command, _Files(project)), junit=junit_globs)
    channel = Channel(helpers, {"root": str(project)})
    config = {"stream_fd": channel.stream_w, "files_fd": channel.files_w, "names": list(REPORT_FILES)}
    config.update(junit=list(junit_globs), tools=list(done.reports), report_dir=str(report), root=str(project))
    env = {"PATH": path, "HOME": os.environ["HOME"], "LANG": "C.UTF-8", "NO_COLOR": "1", **TOOL_ENV, **done.env}
    if stream:
        env["PYTHONPATH"] = plugin_path(str(helpers), "")
    if NODE_REPORTS_VAR in env:  # as view.command_line does
        env["NODE_OPTIONS"] = node_options(str(helpers), "", test_reporter=NODE_TEST_VAR in env)
    proc = subprocess.Popen(
        [*wrapper_argv(str(helpers), config), "/bin/sh", "-c", done.command],
        cwd=project,
        env=env,
        stdout=subprocess.PIPE,
        stderr=subprocess.STDOUT,
        pass_fds=channel.pass_fds,
    )
    channel.started()
    log = proc.communicate(timeout=300)[0].decode("utf-8", "replace")
    readers = done.readers | {JUNIT_COPY}
    results = read_delivery(channel.finish(), log, readers, root=str(project), report_dir=str(report))
    return proc.returncode, log, results


class _Files:
    """A project's files on disk as the tree the check command is resolved on (command.py's)."""

    def __init__(self, root: Path) -> None:
        self.root = root

    def entry_kind(self, path: str) -> str | None:
        target = self.root / path
        return "dir" if target.is_dir() else "file" if target.is_file() else None

    def read_blob(self, path: str) -> bytes | None:
        target = self.root / path
        return target.read_bytes() if target.is_file() else None

    def names_in(self, directory: str) -> list[str]:
        target = self.root / directory
        return sorted(p.name for p in target.iterdir()) if target.is_dir() else []


# One TestCase body for the unittest fixtures: a pass, a failure, a skip.
UNITTEST_CASES = """\
    def test_ok(self):
        self.assertEqual(1, 1)

    def test_bad(self):
        self.assertEqual(1, 2)

    @unittest.skip("later")
    def test_later(self):
        pass
"""

PYTEST_PROJECT = {
    "tests/__init__.py": "",
    "tests/test_calc.py": """\
import unittest

import pytest


def test_add():
    assert 1 + 1 == 2


def test_sub():
    assert 1 - 1 == 2, "one minus one"


@pytest.mark.skip(reason="not today")
def test_skip():
    pass


@pytest.mark.parametrize("n", [1, 2])
def test_param(n):
    assert n == 1


@pytest.fixture
def broken():
    raise RuntimeError("fixture broke")


def test_setup_error(broken):
    pass


class TestGroup:
    class TestInner:
        def test_nested(self):
            pass


class TestUnit(unittest.TestCase):
"""
    + UNITTEST_CASES,
}


def make_project(path: Path, files: dict[str, str]) -> Path:
    for rel, text in files.items():
        write(path, rel, text)
    return path


def test_pytest_results_use_pytest_node_ids_for_functions_classes_and_unittest_cases(tmp_path: Path) -> None:
    project = make_project(tmp_path / "py", PYTEST_PROJECT)
    code, log, results = run_check(project, f"{sys.executable} -m pytest -q -p no:cacheprovider")
    assert code == 1 and results.source == "pytest junit"
    t = "tests/test_calc.py::"
    assert results.outcomes == {
        t + "test_add": P,
        t + "test_sub": F,
        t + "test_skip": S,
        t + "test_param[1]": P,
        t + "test_param[2]": F,
        t + "test_setup_error": E,
        t + "TestGroup::TestInner::test_nested": P,
        t + "TestUnit::test_ok": P,
        t + "TestUnit::test_bad": F,
        t + "TestUnit::test_later": S,
    }
    assert "one minus one" in results.failures[t + "test_sub"]
    assert "fixture broke" in results.failures[t + "test_setup_error"]
    assert set(results.failures) == {
        t + "test_sub",
        t + "test_param[2]",
        t + "test_setup_error",
        t + "TestUnit::test_bad",
    }
    assert "3 failed, 4 passed, 2 skipped, 1 error" in log  # pytest's own output is kept
    collected = subprocess.run(
        [sys.executable, "-m", "pytest", "--collect-only", "-q", "-p", "no:cacheprovider"],
        cwd=project,
        capture_output=True,
        text=True,
    ).stdout.splitlines()
    assert set(results.outcomes) == {line for line in collected if "::" in line}  # pytest's own ids


def test_papayu_keeps_the_projects_pytest_addopts_and_a_failing_message_is_clipped(tmp_path: Path) -> None:
    project = make_project(
        tmp_path / "py", {"test_long.py": "def test_long():\n    raise AssertionError('x' * 5000)\n"}
    )
    line, extra = instrument("pytest", "/r", env={"PYTEST_ADDOPTS": "-x --strict-markers"})
    assert line == "pytest" and extra["PYTEST_ADDOPTS"].startswith("-x --strict-markers --junitxml=/r/pytest.xml")
    code, _, results = run_check(project, f"{sys.executable} -m pytest -q -p no:cacheprovider")
    assert code == 1 and results.outcomes == {"test_long.py::test_long": F}
    message = results.failures["test_long.py::test_long"]
    assert len(message) == 2000 and message.startswith("AssertionError: xxx") and message.endswith("x…")


UNITTEST_FILE = "import unittest\n\n\nclass TestCalc(unittest.TestCase):\n" + UNITTEST_CASES


UNITTEST_MORE = {
    "tests/__init__.py": "",
    "tests/test_calc.py": UNITTEST_FILE
    + """
    def test_table(self):
        for n in (1, 2, 3):
            with self.subTest(n=n):
                self.assertLess(n, 3)

    @unittest.expectedFailure
    def test_known(self):
        self.assertEqual(1, 2)

    def test_runs_a_suite_itself(self):
        # A test of a test helper: its own run is no result of the check's.
        inner = unittest.TestSuite([TestCalc("test_ok")])
        with open("/dev/null", "w") as quiet:
            unittest.TextTestRunner(stream=quiet).run(inner)


class TestBrokenFixture(unittest.TestCase):
    @classmethod
    def setUpClass(cls):
        raise RuntimeError("no database")

    def test_never_runs(self):
        pass
""",
    "tests/test_broken_import.py": "import no_such_module_here\n",
    "run_tests.py": "import unittest\n\nunittest.main(module=None, argv=['run_tests', 'discover', '-s', 'tests', '-t', '.'])\n",
}
UNITTEST_OUTCOMES = {
    "tests/test_calc.py::TestCalc::test_ok": P,
    "tests/test_calc.py::TestCalc::test_bad": F,
    "tests/test_calc.py::TestCalc::test_later": S,
    "tests/test_calc.py::TestCalc::test_table": F,  # its subtest n=3 failed
    "tests/test_calc.py::TestCalc::test_known": S,  # an expected failure, as pytest's xfail
    "tests/test_calc.py::TestCalc::test_runs_a_suite_itself": P,
    "tests/test_calc.py::TestBrokenFixture::setUpClass": E,
    "tests/test_broken_import.py": E,  # did not import: an error under its file
}


@pytest.mark.parametrize(
    "command",
    [
        f"{sys.executable} -m unittest discover -s tests -t . -v",
        f"{sys.executable} run_tests.py",  # a script calling unittest.main(): the same results
        f"cd tests && {sys.executable} -m unittest discover -s . -t ..",  # from another directory
    ],
)
def test_unittest_results_come_through_papayus_result_class_with_pytests_ids(tmp_path: Path, command: str) -> None:
    project = make_project(tmp_path / "ut", UNITTEST_MORE)
    code, log, results = run_check(project, command, stream=True)
    assert code == 1 and "FAILED (failures=" in log and "Ran 7 tests" in log, log
    assert results.source == "unittest stream" and results.outcomes == UNITTEST_OUTCOMES, log
    assert "AssertionError: 1 != 2" in results.failures["tests/test_calc.py::TestCalc::test_bad"]
    assert "(n=3)" in results.failures["tests/test_calc.py::TestCalc::test_table"]
    assert "no database" in results.failures["tests/test_calc.py::TestBrokenFixture::setUpClass"]
    assert "no_such_module_here" in results.failures["tests/test_broken_import.py"]


def test_unittest_cases_under_pytest_are_pytests_and_python_dash_i_is_said(tmp_path: Path) -> None:
    project = make_project(tmp_path / "ut", {"tests/__init__.py": "", "tests/test_calc.py": UNITTEST_FILE})
    code, _, results = run_check(project, f"{sys.executable} -m pytest -q -p no:cacheprovider tests", stream=True)
    assert code == 1 and results.read_from == ("pytest stream", "pytest junit") and not results.collisions
    assert results.outcomes["tests/test_calc.py::TestCalc::test_bad"] == F
    # -I keeps PYTHONPATH, and so papayu's start-up hook, out: exit code only, and why.
    command = f"{sys.executable} -I -m unittest discover -s tests -t ."
    again = make_project(tmp_path / "isolated" / "ut", {"tests/__init__.py": "", "tests/test_calc.py": UNITTEST_FILE})
    code, _, results = run_check(again, command, stream=True)
    assert code == 1 and results.exit_code_only
    assert "python -I does not read PYTHONPATH" in instrumented(command, "/r").notes[0]


SUBTESTS = {
    "tests/__init__.py": "",
    "tests/test_table.py": """\
import unittest


class TestTable(unittest.TestCase):
    def test_all_pass(self):
        for n in (1, 2, 3):
            with self.subTest(n=n):
                self.assertLess(n, 4)

    def test_one_fails(self):
        for n in (1, 2, 3):
            with self.subTest(n=n):
                self.assertLess(n, 3)


def test_fixture_passes(subtests):
    for word in ("a", "b"):
        with subtests.test(msg=word):
            assert word.isalpha()


def test_fixture_fails(subtests):
    for word in ("a", "9"):
        with subtests.test(msg=word):
            assert word.isalpha()
""",
}


@pytest.mark.skipif(int(pytest.__version__.split(".")[0]) < 9, reason="subtests are pytest's own from 9")
def test_subtests_are_their_tests_results_not_tests_of_their_own(tmp_path: Path) -> None:
    # pytest 9 reports each subtest under its test's id: one test, a failing subtest fails it.
    project = make_project(tmp_path / "sub", SUBTESTS)
    code, log, results = run_check(project, f"{sys.executable} -m pytest -q -p no:cacheprovider", stream=True)
    assert code == 1 and not results.collisions and results.trusted and not results.exit_code_only, log
    assert results.read_from == ("pytest stream", "pytest junit"), results.errors
    assert results.outcomes == {
        "tests/test_table.py::TestTable::test_all_pass": P,
        "tests/test_table.py::TestTable::test_one_fails": F,
        "tests/test_table.py::test_fixture_passes": P,
        "tests/test_table.py::test_fixture_fails": F,
    }, log
    assert "n=3" in results.failures["tests/test_table.py::TestTable::test_one_fails"]
    assert "[9]" in results.failures["tests/test_table.py::test_fixture_fails"]


NODE_TESTS = {
    "test/calc.test.js": """\
const test = require('node:test');
const assert = require('node:assert');
test('adds', () => { assert.strictEqual(1 + 1, 2); });
test('subtracts', () => { assert.strictEqual(1 - 1, 2); });
test('later', { skip: true }, () => {});
test('some day', { todo: true }, () => {});
test.describe('suite', () => {
  test.it('inner ok', () => {});
  test.it('inner bad', () => { throw new Error('boom'); });
});
test('parent', async (t) => {
  await t.test('child ok', () => {});
});
""",
    "test/broken.test.js": "this is ( not javascript\n",
    # A second file with tests named as the first's: by name alone (Node's TAP) one id, twice.
    "test/again.test.js": "const test = require('node:test');\ntest('adds', () => {});\n",
}
NODE_OUTCOMES = {
    "adds": P,
    "subtracts": F,
    "later": S,
    "some day": S,
    "suite > inner ok": P,
    "suite > inner bad": F,
    "parent > child ok": P,
}
NODE_IDS = {
    **{f"test/calc.test.js > {name}": outcome for name, outcome in NODE_OUTCOMES.items()},
    "test/again.test.js > adds": P,
    "test/broken.test.js": F,  # the file did not load: node names it absolutely, made relative
}


def node_major() -> int:
    node = toolchains.which("node")
    if node is None:
        return 0
    version = subprocess.run([node, "--version"], capture_output=True, text=True).stdout
    match = re.match(r"v(\d+)", version)
    return int(match[1]) if match else 0


needs_node20 = toolchains.Marks(
    (
        *toolchains.needs("node"),
        pytest.mark.skipif(node_major() < 20, reason="node >= 20 (its test runner's reporters) not installed"),
    )
)


@needs_node20
@pytest.mark.parametrize(
    "command",
    ["node --test test/", "npm test", "npm run check"],
    ids=["the command", "a package script", "a script calling a script"],
)
def test_node_test_results_are_named_by_file_through_papayus_reporter(tmp_path: Path, command: str) -> None:
    scripts = {"test": "node --test test/", "check": "npm run lint --if-present && npm test"}
    files = {**NODE_TESTS, "package.json": json.dumps({"name": "calc", "scripts": scripts})}
    project = make_project(tmp_path / "node", files)
    code, log, results = run_check(project, command)
    assert code == 1 and results.source == "node --test reporter", log
    assert results.outcomes == NODE_IDS
    assert "boom" in results.failures["test/calc.test.js > suite > inner bad"]
    assert "Expected values to be strictly equal" in results.failures["test/calc.test.js > subtracts"]
    # What Node prints when its output is no terminal, as it would have printed it.
    assert ("TAP version 13" if node_major() < 23 else "✖ subtracts") in log


@needs_node20
def test_node_tap_of_a_reporter_the_user_named_is_read_from_the_log(tmp_path: Path) -> None:
    files = {k: v for k, v in NODE_TESTS.items() if k != "test/again.test.js"}
    project = make_project(tmp_path / "node", files)
    code, log, results = run_check(project, "node --test --test-reporter=tap test/")  # the user's reporter: left alone
    assert code == 1 and results.source == "tap" and log.startswith("TAP version")
    assert results.outcomes == {**NODE_OUTCOMES, "test/broken.test.js": F}
    assert "boom" in results.failures["suite > inner bad"]


CARGO_PROJECT = {
    "Cargo.toml": '[package]\nname = "calc"\nversion = "0.1.0"\nedition = "2021"\n',
    "src/lib.rs": """\
/// ```
/// assert_eq!(calc::add(1, 1), 2);
/// ```
pub fn add(a: i32, b: i32) -> i32 { a + b }

#[cfg(test)]
mod tests {
    use super::*;
    #[test] fn adds() { assert_eq!(add(1, 1), 2); }
    #[test] fn subtracts() { assert_eq!(add(1, -1), 2, "one minus one"); }
    #[test] #[ignore] fn slow() {}
    #[test] #[ignore = "flaky on CI"] fn flaky() {}
    #[test] #[should_panic] fn panics() { panic!("expected"); }
}
""",
    "src/main.rs": "fn main() {}\n#[cfg(test)]\nmod tests { #[test] fn in_main() {} }\n",
    "tests/integration.rs": '#[test] fn works() {}\n#[test] fn broke() { panic!("integration broke"); }\n',
}


@pytest.mark.slow
@toolchains.needs("cargo")
def test_cargo_test_results_come_from_libtest_lines_with_the_binary_hash_dropped(tmp_path: Path) -> None:
    project = make_project(tmp_path / "rs", CARGO_PROJECT)
    code, log, results = run_check(project, "cargo test --no-fail-fast")
    assert code == 101 and results.source == "cargo libtest"
    assert re.search(r"target/debug/deps/calc-[0-9a-f]{16}\)", log)
    assert results.outcomes == {
        "calc::tests::adds": P,
        "calc::tests::subtracts": F,
        "calc::tests::slow": S,
        "calc::tests::flaky": S,
        "calc::tests::panics": P,
        "calc@src/main.rs::tests::in_main": P,  # the binary shares the library's name
        "integration::works": P,
        "integration::broke": F,
        "calc (doc)::src/lib.rs - add (#1)": P,  # by its place among add's doctests, not its line
    }
    assert "one minus one" in results.failures["calc::tests::subtracts"]
    assert "integration broke" in results.failures["integration::broke"]
    assert "failures:" not in results.failures["integration::broke"].splitlines()


GO_PROJECT = {
    "go.mod": "module example.com/calc\n\ngo 1.21\n",
    "calc/calc.go": "package calc\n\nfunc Add(a, b int) int { return a + b }\n",
    "calc/calc_test.go": """\
package calc

import "testing"

func TestAdd(t *testing.T) { if Add(1, 1) != 2 { t.Fatal("bad") } }
func TestSub(t *testing.T) { t.Errorf("want %d got %d", 2, Add(1, -1)) }
func TestSkip(t *testing.T) { t.Skip("not today") }
func TestTable(t *testing.T) {
	t.Run("one", func(t *testing.T) {})
	t.Run("two", func(t *testing.T) { t.Error("two failed") })
}
""",
    "broken/b.go": 'package broken\n\nfunc X() int { return "s" }\n',
    "broken/b_test.go": 'package broken\n\nimport "testing"\n\nfunc TestX(t *testing.T) {}\n',
}


@pytest.mark.slow
@toolchains.needs("go")
def test_go_test_becomes_go_test_json_and_a_package_that_does_not_build_is_one_error(tmp_path: Path) -> None:
    project = make_project(tmp_path / "go", GO_PROJECT)
    assert instrument("go vet ./... && go test ./...", "/r")[0] == "go vet ./... && go test -json ./..."
    assert instrument("go test -json -v ./...", "/r")[0] == "go test -json -v ./..."
    code, log, results = run_check(project, "go test ./...")
    assert code == 1 and results.source == "go test -json"
    pkg = "example.com/calc/calc."
    assert results.outcomes == {
        pkg + "TestAdd": P,
        pkg + "TestSub": F,
        pkg + "TestSkip": S,
        pkg + "TestTable": F,
        pkg + "TestTable/one": P,
        pkg + "TestTable/two": F,
        "example.com/calc/broken": E,
    }
    assert "want 2 got 0" in results.failures[pkg + "TestSub"]
    assert "cannot use" in results.failures["example.com/calc/broken"]
    assert "--- FAIL: TestSub" in go_plain_text(log) and '"Action"' not in go_plain_text(log)


def test_junit_files_the_project_writes_are_copied_out_when_the_check_exits_and_its_status_kept(tmp_path: Path) -> None:
    project = make_project(tmp_path / "py", PYTEST_PROJECT)
    command = f"{sys.executable} -m pytest -q -p no:cacheprovider --junitxml=build/test-results/unit.xml; exit 3"
    code, _, results = run_check(project, command, junit_globs=("build/test-results/*.xml", "none/*.xml"))
    assert code == 3  # sent by the check's first process once the command ended, read from memory
    assert not (project.parent / "report/pytest.xml").exists()  # the project's own --junitxml wins
    assert results.source == "junit:build/test-results/unit.xml"
    # xunit2 (pytest's default) names no file: the classname and the name
    assert results.outcomes["tests.test_calc.TestUnit::test_bad"] == F
    assert results.outcomes["tests.test_calc::test_param[1]"] == P
    assert len(results.outcomes) == 10


def test_junit_setting_takes_globs_from_the_root_only(repo: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("PAPAYU_CHECK_JUNIT", " build/*.xml, reports/unit-[0-9].xml ,")
    assert junit_patterns(repo) == ["build/*.xml", "reports/unit-[0-9].xml"]
    for bad in ("../up.xml", "/etc/x.xml", "a b.xml", "x;rm -rf ~.xml", "$(id).xml"):
        monkeypatch.setenv("PAPAYU_CHECK_JUNIT", bad)
        with pytest.raises(PapayuError) as caught:
            junit_patterns(repo)
        assert caught.value.code == "ERR_CONFIG_INVALID" and caught.value.path == "papayu.check.junit"


def test_output_papayu_cannot_read_gives_an_exit_code_only_verdict(tmp_path: Path) -> None:
    project = tmp_path / "odd"
    project.mkdir()
    code, _, results = run_check(project, "echo 'test a ... ok'; echo 'ok 1 - looks like TAP'; exit 1")
    assert code == 1 and results == TestResults(EXIT_CODE_ONLY)
    code, _, results = run_check(project, "printf '<testsuites><testcase name=\"x\"' > ../report/pytest.xml; exit 1")
    assert results.exit_code_only and results.outcomes == {}
    assert len(results.unreadable) == 1 and results.unreadable[0].startswith("pytest junit: not JUnit XML")


def test_a_report_the_check_planted_as_a_link_or_fifo_is_not_followed(tmp_path: Path) -> None:
    secret = tmp_path / "secret.xml"  # valid JUnit a hostile check would like papayu to show
    secret.write_text('<testsuite><testcase name="t"><failure message="SECRET-VALUE"/></testcase></testsuite>')
    outside = tmp_path / "outside"
    (outside / "build").mkdir(parents=True)
    shutil.copy(secret, outside / "build" / "unit.xml")
    report = tmp_path / "report"
    (report / "junit").mkdir(parents=True)
    (report / "pytest.xml").symlink_to(secret)
    os.mkfifo(report / "node-test-1.jsonl")
    (report / "junit" / "build").symlink_to(outside / "build")  # a linked directory on the way
    results = read_results(report, "", ["build/*.xml"])
    assert results.exit_code_only and "SECRET" not in json.dumps(results.to_dict())
    assert [u.split(":")[0] for u in results.unreadable] == ["pytest junit"]  # a FIFO matches no glob


def test_entities_in_a_report_are_not_expanded(tmp_path: Path) -> None:
    secret = tmp_path / "secret.txt"
    secret.write_text("SECRET-VALUE")
    report = tmp_path / "report"
    report.mkdir()
    (report / "pytest.xml").write_text(
        f'<?xml version="1.0"?><!DOCTYPE t [<!ENTITY s SYSTEM "file://{secret}"><!ENTITY i "INNER">]>'
        '<testsuite><testcase classname="t" name="x"><failure message="m">&s;&i;</failure></testcase></testsuite>'
    )
    results = read_results(report, "")
    assert results.outcomes == {"t::x": F}
    assert "SECRET" not in results.failures["t::x"] and "INNER" not in results.failures["t::x"]


def test_instrument_leaves_runners_it_would_break_alone() -> None:
    # gotestsum's variable is set for every check: it reaches gotestsum wherever it runs, and nothing else.
    assert instrument("pytest --junitxml=out.xml", "/r")[1] == {GOTESTSUM_VAR: "/r/gotestsum.jsonl"}
    assert instrument("pytest -p no:junitxml", "/r")[1] == {GOTESTSUM_VAR: "/r/gotestsum.jsonl"}
    assert instrument("node --test --test-reporter=dot", "/r")[0] == "node --test --test-reporter=dot"
    assert instrument("cargo test --workspace", "/r")[0] == "cargo test --no-fail-fast --workspace"
    assert instrument("cargo test --no-fail-fast --workspace", "/r")[0] == "cargo test --no-fail-fast --workspace"
    assert instrument("go test -v ./... 2>&1 | go-junit-report", "/r")[0] == "go test -v ./... 2>&1 | go-junit-report"
    assert instrument("go test ./... || exit 1", "/r")[0] == "go test -json ./... || exit 1"
    # node --test keeps its command line (and its output, piped or not): papayu's reporter comes
    # through NODE_OPTIONS, wherever a script starts the runner.
    for line in ("node --experimental-vm-modules --test t/", "node --test | tap-spec"):
        done = instrumented(line, "/r")
        assert done.command == line and NODE_TEST_EVENTS in done.readers and done.env[NODE_TEST_VAR] == "1"
    assert NODE_TEST_VAR not in instrumented("node --test --test-reporter=dot", "/r").env
    assert "a reporter of its own" in instrumented("node --test --test-reporter=dot", "/r").notes[0]
    assert NODE_TEST_VAR not in instrumented("node --test", "/r", env={"NODE_OPTIONS": "--test-reporter=tap"}).env
    # jest and vitest keep their command line: papayu's hook in their own process adds the report
    # (node_reports.cjs), so a runner deep in a script gets it too.
    done = instrumented("node --test && npx jest --ci", "/r d")
    assert done.command.endswith("&& npx jest --ci") and JEST in done.readers
    assert (done.env[NODE_REPORTS_VAR], done.env[NODE_RUNNERS_VAR]) == ("/r d", "jest")
    for own in ("npx jest --json", "jest --outputFile=x.json", "vitest run --outputFile=x.xml", "vitest bench"):
        done = instrumented(own, "/r")
        assert not ({JEST, VITEST} & done.readers) and NODE_REPORTS_VAR not in done.env, own
    assert "jest is given --json: papayu leaves that run alone" in instrumented("npx jest --json", "/r").notes[0]
    assert VITEST in instrumented("vitest run --reporter=verbose", "/r").readers  # json beside the user's reporter
    dropped = instrumented("NODE_OPTIONS=--experimental-vm-modules jest", "/r")
    assert JEST not in dropped.readers and "NODE_OPTIONS is set for it" in dropped.notes[0]
    assert JEST in instrumented('NODE_OPTIONS="$NODE_OPTIONS --experimental-vm-modules" jest', "/r").readers
    # Maven and Gradle: their reports, found under the root; papayu.check.junit replaces them.
    assert instrumented("./mvnw -B verify", "/r").reports == tuple((MAVEN_DIR, g) for g in MAVEN_REPORTS)
    assert instrumented("gradle test", "/r").reports == tuple((GRADLE_DIR, g) for g in GRADLE_REPORTS)
    mine = instrumented("mvn test", "/r", junit=("target/surefire-reports/*.xml",))
    assert mine.reports == () and MAVEN not in mine.readers


# Samples of the reports jest 30.5.2 (`--json --outputFile`) and vitest 4.1.12 (junit) wrote for
# a file with a describe() block holding a passing, a failing, a skipped and a todo test.
JEST_SAMPLE = {
    "testResults": [
        {
            "name": "/work/js/src/calc.test.js",
            "status": "failed",
            "message": "",
            "assertionResults": [
                {"ancestorTitles": ["calc"], "title": "adds", "status": "passed", "failureMessages": []},
                {
                    "ancestorTitles": ["calc"],
                    "title": "subtracts",
                    "status": "failed",
                    "failureMessages": ["Error: expect(received).toBe(expected) // Object.is equality\n\nExpected: 2"],
                },
                {"ancestorTitles": ["calc"], "title": "skipped one", "status": "pending", "failureMessages": []},
                {"ancestorTitles": ["calc"], "title": "todo one", "status": "todo", "failureMessages": []},
                {"ancestorTitles": [], "title": "top level", "status": "passed", "failureMessages": []},
            ],
        },
        {
            "name": "/work/js/src/broken.test.js",
            "status": "failed",
            "message": "SyntaxError: x",
            "assertionResults": [],
        },
    ]
}
# vitest 4.1.12's json reporter (`--reporter=json --outputFile.json=…`) writes jest's format.
VITEST_SAMPLE = {
    "testResults": [
        {
            "name": "/work/js/src/calc.test.mjs",
            "status": "failed",
            "message": "",
            "assertionResults": [
                {"ancestorTitles": ["calc"], "title": "adds", "status": "passed", "failureMessages": []},
                {
                    "ancestorTitles": ["calc"],
                    "title": "subtracts",
                    "status": "failed",
                    "failureMessages": ["AssertionError: expected +0 to be 2 // Object.is equality"],
                },
                {"ancestorTitles": ["calc"], "title": "skipped one", "status": "skipped", "failureMessages": []},
                {"ancestorTitles": ["calc"], "title": "todo one", "status": "todo", "failureMessages": []},
                {"ancestorTitles": [], "title": "top level", "status": "passed", "failureMessages": []},
            ],
        }
    ]
}
JS_OUTCOMES = {"calc > adds": P, "calc > subtracts": F, "calc > skipped one": S, "calc > todo one": S, "top level": P}


def test_jest_and_vitest_json_samples_give_file_and_title_ids(tmp_path: Path) -> None:
    report = tmp_path / "report"
    report.mkdir()
    (report / "jest-12.json").write_text(json.dumps(JEST_SAMPLE))  # one per runner process
    (report / "vitest-13.json").write_text(json.dumps(VITEST_SAMPLE))
    results = read_results(report, "", root="/work/js")
    assert results.source == "jest json + vitest json"
    expected = {f"src/calc.test.js > {k}": v for k, v in JS_OUTCOMES.items()}
    expected |= {f"src/calc.test.mjs > {k}": v for k, v in JS_OUTCOMES.items()}
    assert results.outcomes == {**expected, "src/broken.test.js": E}
    assert "Object.is equality" in results.failures["src/calc.test.js > calc > subtracts"]
    assert results.failures["src/broken.test.js"] == "SyntaxError: x"


def test_real_jest_and_vitest_write_reports_papayu_reads(tmp_path: Path) -> None:
    js = """describe('calc', () => {
  test('adds', () => { expect(1 + 1).toBe(2); });
  test('subtracts', () => { expect(1 - 1).toBe(2); });
  test.skip('skipped one', () => {});
  test.todo('todo one');
});
test('top level', () => {});
"""
    versions = toolchains.JS_PACKAGES
    project = make_project(
        tmp_path / "js",
        {
            "package.json": json.dumps({"name": "js", "private": True, "devDependencies": versions}),
            "src/calc.test.js": js,
            "vt/calc.test.mjs": "import { describe, test, expect } from 'vitest';\n" + js,
        },
    )
    path = js_path(project)
    code, _, results = run_check(project, "npx jest src", path=path)
    assert code == 1 and results.source == "jest json"
    assert results.outcomes == {f"src/calc.test.js > {k}": v for k, v in JS_OUTCOMES.items()}
    shutil.rmtree(project.parent / "report")
    code, log, results = run_check(project, "npx vitest run vt", path=path)
    assert code == 1 and results.source == "vitest json" and "subtracts" in log  # its own output stays
    assert results.outcomes == {f"vt/calc.test.mjs > {k}": v for k, v in JS_OUTCOMES.items()}


@toolchains.needs("rustup")
def test_the_cargo_test_skips_where_cargo_is_a_rustup_shim_without_a_toolchain(tmp_path: Path) -> None:
    """The run above must say "skipped", not fail, where rustup has no toolchain (a fresh rustup)."""
    empty = tmp_path / "rustup-home"
    empty.mkdir()
    proc = subprocess.run(
        [sys.executable, "-m", "pytest", "-q", "-rs", "-n", "0", "-p", "no:cacheprovider", __file__, "-k", "libtest"],
        env={**os.environ, "RUSTUP_HOME": str(empty)},
        capture_output=True,
        text=True,
        timeout=300,
    )
    assert proc.returncode == 0 and "1 skipped" in proc.stdout and "rustup shim" in proc.stdout, proc.stdout


def js_path(project: Path) -> str:
    """``project``'s node_modules installed from the cache (pnpm, jest, vitest: toolchains.py);
    PATH with pnpm on it."""
    try:
        toolchains.pnpm_install(project)
        return f"{toolchains.pnpm_bin()}{os.pathsep}{TOOL_PATH}"
    except toolchains.Unavailable as exc:
        pytest.skip(str(exc))


def test_runners_behind_scripts_in_a_pnpm_workspace_each_write_their_report(tmp_path: Path) -> None:
    """`npm test` -> `pnpm -r test` -> `cross-env ... jest` in one package, `npm run unit` ->
    `vitest run` in another: one report per runner's process, ids from the root."""
    project = make_project(tmp_path / "ws", JS_WORKSPACE)
    path = js_path(project)
    code, log, results = run_check(project, "npm test", path=path)
    assert code == 1, log
    assert results.source == "jest json + vitest json", results
    expected = {f"packages/j/src/calc.test.js > {k}": v for k, v in JS_OUTCOMES.items()}
    expected |= {f"packages/v/src/calc.test.mjs > {k}": v for k, v in JS_OUTCOMES.items()}
    assert results.outcomes == expected and not results.collisions
    # The same workspace run with the runner named: the same ids.
    shutil.rmtree(project.parent / "report")
    code, _, direct = run_check(project, "pnpm --filter v exec vitest run", path=path)
    assert direct.outcomes == {k: v for k, v in expected.items() if k.startswith("packages/v/")}


JS_TESTS = """describe('calc', () => {
  test('adds', () => { expect(1 + 1).toBe(2); });
  test('subtracts', () => { expect(1 - 1).toBe(2); });
  test.skip('skipped one', () => {});
  test.todo('todo one');
});
test('top level', () => {});
"""
JS_WORKSPACE = {
    "package.json": json.dumps({"name": "ws", "private": True, "scripts": {"test": "pnpm -r --no-bail test"}}),
    "pnpm-workspace.yaml": "packages:\n  - 'packages/*'\n",
    "packages/j/package.json": json.dumps(
        {
            "name": "j",
            "private": True,
            "scripts": {"test": "cross-env NODE_ENV=test jest"},
            "devDependencies": {
                "jest": toolchains.JS_PACKAGES["jest"],
                "cross-env": toolchains.JS_PACKAGES["cross-env"],
            },
        }
    ),
    "packages/j/src/calc.test.js": JS_TESTS,
    "packages/v/package.json": json.dumps(
        {
            "name": "v",
            "private": True,
            "scripts": {"test": "npm run unit", "unit": "vitest run"},
            "devDependencies": {"vitest": toolchains.JS_PACKAGES["vitest"]},
        }
    ),
    "packages/v/src/calc.test.mjs": "import { describe, test, expect } from 'vitest';\n" + JS_TESTS,
}


# --- Maven and Gradle ----------------------------------------------------------------------------

# What surefire 3.5.2 (JUnit 5) and Gradle 4.4.1 (JUnit 4) wrote for a class with a passing, a
# failing and a skipped test (trimmed of their properties and output).
SUREFIRE_SAMPLE = """<?xml version="1.0" encoding="UTF-8"?>
<testsuite xmlns:xsi="http://www.w3.org/2001/XMLSchema-instance" version="3.0.2" name="calc.CalcTest" time="0.5" tests="3" errors="0" skipped="1" failures="1">
  <properties/>
  <testcase name="adds" classname="calc.CalcTest" time="0.277"/>
  <testcase name="multiplies" classname="calc.CalcTest" time="0.014">
    <failure message="expected: &lt;6&gt; but was: &lt;5&gt;" type="org.opentest4j.AssertionFailedError">org.opentest4j.AssertionFailedError: expected: &lt;6&gt; but was: &lt;5&gt;
	at calc.CalcTest.multiplies(CalcTest.java:6)</failure>
  </testcase>
  <testcase name="skipped" classname="calc.CalcTest" time="0"><skipped/></testcase>
</testsuite>
"""
GRADLE_SAMPLE = """<?xml version="1.0" encoding="UTF-8"?>
<testsuite name="calc.CalcTest" tests="3" skipped="1" failures="1" errors="0" timestamp="2026-11-27T00:09:16" hostname="vm" time="0.007">
  <properties/>
  <testcase name="adds" classname="calc.CalcTest" time="0.004"/>
  <testcase name="multiplies" classname="calc.CalcTest" time="0.001">
    <failure message="java.lang.AssertionError: expected:&lt;6&gt; but was:&lt;5&gt;" type="java.lang.AssertionError">java.lang.AssertionError: expected:&lt;6&gt; but was:&lt;5&gt;
	at calc.CalcTest.multiplies(CalcTest.java:6)</failure>
  </testcase>
  <testcase name="skipped" classname="calc.CalcTest" time="0.0"><skipped/></testcase>
  <system-out><![CDATA[]]></system-out>
  <system-err><![CDATA[]]></system-err>
</testsuite>
"""
BUILD_OUTCOMES = {"calc.CalcTest::adds": P, "calc.CalcTest::multiplies": F, "calc.CalcTest::skipped": S}


def test_maven_and_gradle_reports_are_read_per_module_at_any_depth_and_a_stale_one_is_not(tmp_path: Path) -> None:
    """Reports found under the root (the build tools' own places, any depth), each test named by
    its module and class and method; the same class in two modules is two tests."""
    root = tmp_path / "root"
    surefire = "target/surefire-reports/TEST-calc.CalcTest.xml"
    for module in ("", "core/", "apps/web/"):
        write(root, module + surefire, SUREFIRE_SAMPLE)
    write(root, "extra/target/failsafe-reports/TEST-calc.CalcIT.xml", SUREFIRE_SAMPLE.replace("CalcTest", "CalcIT"))
    write(root, "sub/build/test-results/test/TEST-calc.CalcTest.xml", GRADLE_SAMPLE)
    write(root, "node_modules/x/target/surefire-reports/TEST-calc.CalcTest.xml", SUREFIRE_SAMPLE)  # not searched
    old = write(root, "old/target/surefire-reports/TEST-calc.CalcTest.xml", SUREFIRE_SAMPLE)
    os.utime(root / old, (1_000_000_000, 1_000_000_000))  # a build of before the check
    tools = [(MAVEN_DIR, g) for g in MAVEN_REPORTS] + [(GRADLE_DIR, g) for g in GRADLE_REPORTS]
    delivered = tmp_path / "delivered"  # the report directory, with the root under junit/ as read_results reads it
    shutil.copytree(root, delivered / "junit")
    since = time.time() - 60
    results = read_results(delivered, "", tools=tools, since=since)
    expected = {f"{module}{k}": v for module in ("", "core/", "apps/web/") for k, v in BUILD_OUTCOMES.items()}
    expected |= {f"extra/{k.replace('CalcTest', 'CalcIT')}": v for k, v in BUILD_OUTCOMES.items()}
    expected |= {f"sub/{k}": v for k, v in BUILD_OUTCOMES.items()}
    assert results.outcomes == expected and results.source == "gradle junit + maven surefire"
    assert "expected: <6> but was: <5>" in results.failures["core/calc.CalcTest::multiplies"]
    assert any("older than the check" in note and "old/target" in note for note in results.unreadable)
