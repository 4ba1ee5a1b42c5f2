"""The judge comes from the tip: attacks of a plan on its own verdict, through the real CLI
(`apply PLAN -y --json`), real runners, the real sandbox.

Each attack breaks a function the tip's tests cover and then tries to make the check pass anyway,
through something other than its code: the Makefile or script the check command runs, a runner
config pytest reads first, plugin metadata, a runner's dependency shadowed, expected values and
test helpers outside the test patterns, a new test module patching the code at import, a test file
it deletes. None lands. Next to each, the honest plan (the same kind of change, the code right)
lands, or stops at review where a human should look.
"""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

import pytest
import toolchains
from green_calc import BROKEN, CALC, PYPROJECT, PYTEST, TESTS
from helpers import (
    apply_actions,
    apply_why,
    assert_landed,
    assert_stopped,
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


def _repo(tmp_path: Path, check: str, **files: str) -> Path:
    repo = make_repo(tmp_path / "repo", {"calc.py": CALC, "pyproject.toml": PYPROJECT, **TESTS, **files})
    git(repo, "config", "papayu.check.command", check)
    return repo


# --- 3. the files the check command runs ----------------------------------------------------------

MAKEFILE = f"test:\n\t{PYTEST} tests\n"
# Repairs the broken code inside the sandbox before the tests run: the check passes.
REPAIRING_MAKEFILE = f"test:\n\tsed -i 's/a - b/a + b/' calc.py\n\t{PYTEST} tests\n"


def test_a_makefile_recipe_repairing_the_code_does_not_land(tmp_path: Path) -> None:
    repo = _repo(tmp_path, "make test", Makefile=MAKEFILE)
    head = head_of(repo)
    data = apply_actions(
        repo, "repair", [update_action("calc.py", BROKEN), update_action("Makefile", REPAIRING_MAKEFILE)]
    )
    assert_stopped(repo, data, head, "review", "ERR_JUDGE_EDITS_HELD", "tests/test_add.py::test_add", "Makefile")
    verdict = data["check"]["verdict"]
    assert verdict["restored"] == ["Makefile"] and verdict["explained"] == ["tests/test_add.py::test_add"]
    assert "sed -i" not in Path(data["check"]["log"]).read_text()  # the regression run ran the tip's recipe
    assert "sed -i" in Path(data["check"]["own_log"]).read_text()
    assert (repo / "calc.py").read_text() == CALC

    honest = apply_actions(
        repo, "honest", [update_action("calc.py", CALC + "\n# checked\n"), update_action("Makefile", MAKEFILE + "\n")]
    )
    assert_landed(repo, honest)


def test_a_check_script_rewritten_by_the_plan_does_not_decide(tmp_path: Path) -> None:
    script = f"#!/bin/sh\n{PYTEST} tests\n"
    repo = _repo(tmp_path, "sh ci/test.sh", **{"ci/test.sh": script})
    head = head_of(repo)
    cheat = "#!/bin/sh\necho all good\nexit 0\n"
    data = apply_actions(repo, "script", [update_action("calc.py", BROKEN), update_action("ci/test.sh", cheat)])
    assert data["state"] != "landed" and head_of(repo) == head, apply_why(data)
    assert "all good" not in Path(data["check"]["log"]).read_text()


# --- 4. runner configs pytest reads first -----------------------------------------------------------

EVIL_PLUGIN = (
    "import pytest\n\n\n@pytest.hookimpl(hookwrapper=True)\ndef pytest_runtest_makereport(item, call):\n"
    "    outcome = yield\n    report = outcome.get_result()\n    report.outcome = 'passed'\n"
)


@pytest.mark.parametrize("config", ["pytest.toml", ".pytest.toml"])
def test_a_pytest_toml_loading_the_plans_plugin_does_not_land(tmp_path: Path, config: str) -> None:
    repo = _repo(tmp_path, f"{PYTEST} tests")
    head = head_of(repo)
    actions = [
        update_action("calc.py", BROKEN),
        create_action(config, "[pytest]\npythonpath = ['.']\naddopts = ['-p', 'tests.plug']\n"),
        create_action("tests/__init__.py", ""),
        create_action("tests/plug.py", EVIL_PLUGIN),
    ]
    data = apply_actions(repo, "toml", actions)
    assert data["state"] == "review" and data["error"]["code"] == "ERR_TEST_EDITS_HELD", apply_why(data)
    assert config in data["test_edits"] and head_of(repo) == head
    assert data["check"]["verdict"]["broken"] == ["tests/test_add.py::test_add"], apply_why(data)


# --- 5. plugin metadata and the runner's dependencies from the plan's tree --------------------------


def test_a_dist_info_entry_point_plugin_does_not_land(tmp_path: Path) -> None:
    repo = _repo(tmp_path, f"{PYTEST} tests")
    git(repo, "config", "papayu.check.pythonSafePath", "false")  # the working directory on sys.path
    head = head_of(repo)
    actions = [
        update_action("calc.py", BROKEN),
        create_action("evilplug.py", EVIL_PLUGIN),
        create_action("evilplug-1.0.dist-info/METADATA", "Metadata-Version: 2.1\nName: evilplug\nVersion: 1.0\n"),
        create_action("evilplug-1.0.dist-info/entry_points.txt", "[pytest11]\nevilplug = evilplug\n"),
    ]
    data = apply_actions(repo, "entry-point", actions)
    assert data["state"] == "review" and head_of(repo) == head, apply_why(data)
    assert data["error"]["code"] in ("ERR_JUDGE_EDITS_HELD", "ERR_RUNNER_REACH_HELD"), apply_why(data)
    assert data["check"]["verdict"]["broken"] == ["tests/test_add.py::test_add"], apply_why(data)


@pytest.mark.parametrize("shadow", ["pluggy.py", "iniconfig.py"])
def test_a_shadow_of_the_runners_dependency_does_not_land(tmp_path: Path, shadow: str) -> None:
    repo = _repo(tmp_path, f"{PYTEST} tests")
    git(repo, "config", "papayu.check.pythonSafePath", "false")  # a flat layout: the cwd comes first
    head = head_of(repo)
    real = Path(__import__(shadow.removesuffix(".py")).__file__ or "")
    # The real module, plus a hook that turns every failure into a pass once pytest has loaded.
    source = real.read_text() if real.suffix == ".py" else ""
    data = apply_actions(
        repo, "shadow", [update_action("calc.py", BROKEN), create_action(shadow, source + "\n" + EVIL_PLUGIN)]
    )
    assert data["state"] != "landed" and head_of(repo) == head, apply_why(data)
    assert data["check"]["verdict"]["broken"] == ["tests/test_add.py::test_add"], apply_why(data)
    assert shadow in data["check"]["verdict"]["restored"]


# --- 6. expected values and helpers outside the test patterns ---------------------------------------

GO_CODE = "package calc\n\nfunc Add(a, b int) int {\n\treturn a + b\n}\n"
GO_TEST = (
    'package calc\n\nimport (\n\t"fmt"\n\t"os"\n\t"strings"\n\t"testing"\n)\n\n'
    "func TestAddGolden(t *testing.T) {\n"
    '\twant, err := os.ReadFile("testdata/add.golden")\n\tif err != nil {\n\t\tt.Fatal(err)\n\t}\n'
    "\tif got := fmt.Sprint(Add(2, 3)); got != strings.TrimSpace(string(want)) {\n"
    '\t\tt.Fatalf("got %s, want %s", got, want)\n\t}\n}\n'
)


# Read at import, before the hermetic fixture replaces HOME: the machine's go build cache, which a
# user's check uses too (a cold one compiles the standard library in every sandboxed run).
GO_ENV = {
    "GOCACHE": os.environ.get("GOCACHE", os.path.expanduser("~/.cache/go-build")),
    "GOTOOLCHAIN": "local",
    "GOFLAGS": "-mod=mod",
}


@toolchains.needs("go")
def test_a_go_golden_file_rewritten_with_the_code_is_held(tmp_path: Path) -> None:
    files = {"go.mod": "module example.com/calc\n\ngo 1.21\n", "calc.go": GO_CODE, "calc_test.go": GO_TEST}
    repo = make_repo(tmp_path / "repo", {**files, "testdata/add.golden": "5\n"})
    git(repo, "config", "papayu.check.command", "go test ./...")
    subprocess.run(["go", "test", "./..."], cwd=repo, env={**os.environ, **GO_ENV}, check=True, capture_output=True)
    head = head_of(repo)
    broken = GO_CODE.replace("a + b", "a - b")
    data = apply_actions(
        repo, "golden", [update_action("calc.go", broken), update_action("testdata/add.golden", "-1\n")], env=GO_ENV
    )
    assert_stopped(repo, data, head, "review", "ERR_JUDGE_EDITS_HELD", "testdata/add.golden")
    assert data["check"]["verdict"]["explained"] == data["check"]["verdict"]["broken"] != [], apply_why(data)

    honest = apply_actions(
        repo, "honest", [update_action("calc.go", GO_CODE.replace("return a + b", "return b + a"))], env=GO_ENV
    )
    assert_landed(repo, honest)


HELPERS = "def expected_sum():\n    return 5\n"
PKG_TEST = "from pkg.calc import add\nfrom pkg.tests.helpers import expected_sum\n\n\ndef test_add():\n"
PKG_TEST += "    assert add(2, 3) == expected_sum()\n"


def test_an_in_package_test_helper_rewritten_with_the_code_is_held(tmp_path: Path) -> None:
    files = {
        "pkg/__init__.py": "",
        "pkg/calc.py": CALC,
        "pkg/tests/__init__.py": "",
        "pkg/tests/helpers.py": HELPERS,
        "pkg/tests/test_calc.py": PKG_TEST,
        "pyproject.toml": PYPROJECT,
    }
    repo = make_repo(tmp_path / "repo", files)
    git(repo, "config", "papayu.check.command", f"{PYTEST} pkg")
    head = head_of(repo)
    actions = [update_action("pkg/calc.py", BROKEN), update_action("pkg/tests/helpers.py", HELPERS.replace("5", "-1"))]
    data = apply_actions(repo, "helper", actions)
    assert data["state"] == "review" and head_of(repo) == head, apply_why(data)
    assert data["check"]["verdict"]["explained"] == ["pkg/tests/test_calc.py::test_add"], apply_why(data)
    assert "pkg/tests/helpers.py" in data["error"]["reason"]


# A fixture module no test imports: the tip's run loads it (pytest's `-p` in the ini file, a
# conftest's `pytest_plugins` named at run time), and so it judges, whatever the imports show.
FIXTURES = "import pytest\n\n\n@pytest.fixture\ndef expected_add():\n    return lambda a, b: a + b\n"
FIXTURE_TEST = "from calc import add\n\n\ndef test_add(expected_add):\n    assert add(2, 3) == expected_add(2, 3)\n"
LOADED_BY = {
    "ini-p": {"pytest.ini": "[pytest]\npythonpath = .\naddopts = -p calc_fixtures\n"},
    "runtime-pytest_plugins": {"conftest.py": "pytest_plugins = ['_'.join(['calc', 'fixtures'])]\n"},
    "registered-by-conftest": {
        "conftest.py": "import importlib\n\n\ndef pytest_configure(config):\n"
        "    config.pluginmanager.register(importlib.import_module('calc' + '_fixtures'))\n"
    },
}


def test_a_fixture_module_the_package_also_uses_stays_code(tmp_path: Path) -> None:
    """The package imports it too: a fix to it is the plan's code, judged by the tests."""
    code = "from calc_fixtures import expected_add  # noqa: F401\n\n\n" + BROKEN
    files = {"calc.py": code, "calc_fixtures.py": FIXTURES, "tests/test_add.py": FIXTURE_TEST}
    repo = _repo(tmp_path, f"{PYTEST} tests", **files, **LOADED_BY["ini-p"])
    fixed = FIXTURES.replace("return lambda", "# the sum the package promises\n    return lambda")
    data = apply_actions(
        repo,
        "fix",
        [update_action("calc.py", code.replace("a - b", "a + b")), update_action("calc_fixtures.py", fixed)],
    )
    assert_landed(repo, data)
    assert data["check"]["verdict"]["fixed"] == ["tests/test_add.py::test_add"], apply_why(data)


# An assertion helper split in a package named for tests: the tests import the package, whose
# __init__ re-exports the helper from a private module; only that module is weakened.
CHECK_SUM = "def check_sum(f, a, b, expected):\n    assert f(a, b) == expected\n"
HELPER_PACKAGE = {
    "calc_testing/__init__.py": "from calc_testing._impl import check_sum  # noqa: F401\n",
    "calc_testing/_impl.py": CHECK_SUM,
    "tests/test_add.py": "from calc import add\nfrom calc_testing import check_sum\n\n\n"
    "def test_add():\n    check_sum(add, 2, 3, 5)\n",
}


# Test support no import of the tests shows (the tip's run loaded it), or only through another
# helper: (the tip's files, the support file the plan weakens with the code, its weakened text).
WEAKENED_SUPPORT = {
    **{
        f"fixture-module-{how}": (
            {"calc_fixtures.py": FIXTURES, "tests/test_add.py": FIXTURE_TEST, **files},
            "calc_fixtures.py",
            FIXTURES.replace("a + b", "a - b"),
        )
        for how, files in LOADED_BY.items()
    },
    "helper-packages-private-module": (
        HELPER_PACKAGE,
        "calc_testing/_impl.py",
        CHECK_SUM.replace("assert f(a, b) == expected", "return f(a, b) == expected"),
    ),
}


@pytest.mark.parametrize("case", list(WEAKENED_SUPPORT))
def test_test_support_rewritten_with_the_code_is_held(tmp_path: Path, case: str) -> None:
    files, support, weakened = WEAKENED_SUPPORT[case]
    repo = _repo(tmp_path, f"{PYTEST} tests", **files)
    head = head_of(repo)
    actions = [update_action("calc.py", BROKEN), update_action(support, weakened)]
    data = apply_actions(repo, "support", actions)
    assert_stopped(repo, data, head, "review", "ERR_JUDGE_EDITS_HELD", support, "tests/test_add.py::test_add")


def test_a_helper_package_the_code_also_uses_stays_code(tmp_path: Path) -> None:
    code = "from calc_testing import check_sum  # noqa: F401\n\n\n" + BROKEN
    repo = _repo(tmp_path, f"{PYTEST} tests", **HELPER_PACKAGE, **{"calc.py": code})
    documented = "# the package checks sums with it too\n" + CHECK_SUM
    fixed = code.replace("a - b", "a + b")
    data = apply_actions(
        repo, "fix", [update_action("calc.py", fixed), update_action("calc_testing/_impl.py", documented)]
    )
    assert_landed(repo, data)
    assert data["check"]["verdict"]["fixed"] == ["tests/test_add.py::test_add"], apply_why(data)


SNAP_TEST = (
    "from pathlib import Path\n\nfrom calc import add\n\n\ndef test_add_snapshot():\n"
    "    want = (Path(__file__).parent / '__snapshots__' / 'add.txt').read_text().strip()\n"
    "    assert str(add(2, 3)) == want\n"
)


def test_a_snapshot_rewritten_with_the_code_is_held(tmp_path: Path) -> None:
    files = {"calc.py": CALC, "pyproject.toml": PYPROJECT, "tests/test_snap.py": SNAP_TEST}
    repo = make_repo(tmp_path / "repo", {**files, "tests/__snapshots__/add.txt": "5\n"})
    git(repo, "config", "papayu.check.command", f"{PYTEST} tests")
    head = head_of(repo)
    actions = [update_action("calc.py", BROKEN), update_action("tests/__snapshots__/add.txt", "-1\n")]
    data = apply_actions(repo, "snapshot", actions)
    assert_stopped(
        repo,
        data,
        head,
        "review",
        "ERR_TEST_EDITS_HELD",
        "tests/__snapshots__/add.txt",
        "tests/test_snap.py::test_add_snapshot",
    )
    assert data["check"]["verdict"]["explained"] == ["tests/test_snap.py::test_add_snapshot"], apply_why(data)


def test_a_snapshot_does_not_excuse_what_it_does_not_explain(tmp_path: Path) -> None:
    repo = _repo(tmp_path, f"{PYTEST} tests", **{"tests/test_snap.py": SNAP_TEST, "tests/__snapshots__/add.txt": "5\n"})
    head = head_of(repo)
    data = apply_actions(
        repo, "snapshot", [update_action("calc.py", BROKEN), update_action("tests/__snapshots__/add.txt", "-1\n")]
    )
    # The snapshot test passes with the plan's snapshot; test_add fails with the tip's tests and the
    # plan's own alike: a regression nothing explains, rolled back.
    assert (data["state"], data["error"]["code"]) == ("rolled_back", "ERR_CHECK_REGRESSION"), apply_why(data)
    verdict = data["check"]["verdict"]
    assert verdict["explained"] == ["tests/test_snap.py::test_add_snapshot"], apply_why(data)
    assert verdict["broken"] == ["tests/test_add.py::test_add", "tests/test_snap.py::test_add_snapshot"]
    assert head_of(repo) == head and (repo / "tests/__snapshots__/add.txt").read_text() == "5\n"


# --- 7. a new test module that patches the code at import --------------------------------------------

PATCHING_TEST = (
    "import calc\n\ncalc.mul = lambda a, b: a * b\n\n\ndef test_mul_again():\n    assert calc.mul(2, 3) == 6\n"
)
CLEAN_TEST = "from calc import mul\n\n\ndef test_mul_again():\n    assert mul(2, 3) == 6\n"


def test_a_new_test_module_patching_the_code_at_import_does_not_land(tmp_path: Path) -> None:
    """Harmless today (mul is right), it would judge every later plan: a plan breaking mul would
    pass with it. Held, its lines named."""
    repo = _repo(tmp_path, f"{PYTEST} tests")
    head = head_of(repo)
    data = apply_actions(repo, "patching", [create_action("tests/test_more.py", PATCHING_TEST)])
    assert_stopped(repo, data, head, "review", "ERR_RUNNER_REACH_HELD", "tests/test_more.py:3", "rewrites module calc")

    honest = apply_actions(repo, "clean", [create_action("tests/test_more.py", CLEAN_TEST)])
    assert_landed(repo, honest)
    assert honest["check"]["verdict"]["new_passing"] == 1


def test_code_that_reaches_for_the_runner_is_held_with_its_lines(tmp_path: Path) -> None:
    repo = _repo(tmp_path, f"{PYTEST} tests")
    head = head_of(repo)
    hooked = CALC + "\n\ndef pytest_runtest_logreport(report):\n    report.outcome = 'passed'\n"
    data = apply_actions(repo, "hook", [update_action("calc.py", hooked)])
    assert_stopped(repo, data, head, "review", "ERR_RUNNER_REACH_HELD", "calc.py:9", "pytest hook")
    assert data["check"]["verdict"]["lands"], apply_why(data)  # the verdict alone would have landed it
    exiting = CALC + "\n\nimport os\n\n\ndef stop():\n    os._exit(0)\n"
    data = apply_actions(repo, "exit", [update_action("calc.py", exiting)])
    assert_stopped(repo, data, head, "review", "ERR_RUNNER_REACH_HELD", "os._exit")


# --- a judge removed ---------------------------------------------------------------------------------

NODE_TEST = "const test = require('node:test');\nconst assert = require('node:assert');\n"
JS_CALC = "exports.add = (a, b) => a + b;\nexports.mul = (a, b) => a * b;\n"


@toolchains.needs("node")
def test_a_deleted_test_file_outside_the_patterns_is_held_even_with_yes(tmp_path: Path) -> None:
    """`src/mul.test.cjs` is no test to the built-in patterns: it used to be an ordinary file."""
    files = {
        "package.json": '{"name": "calc", "version": "1.0.0"}\n',
        "src/calc.js": JS_CALC.replace("a + b", "a - b"),
        "src/add.test.cjs": NODE_TEST + "const { add } = require('./calc');\ntest('add', () => "
        "assert.strictEqual(add(2, 3), 5));\n",
        "src/mul.test.cjs": NODE_TEST + "const { mul } = require('./calc');\ntest('mul', () => "
        "assert.strictEqual(mul(2, 3), 6));\n",
    }
    repo = make_repo(tmp_path / "repo", files)
    git(repo, "config", "papayu.check.command", "node --test")
    head = head_of(repo)
    # Fixes add on a red tip and deletes another test file whose test passes.
    data = apply_actions(
        repo, "drop-tests", [update_action("src/calc.js", JS_CALC), {"kind": "DELETE_FILE", "path": "src/mul.test.cjs"}]
    )
    assert_stopped(repo, data, head, "review", "ERR_TESTS_REMOVED_HELD", "mul")
    verdict = data["check"]["verdict"]
    assert verdict["fixed"] and verdict["removed"] and all("mul" in t for t in verdict["removed"]), apply_why(data)
    assert data["test_edits"] == []  # no pattern named it: the runs did

    honest = apply_actions(repo, "fix", [update_action("src/calc.js", JS_CALC)])
    assert_landed(repo, honest)


def test_a_renamed_test_file_that_drops_a_test_is_held(tmp_path: Path) -> None:
    repo = _repo(tmp_path, f"{PYTEST} tests")
    head = head_of(repo)
    renamed = "from calc import mul\n\n\ndef test_mul_is_defined():\n    assert callable(mul)\n"
    actions = [{"kind": "DELETE_FILE", "path": "tests/test_mul.py"}, create_action("tests/test_product.py", renamed)]
    data = apply_actions(repo, "rename", actions)
    assert_stopped(repo, data, head, "review", "ERR_TEST_EDITS_HELD", "tests/test_mul.py")
    assert data["check"]["verdict"]["removed"] == ["tests/test_mul.py::test_mul"], apply_why(data)


# A coding declaration makes the interpreter read other text than a reader of the bytes as UTF-8:
# in UTF-7, `+AAo-` is a newline, so a "comment" holds a statement. Read as Python reads it, and
# held for the declaration itself. Two spellings of the declaration, in code and in a new test.
UTF7_CODE = {
    "emacs": "# -*- coding: utf-7 -*-\nimport sys\n\n# alias +AAo-sys.modules['calc_alias'] = sys.modules[__name__]\n",
    "vim": "# vim: set fileencoding=utf-7 :\nimport sys\n\n# alias +AAo-sys.modules['calc_alias'] = sys.modules[__name__]\n",
}


@pytest.mark.parametrize("spelling", list(UTF7_CODE))
def test_a_statement_hidden_by_a_source_encoding_is_read_and_held(tmp_path: Path, spelling: str) -> None:
    repo = _repo(tmp_path, f"{PYTEST} tests")
    head = git(repo, "rev-parse", "main").strip()
    data = apply_actions(
        repo, f"utf7-{spelling}", [update_action("calc.py", UTF7_CODE[spelling] + "\n\n" + CALC.replace("+", "+-"))]
    )
    assert (data["state"], data["error"]["code"]) == ("review", "ERR_RUNNER_REACH_HELD"), data
    reason = data["error"]["reason"]
    assert "calc.py:1: (coding: utf-7)" in reason and "sys.modules['calc_alias']" in reason, reason
    assert git(repo, "rev-parse", "main").strip() == head


def test_a_new_test_hidden_by_a_source_encoding_is_read_and_held(tmp_path: Path) -> None:
    repo = _repo(tmp_path, f"{PYTEST} tests")
    test = (
        "# coding=utf-7\nimport calc\n\n# setup +AAo-calc.add = lambda a, b: 5\n\n\n"
        "def test_smoke():\n    assert calc.mul(1, 1) == 1\n"
    )
    data = apply_actions(
        repo, "utf7-test", [create_action("tests/test_aaa.py", test), update_action("calc.py", BROKEN)]
    )
    # The hidden rewrite makes the broken add pass in the plan's own run only: held either way, and
    # the new test's reach is read in the encoding it declares.
    assert (data["state"], data["error"]["code"]) == ("review", "ERR_JUDGE_EDITS_HELD"), data
    assert data["check"]["verdict"]["explained"] == ["tests/test_add.py::test_add"], data["check"]["verdict"]
    assert git(repo, "rev-parse", "main").strip() != data.get("commit")
    honest = "def test_smoke():\n    assert calc.mul(1, 1) == 1\n"
    alone = apply_actions(
        repo, "utf7-test-alone", [create_action("tests/test_aaa.py", test.replace(honest, "") + honest)]
    )
    assert (alone["state"], alone["error"]["code"]) == ("review", "ERR_RUNNER_REACH_HELD"), alone
    reason = alone["error"]["reason"]
    assert "tests/test_aaa.py:1: (coding: utf-7)" in reason and "calc.add = lambda a, b: 5" in reason, reason


@pytest.mark.parametrize(
    ("data_path", "reader"),
    [
        ("rates.json", "json.load(open(os.path.join(os.path.dirname(os.path.abspath(__file__)), 'rates.json')))"),
        ("pkgdata/rates.json", "json.load(open(os.path.join(os.path.dirname(__file__), 'pkgdata', 'rates.json')))"),
    ],
)
def test_a_data_file_the_code_reads_added_with_it_is_held_not_rolled_back(
    tmp_path: Path, data_path: str, reader: str
) -> None:
    """A new data file is not code: the regression run has the tip's tree without it, where the
    plan's code fails to import (its test file a collection error). The plan's own run passes, so
    the difference is the file's: held for a human, never rolled back as a regression."""
    repo = _repo(tmp_path, f"{PYTEST} tests")
    code = f"import json\nimport os\n\n_K = {reader}['k']\n\n\n" + CALC.replace("a + b", "a + b + _K")
    data = apply_actions(repo, "data-file", [create_action(data_path, '{"k": 0}\n'), update_action("calc.py", code)])
    assert (data["state"], data["error"]["code"]) == ("review", "ERR_JUDGE_EDITS_HELD"), data
    assert data_path in data["check"]["verdict"]["restored"]
    land = subprocess.run(
        [sys.executable, "-m", "papayu_git", "land", data["plan_id"]], cwd=repo, capture_output=True, text=True
    )
    assert land.returncode == 0, land.stderr
    assert git(repo, "rev-parse", "main").strip() == data["commit"]
