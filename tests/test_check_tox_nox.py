"""tox and nox through the real CLI (`apply PLAN -y --json`) and the real sandbox: the session's
commands run in its existing environment offline, the project installed there as a copy is stood
in for by the plan's source, and the inner unittest or pytest is read per test.

Verified on hukkin/tomli (`tox -e 3.11`, tox's config in pyproject.toml, the package built as an
sdist and installed as a copy, `python -m unittest` inside: 16 tests read; a plan changing the
"binary mode" message rolled back naming exactly `tests/test_misc.py::TestMiscellaneous::
test_incorrect_load`, a comment landed) and pypa/packaging (`nox -s tests-3.11`, an editable
install, pytest inside: 62435 tests read); docs/BENCHMARKS.md. Before, tox rebuilt the package in
the check and pip's isolated build could not reach PyPI ("a name did not resolve"), and neither
runner's tests were read. Here: a tomli-like project (src layout, setuptools built as an sdist by
tox, unittest) and a flat-layout project nox installs as a copy (`session.install(".")`, pytest),
both launched through a link in ~/.local/bin into the tool's own virtualenv, as pipx installs them
(`python -E`: the launcher reads no PYTHON* variable).
"""

from __future__ import annotations

import os
import subprocess
from pathlib import Path
from typing import Any

import pytest
import toolchains
from helpers import apply_json, git, make_repo, write_plan

from papayu_git.check import sandbox

pytestmark = pytest.mark.skipif(
    sandbox.unavailable_reason() is not None, reason=f"bwrap: {sandbox.unavailable_reason()}"
)

PARSER = '''\
"""A lil' parser of `key = value` lines."""


def load(fp):
    """Parse from a binary file object."""
    data = fp.read()
    try:
        text = data.decode()
    except AttributeError:
        raise TypeError("File must be opened in binary mode") from None
    return loads(text)


def loads(text):
    """Parse from a string."""
    out = {}
    for line in text.splitlines():
        if line.strip():
            key, _, value = line.partition("=")
            out[key.strip()] = value.strip()
    return out
'''

TEST_MISC = """\
import io
import unittest

from tomlet import _parser


class TestMiscellaneous(unittest.TestCase):
    def test_load(self):
        self.assertEqual(_parser.load(io.BytesIO(b"a = 1")), {"a": "1"})

    def test_incorrect_load(self):
        with self.assertRaises(TypeError) as caught:
            _parser.load(io.StringIO("a = 1"))
        self.assertEqual(str(caught.exception), "File must be opened in binary mode")

    def test_loads(self):
        self.assertEqual(_parser.loads("a = 1\\n\\nb = 2"), {"a": "1", "b": "2"})
"""

PYPROJECT = """\
[build-system]
requires = ["setuptools>=61"]
build-backend = "setuptools.build_meta"

[project]
name = "tomlet"
version = "2.4.0"

[tool.tox]
env_list = ["3.11"]

[tool.tox.env_run_base]
commands = [["python", "-m", "unittest"]]
"""

NOXFILE = """\
import nox


@nox.session(venv_backend="virtualenv")
def tests(session):
    session.install(".", "pytest")
    session.run("pytest", "-q", "tests")
"""


def _tool(name: str) -> dict[str, str]:
    """The environment with ``name`` linked into ~/.local/bin, as pipx installs it."""
    try:
        launcher = toolchains.python_tool(name)
        wheels = toolchains.wheelhouse("setuptools>=61", "pytest")
    except toolchains.Unavailable as exc:
        pytest.skip(str(exc))
    local = Path(os.environ["HOME"]) / ".local" / "bin"
    local.mkdir(parents=True, exist_ok=True)
    (local / name).symlink_to(launcher)
    path = f"{local}{os.pathsep}{os.environ['PATH']}"
    # Offline from the wheel directory, as the user's environment was made online once.
    return {"PATH": path, "PIP_FIND_LINKS": str(wheels), "PIP_NO_INDEX": "1"}


def _setup(repo: Path, command: list[str], env: dict[str, str]) -> None:
    proc = subprocess.run(command, cwd=repo, env={**os.environ, **env}, capture_output=True, text=True, timeout=600)
    assert proc.returncode == 0, proc.stdout[-2000:] + proc.stderr[-2000:]


def _apply(repo: Path, path: str, name: str, old: str, new: str, env: dict[str, str]) -> dict[str, Any]:
    text = (repo / path).read_text()
    assert old in text
    actions = [{"kind": "UPDATE_FILE", "path": path, "content": text.replace(old, new, 1)}]
    plan = write_plan(repo.parent, actions, summary=name, name=f"{name}.json")
    return apply_json(repo, plan, "-y", env={"PAPAYU_PROTOCOL_VERSION": "1", "PATH": env["PATH"]})


