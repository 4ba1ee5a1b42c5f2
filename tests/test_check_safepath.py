"""The check's Python and the working directory (docs/DESIGN.md, "The check's trust boundary").

`python -m pytest` puts the working directory first on sys.path: a plan's top-level `pytest/` or
`pluggy/` would run instead of the real one. With PYTHONSAFEPATH=1 it does not, and `auto` turns
it on unless the tip imports its own code from there (a flat layout), where it would break the
tests or, worse, test an installed old copy. The projects here are real: a venv made with
`python -m venv` (pytest reaches it through a `.pth` naming papayu's own environment: no network),
a src layout installed with setuptools' `develop`, a flat one with a non-editable copy in
site-packages. Every test prints `sys.flags.safe_path` and where its code came from; the host
reads that from the check's log.
"""

from __future__ import annotations

import subprocess
import sys
import sysconfig
from pathlib import Path
from typing import Any

import pytest
from helpers import apply_json, git, make_repo, write_plan
from helpers import head_of as _head

from papayu_git import settings
from papayu_git.check import sandbox
from papayu_git.check.command import resolve_command
from papayu_git.check.diagnose import environment_causes
from papayu_git.check.safe_path import flat_modules, resolve
from papayu_git.check.sandbox import Sandbox, check_env
from papayu_git.errors import PapayuError
from papayu_git.objects import GitTree
from papayu_git.repository import open_repo

needs_bwrap = pytest.mark.skipif(
    sandbox.unavailable_reason() is not None, reason=f"bwrap does not work here: {sandbox.unavailable_reason()}"
)
needs_safe_path = pytest.mark.skipif(sys.version_info < (3, 11), reason="PYTHONSAFEPATH is Python 3.11's")

TIP, BROKEN, FIXED = "tip-3f9a", "plan-broken-3f9a", "plan-fixed-3f9a"
INSTALLED = "installed-copy-3f9a"  # an old non-editable copy in site-packages: it must not be what ran
FAKE = "FAKE-RUNNER-RAN-3f9a"  # printed by a plan's shadow of pytest or pluggy, if it ever runs
SETTING = "`git config papayu.check.pythonSafePath false`"

TEST = """\
import sys

import calc


def test_calc():
    print(f"safe_path={bool(sys.flags.safe_path)} calc from {calc.__file__} marker {calc.MARKER}", flush=True)
    assert calc.add(2, 3) == 5
    assert calc.mul(2, 3) == 6
"""
TEST_SUB = "from calc import sub\n\n\ndef test_sub():\n    assert sub(5, 3) == 2\n"
# A shadow that would make any run look green: a passing JUnit report where pytest was asked to
# write one, then exit 0 before a test runs.
SHADOW = f"""\
import os, re
print("{FAKE}", flush=True)
found = re.search(r"--junitxml=(\\S+)", os.environ.get("PYTEST_ADDOPTS", ""))
if found:
    with open(found.group(1).strip("'"), "w") as report:
        report.write('<testsuite tests="1"><testcase file="tests/test_calc.py" name="test_calc"/></testsuite>')
os._exit(0)
"""


def _calc(marker: str, mul: str = "a * b", sub: bool = True) -> str:
    code = f'MARKER = "{marker}"\n\n\ndef add(a, b):\n    return a + b\n\n\ndef mul(a, b):\n    return {mul}\n'
    return code + ("\n\ndef sub(a, b):\n    return a - b\n" if sub else "")


def _venv(repo: Path, installed: dict[str, str] | None = None) -> Path:
    """The project's .venv: pytest from papayu's own environment (a `.pth` line, read inside
    the check too), and ``installed`` files laid in site-packages as a non-editable install."""
    subprocess.run([sys.executable, "-m", "venv", "--without-pip", ".venv"], cwd=repo, check=True)
    version = f"python{sys.version_info.major}.{sys.version_info.minor}"
    site = repo / ".venv" / "lib" / version / "site-packages"
    (site / "papayu_dev_tools.pth").write_text(sysconfig.get_paths()["purelib"] + "\n")
    for name, text in (installed or {}).items():
        (site / name).write_text(text)
    return site


