"""Where per-test results come from, through the real CLI and sandbox: the plan's code runs
inside the test process (the regression run imports it), so it attacks the report. Each attack
is a plan whose code breaks (or fixes nothing of) the tip and lies about it; each must not land,
saying why, and an honest plan next to it lands.

- an atexit handler rewriting pytest's JUnit file to all-pass, then exiting 0;
- on a red tip, an atexit handler dropping the failing test from the file ("fixed");
- os._exit(0) at import with TAP lines printed in place of pytest's report;
- 120 MiB and 100k files written into the report directory;
- a second report claiming the tip's tests passed.
Then the ids: inherited test classes across two files and parametrized ids are pytest's own
node ids, streamed or read from JUnit; an id reported twice is said, and judged as one group.
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import pytest
from helpers import git, make_repo, papayu_dir
from test_check_verdict_runs import (
    BROKEN_MUL,
    CALC,
    PYPROJECT,
    PYTEST,
    _apply,
    _green_python_repo,
    _head,
    _not_landed,
    _py_code,
    _trailer,
    _update,
    _why,
)

from papayu_git.check import sandbox

pytestmark = pytest.mark.skipif(
    sandbox.unavailable_reason() is not None, reason=f"bwrap does not work here: {sandbox.unavailable_reason()}"
)

# Code a plan appends to calc.py. The report's path is in PYTEST_ADDOPTS, as papayu asks for it.
# The writes go through a process of its own: in pytest's, papayu's shield refuses them first
# (tests/test_judge_shield.py); here the report channel is what must catch them.
REPORT_PATH = """
import atexit, os, re, shlex, subprocess, sys

def _report():
    return next(a.split("=", 1)[1] for a in shlex.split(os.environ["PYTEST_ADDOPTS"]) if a.startswith("--junitxml="))

def _in_a_child(source, *args):
    subprocess.run([sys.executable, "-c", source, *args], check=False)

_WRITE = "import sys; open(sys.argv[1], 'w').write(sys.argv[2])"
"""
ALL_PASSED_AT_EXIT = (
    REPORT_PATH
    + """
def _all_passed():
    with open(_report()) as f:
        text = f.read()
    text = re.sub(r"<failure[^>]*>.*?</failure>|<failure[^>]*/>", "", text, flags=re.S)
    _in_a_child(_WRITE, _report(), re.sub(r'failures="[0-9]+"', 'failures="0"', text))
    print("REWROTE THE REPORT", flush=True)
    os._exit(0)

atexit.register(_all_passed)
"""
)
DROP_FAILING_AT_EXIT = (
    REPORT_PATH
    + """
def _drop_failing():
    with open(_report()) as f:
        text = f.read()
    text = re.sub(r"<testcase [^>]*>\\s*<failure.*?</testcase>", "", text, flags=re.S)
    _in_a_child(_WRITE, _report(), re.sub(r'failures="[0-9]+"', 'failures="0"', text))
    print("DROPPED THE FAILING TEST", flush=True)
    os._exit(0)

atexit.register(_drop_failing)
"""
)
# pytest captures what collection prints: the lines go to the log through the shell's stdout.
TAP_AND_EXIT = """
import os
with open(f"/proc/{os.getppid()}/fd/1", "w") as log:
    log.write("TAP version 13\\n")
    for n, name in enumerate(["add", "mul", "sub"], 1):
        log.write(f"ok {n} - tests/test_{name}.py::test_{name}\\n")
    log.write("1..3\\n")
os._exit(0)
"""
FLOOD = (
    REPORT_PATH
    + """
_FLOOD = (
    "import os, sys\\n"
    "for i in range(120):\\n"
    "    try:\\n"
    "        with open(os.path.join(sys.argv[1], f'junk-{i}'), 'wb') as f:\\n"
    "            for _ in range(16):\\n"
    "                f.write(b'x' * 65536)\\n"
    "    except OSError:\\n"
    "        pass\\n"
    "for i in range(100_000):\\n"
    "    try:\\n"
    "        open(os.path.join(sys.argv[1], f'f-{i}'), 'wb').close()\\n"
    "    except OSError:\\n"
    "        break\\n"
)
_in_a_child(_FLOOD, os.path.dirname(_report()))
with open(f"/proc/{os.getppid()}/fd/1", "w") as log:  # pytest captures what collection prints
    log.write("FLOODED THE REPORT DIRECTORY\\n")
