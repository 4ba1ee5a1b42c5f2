"""Static review reads code, not text (check/reach.py, check/reach_python.py): what a plan's
Python code and new tests reach for is read on the syntax tree with strings folded, over a real
repository's tip tree. The spellings here are each one that last round's line patterns read as
nothing; the honest neighbours are read as nothing now too.
"""

from __future__ import annotations

import base64
import codecs
import importlib.util
import marshal
from pathlib import Path

import pygit2
import pytest
from helpers import make_repo

from papayu_git.check.reach import runner_reach
from papayu_git.objects import GitTree

CALC = "def add(a, b):\n    return a + b\n"


def _tip(tmp_path: Path, **files: str) -> GitTree:
    repo = make_repo(tmp_path / "repo", {"calc.py": CALC, "tests/test_calc.py": "def test_x():\n    pass\n", **files})
    git = pygit2.Repository(str(repo))
    return GitTree(git, git.head.peel(pygit2.Commit).tree)


def _reach(tmp_path: Path, writes: dict[str, str | bytes], **files: str) -> list[str]:
    tip = _tip(tmp_path, **files)
    data = {p: v.encode() if isinstance(v, str) else v for p, v in writes.items()}
    return [str(r) for r in runner_reach(tip, data)]


PYTEST_INTERNALS = {
    "implicit-join": 'import importlib\nrunner = importlib.import_module("_py" "test.runner")\n',
    "plus": 'import importlib\nrunner = importlib.import_module("_py" + "test.runner")\n',
    "percent": 'runner = __import__("%stest.runner" % "_py")\n',
    "format": 'runner = __import__("{}test.runner".format("_py"))\n',
    "f-string": 'PREFIX = "_py"\nrunner = __import__(f"{PREFIX}test.runner")\n',
    "join": 'runner = __import__("".join(["_", "py", "test"]))\n',
    "reversed": 'runner = __import__("tsetyp_"[::-1])\n',
    "chr": 'runner = __import__("".join(map(chr, [95, 112, 121, 116, 101, 115, 116])))\n',
    "base64": f'import base64\nrunner = __import__(base64.b64decode("{base64.b64encode(b"_pytest").decode()}").decode())\n',
    "rot13": f'import codecs\nrunner = __import__(codecs.decode("{codecs.encode("_pytest", "rot13")}", "rot13"))\n',
    "exec": 'exec("import _p" + "ytest.runner")\n',
}


@pytest.mark.parametrize("source", PYTEST_INTERNALS.values(), ids=PYTEST_INTERNALS.keys())
def test_a_runner_name_built_from_pieces_is_read_as_that_name(tmp_path: Path, source: str) -> None:
    found = _reach(tmp_path, {"calc.py": CALC + source})
    assert found and all("calc.py:" in f and "pytest's internals" in f for f in found), found


REACHING = {
    "getattr-exit": ('import os\ngetattr(os, "_ex" + "it")(0)\n', "os._exit"),
    "vars-exit": ('import os\nvars(os)["_e" + "xit"](0)\n', "os._exit"),
    "computed-getattr": ("import sys\nname = sys.argv[0]\ngetattr(sys, name)\n", "computed name"),
    "computed-import": ("import sys\n__import__(sys.argv[1])\n", "computed"),
    "gc-walk": ("import gc\nfor found in gc.get_objects():\n    pass\n", "gc.get_objects"),
    "gc-from": ("from gc import get_referrers as who\n", "gc.get_referrers"),
    "frames": ("import sys\ncaller = sys._getframe(1).f_back\n", "other frames"),
    "traceback-frame": ("try:\n    1 / 0\nexcept ZeroDivisionError as e:\n    f = e.__traceback__.tb_frame\n", "frame"),
    "code-swap": ("def f():\n    pass\n\n\nf.__code__ = (lambda: 1).__code__\n", "__code__"),
    "sys-modules": ("import sys\nsys.modules.update({})\n", "sys.modules surgery"),
    "ctypes": ("import ctypes\n", "ctypes"),
    "settrace": ("import threading\nthreading.settrace(print)\n", "trace function"),
}


@pytest.mark.parametrize(("source", "why"), REACHING.values(), ids=REACHING.keys())
def test_code_reaching_past_itself_is_named(tmp_path: Path, source: str, why: str) -> None:
    found = _reach(tmp_path, {"calc.py": CALC + source})
    assert any(why in f for f in found), found


