"""The sealed judge: the plan's code cannot rewrite the runner, its record or the code under
test from inside the check's process (docs/DESIGN.md, "The runtime shield"), through the real CLI
(`apply PLAN -y --json`), real pytest, the real sandbox.

Each attack is spelled at least two ways that a reading of the plan's text for known names
misses (names joined at run time, objects found through gc, frames reached through a traceback);
each is refused in the process, and the run is untrusted with the plan's file:line named, or held
before it runs. Next to them, honest plans doing nearby things land: a test calling gc.collect(),
a test using monkeypatch.setattr on the code it tests.
"""

from __future__ import annotations

import json
import os
import shutil
from pathlib import Path

import pytest
import toolchains
from green_calc import BROKEN, CALC, PYPROJECT, PYTEST, TESTS
from helpers import (
    apply_actions,
    apply_json,
    apply_why,
    assert_landed,
    assert_untrusted,
    create_action,
    git,
    head_of,
    make_repo,
    update_action,
    write_plan,
)

from papayu_git.check import sandbox

pytestmark = pytest.mark.skipif(
    sandbox.unavailable_reason() is not None, reason=f"bwrap does not work here: {sandbox.unavailable_reason()}"
)


def _repo(tmp_path: Path, **files: str) -> Path:
    repo = make_repo(tmp_path / "repo", {"calc.py": CALC, "pyproject.toml": PYPROJECT, **TESTS, **files})
    git(repo, "config", "papayu.check.command", f"{PYTEST} tests")
    return repo


# --- the runner rewritten from inside the process ------------------------------------------------

# Last round's report-rewriting hook, its names spelled in pieces joined at run time: the
# text patterns read `"_py" "test.reports"` and `"Test" + "Report"` as nothing.
PIECES = (
    BROKEN
    + """
import importlib

_reports = importlib.import_module("_py" "test.reports")
_cls = getattr(_reports, "Test" + "Report")
_made = _cls.__init__


def _passing(self, *args, **kwargs):
    _made(self, *args, **kwargs)
    self.outcome = "passed"


setattr(_cls, "__in" + "it__", _passing)
"""
)
# The same, found without naming pytest at all: the report objects, through the garbage collector.
THROUGH_GC = BROKEN.replace(
    "    return a - b\n",
    "    import gc\n\n"
    "    for found in gc.get_objects():\n"
    "        if type(found).__name__ == 'CallInfo':\n"
    "            found.excinfo = None\n"
    "    return a - b\n",
)
# And through frames: the traceback of an exception it raises leads to the runner's frames.
THROUGH_FRAMES = BROKEN.replace(
    "    return a - b\n",
    "    try:\n"
    "        raise ValueError\n"
    "    except ValueError as caught:\n"
    "        frame = caught.__traceback__.tb_frame\n"
    "    while frame is not None and 'item' not in frame.f_locals:\n"
    "        frame = frame.f_back\n"
    "    return a - b\n",
)


@pytest.mark.parametrize(
    ("source", "named"),
    [
        (PIECES, "_pytest.reports.TestReport.__init__ (replaced, by calc.py:"),
        (THROUGH_GC, "calc.py:4: gc.get_objects"),
        (THROUGH_FRAMES, "calc.py:5: reads a traceback's tb_frame"),
    ],
    ids=["names-in-pieces", "gc", "traceback-frames"],
)
def test_code_rewriting_the_runner_from_inside_is_refused_and_named(tmp_path: Path, source: str, named: str) -> None:
    repo = _repo(tmp_path)
    head = head_of(repo)
    data = apply_actions(repo, "inside", [update_action("calc.py", source)])
    assert_untrusted(repo, data, head, named)
    assert (repo / "calc.py").read_text() == CALC


GC_TEST = (
    "import gc\n\nfrom calc import mul\n\n\ndef test_mul_collected():\n    gc.collect()\n    assert mul(2, 3) == 6\n"
)
MONKEYPATCH_TEST = (
    "import calc\n\n\ndef test_add_patched(monkeypatch):\n"
    "    monkeypatch.setattr(calc, 'add', lambda a, b: 42)\n    assert calc.add(1, 1) == 42\n"
)