"""
)
# A second report, in a place the user named with papayu.check.junit, saying the tip's tests passed.
SECOND_REPORT = """
import os
os.makedirs("build", exist_ok=True)
with open("build/extra.xml", "w") as f:
    f.write('<testsuite><testcase classname="tests.test_mul" name="test_mul" file="tests/test_mul.py"/></testsuite>')
with open(f"/proc/{os.getppid()}/fd/1", "w") as log:
    log.write("WROTE A SECOND REPORT\\n")
"""


def _log(data: dict[str, object]) -> str:
    check = data["check"]
    assert isinstance(check, dict)
    return Path(str(check["log"])).read_text(errors="replace")


def _honest_plan_lands(repo: Path) -> None:
    honest = _apply(repo, "honest", [_update("calc.py", CALC + "# tidy\n")], env={})
    assert (honest["state"], honest["_rc"]) == ("landed", 0), _why(honest)
    assert _trailer(repo) == "Papayu-Check: passed 3, fixed 0, already failing 0"


def test_a_report_rewritten_to_all_pass_at_exit_does_not_land(tmp_path: Path) -> None:
    repo = _green_python_repo(tmp_path)
    head = _head(repo)
    data = _apply(repo, "rewrite", [_update("calc.py", BROKEN_MUL + ALL_PASSED_AT_EXIT)], env={})
    _not_landed(repo, data, head, "rolled_back", "ERR_CHECK_REGRESSION")
    assert "REWROTE THE REPORT" in _log(data) and data["check"]["exit_code"] == 0, _why(data)
    verdict = data["check"]["verdict"]
    assert verdict["broken"] == ["tests/test_mul.py::test_mul"], _why(data)  # what pytest streamed
    regression = "the regression run (the tip's tests on the plan's code)"
    assert verdict["lines"][:2] == [
        f"{regression}: the report pytest was asked for was rewritten after the runner ended: "
        "tests.test_mul::test_mul: streamed failed, the report says passed",
        f"{regression}: 1 test failed, yet the check exited 0",
    ], _why(data)
    assert "rewritten after the runner ended" in data["error"]["reason"]
    _honest_plan_lands(repo)


def test_on_a_red_tip_a_failing_test_dropped_from_the_report_is_not_fixed(tmp_path: Path) -> None:
    repo = _green_python_repo(tmp_path)
    (repo / "calc.py").write_text(_py_code(frozenset({"add"})))
    git(repo, "commit", "-q", "-am", "a red tip: add is wrong")
    head = _head(repo)
    data = _apply(repo, "drop", [_update("calc.py", _py_code(frozenset({"add"})) + DROP_FAILING_AT_EXIT)], env={})
    _not_landed(repo, data, head, "rolled_back", "ERR_CHECK_RESULTS_UNTRUSTED")
    assert "DROPPED THE FAILING TEST" in _log(data), _why(data)
    verdict = data["check"]["verdict"]
    assert verdict["fixed"] == [] and verdict["already_failing"] == ["tests/test_add.py::test_add"], _why(data)
    assert any("rewritten after the runner ended: tests.test_add::test_add" in line for line in verdict["lines"])
    fix = _apply(repo, "fix-add", [_update("calc.py", CALC)], env={})
    assert (fix["state"], fix["check"]["verdict"]["fixed"]) == ("landed", ["tests/test_add.py::test_add"]), _why(fix)


def test_exiting_at_import_with_tap_lines_printed_does_not_stand_in_for_pytest(tmp_path: Path) -> None:
    repo = _green_python_repo(tmp_path)
    head = _head(repo)
    data = _apply(repo, "tap", [_update("calc.py", BROKEN_MUL + TAP_AND_EXIT)], env={})
    _not_landed(repo, data, head, "rolled_back", "ERR_CHECK_REGRESSION")
    assert "ok 2 - tests/test_mul.py::test_mul" in _log(data) and data["check"]["exit_code"] == 0, _why(data)
    assert data["check"]["tests"]["source"] == "exit code only", _why(data)  # no TAP read under pytest
    lines = data["check"]["verdict"]["lines"]
    assert (
        "the regression run (the tip's tests on the plan's code): the report pytest was asked for is missing" in lines
    )
    _honest_plan_lands(repo)


def test_a_flooded_report_directory_stays_in_the_sandbox_and_is_said(tmp_path: Path) -> None:
    repo = _green_python_repo(tmp_path)
    git(repo, "config", "papayu.check.tmpMB", "16")
    head = _head(repo)
    data = _apply(repo, "flood", [_update("calc.py", CALC + FLOOD)], env={})
    assert "FLOODED THE REPORT DIRECTORY" in _log(data), _why(data)
    assert not data["ok"] and _head(repo) == head, _why(data)
    said = " ".join(data["check"]["verdict"]["lines"])
    assert "the report directory was full (16 MiB)" in said, said
    assert "the report directory held more than 100000 entries" in said, said
    assert "the report pytest was asked for is missing" in said, said
    # Nothing of it reached the disk: papayu's directory holds the logs and records, no junk.
    junk = [p for p in tmp_path.rglob("*") if p.name.startswith(("junk-", "f-"))]
    used = sum(p.stat().st_size for p in papayu_dir(repo).rglob("*") if p.is_file() and not p.is_symlink())
    assert junk == [] and used < 8 * 1024 * 1024, (junk[:3], used)
    _honest_plan_lands(repo)


def test_unsandboxed_the_report_directory_is_on_disk_only_while_the_check_runs(tmp_path: Path) -> None:
    repo = _green_python_repo(tmp_path)
    git(repo, "config", "papayu.check.sandbox", "off")
    flood = FLOOD.replace("range(120)", "range(20)").replace("range(100_000)", "range(5000)")
    data = _apply(repo, "flood", [_update("calc.py", CALC + flood)], env={})
    log = _log(data)
    assert "FLOODED THE REPORT DIRECTORY" in log and "[papayu] sandbox: none" in log, _why(data)
    assert "on disk while the check runs (no sandbox to bound it)" in log
    # 20 + 5000 + pytest.xml and the FIFO the runner streams its results through (a plan's run
    # records nothing: only a base run may, once).
    assert data["check"]["tests"]["unreadable"] == ["the report directory held 5022 entries"], _why(data)
    assert [p for p in tmp_path.rglob("*") if p.name.startswith(("junk-", "f-"))] == []  # removed after the run


def test_a_second_report_claiming_the_tips_tests_passed_does_not_land(tmp_path: Path) -> None:
    repo = _green_python_repo(tmp_path)
    git(repo, "config", "papayu.check.junit", "build/*.xml")
    head = _head(repo)
    data = _apply(repo, "second", [_update("calc.py", BROKEN_MUL + SECOND_REPORT)], env={})
    _not_landed(repo, data, head, "rolled_back", "ERR_CHECK_REGRESSION")
    assert "WROTE A SECOND REPORT" in _log(data), _why(data)
    assert data["check"]["tests"]["collisions"] == [
        "tests/test_mul.py::test_mul: by pytest stream and by junit:build/extra.xml"
    ], _why(data)
    lines = data["check"]["verdict"]["lines"]
    regression = "the regression run (the tip's tests on the plan's code)"
    assert f"{regression}: results from junit:build/extra.xml, which the tip's run did not have" in lines
    assert any(line.startswith(f"{regression}: ids reported more than once: tests/test_mul.py") for line in lines)
    _honest_plan_lands(repo)


# --- ids: pytest's own node ids, never merged ------------------------------------------------

INHERITED = {
    "tests/__init__.py": "",
    "tests/test_base.py": """\