def _apply(repo: Path, name: str, actions: list[dict[str, str]], *args: str) -> dict[str, Any]:
    plan = write_plan(repo.parent, actions, summary=name, name=f"{name}.json")
    return apply_json(repo, plan, "-y", *args, env={"PAPAYU_PROTOCOL_VERSION": "1"})


def _file(kind: str, path: str, content: str) -> dict[str, str]:
    return {"kind": kind, "path": path, "content": content}


def _logs(data: dict[str, Any]) -> str:
    check = data.get("check") or {}
    paths = [p for p in (check.get("log"), check.get("own_log")) if p]
    return "\n---\n".join(Path(p).read_text(errors="replace") for p in paths)


# --- a src layout: on, and a plan's shadow of the runner never runs -----------------------------


@needs_bwrap
@needs_safe_path
def test_a_src_layout_checks_with_safe_path_and_a_shadow_of_the_runner_never_runs(tmp_path: Path) -> None:
    repo = make_repo(
        tmp_path / "repo",
        {
            ".gitignore": ".venv/\n*.egg-info/\n__pycache__/\n",
            "setup.py": 'from setuptools import setup\n\nsetup(name="calc", version="0.1", package_dir={"": "src"}, '
            'packages=["calc"])\n',
            "pytest.ini": "[pytest]\naddopts = -s\n",
            "src/calc/__init__.py": _calc(TIP),
            "tests/test_calc.py": TEST,
        },
    )
    _venv(repo)
    # The user's editable install: an absolute path to src/ in easy-install.pth.
    subprocess.run([".venv/bin/python", "setup.py", "-q", "develop"], cwd=repo, check=True, capture_output=True)
    own_code = f"calc from {repo / 'src/calc/__init__.py'} marker"

    good = _apply(repo, "good", [_file("UPDATE_FILE", "src/calc/__init__.py", _calc(FIXED))])
    log = _logs(good)
    assert (good["state"], good["_rc"]) == ("landed", 0), (good, log)
    assert f"{repo / '.venv/bin/python'} -m pytest -q" in log  # detected, the project's interpreter
    assert "[papayu] python: PYTHONSAFEPATH=1 (papayu.check.pythonSafePath)" in log
    assert f"safe_path=True {own_code} {FIXED}" in log, log  # inside the check, judged here
    assert good["check"]["tests"]["counts"]["passed"] == 1, good["check"]  # read from pytest's report

    # Runner shadows at the root with broken code: `pytest` (named like the runner: held, and put
    # back as on the tip for the regression run) and `pluggy` (which pytest imports: nothing holds
    # it). With the working directory off sys.path, neither runs, in any run.
    for shadow in ("pytest", "pluggy"):
        head = _head(repo)
        bad = _apply(
            repo,
            f"shadow-{shadow}",
            [
                _file("UPDATE_FILE", "src/calc/__init__.py", _calc(BROKEN, mul="a + b")),
                _file("CREATE_FILE", f"{shadow}/__init__.py", SHADOW),
            ],
        )
        log = _logs(bad)
        assert bad["state"] == "rolled_back" and bad["error"]["code"] == "ERR_CHECK_REGRESSION", (bad, log)
        assert _head(repo) == head and not (repo / shadow).exists()
        assert FAKE not in log, log
        assert f"safe_path=True {own_code} {BROKEN}" in log and "assert 5 == 6" in log, log
        assert bad["check"]["verdict"]["broken"] == ["tests/test_calc.py::test_calc"], bad["check"]

    # The same pluggy shadow with safe path forced off runs instead of pytest: what the setting stops.
    git(repo, "config", "papayu.check.pythonSafePath", "false")
    head = _head(repo)
    off = _apply(
        repo,
        "shadow-off",
        [
            _file("UPDATE_FILE", "src/calc/__init__.py", _calc(BROKEN, mul="a + b")),
            _file("CREATE_FILE", "pluggy/__init__.py", SHADOW),
        ],
        "--review",
    )
    log = _logs(off)
    assert "[papayu] python: no PYTHONSAFEPATH" in log and FAKE in log, log
    assert _head(repo) == head


