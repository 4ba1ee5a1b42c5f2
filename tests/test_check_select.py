"""The selective check (papayu.check.select): each input class a test can depend on, changed by a
plan, makes the test that read it run again; a test that read nothing the plan changed keeps the
tip's pass. Through the real CLI (`apply PLAN -y --json`), real pytest in the real sandbox, and
papayu's plugin recording what each test of the base run read.
"""

from __future__ import annotations

import json
import sys
from pathlib import Path
from typing import Any

import pytest
from helpers import apply_json, git, make_repo, papayu_dir, write_plan

from papayu_git.check import sandbox
from papayu_git.check.selection.changes import python_change
from papayu_git.check.selection.inputs import read_inputs
from papayu_git.check.selection.select import select

pytestmark = pytest.mark.skipif(
    sandbox.unavailable_reason() is not None, reason=f"bwrap does not work here: {sandbox.unavailable_reason()}"
)

PYTEST = f"{sys.executable} -m pytest -q -p no:cacheprovider tests"
CALC = "def add(a, b):\n    return a + b\n\n\ndef mul(a, b):\n    return a * b\n"
FILLERS = 24  # tests that read nothing of the plans below


def _files() -> dict[str, str | bytes]:
    files: dict[str, str | bytes] = {
        "pkg/__init__.py": "",
        "pkg/calc.py": CALC,
        "pyproject.toml": "[tool.pytest.ini_options]\npythonpath = ['.']\n",
        "uv.lock": "version = 1\n",
        "tests/conftest.py": "",
        "tests/data.json": '{"x": 1}\n',
        "tests/test_add.py": "from pkg.calc import add\n\n\ndef test_add():\n    assert add(2, 3) == 5\n",
        "tests/test_mul.py": "from pkg.calc import mul\n\n\ndef test_mul():\n    assert mul(2, 3) == 6\n",
        "tests/test_data.py": "import json\n\n\ndef test_data():\n    assert json.load(open('tests/data.json'))['x'] == 1\n",
        "tests/test_env.py": "import os\n\n\ndef test_env():\n    assert os.environ.get('CALC_MODE', 'fast') in ('fast', 'slow')\n",
    }
    for i in range(FILLERS):
        files[f"tests/test_filler_{i:02d}.py"] = f"def test_filler_{i}():\n    assert {i} + 1 == {i + 1}\n"
    return files


@pytest.fixture
def repo(tmp_path: Path) -> Path:
    repo = make_repo(tmp_path / "repo", _files())
    git(repo, "config", "papayu.check.command", PYTEST)
    git(repo, "config", "papayu.check.select", "on")
    return repo


def _apply(repo: Path, name: str, actions: list[dict[str, str]], env: dict[str, str] | None = None) -> dict[str, Any]:
    plan = write_plan(repo.parent, actions, summary=name, name=f"{name}.json")
    data = apply_json(repo, plan, "-y", "--review", env={"PAPAYU_PROTOCOL_VERSION": "1", **(env or {})})
    assert data.get("check"), data
    return data


def _write(path: str, content: str) -> dict[str, str]:
    return {"kind": "UPDATE_FILE", "path": path, "content": content}


def _ran(log: str) -> str:
    return Path(log).read_text()


def test_an_edited_function_reruns_the_tests_that_ran_it_and_reuses_the_rest(repo: Path) -> None:
    data = _apply(repo, "mul", [_write("pkg/calc.py", CALC.replace("a * b", "b * a"))])
    chosen = data["check"]["selection"]
    assert chosen["mode"] == "on" and not chosen["full"], chosen
    log = _ran(data["check"]["log"])
    assert "test_mul.py" in log or chosen["sampled"], log
    verdict = data["check"]["verdict"]
    assert verdict["reused"] >= FILLERS - 3 and verdict["passed"] == FILLERS + 4, verdict  # every test counted
    assert f"({verdict['reused']} reused)" in verdict["trailer"]
    assert "reused: " in " ".join(verdict["lines"])
    # The base recorded what each test ran: test_mul ran mul, test_add did not.
    [record] = list((papayu_dir(repo) / "base").glob("*.inputs.jsonl"))
    recorded = read_inputs(record.read_bytes())
    assert ("pkg/calc.py", "mul") in recorded.tests["tests/test_mul.py::test_mul"].units
    assert ("pkg/calc.py", "mul") not in recorded.tests["tests/test_add.py::test_add"].units
    again = select(
        recorded,
        {t: "passed" for t in recorded.tests},
        [("pkg/calc.py", CALC.encode(), CALC.replace("a * b", "b * a").encode())],
        seed="x",
        sample=0,
    )  # type: ignore[misc]
    assert again.run == {"tests/test_mul.py::test_mul"}, again