@pytest.mark.parametrize(("path", "test"), [("tests/test_gc.py", GC_TEST), ("tests/test_patch.py", MONKEYPATCH_TEST)])
def test_honest_tests_near_the_refused_routes_land(tmp_path: Path, path: str, test: str) -> None:
    """gc.collect() walks nothing; monkeypatch.setattr is undone after its test."""
    repo = _repo(tmp_path)
    data = apply_actions(repo, "honest", [create_action(path, test), update_action("calc.py", CALC + "\n# tidied\n")])
    assert_landed(repo, data)
    assert data["check"]["verdict"]["new_passing"] == 1
    assert not data["check"]["tests"]["errors"], apply_why(data)


TIP_TRACING = {
    "doctest": "import doctest\n\nimport calc\n\n\ndef test_doctests():\n"
    "    assert doctest.testmod(calc).failed == 0\n",
    "cprofile": "import cProfile\n\nfrom calc import mul\n\n\ndef test_profiled():\n"
    "    assert cProfile.Profile().runcall(mul, 2, 3) == 6\n",
}


@pytest.mark.parametrize("tool", list(TIP_TRACING))
def test_the_tips_own_test_setting_a_trace_lets_a_fix_land(tmp_path: Path, tool: str) -> None:
    """doctest puts back the trace function it found, cProfile sets a profile function: from the
    tip's own test, that is the judge's doing, said in the notes; every plan landed red before."""
    repo = _repo(tmp_path, **{"tests/test_tool.py": TIP_TRACING[tool], "calc.py": BROKEN})
    data = apply_actions(repo, "fix", [update_action("calc.py", CALC)])
    assert_landed(repo, data)
    assert data["check"]["verdict"]["fixed"] == ["tests/test_add.py::test_add"], apply_why(data)
    notes = " ".join(data["check"]["tests"]["unreadable"])
    assert "tests/test_tool.py:" in notes and ("sys.settrace" in notes or "sys.setprofile" in notes), notes


def test_the_tips_own_test_walking_frames_is_allowed_and_said(tmp_path: Path) -> None:
    """Reaching for frames is refused in what the plan changed, not in the tip's own files: they
    are what judges the plan. It is said in the run's notes."""
    walker = "import inspect\n\n\ndef test_frames():\n    assert inspect.currentframe().f_back is not None\n"
    repo = _repo(tmp_path, **{"tests/test_frames.py": walker})
    data = apply_actions(repo, "fix", [update_action("calc.py", CALC + "\n# tidied\n")])
    assert_landed(repo, data)
    assert any("tests/test_frames.py:5" in note for note in data["check"]["tests"]["unreadable"]), apply_why(data)


# --- a runner hook the plan's code registers at run time ------------------------------------------

# A plugin built at run time around a function of the standard library (truthy: pytest then takes
# the test as run), every name decoded at run time: no function of the tree to blame, no name for
# the static review to read.
DECODE = """
import sys
import tempfile
import types


def _n(xs):
    return bytes(c ^ 5 for c in xs).decode()


CONFIG, MANAGER = _n([102, 106, 107, 99, 108, 98]), _n([117, 105, 112, 98, 108, 107, 104, 100, 107, 100, 98, 96, 119])
HOOK = _n([117, 124, 113, 96, 118, 113, 90, 117, 124, 99, 112, 107, 102, 90, 102, 100, 105, 105])
REGISTER = _n([119, 96, 98, 108, 118, 113, 96, 119])


def _manager():
    for value in list(vars(sys).values()):
        for found in value if isinstance(value, list) else ():
            config = getattr(found, CONFIG, None)
            if config is not None and hasattr(config, MANAGER):
                return getattr(config, MANAGER)
    return None
"""
REGISTERED_STDLIB = (
    BROKEN
    + DECODE
    + """
_plugin = types.ModuleType("helper_plugin")
setattr(_plugin, HOOK, tempfile.gettempdir)
if _manager() is not None:
    getattr(_manager(), REGISTER)(_plugin, "helper_plugin")
"""
)
# A function compiled under the file name of a standard module, registered through a partial:
# no frame of the tree calls register itself.
REGISTERED_COMPILED = (
    BROKEN
    + DECODE
    + """
_plugin = types.ModuleType("helper_plugin")
_space = {}
getattr(__import__("builtins"), "ex" + "ec")(compile("def h(pyfuncitem):\\n    return True\\n", types.__file__, "exec"), _space)
setattr(_plugin, HOOK, _space["h"])
if _manager() is not None:
    __import__("functools").partial(getattr(_manager(), REGISTER), _plugin)("helper_plugin")
"""
)
# No registration at all: the tip's conftest imports the code, which puts a function of the
# standard library into that conftest under a hook's name before pytest reads it.
CONFTEST_IMPORTING = "import calc  # noqa: F401\n"
INTO_CONFTEST = (
    BROKEN
    + DECODE
    + """
for _name, _module in list(sys.modules.items()):
    if _name.endswith(_n([102, 106, 107, 99, 113, 96, 118, 113])):
        setattr(_module, HOOK, tempfile.gettempdir)
"""
)