HONEST = {
    "gc-collect": "import gc\n\n\ndef tidy():\n    gc.collect()\n",
    "constant-getattr": 'def name_of(obj):\n    return getattr(obj, "name", "")\n',
    "own-methods": "class Store:\n    def get_objects(self):\n        return []\n\n    def stack(self):\n        return []\n",
    "strings": 'GREETING = "hello " + "world"\nTEMPLATE = "%s items" % 3\n',
    "dynamic-attribute": "def visit(self, node):\n    return getattr(self, 'visit_' + type(node).__name__)(node)\n",
}


@pytest.mark.parametrize("source", HONEST.values(), ids=HONEST.keys())
def test_honest_code_near_those_routes_is_read_as_nothing(tmp_path: Path, source: str) -> None:
    assert _reach(tmp_path, {"calc.py": CALC + source}) == []


def test_only_the_lines_the_plan_adds_are_read(tmp_path: Path) -> None:
    reaching = CALC + "import os\n\n\ndef stop():\n    os._exit(0)\n"
    assert _reach(tmp_path, {"calc.py": reaching + "\n# a comment\n"}, **{"calc.py": reaching}) == []


SWAPS = {
    "vars": "import calc\n\nvars(calc)['add'].__code__ = (lambda a, b: 0).__code__\n",
    "computed-setattr": (
        "import importlib\n\n\ndef test_x():\n    m = importlib.import_module('calc')\n"
        "    setattr(getattr(m, 'add'), '__co' + 'de__', (lambda a, b: 0).__code__)\n"
    ),
    "alias": "import calc as c\n\n\ndef test_x():\n    c.add = lambda a, b: 5\n",
    "dict": "import calc\n\n\ndef test_x():\n    calc.__dict__['add'] = lambda a, b: 5\n",
}


@pytest.mark.parametrize("test", SWAPS.values(), ids=SWAPS.keys())
def test_a_new_test_rewriting_the_code_it_tests_is_named(tmp_path: Path, test: str) -> None:
    found = _reach(tmp_path, {"tests/test_new.py": test})
    assert any("rewrites" in f or "__code__" in f for f in found), found


@pytest.mark.parametrize(
    "test",
    [
        "import calc\n\n\ndef test_x(monkeypatch):\n    monkeypatch.setattr(calc, 'add', lambda a, b: 5)\n",
        "import gc\n\nfrom calc import add\n\n\ndef test_x():\n    gc.collect()\n    assert add(1, 2) == 3\n",
        "from unittest import mock\n\nimport calc\n\n\ndef test_x():\n    with mock.patch.object(calc, 'add'):\n        pass\n",
    ],
    ids=["monkeypatch", "gc-collect", "mock-patch"],
)
def test_a_new_test_patching_through_fixtures_is_read_as_nothing(tmp_path: Path, test: str) -> None:
    assert _reach(tmp_path, {"tests/test_new.py": test}) == []


def _bytecode() -> bytes:
    code = compile("import os\nos._exit(0)\n", "calc.py", "exec")
    return importlib.util.MAGIC_NUMBER + b"\0\0\0\0" + b"\0" * 8 + marshal.dumps(code)


@pytest.mark.parametrize(
    ("path", "data", "what"),
    [
        ("__pycache__/calc.cpython-311.pyc", _bytecode(), "Python bytecode"),
        ("assets/calc.txt", _bytecode(), "Python bytecode"),
        ("vendor/data.bin", b"\x7fELF\x02\x01\x01" + b"\0" * 64, "a native library"),
        ("calc_native.so", b"anything", "a native extension"),
    ],
    ids=["pycache", "bytecode-by-content", "elf-by-content", "extension-by-name"],
)
def test_a_binary_the_check_would_load_is_named_whatever_its_name(
    tmp_path: Path, path: str, data: bytes, what: str
) -> None:
    found = _reach(tmp_path, {path: data})
    assert len(found) == 1 and what in found[0] and path in found[0], found


def test_conversion_attributes_are_named_and_other_attributes_are_not(tmp_path: Path) -> None:
    encoding = _reach(tmp_path / "a", {".gitattributes": "calc.py working-tree-encoding=UTF-16LE\n"})
    assert len(encoding) == 1 and ".gitattributes:1" in encoding[0] and "converts" in encoding[0]
    macro = _reach(tmp_path / "b", {"sub/.gitattributes": "[attr]crlfy text eol=crlf\n*.sh crlfy\n"})
    assert [f.split(":")[1] for f in macro] == ["1", "2"], macro
    honest = (
        "*.py linguist-vendored\ndocs/ export-ignore\n*.png -diff\n# eol=crlf is not used\n*.jpg binary\n*.dat -text\n"
    )
    assert _reach(tmp_path / "c", {".gitattributes": honest}) == []