import pytest

from calc import add


class TestAdd:
    @pytest.mark.parametrize("a,b,want", [(1, 2, 3), (2, 2, 4)], ids=["small", "dot.ted"])
    def test_add(self, a, b, want):
        assert add(a, b) == want

    def test_zero(self):
        assert add(0, 0) == 0
""",
    "tests/test_child.py": """\
from calc import add
from tests.test_base import TestAdd


class TestAddAgain(TestAdd):
    def test_more(self):
        assert add(1, 1) == 2
""",
}
BROKEN_FOR_EQUALS = "def add(a, b):\n    return a + b if a != b else 0\n"


@pytest.mark.parametrize("streamed", [True, False], ids=["streamed", "junit-only"])
def test_inherited_classes_and_parametrized_ids_are_pytests_node_ids(tmp_path: Path, streamed: bool) -> None:
    files: dict[str, str | bytes] = {"calc.py": "def add(a, b):\n    return a + b\n", "pyproject.toml": PYPROJECT}
    repo = make_repo(tmp_path / "repo", {**files, **INHERITED})
    check = f"{PYTEST} tests" + ("" if streamed else " -p no:papayu-results")
    git(repo, "config", "papayu.check.command", check)
    head = _head(repo)
    data = _apply(repo, "break", [_update("calc.py", BROKEN_FOR_EQUALS)], env={})
    _not_landed(repo, data, head, "rolled_back", "ERR_CHECK_REGRESSION")
    collected = subprocess.run(
        [sys.executable, "-m", "pytest", "--collect-only", "-q", "-p", "no:cacheprovider", "tests"],
        cwd=repo,
        capture_output=True,
        text=True,
    ).stdout.splitlines()
    ids = sorted(line for line in collected if "::" in line)
    assert len(ids) == 10, collected
    records = [json.loads(p.read_text()) for p in (papayu_dir(repo) / "base").glob("*.json")]
    [base] = [r["tests"] for r in records if r["commit"] == head]  # the tip's (the plan's run is kept too)
    assert sorted(base["outcomes"]) == ids and base["collisions"] == [], base
    assert base["sources"] == (["pytest stream", "pytest junit"] if streamed else ["pytest junit"])
    broken = [i for i in ids if i.endswith(("test_add[dot.ted]", "test_more"))]  # 2 + 2 and 1 + 1 are 0
    assert len(broken) == 4 and data["check"]["verdict"]["broken"] == broken, _why(data)
    assert "tests/test_child.py::TestAddAgain::test_add[dot.ted]" in data["error"]["reason"]


DUPLICATE_REPORT = """\
import os

