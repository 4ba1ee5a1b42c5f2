"""Fail first (papayu.check.select, docs/DESIGN.md "Fail first"): a check runs first the tests a
plan's change reaches (by a record of what each test read, or by the tests' names and imports),
stops there when one breaks, and otherwise runs the rest of the tip's suite in the same session;
the plan lands only on the whole suite's verdict. Through the real CLI (`apply PLAN -y --json`),
real pytest in the real sandbox, papayu's plugin ordering the run and, under Python 3.12+,
recording what each test of a base run read.
"""

from __future__ import annotations

import json
import os
import shutil
import sys
import sysconfig
from pathlib import Path
from typing import Any

import pytest
from helpers import apply_json, git, make_repo, papayu, papayu_dir, write_plan
from helpers import update_action as _write

from papayu_git.check import sandbox
from papayu_git.check.results import TestResults
from papayu_git.check.results.outcome import Outcome
from papayu_git.check.selection.changes import python_change
from papayu_git.check.selection.inputs import Inputs, Recorded, read_inputs
from papayu_git.check.selection.order import first_part
from papayu_git.check.selection.signals import Touched, reached_files
from papayu_git.check.verdict import Run, judge

pytestmark = pytest.mark.skipif(
    sandbox.unavailable_reason() is not None, reason=f"bwrap does not work here: {sandbox.unavailable_reason()}"
)

CALC = "def add(a, b):\n    return a + b\n\n\ndef mul(a, b):\n    return a * b\n"
FILLERS = 24  # tests that read nothing of the plans below
ALL = FILLERS + 3


def _files() -> dict[str, str | bytes]:
    files: dict[str, str | bytes] = {
        "pkg/__init__.py": "",
        "pkg/calc.py": CALC,
        "pyproject.toml": "[tool.pytest.ini_options]\npythonpath = ['.']\n",
        "tests/conftest.py": "",
        "tests/test_add.py": "from pkg.calc import add\n\n\ndef test_add():\n    assert add(2, 3) == 5\n",
        "tests/test_mul.py": "from pkg.calc import mul\n\n\ndef test_mul():\n    assert mul(2, 3) == 6\n",
        "tests/test_data.py": "import json\n\n\ndef test_data():\n    assert json.load(open('tests/data.json'))['x'] == 1\n",
        "tests/data.json": '{"x": 1}\n',
        ".gitignore": ".venv/\n",
    }
    for i in range(FILLERS):
        files[f"tests/test_filler_{i:02d}.py"] = f"def test_filler_{i}():\n    assert {i} + 1 == {i + 1}\n"
    return files


def recording_python() -> str | None:
    """A Python 3.12+ of this machine (sys.monitoring records what each test read), or None."""
    import subprocess

    found = [str(p) for p in sorted(Path.home().parent.glob("*/.pyenv/versions/3.1[2-9]*/bin/python"), reverse=True)]
    found += [str(p) for p in sorted(Path("/root/.pyenv/versions").glob("3.1[2-9]*/bin/python"), reverse=True)]
    found += [shutil.which(n) or "" for n in ("python3.13", "python3.12")]
    for python in filter(None, found):
        probe = [python, "-c", "import sys, venv; assert sys.version_info >= (3, 12)"]
        if os.access(python, os.X_OK) and subprocess.run(probe, capture_output=True).returncode == 0:
            return python
    return None


PYTEST_PARTS = ("_pytest", "pytest", "pluggy", "iniconfig", "packaging", "pygments", "py.py")


def venv(repo: Path, python: str) -> str:
    """A virtualenv in ``repo`` whose pytest is this one's (pure Python): linked, no install."""
    import subprocess

    subprocess.run([python, "-m", "venv", "--without-pip", str(repo / ".venv")], check=True)
    [site] = (repo / ".venv/lib").glob("python3.*/site-packages")
    ours = Path(sysconfig.get_paths()["purelib"])
    for entry in ours.iterdir():
        if entry.name.split("-", 1)[0] in PYTEST_PARTS or entry.name in PYTEST_PARTS:
            (site / entry.name).symlink_to(entry)
    return ".venv/bin/python"


@pytest.fixture(params=["3.11", "recording"])
def repo(request: pytest.FixtureRequest, tmp_path: Path) -> Path:
    repo = make_repo(tmp_path / "repo", _files())
    python = sys.executable
    if request.param == "recording":
        found = recording_python()
        if found is None:
            pytest.skip("no Python 3.12+ here: the record needs sys.monitoring")
        python = venv(repo, found)
    git(repo, "config", "papayu.check.command", f"{python} -m pytest -q -p no:cacheprovider tests")
    return repo


