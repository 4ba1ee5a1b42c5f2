"""Fail first where the order is wrong (docs/DESIGN.md, "Fail first"): inputs a record of what each
test read cannot see, or can be made not to see, each used by a plan that breaks a test through
it. The order puts that test in the rest, not first; the rest still runs before anything lands, so
each one costs time and never correctness: the broken test runs, fails, and the plan is rolled
back. Through the real CLI and the real sandbox, recorded by Python 3.12's sys.monitoring where
this machine has one (else ordered by the tests' names and imports, which these inputs fool too).
"""

from __future__ import annotations

import sys
from pathlib import Path
from typing import Any

import pytest
from helpers import apply_json, git, make_repo, papayu_dir, write_plan
from test_check_select import recording_python, venv

from papayu_git.check import sandbox

pytestmark = pytest.mark.skipif(
    sandbox.unavailable_reason() is not None, reason=f"bwrap does not work here: {sandbox.unavailable_reason()}"
)

BASE = {
    "pkg/__init__.py": "",
    "pyproject.toml": "[tool.pytest.ini_options]\npythonpath = ['.']\n",
    ".gitignore": ".venv/\n",
    **{f"tests/test_filler_{i:02d}.py": f"def test_filler_{i}():\n    assert {i} + 1 == {i + 1}\n" for i in range(8)},
}


def _update(path: str, content: str) -> dict[str, str]:
    return {"kind": "UPDATE_FILE", "path": path, "content": content}


# name -> (the tip's files, the plan's actions, the test the plan breaks)
CASES: dict[str, tuple[dict[str, str], list[dict[str, str]], str]] = {
    # The test imports pkg/alias.py, a symbolic link to pkg/real.py: the record names the code it
    # ran by the link's path, the plan edits the file.
    "imported-through-a-symlink": (
        {
            "pkg/real.py": "def value():\n    return 1\n",
            "tests/test_alias.py": ("from pkg.alias import value\n\n\ndef test_alias():\n    assert value() == 1\n"),
        },
        [_update("pkg/real.py", "def value():\n    return 2\n")],
        "tests/test_alias.py::test_alias",
    ),
    # The test reads the source as text: an open of a .py file reads like an import, not data.
    "source-read-as-text": (
        {
            "pkg/calc.py": "def add(a, b):\n    return a + b\n",
            "tests/test_source.py": ("def test_source():\n    assert 'a + b' in open('pkg/calc.py').read()\n"),
        },
        [_update("pkg/calc.py", "def add(a, b):\n    return b + a\n")],
        "tests/test_source.py::test_source",
    ),
    # The test reads a docstring as data and never calls the function.
    "docstring-read-as-data": (
        {
            "pkg/calc.py": 'def add(a, b):\n    """Adds two numbers."""\n    return a + b\n',
            "tests/test_doc.py": "from pkg import calc\n\n\ndef test_doc():\n    assert calc.add.__doc__.startswith('Adds')\n",
        },
        [_update("pkg/calc.py", 'def add(a, b):\n    """Sums two numbers."""\n    return a + b\n')],
        "tests/test_doc.py::test_doc",
    ),
    # An earlier test fills a cache; a later one reads it without running the code behind it.
    "value-an-earlier-test-cached": (
        {
            "pkg/table.py": (
                "import functools\n\n\ndef compute():\n    return 5\n\n\n@functools.lru_cache\ndef table():\n"
                "    return compute()\n"
            ),
            "tests/test_1_warm.py": "from pkg.table import table\n\n\ndef test_warm():\n    table()\n",
            "tests/test_2_reads.py": "from pkg.table import table\n\n\ndef test_reads():\n    assert table() == 5\n",
        },
        [
            _update(
                "pkg/table.py",
                (
                    "import functools\n\n\ndef compute():\n    return 6\n\n\n@functools.lru_cache\ndef table():\n"
                    "    return compute()\n"
                ),
            )
        ],
        "tests/test_2_reads.py::test_reads",
    ),
    # A thread started at import computes the value the test reads: no test ran that code.
    "calls-in-a-thread-started-at-import": (
        {
            "pkg/numbers.py": "def compute():\n    return 5\n",
            "pkg/worker.py": (
                "import threading\n\nfrom pkg.numbers import compute\n\nRESULT = []\n"
                "_t = threading.Thread(target=lambda: RESULT.append(compute()))\n_t.start()\n_t.join()\n"
            ),
            "tests/test_worker.py": "from pkg.worker import RESULT\n\n\ndef test_worker():\n    assert RESULT == [5]\n",
        },
        [_update("pkg/numbers.py", "def compute():\n    return 6\n")],
        "tests/test_worker.py::test_worker",
    ),
    # A new function shadows a name the module star-imports: to a syntax tree, a new name only.
    "new-function-shadowing-a-star-import": (
        {
            "pkg/helpers.py": "def scale(x):\n    return x * 2\n",
            "pkg/api.py": "from pkg.helpers import *  # noqa\n\n\ndef double(x):\n    return scale(x)\n",
            "tests/test_double.py": "from pkg.api import double\n\n\ndef test_double():\n    assert double(2) == 4\n",
        },
        [
            _update(
                "pkg/api.py",
                (
                    "from pkg.helpers import *  # noqa\n\n\ndef double(x):\n    return scale(x)\n\n\n"
                    "def scale(x):\n    return x * 3\n"
                ),
            )
        ],
        "tests/test_double.py::test_double",
    ),
    # The tip's conftest switches the recorder off from inside: the record says no test ran mul.
    "recorder-switched-off-from-inside": (
        {
            "tests/conftest.py": (
                "import sys\n\nmonitoring = getattr(sys, 'monitoring', None)\nif monitoring is not None:\n"
                "    for tool in range(6):\n        if monitoring.get_tool(tool):\n"
                "            monitoring.set_events(tool, 0)\n"
            ),
            "pkg/calc.py": "def mul(a, b):\n    return a * b\n",
            "tests/test_mul.py": "from pkg.calc import mul\n\n\ndef test_mul():\n    assert mul(2, 3) == 6\n",
        },
        [_update("pkg/calc.py", "def mul(a, b):\n    return a + b\n")],
        "tests/test_mul.py::test_mul",
    ),
}