@pytest.mark.parametrize(
    ("source", "files", "named"),
    [
        (REGISTERED_STDLIB, {}, "pytest_pyfunc_call was registered by the plan's calc.py:"),
        (REGISTERED_COMPILED, {}, "pytest_pyfunc_call was registered by the plan's calc.py:"),
        (INTO_CONFTEST, {"tests/conftest.py": CONFTEST_IMPORTING}, "put in tests/conftest.py under the hook's name"),
    ],
    ids=["stdlib-function", "compiled-as-stdlib-through-partial", "into-the-tips-conftest"],
)
def test_a_runner_hook_the_plans_code_puts_in_place_is_refused(
    tmp_path: Path, source: str, files: dict[str, str], named: str
) -> None:
    """Judged by who registered it and where it is exposed, not by its function's file."""
    repo = _repo(tmp_path, **files)
    head = head_of(repo)
    data = apply_actions(repo, "hook", [update_action("calc.py", source)])
    assert_untrusted(repo, data, head, named)


def test_a_conftest_registering_its_own_plugin_class_lands(tmp_path: Path) -> None:
    """The tip's conftest registering a plugin object of its own, and a plan fixing the code."""
    conftest = (
        "class Counting:\n    calls = 0\n\n    def pytest_runtest_call(self, item):\n        Counting.calls += 1\n\n\n"
        "def pytest_configure(config):\n    config.pluginmanager.register(Counting(), 'counting')\n"
    )
    repo = _repo(tmp_path, **{"tests/conftest.py": conftest, "calc.py": BROKEN})
    data = apply_actions(repo, "fix", [update_action("calc.py", CALC)])
    assert_landed(repo, data)
    assert data["check"]["verdict"]["fixed"] == ["tests/test_add.py::test_add"], apply_why(data)


# --- a landed test that would judge later plans ------------------------------------------------------

SWAP_VARS = (
    "import calc\n\n"
    "vars(calc)['mul'].__code__ = (lambda a, b: a * b).__code__\n\n\n"
    "def test_mul_again():\n    assert calc.mul(2, 3) == 6\n"
)
SWAP_COMPUTED = (
    "import importlib\n\n\ndef test_mul_again():\n"
    "    module = importlib.import_module('calc')\n"
    "    setattr(getattr(module, 'mul'), '__co' + 'de__', (lambda a, b: a * b).__code__)\n"
    "    assert module.mul(2, 3) == 6\n"
)


@pytest.mark.parametrize(
    ("test", "named"),
    [(SWAP_VARS, "tests/test_more.py:3"), (SWAP_COMPUTED, "tests/test_more.py:6")],
    ids=["vars", "computed-setattr"],
)
def test_a_new_test_swapping_the_codes_code_does_not_land(tmp_path: Path, test: str, named: str) -> None:
    """Refused when it runs (its own run untrusted, the line named), and read before it runs
    (tests/test_reach_python.py: held with that line): it does not land to judge later plans."""
    repo = _repo(tmp_path)
    head = head_of(repo)
    data = apply_actions(repo, "swap", [create_action("tests/test_more.py", test)])
    assert data["state"] in ("review", "rolled_back") and head_of(repo) == head, apply_why(data)
    assert data["error"]["code"] in ("ERR_RUNNER_REACH_HELD", "ERR_CHECK_RESULTS_UNTRUSTED"), apply_why(data)
    assert named in data["error"]["reason"] and "__code__" in data["error"]["reason"], data["error"]


