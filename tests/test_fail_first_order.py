"""Fail first where the suite's own order matters (docs/DESIGN.md, "Fail first"): a test that
pollutes shared state runs first because the plan reaches it, and a test that ran before it in
the suite's own order fails after it. The failing test passes alone on the plan's tree, so the
failure is the order's: the suite runs again in its own order, and that run is judged. A test
the plan really breaks fails alone too, and rejects the plan as before. Through the real CLI and
the real sandbox.
"""

from __future__ import annotations

import sys
from pathlib import Path
from typing import Any

import pytest
from helpers import apply_json, git, make_repo, write_plan

from papayu_git.check import sandbox

pytestmark = pytest.mark.skipif(
    sandbox.unavailable_reason() is not None, reason=f"bwrap does not work here: {sandbox.unavailable_reason()}"
)

CALC = "def add(a, b):\n    return a + b\n"

# name -> files where tests/test_z_calc.py (reached by a change to pkg/calc.py) leaves behind
# what tests/test_a_mode.py, earlier in the suite's own order, does not expect.
POLLUTERS: dict[str, dict[str, str]] = {
    "module-state": {
        "pkg/config.py": "SETTINGS = {'mode': 'default'}\n",
        "tests/test_a_mode.py": (
            "from pkg.config import SETTINGS\n\n\ndef test_mode():\n    assert SETTINGS['mode'] == 'default'\n"
        ),
        "tests/test_z_calc.py": (
            "from pkg.calc import add\nfrom pkg.config import SETTINGS\n\n\n"
            "def test_add():\n    SETTINGS['mode'] = 'changed'\n    assert add(2, 3) == 5\n"
        ),
    },
    "environment-variable": {
        "tests/test_a_mode.py": "import os\n\n\ndef test_mode():\n    assert 'CALC_MODE' not in os.environ\n",
        "tests/test_z_calc.py": (
            "import os\n\nfrom pkg.calc import add\n\n\n"
            "def test_add():\n    os.environ['CALC_MODE'] = 'fast'\n    assert add(2, 3) == 5\n"
        ),
    },
}


def _repo(tmp_path: Path, polluter: str) -> Path:
    files = {
        "pkg/__init__.py": "",
        "pkg/calc.py": CALC,
        "pyproject.toml": "[tool.pytest.ini_options]\npythonpath = ['.']\n",
        **{f"tests/test_m_filler_{i}.py": f"def test_filler_{i}():\n    assert {i} == {i}\n" for i in range(4)},
        **POLLUTERS[polluter],
    }
    repo = make_repo(tmp_path / "repo", files)
    git(repo, "config", "papayu.check.command", f"{sys.executable} -m pytest -q -p no:cacheprovider tests")
    return repo


def _apply(repo: Path, name: str, calc: str) -> dict[str, Any]:
    plan = write_plan(repo.parent, [{"kind": "UPDATE_FILE", "path": "pkg/calc.py", "content": calc}], name=name)
    return apply_json(repo, plan, "-y", env={"PAPAYU_PROTOCOL_VERSION": "1"})


@pytest.mark.parametrize("polluter", list(POLLUTERS))
def test_a_failure_the_fail_first_order_made_does_not_reject_the_plan(tmp_path: Path, polluter: str) -> None:
    repo = _repo(tmp_path, polluter)
    data = _apply(repo, "commuted.json", "def add(a, b):\n    return b + a\n")
    runs = data["check"]["runs"]
    assert (data["state"], data["_rc"]) == ("landed", 0), (data.get("error"), runs)
    assert git(repo, "rev-parse", "main").strip() == data["commit"]
    # The reordered run failed test_mode; alone on the plan's tree it passed; the whole suite in
    # its own order is what landed the plan, and each of those runs is named with why it ran.
    said = [(r["run"], r["why"]) for r in runs]
    assert any(run == "plan again" and r.get("passed") == 1 for (run, _), r in zip(said, runs, strict=True)), said
    own = [why for run, why in said if "own order" in why]
    assert own and "pass alone on the plan's tree" in own[-1], said
    verdict = data["check"]["verdict"]
    assert verdict["broken"] == [] and verdict["passed"] == 6, verdict


@pytest.mark.parametrize("polluter", list(POLLUTERS))
def test_a_test_the_plan_breaks_fails_alone_too_and_rejects_it(tmp_path: Path, polluter: str) -> None:
    repo = _repo(tmp_path, polluter)
    head = git(repo, "rev-parse", "main").strip()
    data = _apply(repo, "broken.json", "def add(a, b):\n    return a - b\n")
    assert (data["state"], data["error"]["code"]) == ("rolled_back", "ERR_CHECK_REGRESSION"), data
    assert data["check"]["verdict"]["broken"] == ["tests/test_z_calc.py::test_add"], data["check"]["verdict"]
    # test_add failed in the first part, which keeps the suite's order: never the order's doing,
    # so neither an alone run nor an own-order run was paid for.
    assert [r["run"] for r in data["check"]["runs"] if r["run"] == "plan again" or "own order" in r["why"]] == []
    assert git(repo, "rev-parse", "main").strip() == head and git(repo, "status", "--porcelain") == ""