def test_a_broken_function_is_caught_by_the_tests_that_ran_it(repo: Path) -> None:
    data = _apply(repo, "broken", [_write("pkg/calc.py", CALC.replace("a * b", "a + b"))])
    assert data["state"] == "rolled_back" and data["error"]["code"] == "ERR_CHECK_REGRESSION", data["error"]
    assert data["check"]["verdict"]["broken"] == ["tests/test_mul.py::test_mul"]
    assert data["check"]["selection"]["reused"] > 0  # not a full run


def test_a_data_file_it_opens_reruns_the_test_in_the_plans_own_run(repo: Path) -> None:
    data = _apply(repo, "data", [_write("tests/data.json", '{"x": 2}\n')])
    own = data["check"]["selection"]["own"]
    assert own["mode"] == "on" and not own["full"] and own["why"] == {"tests/data.json": "1 tests read it"}, own
    assert data["check"]["verdict"]["new_failing"] == ["tests/test_data.py::test_data"], data["check"]["verdict"]


@pytest.mark.parametrize(
    ("path", "content"),
    [
        ("pyproject.toml", "[tool.pytest.ini_options]\npythonpath = ['.']\nmarkers = ['slow']\n"),
        ("uv.lock", "version = 2\n"),
        ("tests/conftest.py", "import pytest\n"),
    ],
    ids=["config", "lockfile", "conftest"],
)
def test_what_every_test_may_read_reruns_every_test(repo: Path, path: str, content: str) -> None:
    data = _apply(repo, path.replace("/", "-"), [_write(path, content)])
    own = data["check"]["selection"]["own"]
    assert own["full"].startswith(path), own
    assert f"{FILLERS + 4} passed" in Path(data["check"]["own_log"]).read_text()


def test_an_environment_value_is_part_of_the_base_so_a_change_reruns_every_test(repo: Path) -> None:
    git(repo, "config", "papayu.check.env", "CALC_MODE")
    first = _apply(repo, "env1", [_write("pkg/calc.py", CALC + "# 1\n")], env={"CALC_MODE": "fast"})
    second = _apply(repo, "env2", [_write("pkg/calc.py", CALC + "# 2\n")], env={"CALC_MODE": "slow"})
    bases = sorted(p.name for p in (papayu_dir(repo) / "base").glob("*.json"))
    assert len(bases) >= 2, bases  # the changed value made a new base: every test ran again there
    assert first["check"]["selection"]["reused"] > 0 and second["check"]["selection"]["reused"] > 0
    logs = sorted((papayu_dir(repo) / "checks").glob("base-*.log"))
    assert sum("test_env" in p.read_text() or f"{FILLERS + 4} passed" in p.read_text() for p in logs) >= 2


def test_observe_runs_every_test_and_says_what_selection_would_have_missed(repo: Path) -> None:
    git(repo, "config", "papayu.check.select", "observe")
    data = _apply(repo, "observe", [_write("pkg/calc.py", CALC.replace("a * b", "b * a"))])
    chosen = data["check"]["selection"]
    assert chosen["mode"] == "observe" and chosen["missed"] == [] and chosen["reused"] > 0, chosen
    assert f"{FILLERS + 4} passed" in Path(data["check"]["log"]).read_text()
    assert data["check"]["verdict"]["reused"] == 0
    stats = json.loads(__import__("helpers").papayu("stats", "--json", cwd=repo).stdout)
    assert stats["selection"]["observed_runs"] >= 1 and stats["selection"]["missed"] == 0, stats["selection"]


def test_off_records_nothing_and_runs_every_test(repo: Path) -> None:
    git(repo, "config", "papayu.check.select", "off")
    data = _apply(repo, "off", [_write("pkg/calc.py", CALC + "# off\n")])
    assert data["check"]["selection"] is None
    assert not list((papayu_dir(repo) / "base").glob("*.inputs.jsonl"))


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
    assert python_change(
        old, old.replace(b"        return 1\n", b"        return 1\n\n    def n(self):\n        return 2\n")
    ).module  # may override
    assert python_change(old, None).module and python_change(b"def (", old).module