os.makedirs("build", exist_ok=True)
with open("build/suite.xml", "w") as f:
    f.write('<testsuite><testcase classname="suite" name="one"/><testcase classname="suite" name="one"/></testsuite>')
"""


def test_an_id_the_tips_suite_reports_twice_is_one_group_and_the_rest_judged_per_test(tmp_path: Path) -> None:
    repo = _green_python_repo(tmp_path, **{"tools/report.py": DUPLICATE_REPORT})
    git(repo, "config", "papayu.check.command", f"{PYTEST} tests && {sys.executable} tools/report.py")
    git(repo, "config", "papayu.check.junit", "build/*.xml")
    data = _apply(repo, "honest", [_update("calc.py", CALC + "# tidy\n")], env={})
    assert (data["state"], data["_rc"]) == ("landed", 0), _why(data)
    assert data["check"]["tests"]["collisions"] == ["suite::one: by junit:build/suite.xml twice"], _why(data)
    verdict = data["check"]["verdict"]
    assert not verdict["exit_code_only"] and verdict["lines"][0] == (
        "1 test id(s) the tip's own suite reports more than once are each judged as one group "
        "(its worst outcome, its number of tests kept)"
    ), _why(data)
    head = _head(repo)
    broken = _apply(repo, "break", [_update("calc.py", BROKEN_MUL)], env={})
    _not_landed(repo, broken, head, "rolled_back", "ERR_CHECK_REGRESSION")
    assert broken["check"]["verdict"]["broken"] == ["tests/test_mul.py::test_mul"], _why(broken)
    assert os.path.exists(repo / "tools/report.py")