def _apply(repo: Path, name: str, actions: list[dict[str, str]], *args: str) -> dict[str, Any]:
    plan = write_plan(repo.parent, actions, summary=name, name=f"{name}.json")
    data = apply_json(repo, plan, "-y", *args, env={"PAPAYU_PROTOCOL_VERSION": "1"})
    assert data.get("check"), data
    return data


def _runs(data: dict[str, Any], name: str) -> list[dict[str, Any]]:
    return [run for run in data["check"]["runs"] if run["run"] == name]


def _recorded(repo: Path) -> Recorded | None:
    found = list((papayu_dir(repo) / "base").glob("*.inputs.jsonl"))
    return read_inputs(found[0].read_bytes()) if found else None


def test_a_broken_function_is_rejected_after_the_tests_that_reach_it(repo: Path) -> None:
    data = _apply(repo, "broken", [_write("pkg/calc.py", CALC.replace("a * b", "a + b"))])
    assert data["state"] == "rolled_back" and data["error"]["code"] == "ERR_CHECK_REGRESSION", data["error"]
    verdict = data["check"]["verdict"]
    assert verdict["broken"] == ["tests/test_mul.py::test_mul"], verdict
    # It stopped after the first part: the rest did not run, and is said not run, not missing.
    [plan] = _runs(data, "plan")
    assert plan["stopped"] and 0 < plan["first"] < ALL and plan["tests"] == plan["first"], plan
    assert len(verdict["not_run"]) == ALL - plan["first"] and verdict["missing"] == [], verdict
    assert f"({plan['first']} first)" in verdict["trailer"] and "reused" not in json.dumps(data)
    # The failing test, and only it, ran again on the tip (flaky or broken), never the suite.
    [again] = _runs(data, "tip again")
    assert again["tests"] == 1, again
    # The retry prompt gets the failing tests.
    from papayu_git import retry

    assert retry.failing_tests(data["check"]) == ("tests/test_mul.py::test_mul",)
    recorded = _recorded(repo)
    by = data["check"]["selection"]["plan"]["by"]
    if recorded is not None and not recorded.problem:  # Python 3.12+: the record placed the change
        assert by == "the record", by
        assert ("pkg/calc.py", "mul") in recorded.tests["tests/test_mul.py::test_mul"].units
        assert ("pkg/calc.py", "mul") not in recorded.tests["tests/test_add.py::test_add"].units
    else:
        assert by.startswith("imports and names"), by


def test_a_green_plan_runs_the_whole_suite_in_one_session_and_lands(repo: Path) -> None:
    data = _apply(repo, "green", [_write("pkg/calc.py", CALC.replace("a * b", "b * a"))])
    assert data["state"] == "landed", data.get("error")
    verdict = data["check"]["verdict"]
    assert verdict["passed"] == ALL and verdict["not_run"] == [], verdict
    [plan] = _runs(data, "plan")
    assert plan["tests"] == ALL and not plan["stopped"] and _runs(data, "rest") == [], data["check"]["runs"]
    assert f"{ALL} passed" in Path(data["check"]["log"]).read_text()
    # Each run named, with its time: the tip's (run now), then the plan's.
    assert [r["run"] for r in data["check"]["runs"]] == ["tip", "plan"]
    assert set(plan["timing"]) == {"setup", "command", "reading"}
    # The landed plan's run is the new tip's base: the next check runs no tip again.
    again = _apply(repo, "again", [_write("pkg/calc.py", CALC.replace("a * b", "b * a") + "# 2\n")])
    [tip] = _runs(again, "tip")
    assert tip["seconds"] == 0.0 and f"plan {data['plan_id']}'s check" in tip["why"], tip


def test_a_data_file_reaches_the_test_that_reads_it_in_the_plans_own_run(repo: Path) -> None:
    data = _apply(repo, "data", [_write("tests/data.json", '{"x": 2}\n')], "--allow-test-edits")
    assert data["check"]["verdict"]["new_failing"] == ["tests/test_data.py::test_data"], data["check"]["verdict"]
    assert data["state"] == "rolled_back"


def test_off_runs_the_suite_in_its_own_order_and_records_nothing(repo: Path) -> None:
    git(repo, "config", "papayu.check.select", "off")
    data = _apply(repo, "off", [_write("pkg/calc.py", CALC.replace("a * b", "a + b"))])
    assert data["check"]["verdict"]["broken"] == ["tests/test_mul.py::test_mul"]
    [plan] = _runs(data, "plan")
    assert plan["tests"] == ALL and not plan["first"], plan
    assert data["check"]["selection"] == {"mode": "off", "unordered": "papayu.check.select=off", "plan": {
        "first": 0, "first_files": [], "why": {}, "by": ""}}  # fmt: skip
    assert not list((papayu_dir(repo) / "base").glob("*.inputs.jsonl"))


