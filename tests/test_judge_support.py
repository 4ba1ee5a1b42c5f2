"""Judges by what the tests use (judge_support.py, judges.py), through the real CLI.

Test support written as code (an assertion helper inside the package, a fixture module loaded
through `pytest_plugins`, an `assert_*` helper module) is taken from the tip in the regression
run, whatever its name: a plan that weakens it along with the code stops at review, the file
named. A helper the package itself uses stays code and its fix lands; so does a fix to a file the
check command only reads as an operand (`grep`, `python -m doctest`, `python -m py_compile`):
there the judge is the program.
"""

from __future__ import annotations

import sys
from pathlib import Path

import pytest
from helpers import apply_actions, apply_why, git, head_of, make_repo, update_action

from papayu_git.check import sandbox

pytestmark = pytest.mark.skipif(
    sandbox.unavailable_reason() is not None, reason=f"bwrap does not work here: {sandbox.unavailable_reason()}"
)

PYTEST = f"{sys.executable} -m pytest -q -p no:cacheprovider"
CALC = "def add(a, b):\n    return a + b\n"
BROKEN = CALC.replace("a + b", "a - b")
PYPROJECT = "[tool.pytest.ini_options]\npythonpath = ['.']\n"


def _package(tmp_path: Path, check: str, **files: str) -> Path:
    base = {"pkg/__init__.py": "", "pkg/calc.py": CALC, "pyproject.toml": PYPROJECT, "tests/__init__.py": ""}
    repo = make_repo(tmp_path / "repo", {**base, **files})
    git(repo, "config", "papayu.checkCommand", check)
    return repo


# Three spellings of a judge written as a module of the package: none is in a test directory,
# none is named like a test file, and last round each was "code".
HELPER = {
    "pkg/testing.py": "def expected_sum():\n    return 5\n",
    "tests/test_calc.py": (
        "from pkg.calc import add\nfrom pkg.testing import expected_sum\n\n\n"
        "def test_add():\n    assert add(2, 3) == expected_sum()\n"
    ),
}
FIXTURES = {
    "pkg/expectations.py": "import pytest\n\n\n@pytest.fixture\ndef expected():\n    return 5\n",
    "conftest.py": "pytest_plugins = ['pkg.expectations']\n",
    "tests/test_calc.py": "from pkg.calc import add\n\n\ndef test_add(expected):\n    assert add(2, 3) == expected\n",
}
ASSERTER = {
    "pkg/verify.py": "from pkg.calc import add\n\n\ndef assert_sum(a, b, want):\n    assert add(a, b) == want\n",
    "tests/test_calc.py": "from pkg.verify import assert_sum\n\n\ndef test_add():\n    assert_sum(2, 3, 5)\n",
}


@pytest.mark.parametrize(
    ("files", "judge", "weakened"),
    [
        (HELPER, "pkg/testing.py", "def expected_sum():\n    return -1\n"),
        (FIXTURES, "pkg/expectations.py", "import pytest\n\n\n@pytest.fixture\ndef expected():\n    return -1\n"),
        (ASSERTER, "pkg/verify.py", "def assert_sum(a, b, want):\n    pass\n"),
    ],
    ids=["helper", "pytest_plugins-fixture", "assert-helper"],
)
def test_a_judge_written_as_a_package_module_is_taken_from_the_tip(
    tmp_path: Path, files: dict[str, str], judge: str, weakened: str
) -> None:
    repo = _package(tmp_path, f"{PYTEST} tests", **files)
    head = head_of(repo)
    data = apply_actions(repo, "weaken", [update_action("pkg/calc.py", BROKEN), update_action(judge, weakened)])
    assert (data["state"], data["error"]["code"]) == ("review", "ERR_JUDGE_EDITS_HELD"), apply_why(data)
    assert judge in data["error"]["reason"] and head_of(repo) == head
    verdict = data["check"]["verdict"]
    assert verdict["restored"] == [judge] and verdict["explained"] == ["tests/test_calc.py::test_add"], apply_why(data)


def test_a_helper_the_package_itself_uses_stays_code_and_its_fix_lands(tmp_path: Path) -> None:
    """`pkg/testing.py` is also the package's own (its `__init__` exports it): a fix to it is
    judged by the tip's tests like any code."""
    files = {
        "pkg/__init__.py": "from pkg.testing import double\n",
        "pkg/testing.py": "import pytest\n\n\ndef double(x):\n    return x + x + 1\n",
        "tests/test_double.py": "from pkg import double\n\n\ndef test_double():\n    assert double(2) == 4\n",
    }
    repo = _package(tmp_path, f"{PYTEST} tests", **files)
    data = apply_actions(
        repo, "fix", [update_action("pkg/testing.py", "import pytest\n\n\ndef double(x):\n    return x + x\n")]
    )
    assert (data["state"], data["_rc"]) == ("landed", 0), apply_why(data)
    assert data["check"]["verdict"]["fixed"] == ["tests/test_double.py::test_double"]
    assert data["check"]["verdict"]["restored"] == []


DOCTESTED = 'def add(a, b):\n    """\n    >>> add(2, 3)\n    5\n    """\n    return a - b\n'


@pytest.mark.parametrize(
    ("check", "broken", "fixed"),
    [
        ("grep -q 'a + b' calc.py", BROKEN, CALC),
        (f"{sys.executable} -m doctest calc.py", DOCTESTED, DOCTESTED.replace("a - b", "a + b")),
        (f"{sys.executable} -m py_compile calc.py", "def add(a, b)\n    return a + b\n", CALC),
    ],
    ids=["grep", "doctest", "py_compile"],
)
def test_a_fix_to_a_file_the_check_command_reads_as_an_operand_lands(
    tmp_path: Path, check: str, broken: str, fixed: str
) -> None:
    """The judge there is the program (grep, doctest, py_compile), not the file it reads: the
    file is the code it judges. Last round every such fix was held (ERR_JUDGE_EDITS_HELD)."""
    repo = make_repo(tmp_path / "repo", {"calc.py": broken})
    git(repo, "config", "papayu.checkCommand", check)
    data = apply_actions(repo, "fix", [update_action("calc.py", fixed)])
    assert (data["state"], data["_rc"]) == ("landed", 0), apply_why(data)
    assert (repo / "calc.py").read_text() == fixed and data["check"]["verdict"]["restored"] == []


def test_the_script_the_command_runs_still_judges(tmp_path: Path) -> None:
    """`sh ci/check.sh`: the script is the program, taken from the tip."""
    repo = make_repo(tmp_path / "repo", {"calc.py": CALC, "ci/check.sh": "grep -q 'a + b' calc.py\n"})
    git(repo, "config", "papayu.checkCommand", "sh ci/check.sh")
    head = head_of(repo)
    data = apply_actions(repo, "cheat", [update_action("calc.py", BROKEN), update_action("ci/check.sh", "exit 0\n")])
    assert data["state"] != "landed" and head_of(repo) == head, apply_why(data)
    assert data["check"]["verdict"]["restored"] == ["ci/check.sh"], apply_why(data)
