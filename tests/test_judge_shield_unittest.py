"""The sealed judge in unittest runs: the plan's code cannot rewrite unittest's assertions, its
result or its runner from inside the check's process (docs/DESIGN.md, "The runtime shield"),
through the real CLI (`apply PLAN -y --json`), a real `python -m unittest` (and pytest running the
same TestCase tests), the real sandbox.

Each plan breaks `add` and makes its test pass anyway by a different route into unittest, none
of which is an audit event: a method of TestCase replaced (by setattr with a name joined at run
time, or by type.__setattr__), TestCase's constructor giving every test an equality function
that passes, the run's own result object made to count a failure as a success, or the tip's own
test class given an assertEqual of the plan's by an import hook once the loader loaded it. Each ends
untrusted, naming what changed and the plan's line that did it. Next to them, honest plans doing
nearby things land: a test adding its own equality function in setUp, a test using
unittest.mock.patch.object on the code it tests, a plain fix.
"""

from __future__ import annotations

import sys
from pathlib import Path

import pytest
from green_calc import BROKEN, CALC, PYPROJECT, PYTEST
from helpers import (
    apply_actions,
    apply_why,
    create_action,
    git,
    head_of,
    make_repo,
    update_action,
)

from papayu_git.check import sandbox

pytestmark = pytest.mark.skipif(
    sandbox.unavailable_reason() is not None, reason=f"bwrap does not work here: {sandbox.unavailable_reason()}"
)

UNITTEST = f"{sys.executable} -m unittest discover -s tests"
TESTS = {
    "tests/test_add.py": (
        "import unittest\n\nfrom calc import add\n\n\n"
        "class AddTest(unittest.TestCase):\n    def test_add(self):\n        self.assertEqual(add(2, 3), 5)\n"
    ),
    "tests/test_mul.py": (
        "import unittest\n\nfrom calc import mul\n\n\n"
        "class MulTest(unittest.TestCase):\n    def test_mul(self):\n        self.assertEqual(mul(2, 3), 6)\n"
    ),
}
ADD = "tests/test_add.py::AddTest::test_add"
WRONG_ADD = "def add(a, b):\n    return a + b + 1\n\n\ndef mul(a, b):\n    return a * b\n"

# The method replaced on TestCase, its name joined at run time: assertEqual passes whatever it is given.
ASSERT_REPLACED = (
    "import unittest\n"
    "setattr(unittest.TestCase, 'assert' + 'Equal', lambda self, first, second, msg=None: None)\n" + WRONG_ADD
)
# No method replaced: every test is given an equality function for ints that passes.
TYPE_EQUALITY = (
    "import unittest\n"
    "_orig_init = unittest.TestCase.__init__\n"
    "def _init(self, *a, **k):\n"
    "    _orig_init(self, *a, **k)\n"
    "    self.addTypeEqualityFunc(int, lambda x, y, msg=None: None)\n"
    "unittest.TestCase.__init__ = _init\n" + WRONG_ADD
)
# Through type's own setattr, the helper every equality assertion ends in.
TYPE_SETATTR = (
    "import unittest\n"
    "type.__setattr__(unittest.TestCase, '_baseAssert' + 'Equal', lambda self, first, second, msg=None: None)\n"
    + WRONG_ADD
)
# No class touched: the run's result, found where unittest registers it for Ctrl-C, told that a
# failure is a success, from inside the function under test.
RESULT_OBJECT = (
    "import unittest.signals\n\n\n"
    "def add(a, b):\n"
    "    for result in list(unittest.signals._results):\n"
    "        vars(result)['addFail' + 'ure'] = lambda test, err, r=result: r.addSuccess(test)\n"
    "    return a + b + 1\n\n\n"
    "def mul(a, b):\n    return a * b\n"
)