def test_observe_is_read_as_on_with_a_notice(repo: Path) -> None:
    git(repo, "config", "papayu.check.select", "observe")
    plan = write_plan(repo.parent, [_write("pkg/calc.py", CALC + "# x\n")], summary="x", name="x.json")
    proc = papayu("apply", str(plan), "-y", cwd=repo, env={"PAPAYU_PROTOCOL_VERSION": "1"})
    assert proc.returncode == 0, proc.stderr
    assert "papayu.check.select=observe is deprecated" in proc.stderr and "read as on" in proc.stderr


def test_an_expression_too_deep_to_compare_orders_by_signals_and_lands_as_off_would(repo: Path) -> None:
    """ast cannot compare a 1,200-term expression (RecursionError): the order falls back, says
    so, and the plan lands on the whole suite as with select=off."""
    deep = CALC + "\n\nTOTAL = " + " + ".join(["1"] * 1200) + "\n"
    data = _apply(repo, "deep", [_write("pkg/calc.py", deep)])
    assert data["state"] == "landed", data.get("error")
    notes = data["check"]["selection"]["plan"]["notes"]
    assert notes == ["pkg/calc.py: too deeply nested to compare (RecursionError); placed by its name and imports"]
    assert data["check"]["verdict"]["passed"] == ALL


def test_a_flaky_failure_in_the_first_part_runs_alone_on_the_tip_then_the_rest_runs(tmp_path: Path) -> None:
    """test_b relies on state test_a leaves (order-dependent): run first, it fails, and alone on
    the tip it fails too: flaky, not the plan's. The rest then runs, and the plan lands."""
    files = _files()
    files["tests/test_state.py"] = (
        "import pkg.calc\n\nSEEN = []\n\n\ndef test_a():\n    SEEN.append(1)\n\n\n"
        "def test_b():\n    assert SEEN and pkg.calc.mul(2, 2) == 4\n"
    )
    repo = make_repo(tmp_path / "repo", files)
    git(repo, "config", "papayu.check.command", f"{sys.executable} -m pytest -q -p no:cacheprovider tests")
    # Recently failed: first in the next check (as a retry's are).
    (papayu_dir(repo) / "order").mkdir(parents=True)
    (papayu_dir(repo) / "order/recent-failures.json").write_text(json.dumps({"tests": ["tests/test_state.py::test_b"]}))
    data = _apply(repo, "flaky", [{"kind": "CREATE_FILE", "path": "pkg/notes.py", "content": "NOTE = 1\n"}])
    assert data["state"] == "landed", data.get("error")
    verdict = data["check"]["verdict"]
    assert verdict["flaky"] == ["tests/test_state.py::test_b"] and verdict["not_run"] == [], verdict
    names = [r["run"] for r in data["check"]["runs"]]
    assert names == ["tip", "plan", "tip again", "rest"], data["check"]["runs"]
    assert _runs(data, "tip again")[0]["tests"] == 1 and _runs(data, "plan")[0]["stopped"]
    assert verdict["passed"] == ALL + 1


def test_every_run_is_named_with_why_in_the_output_and_as_events(tmp_path: Path) -> None:
    repo = make_repo(tmp_path / "repo", _files())
    git(repo, "config", "papayu.check.command", f"{sys.executable} -m pytest -q -p no:cacheprovider tests")
    doctor = papayu("doctor", "--check", cwd=repo, env={"PAPAYU_LLM_BASE_URL": "http://127.0.0.1:9/v1"})
    assert "check on the tip" in doctor.stdout + doctor.stderr
    plan = write_plan(repo.parent, [_write("pkg/calc.py", CALC.replace("a * b", "a + b"))], summary="b", name="b.json")
    proc = papayu("-v", "apply", str(plan), "-y", cwd=repo, env={"PAPAYU_PROTOCOL_VERSION": "1"})
    assert proc.returncode == 1, proc.stderr
    err = proc.stderr
    # doctor --check ran the tip: kept, never repeated.
    assert "the tip's tests: 0.0s: kept from doctor --check" in err, err
    assert "CHECK_RUN run=tip" in err and "CHECK_RUN run=plan" in err and 'CHECK_RUN run="tip again"' in err
    plan_line = next(line for line in err.splitlines() if line.strip().startswith("the plan's run:"))
    assert "sandbox set-up" in plan_line and "reading results" in plan_line and "stopped there" in plan_line
    assert "failing tests again on the tip:" in err


# --- units -------------------------------------------------------------------------------------