# --- a flat layout: off in auto, and forced on the diagnosis names the setting -------------------


@needs_bwrap
@needs_safe_path
def test_a_flat_layout_checks_the_working_directorys_code_and_forced_on_the_diagnosis_says_why(
    tmp_path: Path,
) -> None:
    repo = make_repo(
        tmp_path / "repo",
        {
            ".gitignore": ".venv/\n__pycache__/\n",
            "pyproject.toml": '[project]\nname = "calc"\nversion = "0.1"\n',
            "pytest.ini": "[pytest]\naddopts = -s\n",
            "calc.py": _calc(TIP),
            "tests/test_calc.py": TEST,
            "tests/test_sub.py": TEST_SUB,
        },
    )
    # An old non-editable install of the project: right for add and mul, without sub. The check
    # must test the plan's calc.py, never this copy.
    site = _venv(repo, {"calc.py": _calc(INSTALLED, sub=False)})
    own_code = f"calc from {repo / 'calc.py'} marker"

    head = _head(repo)
    bad = _apply(repo, "broken", [_file("UPDATE_FILE", "calc.py", _calc(BROKEN, mul="a + b"))])
    log = _logs(bad)
    assert bad["state"] == "rolled_back" and bad["error"]["code"] == "ERR_CHECK_REGRESSION", (bad, log)
    assert _head(repo) == head
    assert "[papayu] python: no PYTHONSAFEPATH (papayu.check.pythonSafePath)" in log
    assert f"safe_path=False {own_code} {BROKEN}" in log and INSTALLED not in log, log

    good = _apply(repo, "fixed", [_file("UPDATE_FILE", "calc.py", _calc(FIXED))])
    log = _logs(good)
    assert (good["state"], good["_rc"]) == ("landed", 0), (good, log)
    assert f"safe_path=False {own_code} {FIXED}" in log and INSTALLED not in log, log
    assert good["check"]["tests"]["counts"]["passed"] == 2, good["check"]

    # Forced on: the installed copy stands in for calc.py; its missing sub() is named with the fix.
    git(repo, "config", "papayu.check.pythonSafePath", "true")
    head = _head(repo)
    forced = _apply(repo, "forced", [_file("UPDATE_FILE", "calc.py", _calc(FIXED + "-2"))])
    log = _logs(forced)
    assert forced["state"] != "landed" and _head(repo) == head, (forced, log)
    assert f"ImportError: cannot import name 'sub' from 'calc' ({site / 'calc.py'})" in log, log
    [cause] = [c for c in forced["check"]["environment"] if "PYTHONSAFEPATH" in c]
    assert f"module 'calc' came from {site / 'calc.py'}, not from the repository's calc.py" in cause, cause
    assert SETTING in cause

    # No installed copy: calc is not found at all, and the diagnosis says the same.
    (site / "calc.py").unlink()
    missing = _apply(repo, "missing", [_file("UPDATE_FILE", "calc.py", _calc(FIXED + "-3"))])
    log = _logs(missing)
    assert missing["state"] != "landed" and _head(repo) == head, (missing, log)
    assert "ModuleNotFoundError: No module named 'calc'" in log, log
    [cause] = [c for c in missing["check"]["environment"] if "'calc'" in c]
    assert cause.startswith("module 'calc' was not found, but the repository has calc.py") and SETTING in cause


# --- the rule, on trees -------------------------------------------------------------------------

