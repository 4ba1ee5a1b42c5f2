"""The reporting path's snapshot on its own (check/results/reporting_path.py; docs/DESIGN.md, "The
runtime shield"): what counts as a change of a module's names, of a class, and of the checked
tree's test classes, and what does not. The sandboxed runs through the real CLI are
tests/test_judge_shield_unittest.py."""

from __future__ import annotations

import sys
import types
from collections.abc import Iterator
from pathlib import Path

import pytest

from papayu_git.check.results.reporting_path import Snapshot, defined_at
from papayu_git.check.results.reporting_path import TestClasses as Classes  # not a test class of ours

SOURCE = """\
import unittest


def helper(value):
    return isinstance(value, int)


LIMIT = 80


class Base(unittest.TestCase):
    def check(self, value):
        return helper(value)


class CaseTest(Base):
    def test_one(self):
        self.check(1)
"""


class _Tree:
    """Shield.repository, for a tree at ``root``."""

    def __init__(self, root: Path) -> None:
        self.root = str(root)

    def repository(self, filename: str) -> bool:
        return filename.startswith(self.root + "/")

    def rel(self, filename: str) -> str:
        return filename[len(self.root) + 1 :] if self.repository(filename) else filename


@pytest.fixture
def module(tmp_path: Path) -> Iterator[types.ModuleType]:
    path = tmp_path / "watched_mod.py"
    path.write_text(SOURCE)
    made = types.ModuleType("watched_mod")
    made.__file__ = str(path)
    sys.modules["watched_mod"] = made
    exec(compile(SOURCE, str(path), "exec"), vars(made))
    yield made
    del sys.modules["watched_mod"]


def _elsewhere(tmp_path: Path, source: str) -> object:
    """A function defined in another file of the tree (the plan's code)."""
    path = tmp_path / "calc.py"
    path.write_text(source)
    space: dict[str, object] = {}
    exec(compile(source, str(path), "exec"), space)
    return space["replacement"]


def test_a_namespace_names_what_was_replaced_removed_or_shadowed_and_lets_values_change(
    module: types.ModuleType, tmp_path: Path
) -> None:
    tree = _Tree(tmp_path)
    snapshot = Snapshot(lambda value: defined_at(value, tree.rel))
    snapshot.namespace("watched_mod", data=True)
    assert snapshot.changed() == ""
    module.LIMIT = None  # a plain value for another: no code runs through it
    module.added = lambda: 0  # a name of its own: nothing of the module's reads it
    assert snapshot.changed() == ""
    module.isinstance = _elsewhere(tmp_path, "def replacement(*args):\n    return True\n")  # type: ignore[attr-defined]
    assert snapshot.changed() == "watched_mod.isinstance (added, shadowing the builtin, by calc.py:1)"
    del module.isinstance  # type: ignore[attr-defined]
    assert snapshot.changed() == ""
    module.helper = _elsewhere(tmp_path, "def replacement(value):\n    return True\n")
    assert snapshot.changed() == "watched_mod.helper (replaced, by calc.py:1)"


def test_a_removed_name_is_named_even_when_another_was_added(module: types.ModuleType) -> None:
    snapshot = Snapshot()
    snapshot.namespace("watched_mod")
    del module.helper
    module.other = 1
    assert snapshot.changed() == "watched_mod.helper (removed)"


def test_a_class_part_with_data_takes_plain_values_but_not_code(module: types.ModuleType, tmp_path: Path) -> None:
    tree = _Tree(tmp_path)
    snapshot = Snapshot(lambda value: defined_at(value, tree.rel))
    snapshot.cls("watched_mod.Base", module.Base, data=True)
    module.Base.maxDiff = None
    module.Base.longMessage = False
    assert snapshot.changed() == ""
    module.Base.assertEqual = _elsewhere(tmp_path, "def replacement(self, a, b, msg=None):\n    pass\n")
    assert snapshot.changed() == "watched_mod.Base.assertEqual (added, by calc.py:1)"


def test_the_checked_trees_test_classes_stay_as_first_seen(module: types.ModuleType, tmp_path: Path) -> None:
    tree = _Tree(tmp_path)
    classes = Classes(tree, lambda value: defined_at(value, tree.rel))
    classes.see(module.CaseTest)
    module.CaseTest.patcher = lambda: None  # stands in front of nothing: setUpClass's own
    module.CaseTest.maxDiff = None  # a value, in front of TestCase's
    assert classes.changed(module.CaseTest) == ""
    module.Base.check = _elsewhere(tmp_path, "def replacement(self, value):\n    return True\n")
    assert classes.changed(module.CaseTest) == "watched_mod.Base.check (replaced, by calc.py:1)"


def test_a_callable_put_in_front_of_an_inherited_method_is_a_change(module: types.ModuleType, tmp_path: Path) -> None:
    tree = _Tree(tmp_path)
    classes = Classes(tree, lambda value: defined_at(value, tree.rel))
    classes.see(module.CaseTest)
    module.CaseTest.assertEqual = _elsewhere(tmp_path, "def replacement(self, a, b, msg=None):\n    pass\n")
    said = classes.changed(module.CaseTest)
    assert said == "watched_mod.CaseTest.assertEqual (added in front of the inherited one, by calc.py:1)"