# Nothing of unittest's touched: the tip's test class, found through sys.modules by an import hook
# at the next module's import (test_mul.py's), once the loader has loaded test_add.py's class.
TEST_CLASS = (
    "import sys\n\n\n"
    "class _Later:\n"
    "    def find_spec(self, name, path=None, target=None):\n"
    "        loaded = sys.modules.get('test_add')\n"
    "        if loaded is not None and hasattr(loaded, 'AddTest'):\n"
    "            setattr(loaded.AddTest, 'assert' + 'Equal', lambda self, first, second, msg=None: None)\n"
    "            sys.meta_path.remove(self)\n"
    "        return None\n\n\n"
    "sys.meta_path.insert(0, _Later())\n\n\n" + WRONG_ADD
)

# Through the runner's own defaults: the result class TextTestRunner makes, once discovery ran.
RUNNER_DEFAULTS = (
    "import unittest\n\n\n"
    "class Lenient(unittest.TextTestResult):\n"
    "    def addFailure(self, test, err):\n        self.addSuccess(test)\n\n\n"
    "_defaults = list(unittest.TextTestRunner.__init__.__defaults__)\n"
    "_defaults[5] = Lenient\n"
    "unittest.TextTestRunner.__init__.__defaults__ = tuple(_defaults)\n\n\n" + WRONG_ADD
)
# Or the runner itself, replaced where `python -m unittest` finds it once discovery ran.
RUNNER_CLASS = (
    "import unittest.runner\n\n\n"
    "class Lenient(unittest.TextTestResult):\n"
    "    def addFailure(self, test, err):\n        self.addSuccess(test)\n\n\n"
    "class Runner(unittest.runner.TextTestRunner):\n    resultclass = Lenient\n\n\n"
    "unittest.runner.TextTestRunner = Runner\n\n\n" + WRONG_ADD
)


def _repo(tmp_path: Path, check: str = UNITTEST, **files: str) -> Path:
    repo = make_repo(tmp_path / "repo", {"calc.py": CALC, "pyproject.toml": PYPROJECT, **TESTS, **files})
    git(repo, "config", "papayu.check.command", check)
    return repo


@pytest.mark.parametrize(
    ("check", "source", "named"),
    [
        (UNITTEST, ASSERT_REPLACED, "unittest.case.TestCase.assertEqual (replaced, by calc.py:2)"),
        (UNITTEST, TYPE_EQUALITY, "unittest.case.TestCase.__init__ (replaced, by calc.py:3)"),
        (UNITTEST, TYPE_SETATTR, "unittest.case.TestCase._baseAssertEqual (replaced, by calc.py:2)"),
        (UNITTEST, RESULT_OBJECT, "the run's result's addFailure (replaced on the object, by calc.py:6)"),
        (UNITTEST, TEST_CLASS, "test_add.AddTest.assertEqual (added in front of the inherited one, by calc.py:8)"),
        (
            UNITTEST,
            RUNNER_DEFAULTS,
            "calc.py:11: assigns the runner's function unittest.runner.TextTestRunner.__init__",
        ),
        (UNITTEST, RUNNER_CLASS, "unittest.runner.TextTestRunner (replaced, by calc.py)"),
        (f"{PYTEST} tests", ASSERT_REPLACED, "unittest.case.TestCase.assertEqual (replaced, by calc.py:2)"),
        (
            f"{PYTEST} tests",
            TEST_CLASS,
            "test_add.AddTest.assertEqual (added in front of the inherited one, by calc.py:8)",
        ),
    ],
    ids=[
        "setattr-assertEqual",
        "init-type-equality",
        "type-setattr",
        "result-object",
        "test-class",
        "runner-defaults",
        "runner-class",
        "pytest-setattr-assertEqual",
        "pytest-test-class",
    ],
)
def test_code_rewriting_unittest_from_inside_is_named_and_not_trusted(
    tmp_path: Path, check: str, source: str, named: str
) -> None:
    repo = _repo(tmp_path, check)
    head = head_of(repo)
    data = apply_actions(repo, "inside", [update_action("calc.py", source)])
    assert (data["state"], (data["error"] or {}).get("code")) == ("rolled_back", "ERR_CHECK_RESULTS_UNTRUSTED"), (
        apply_why(data)
    )
    assert "papayu's shield" in data["error"]["reason"] and named in data["error"]["reason"], data["error"]
    assert head_of(repo) == head and git(repo, "status", "--porcelain") == ""
    assert (repo / "calc.py").read_text() == CALC
    if check == UNITTEST and source is not RUNNER_DEFAULTS:  # green by unittest: only the shield kept it out
        assert data["check"]["tests"]["source"] == "unittest stream", apply_why(data)
        assert data["check"]["tests"]["counts"]["failed"] == 0, apply_why(data)