def test_a_landed_code_swap_cannot_judge_a_later_plan(tmp_path: Path) -> None:
    """Landed anyway (a human's `land --force`, here a commit of the user's): the next plan that
    breaks mul is not judged by the swapped function. The swap is refused in the process: the
    test fails on the tip and on the plan alike, mul's own test catches the bug, and the runs
    are not trusted with the swap named."""
    repo = _repo(tmp_path, **{"tests/test_more.py": SWAP_VARS})
    head = head_of(repo)
    data = apply_actions(repo, "break-mul", [update_action("calc.py", CALC.replace("a * b", "a + b"))])
    assert_untrusted(repo, data, head, "tests/test_more.py:3", "calc.mul.__code__")


# --- the recorder fail first trusts --------------------------------------------------------------

# Landed first (here: committed by the user), then a plain bug: the code under test finds the
# recorder and switches it off, so the tip's record would say no test read calc.py.
RECORDER_OFF_GC = CALC + (
    "\n\nimport gc\n\nfor _found in gc.get_objects():\n"
    "    if type(_found).__name__ == 'Recorder':\n        _found.monitor.set_events(_found.tool, 0)\n"
)
RECORDER_OFF_MODULES = CALC + (
    "\n\nimport sys\n\n_name = 'papayu_pytest_' + 'inputs'\n"
    "for _plugin in list(getattr(sys.modules.get(_name), '__dict__', {}).values()):\n"
    "    pass\nsys.setprofile(None)\n"
)


@pytest.mark.parametrize(
    ("switch", "said"),
    [
        # Walking gc from the tip's own file is the tip's reach: allowed there, and said.
        (RECORDER_OFF_GC, "calc.py:11: gc.get_objects"),
        # Setting a profile function is refused wherever the repository asks.
        (RECORDER_OFF_MODULES, "papayu's shield"),
    ],
    ids=["gc", "setprofile"],
)
def test_code_switching_the_recorder_off_does_not_let_a_later_bug_land(tmp_path: Path, switch: str, said: str) -> None:
    """Fail first never trusts the record for the verdict (docs/DESIGN.md, "Fail first"): a
    recorder switched off only orders the run worse, the whole suite still runs before anything
    lands, and the broken test names the bug."""
    repo = _repo(tmp_path)
    (repo / "calc.py").write_text(switch)
    git(repo, "commit", "-qam", "the switch, landed")
    head = head_of(repo)
    data = apply_actions(repo, "bug", [update_action("calc.py", switch.replace("a * b", "a + b"))])
    assert data["state"] != "landed" and head_of(repo) == head, apply_why(data)
    assert said in str(data["check"]) and "calc.py:" in str(data["check"]), apply_why(data)
    if said != "papayu's shield":
        assert data["error"]["code"] == "ERR_CHECK_REGRESSION", apply_why(data)
        assert data["check"]["verdict"]["broken"] == ["tests/test_mul.py::test_mul"], apply_why(data)


# --- the node hook, as far as Node allows ---------------------------------------------------------

JS_CALC = "exports.add = (a, b) => a + b;\nexports.mul = (a, b) => a * b;\n"
JS_TEST = (
    "const { add, mul } = require('../lib/calc');\n\n"
    "test('add', () => {\n  expect(add(2, 3)).toBe(5);\n});\n\ntest('mul', () => {\n  expect(mul(2, 3)).toBe(6);\n});\n"
)
# Native reach from the code under jest, each name built at run time.
JS_BINDINGS = JS_CALC.replace("a + b;", "(process['bin' + 'ding']('fs'), a - b);")
JS_V8_FLAGS = JS_CALC.replace(
    "a + b;", "(require(['v', '8'].join('')).setFlagsFromString('--allow-natives-syntax'), a - b);"
)