SRC_LAYOUT = {
    "setup.py": "",
    "pyproject.toml": "",
    "conftest.py": "",
    "noxfile.py": "",
    "tasks.py": "",
    "src/calc/__init__.py": "",
    "tests/__init__.py": "",
    "tests/test_calc.py": "",
    "docs/__init__.py": "",
    "docs/conf.py": "",
    "scripts/__init__.py": "",
    "scripts/release.py": "",
    "tools/gen.py": "",  # a namespace package: no __init__.py
}


@pytest.mark.parametrize(
    ("files", "modules"),
    [
        (SRC_LAYOUT, []),
        ({"package.json": "{}", "index.js": "", "lib/a.js": ""}, []),  # not Python at all
        ({"README.md": "", "my-script.py": "", "__main__.py": "", "__init__.py": ""}, []),  # not importable by name
        ({**SRC_LAYOUT, "calc.py": ""}, ["calc.py"]),
        ({"calc/__init__.py": "", "tests/test_calc.py": ""}, ["calc/"]),
        ({"src/__init__.py": "", "src/calc.py": ""}, ["src/"]),  # `from src.calc import …` from the root
        ({"test_calc.py": ""}, ["test_calc.py"]),  # `python -m unittest test_calc` imports it by name
        ({"backend/pyproject.toml": "", "backend/app/__init__.py": ""}, ["backend/app/"]),  # `cd backend && …`
        ({"services/api/setup.cfg": "", "services/api/api.py": ""}, ["services/api/api.py"]),
        ({"a/b/c/pyproject.toml": "", "a/b/c/deep.py": ""}, []),  # subprojects deeper than 2 are not looked at
        ({"backend/app/__init__.py": ""}, []),  # no manifest: not a subproject
        ({**SRC_LAYOUT, "examples/demo/pyproject.toml": "", "examples/demo/demo.py": ""}, []),  # click's examples
    ],
    ids=[
        "src-layout",
        "not-python",
        "unimportable",
        "flat-module",
        "flat-package",
        "src-package",
        "root-test",
        "subproject",
        "nested-subproject",
        "too-deep",
        "no-manifest",
        "example-projects",
    ],
)
def test_auto_is_off_only_where_the_tip_imports_its_own_code_from_a_project_directory(
    tmp_path: Path, files: dict[str, str], modules: list[str]
) -> None:
    tree = _tree(make_repo(tmp_path / "repo", {"README.md": "x\n", **files}))
    assert sorted(flat_modules(tree)) == sorted(modules)
    assert resolve(tmp_path / "repo", tree) is (not modules)


def _tree(repo: Path) -> GitTree:
    pyrepo = open_repo(repo)
    return GitTree(pyrepo, pyrepo[pyrepo.head.target].tree)


@pytest.mark.parametrize(("value", "flat", "on"), [("true", True, True), ("false", False, False), ("", True, False)])
def test_the_setting_forces_it_and_rides_on_the_command_resolved_on_the_tip(
    tmp_path: Path, value: str, flat: bool, on: bool
) -> None:
    files = {"calc.py": "", "tests/test_calc.py": ""} if flat else {"src/calc/__init__.py": "", "tests/test_c.py": ""}
    repo = make_repo(tmp_path / "repo", {"setup.py": "", **files})
    if value:
        git(repo, "config", "papayu.check.pythonSafePath", value)
    settings.forget_cached_config()
    found = resolve_command(repo, _tree(repo), "python -m pytest")
    assert found is not None and found.python_safe_path is on
    assert ("PYTHONSAFEPATH" in check_env("/h", "/t", str(repo), python_safe_path=found.python_safe_path)) is on