@pytest.mark.slow
def test_a_tox_session_runs_offline_in_its_environment_and_unittest_is_read(tmp_path: Path) -> None:
    env = _tool("tox")
    files = {
        "pyproject.toml": PYPROJECT,
        "src/tomlet/__init__.py": "from tomlet._parser import load, loads\n",
        "src/tomlet/_parser.py": PARSER,
        "tests/__init__.py": "",
        "tests/test_misc.py": TEST_MISC,
        ".gitignore": ".tox/\n",
    }
    repo = make_repo(tmp_path / "repo", files)
    _setup(repo, ["tox", "-e", "3.11"], env)  # the user's own run: the sdist built and installed as a copy
    copies = list((repo / ".tox" / "3.11").glob("lib/python*/site-packages/tomlet/_parser.py"))
    assert copies and "binary mode" in copies[0].read_text()
    git(repo, "config", "papayu.check.command", "tox -e 3.11")
    tip = git(repo, "rev-parse", "HEAD").strip()

    broken = _apply(repo, "src/tomlet/_parser.py", "break", "binary mode", "bytes mode", env)
    assert (broken["state"], broken["error"]["code"]) == ("rolled_back", "ERR_CHECK_REGRESSION"), broken
    assert broken["check"]["tests"]["source"] == "unittest stream", broken
    assert broken["check"]["verdict"]["broken"] == ["tests/test_misc.py::TestMiscellaneous::test_incorrect_load"]
    assert git(repo, "rev-parse", "HEAD").strip() == tip
    log = Path(broken["check"]["log"]).read_text()
    assert "skip building and installing the package" in log  # tox's own words: no rebuild, no network
    assert ".tox/3.11 holds tomlet 2.4.0 installed as a copy of the tree" in log

    comment = _apply(repo, "src/tomlet/_parser.py", "comment", "def loads(text):\n", "def loads(text):  # str\n", env)
    assert (comment["state"], comment["_rc"]) == ("landed", 0), comment
    assert comment["check"]["tests"]["counts"]["passed"] == 3

    # The setting that rebuilds: tox builds and installs as it does directly, which needs PyPI.
    git(repo, "config", "papayu.check.reinstall", "true")
    rebuilt = _apply(repo, "src/tomlet/_parser.py", "rebuilt", "# str\n", "# a str\n", env)
    assert rebuilt["state"] == "rolled_back", rebuilt
    assert "install_package" in Path(rebuilt["check"]["log"]).read_text()


@pytest.mark.slow
def test_a_nox_session_reuses_its_environment_and_pytest_is_read(tmp_path: Path) -> None:
    env = _tool("nox")
    files = {
        "pyproject.toml": PYPROJECT.split("[tool.tox]")[0].replace("tomlet", "calc"),
        "calc/__init__.py": "def twice(n):\n    return n * 2\n\n\ndef half(n):\n    return n / 2\n",
        "tests/test_calc.py": "import calc\n\n\ndef test_twice():\n    assert calc.twice(3) == 6\n\n\n"
        "def test_half():\n    assert calc.half(6) == 3\n",
        "noxfile.py": NOXFILE,
        ".gitignore": ".nox/\n",
    }
    repo = make_repo(tmp_path / "repo", files)
    _setup(repo, ["nox", "-s", "tests"], env)
    git(repo, "config", "papayu.check.command", "nox -s tests")

    broken = _apply(repo, "calc/__init__.py", "break", "n * 2", "n * 3", env)
    assert (broken["state"], broken["error"]["code"]) == ("rolled_back", "ERR_CHECK_REGRESSION"), broken
    assert broken["check"]["verdict"]["broken"] == ["tests/test_calc.py::test_twice"], broken
    assert "pytest stream" in broken["check"]["tests"]["source"]
    log = Path(broken["check"]["log"]).read_text()
    assert "holds calc 2.4.0 installed as a copy of the tree" in log and "$ nox -s tests" in log

    comment = _apply(repo, "calc/__init__.py", "comment", "def half(n):\n", "def half(n):  # n / 2\n", env)
    assert (comment["state"], comment["_rc"]) == ("landed", 0), comment
    assert comment["check"]["tests"]["counts"]["passed"] == 2

    # A plan changing the packaging: the copy's metadata is not rebuilt, and the log says what would.
    bumped = _apply(repo, "pyproject.toml", "bump", 'version = "2.4.0"', 'version = "2.5.0"', env)
    assert bumped["state"] == "landed", bumped
    log = Path(bumped["check"]["own_log"]).read_text()  # the plan's own run: its pyproject.toml
    assert "pyproject.toml differ from your tree's" in log and "papayu.check.reinstall true" in log