@pytest.mark.skipif(shutil.which("node") is None or shutil.which("npm") is None, reason="node or npm is not installed")
@pytest.mark.parametrize(("source", "what"), [(JS_BINDINGS, "internal bindings"), (JS_V8_FLAGS, "V8's flags")])
def test_code_under_jest_reaching_node_internals_is_refused_and_named(tmp_path: Path, source: str, what: str) -> None:
    manifest = {"name": "calc", "private": True, "scripts": {"test": "jest"}}
    manifest["devDependencies"] = {"jest": toolchains.JS_PACKAGES["jest"]}
    files = {".gitignore": "node_modules/\n", "package.json": json.dumps(manifest), "lib/calc.js": JS_CALC}
    repo = make_repo(tmp_path / "repo", {**files, "test/calc.test.js": JS_TEST})
    try:
        toolchains.pnpm_install(repo)
    except toolchains.Unavailable as exc:
        pytest.skip(str(exc))
    git(repo, "add", "pnpm-lock.yaml")
    git(repo, "commit", "-qm", "lockfile")
    git(repo, "config", "papayu.check.command", "npm test")
    head = head_of(repo)
    plan = write_plan(repo.parent, [update_action("lib/calc.js", source)], summary="node", name="node.json")
    path = f"{toolchains.pnpm_bin()}{os.pathsep}{os.environ.get('PATH', '')}"
    data = apply_json(repo, plan, "-y", env={"PAPAYU_PROTOCOL_VERSION": "1", "PATH": path})
    assert_untrusted(repo, data, head, "lib/calc.js:1", what)


# --- binaries the check would load ---------------------------------------------------------------------


@pytest.mark.parametrize(
    ("path", "content"),
    [("tools/fast.dat", "\x7fELF\x02\x01\x01" + "x" * 57), ("calc_speedups.so", "not even a library")],
    ids=["elf-by-content", "extension-by-name"],
)
def test_a_binary_the_check_would_load_is_held(tmp_path: Path, path: str, content: str) -> None:
    """No one can read what a native library does: held whatever its name, by what it is."""
    repo = _repo(tmp_path)
    head = head_of(repo)
    data = apply_actions(
        repo, "binary", [create_action(path, content), update_action("calc.py", CALC + "\n# tidied\n")]
    )
    assert (data["state"], data["error"]["code"]) == ("review", "ERR_RUNNER_REACH_HELD"), apply_why(data)
    assert path in data["error"]["reason"] and "native" in data["error"]["reason"]
    assert head_of(repo) == head


TRACEBACKS = (
    "import sys\n\n\ndef add(a, b):\n    return a + b\n\n\n"
    "def mul(a, b):\n    return a * b\n\n\n"
    "def where_it_failed():\n"
    "    try:\n        raise ValueError\n    except ValueError:\n"
    "        return sys.exc_info()[2].tb_frame.f_lineno\n"
)
TRACEBACK_TEST = "from calc import where_it_failed\n\n\ndef test_where():\n    assert where_it_failed() > 0\n"


def test_a_fix_in_a_file_whose_own_code_reaches_for_frames_lands(tmp_path: Path) -> None:
    """The tip's code reads a traceback's frame (jinja's debug.py does, rewriting tracebacks): a
    plan changing that file elsewhere is judged, not refused, since the tip's own run reached
    from the same function; the same read from a function the plan adds is refused."""
    repo = _repo(tmp_path, **{"calc.py": TRACEBACKS.replace("a + b", "a - b"), "tests/test_where.py": TRACEBACK_TEST})
    fixed = apply_actions(repo, "fix", [update_action("calc.py", TRACEBACKS)])
    assert_landed(repo, fixed)
    assert fixed["check"]["verdict"]["fixed"] == ["tests/test_add.py::test_add"], apply_why(fixed)
    head = head_of(repo)
    elsewhere = TRACEBACKS + (
        "\n\ndef sneak():\n    try:\n        raise ValueError\n    except ValueError:\n"
        "        return sys.exc_info()[2].tb_frame.f_back\n"
    )
    test = "from calc import add, sneak\n\n\ndef test_add_again():\n    sneak()\n    assert add(2, 3) == 5\n"
    data = apply_actions(
        repo, "sneak", [update_action("calc.py", elsewhere), create_action("tests/test_again.py", test)]
    )
    line = elsewhere.splitlines().index("        return sys.exc_info()[2].tb_frame.f_back") + 1
    assert_untrusted(repo, data, head, f"calc.py:{line}", "tb_frame")