def test_an_unknown_value_is_refused(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    repo = make_repo(tmp_path / "repo")
    monkeypatch.setenv("PAPAYU_CHECK_PYTHON_SAFE_PATH", "sometimes")
    with pytest.raises(PapayuError) as caught:
        resolve(repo, _tree(repo))
    assert (caught.value.code, caught.value.path) == ("ERR_CONFIG_INVALID", "papayu.check.pythonSafePath")


def test_the_setting_decides_over_a_passed_through_variable(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("PYTHONSAFEPATH", "1")
    monkeypatch.setenv("PAPAYU_CHECK_ENV", "PYTHONSAFEPATH")
    assert check_env("/h", "/t")["PYTHONSAFEPATH"] == "1"  # undecided (a model's command): as passed
    assert "PYTHONSAFEPATH" not in check_env("/h", "/t", python_safe_path=False)
    assert check_env("/h", "/t", python_safe_path=True)["PYTHONSAFEPATH"] == "1"


def test_the_diagnosis_names_the_setting_only_for_the_repositorys_own_modules(tmp_path: Path) -> None:
    repo = make_repo(tmp_path / "repo", {"calc.py": "", "backend/pyproject.toml": "", "backend/app/__init__.py": ""})
    box = Sandbox("bwrap", "bwrap", False)
    text = (
        "E   ModuleNotFoundError: No module named 'calc'\n"
        "E   ModuleNotFoundError: No module named 'app.models'\n"
        "E   ModuleNotFoundError: No module named 'requests'\n"
    )
    on = environment_causes(text, repo, box, safe_path=True)
    assert [c.split(":")[0] for c in on] == [
        "module 'calc' was not found, but the repository has calc.py",
        "module 'app.models' was not found, but the repository has backend/app",
        "module 'requests' was not found in the check's environment",
    ]
    assert SETTING in on[0] and SETTING in on[1] and SETTING not in on[2]
    off = environment_causes(text, repo, box, safe_path=False)
    assert not any("pythonSafePath" in c for c in off) and len(off) == 3
    installed = "ImportError: cannot import name 'sub' from 'calc' (/venv/lib/python3.11/site-packages/calc.py)\n"
    [cause] = environment_causes(installed, repo, box, safe_path=True)
    assert "came from /venv/lib/python3.11/site-packages/calc.py, not from the repository's calc.py" in cause
    own = f"ImportError: cannot import name 'sub' from 'calc' ({repo / 'calc.py'})\n"
    assert environment_causes(own, repo, box, safe_path=True) == []  # the repository's own: the plan's doing


def test_a_script_importing_its_neighbour_is_diagnosed_with_both_ways_out(tmp_path: Path) -> None:
    # What Python itself prints for `python tools/gen.py` under PYTHONSAFEPATH=1 (real run).
    repo = make_repo(
        tmp_path / "repo",
        {"pyproject.toml": "", "src/app/__init__.py": "", "tools/gen.py": "import helper\n", "tools/helper.py": ""},
    )
    env = {"PATH": "/usr/bin:/bin", "PYTHONSAFEPATH": "1"}
    ran = subprocess.run([sys.executable, "tools/gen.py"], cwd=repo, env=env, capture_output=True, text=True)
    assert ran.returncode == 1 and "No module named 'helper'" in ran.stderr, ran.stderr
    assert subprocess.run([sys.executable, "tools/gen.py"], cwd=repo, env={"PATH": "/usr/bin:/bin"}).returncode == 0
    box = Sandbox("bwrap", "bwrap", False)
    [cause] = environment_causes(ran.stderr, repo, box, safe_path=True)
    assert cause.startswith(
        "module 'helper' was not found, but it is next to the script tools/gen.py (tools/helper.py)"
    )
    assert "`python -m tools.gen`" in cause and SETTING in cause
    # Without safe path the neighbour was importable: the module is missing from the environment.
    [cause] = environment_causes(ran.stderr, repo, box, safe_path=False)
    assert cause.startswith("module 'helper' was not found in the check's environment")
    # A missing module next to no script of the traceback is the environment's, as before.
    other = ran.stderr.replace("'helper'", "'yaml'")
    [cause] = environment_causes(other, repo, box, safe_path=True)
    assert cause.startswith("module 'yaml' was not found in the check's environment")