def test_a_changed_function_body_is_that_unit_and_module_code_is_the_module() -> None:
    old = b"import os\nX = 1\n\n\ndef f(a):\n    return a\n\n\nclass C:\n    def m(self):\n        return 1\n"
    assert python_change(old, old.replace(b"return a", b"return a + 1")).units == {"f"}
    assert not python_change(old, old.replace(b"return a", b"return a + 1")).module
    assert python_change(old, old.replace(b"return 1", b"return 2")).units == {"C.m"}
    assert python_change(old, old.replace(b"X = 1", b"X = 2")).module
    assert python_change(old, b"# moved\n" + old) == python_change(old, old)
    assert not python_change(old, old + b"\n\ndef g():\n    pass\n").module  # a new plain function: a name
    assert python_change(old, old + b"\n\ndef open():\n    pass\n").module  # shadows a builtin
    assert python_change(old, None).module and python_change(b"def (", old).module
    deep = b"X = " + b" + ".join([b"1"] * 1200)
    assert python_change(old, deep).problem.startswith("too deeply nested")


def test_the_record_places_a_change_and_the_signals_the_tests_it_does_not_know() -> None:
    recorded = Recorded(
        tests={
            "tests/test_a.py::test_a": Inputs(units={("pkg/m.py", "f")}),
            "tests/test_b.py::test_b": Inputs(units={("pkg/m.py", "g")}),
            "tests/test_c.py::test_c": Inputs(opened={"data/x.txt"}),
        }
    )
    outcomes = {t: Outcome.PASSED for t in recorded.tests} | {"tests/test_m.py::test_new": Outcome.PASSED}
    old = b"def f():\n    return 1\n\n\ndef g():\n    return 2\n"
    texts = {"tests/test_m.py": b"from pkg.m import f\n\ndef test_new():\n    assert f()\n"}
    found = first_part(recorded, outcomes, [("pkg/m.py", old, old.replace(b"1", b"3"))], texts.get)
    # test_a ran f (the record); test_m.py is named after m and the record does not know it.
    assert found.tests == {"tests/test_a.py::test_a", "tests/test_m.py::test_new"}, found
    data = first_part(recorded, outcomes, [("data/x.txt", b"1", b"2")], texts.get)
    assert data.tests == {"tests/test_c.py::test_c"}
    # Module code changed: every test that ran the file's code, not the whole suite.
    module = first_part(recorded, outcomes, [("pkg/m.py", old, b"X = 1\n" + old)], texts.get)
    assert module.tests >= {"tests/test_a.py::test_a", "tests/test_b.py::test_b"}
    assert "tests/test_c.py::test_c" not in module.tests
    # Red on the tip and recently failing come first whatever changed.
    red = first_part(None, {**outcomes, "tests/test_c.py::test_c": Outcome.FAILED}, [], texts.get, recent=["x::y"])
    assert red.tests == {"tests/test_c.py::test_c"} and red.by.startswith("imports and names")


def test_signals_name_the_test_files_a_change_reaches() -> None:
    texts = {
        "tests/test_strutils.py": b"from boltons import strutils\n",
        "tests/test_other.py": b"from boltons.strutils import slugify\n\ndef test_x():\n    slugify('a')\n",
        "tests/test_far.py": b"import boltons\n",
    }
    touched = [Touched("boltons/strutils.py", frozenset({"slugify"}))]
    reached = reached_files(touched, texts, texts.get)
    assert set(reached) == {"tests/test_strutils.py", "tests/test_other.py"}, reached
    assert "named after strutils" in reached["tests/test_strutils.py"]


def test_a_stop_with_no_failure_to_show_for_it_never_lands() -> None:
    """The plugin said it stopped, and no test failed (the plan's code forged the stop): the tests
    not run count as missing."""
    base = Run(TestResults("pytest stream", {"a": Outcome.PASSED, "b": Outcome.PASSED}), 0)
    order = {"first": 1, "total": 2, "stopped": "forged"}
    forged = Run(TestResults("pytest stream", {"a": Outcome.PASSED}, order=order), 0, frozenset({"b"}))
    verdict = judge(base, forged, None)
    assert not verdict.lands and verdict.incomplete and verdict.code == "ERR_CHECK_REGRESSION", verdict
    assert verdict.pending == "" and "count as missing" in verdict.notes[-1]
    interrupted = judge(base, Run(forged.results, 2, forged.not_run), None)  # pytest's exit when stopped
    assert not interrupted.lands and interrupted.code == "ERR_CHECK_REGRESSION"
    broken = Run(
        TestResults("pytest stream", {"a": Outcome.FAILED}, order={"first": 1, "total": 2}), 2, frozenset({"b"})
    )
    said = judge(base, broken, None)
    assert said.broken == ("a",) and said.not_run == ("b",) and not said.incomplete
    assert said.trailer() == "passed 0 (1 first), fixed 0, already failing 0, newly failing 1, not run 1"
