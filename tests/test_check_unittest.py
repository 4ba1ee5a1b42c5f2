"""unittest-only projects through the real CLI (`apply PLAN -y --json`) and the real sandbox: the
verdict is per test, named with pytest's ids, whatever runs unittest.

The project reproduces the layout of Python-Markdown (verified there: 1088 tests read, a plan
breaking `parseBoolValue` rolled back naming exactly `tests/test_apis.py::TestConfigParsing::
testBooleansParsing`, a comment-only plan landed; docs/BENCHMARKS.md): a package at the root, a
`tests` package of TestCase classes run by `python -m unittest discover tests`, one of them
turning warnings into errors at import, which is why pytest is no way out there. The same
project is then run by a `runtests.py` in Django's way (its own runner and result class, a
subclass of unittest's), which papayu has no case for.
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

UTIL = '''\
"""Helpers of the markup package."""


def parse_bool(value, fail_on_errors=True):
    """True or False from a string; None (or ValueError) when it is neither."""
    if not isinstance(value, str):
        return bool(value)
    if value.lower() in ("true", "yes", "y", "on", "1"):
        return True
    if value.lower() in ("false", "no", "n", "off", "0", "none"):
        return False
    if fail_on_errors:
        raise ValueError(f"Cannot parse bool value: {value!r}")
    return None


def escape(text):
    """HTML escape a string of code."""
    return text.replace("&", "&amp;").replace("<", "&lt;").replace(">", "&gt;")
'''

TEST_APIS = """\
import unittest

from markup import util


class TestConfigParsing(unittest.TestCase):
    def assertParses(self, value, result):
        self.assertIs(util.parse_bool(value, False), result)

    def testBooleansParsing(self):
        self.assertParses(True, True)
        self.assertParses("novalue", None)
        self.assertParses("yES", True)
        self.assertParses("FALSE", False)

    def testInvalidBooleansParsing(self):
        self.assertRaises(ValueError, util.parse_bool, "novalue")


class TestEscape(unittest.TestCase):
    def testAmpersand(self):
        self.assertEqual(util.escape("a & b"), "a &amp; b")

    def testTags(self):
        for text, want in (("<b>", "&lt;b&gt;"), ("x > y", "x &gt; y")):
            with self.subTest(text=text):
                self.assertEqual(util.escape(text), want)
"""

# Warnings are errors in this module, as in the real project's tests: pytest collecting it with
# another module's deprecation warning in flight fails, unittest does not care.
TEST_STRICT = """\
import unittest
import warnings

warnings.simplefilter("error")

from markup import util  # noqa: E402


class TestStrict(unittest.TestCase):
    def testEmpty(self):
        self.assertEqual(util.escape(""), "")
"""

# Django's way: a runner of its own with a result class of its own, extending unittest's.
RUNTESTS = """\
import sys
import unittest


class VerboseResult(unittest.TextTestResult):
    def addSuccess(self, test):
        super().addSuccess(test)


class Runner(unittest.TextTestRunner):
    resultclass = VerboseResult


if __name__ == "__main__":
    suite = unittest.defaultTestLoader.discover("tests", top_level_dir=".")
    sys.exit(not Runner(verbosity=2).run(suite).wasSuccessful())
"""

IDS = {
    "bool": "tests/test_apis.py::TestConfigParsing::testBooleansParsing",
    "invalid": "tests/test_apis.py::TestConfigParsing::testInvalidBooleansParsing",
    "amp": "tests/test_apis.py::TestEscape::testAmpersand",
    "tags": "tests/test_apis.py::TestEscape::testTags",
    "strict": "tests/test_strict.py::TestStrict::testEmpty",
}


def _repo(tmp_path: Path, check: str) -> Path:
    files: dict[str, str | bytes] = {
        "markup/__init__.py": "",
        "markup/util.py": UTIL,
        "tests/__init__.py": "",
        "tests/test_apis.py": TEST_APIS,
        "tests/test_strict.py": TEST_STRICT,
        "runtests.py": RUNTESTS,
    }
    repo = make_repo(tmp_path / "repo", files)
    git(repo, "config", "papayu.check.command", check)
    return repo


def _apply(repo: Path, name: str, old: str, new: str) -> dict[str, Any]:
    text = (repo / "markup/util.py").read_text()
    assert old in text
    actions = [{"kind": "UPDATE_FILE", "path": "markup/util.py", "content": text.replace(old, new, 1)}]
    plan = write_plan(repo.parent, actions, summary=name, name=f"{name}.json")
    return apply_json(repo, plan, "-y", env={"PAPAYU_PROTOCOL_VERSION": "1"})


@pytest.mark.parametrize(
    "check",
    [f"{sys.executable} -m unittest discover tests", f"{sys.executable} runtests.py"],
    ids=["unittest discover", "a runner of its own"],
)
def test_a_unittest_project_is_judged_per_test(tmp_path: Path, check: str) -> None:
    repo = _repo(tmp_path, check)
    tip = git(repo, "rev-parse", "HEAD").strip()

    # `yes` no longer parses: exactly the test that says so is named, and the plan rolls back.
    broken = _apply(repo, "break", '("true", "yes", "y", "on", "1")', '("true", "y", "on", "1")')
    assert (broken["state"], broken["error"]["code"], broken["_rc"]) == ("rolled_back", "ERR_CHECK_REGRESSION", 1)
    check_data = broken["check"]
    assert check_data["tests"]["source"] == "unittest stream", broken
    assert check_data["verdict"]["broken"] == [IDS["bool"]] and check_data["verdict"]["missing"] == []
    assert f"newly failing: {IDS['bool']}" in broken["error"]["reason"]
    assert check_data["tests"]["counts"] == {"passed": 4, "failed": 1, "skipped": 0, "error": 0}
    assert git(repo, "rev-parse", "HEAD").strip() == tip

    # A subtest's failure is its test's.
    tags = _apply(repo, "break-tags", '.replace(">", "&gt;")', "")
    assert tags["check"]["verdict"]["broken"] == [IDS["tags"]], tags

    # A comment: lands, every test passing under the same ids.
    comment = _apply(repo, "comment", "def escape(text):\n", "def escape(text):  # &, < and >\n")
    assert (comment["state"], comment["_rc"]) == ("landed", 0), comment
    assert comment["check"]["tests"]["counts"]["passed"] == len(IDS)
    trailer = git(repo, "log", "-1", "--format=%(trailers:key=Papayu-Check,valueonly)").strip()
    assert trailer == f"passed {len(IDS)}, fixed 0, already failing 0"