OWN_EQUALITY = (
    "import unittest\n\nfrom calc import add\n\n\n"
    "class Money:\n    def __init__(self, cents):\n        self.cents = cents\n\n\n"
    "class MoneyTest(unittest.TestCase):\n"
    "    def setUp(self):\n        self.addTypeEqualityFunc(Money, self.assertMoneyEqual)\n\n"
    "    def assertMoneyEqual(self, first, second, msg=None):\n"
    "        if first.cents != second.cents:\n            raise self.failureException(msg or 'amounts differ')\n\n"
    "    def test_sum(self):\n        self.assertEqual(Money(add(2, 3)), Money(5))\n"
)
# Every sys.path walker lists papayu's plugin directory on the way (markdown loads its extensions so).
ENTRY_POINTS = (
    "import unittest\nfrom importlib import metadata\n\nfrom calc import add\n\n\n"
    "class PluginsTest(unittest.TestCase):\n"
    "    def test_no_plugins(self):\n"
    "        self.assertEqual(list(metadata.entry_points(group='calc.plugins')), [])\n"
    "        self.assertEqual(add(1, 1), 2)\n"
)
PATCHED = (
    "import unittest\nfrom unittest import mock\n\nimport calc\n\n\n"
    "class PatchTest(unittest.TestCase):\n"
    "    @mock.patch.object(calc, 'mul', return_value=42)\n"
    "    def test_mul_patched(self, fake):\n"
    "        self.assertEqual(calc.mul(2, 3), 42)\n        fake.assert_called_once_with(2, 3)\n\n"
    "    def test_add_patched(self):\n"
    "        with mock.patch.object(calc, 'add', lambda a, b: 0):\n            self.assertEqual(calc.add(1, 1), 0)\n"
)


@pytest.mark.parametrize(
    ("path", "test", "new"),
    [
        ("tests/test_money.py", OWN_EQUALITY, 1),
        ("tests/test_patch.py", PATCHED, 2),
        ("tests/test_eps.py", ENTRY_POINTS, 1),
    ],
    ids=["own-equality-in-setUp", "mock-patch-object", "entry-points"],
)
def test_honest_unittest_tests_near_the_watched_path_land(tmp_path: Path, path: str, test: str, new: int) -> None:
    """addTypeEqualityFunc on the test's own instance, and mock's patches undone after their
    test, leave unittest's reporting path as it was; listing the directories on sys.path (papayu's
    plugin directory among them) is no reach into papayu's files."""
    repo = _repo(tmp_path)
    data = apply_actions(repo, "honest", [create_action(path, test), update_action("calc.py", CALC + "\n# tidied\n")])
    assert (data["state"], data["_rc"]) == ("landed", 0), apply_why(data)
    assert head_of(repo) == data["commit"]
    assert data["check"]["tests"]["source"] == "unittest stream", apply_why(data)
    assert data["check"]["verdict"]["new_passing"] == new and not data["check"]["tests"]["errors"], apply_why(data)


def test_a_plain_fix_of_a_unittest_project_lands(tmp_path: Path) -> None:
    repo = _repo(tmp_path, **{"calc.py": BROKEN})
    data = apply_actions(repo, "fix", [update_action("calc.py", CALC)])
    assert (data["state"], data["_rc"]) == ("landed", 0), apply_why(data)
    assert data["check"]["verdict"]["fixed"] == [ADD], apply_why(data)
    assert not data["check"]["tests"]["errors"], apply_why(data)