@pytest.fixture(scope="module")
def python() -> str | None:
    return recording_python()


@pytest.mark.parametrize("case", list(CASES))
def test_an_input_the_order_cannot_see_costs_time_not_correctness(
    tmp_path: Path, case: str, python: str | None
) -> None:
    files, actions, broken = CASES[case]
    repo = make_repo(tmp_path / "repo", {**BASE, **files})
    if case == "imported-through-a-symlink":
        (repo / "pkg/alias.py").symlink_to("real.py")
        git(repo, "add", "pkg/alias.py")
        git(repo, "commit", "-qm", "alias")
    check = venv(repo, python) if python else sys.executable
    git(repo, "config", "papayu.check.command", f"{check} -m pytest -q -p no:cacheprovider tests")
    head = git(repo, "rev-parse", "main").strip()
    plan = write_plan(repo.parent, actions, summary=case, name=f"{case}.json")
    data: dict[str, Any] = apply_json(repo, plan, "-y", env={"PAPAYU_PROTOCOL_VERSION": "1"})
    # Rolled back, naming the broken test, which ran on the plan's code before anything landed.
    assert (data["state"], data["error"]["code"]) == ("rolled_back", "ERR_CHECK_REGRESSION"), data
    verdict = data["check"]["verdict"]
    assert verdict["broken"] == [broken] and verdict["not_run"] == [], verdict
    assert broken in data["check"]["tests"]["failing"]
    assert git(repo, "rev-parse", "main").strip() == head and git(repo, "status", "--porcelain") == ""
    if python is not None:  # the record was made, and it did not place the broken test first
        assert list((papayu_dir(repo) / "base").glob("*.inputs.jsonl")), "no record was made"
        [plan_run] = [r for r in data["check"]["runs"] if r["run"] == "plan"]
        assert not plan_run["stopped"], plan_run  # it was not among the first: found in the rest
