"""Tools installed outside the repository the usual ways, through the real CLI (`apply PLAN -y
--json`) and the real sandbox: the check resolves each program to the installation it belongs
to and sees exactly that, read-only.

Verified on unjs/pathe with pnpm installed by `npm install -g --prefix ~/.local pnpm`, whose
`~/.local/bin/pnpm` links to `../lib/node_modules/pnpm/bin/pnpm.cjs`: pnpm could not load its
own `dist/` in the check (only the bin directory was given), so every pnpm project got a false
red; now 381 vitest tests are read there (docs/BENCHMARKS.md). Here: the same installation of
pnpm in the test's HOME, and a runner script in an ignored `.tools/bin` on PATH.
"""

from __future__ import annotations

import json
import os
import shutil
import subprocess
import sys
from pathlib import Path
from typing import Any

import pytest
import toolchains
from helpers import apply_json, git, make_repo, write_plan

from papayu_git.check import sandbox

pytestmark = pytest.mark.skipif(
    sandbox.unavailable_reason() is not None, reason=f"bwrap: {sandbox.unavailable_reason()}"
)

FILES = {
    "lib.js": "exports.twice = (n) => n * 2;\nexports.half = (n) => n / 2;\n",
    "test/twice.test.js": "const test = require('node:test');\nconst assert = require('node:assert');\n"
    "const { twice } = require('../lib');\ntest('twice', () => assert.strictEqual(twice(3), 6));\n",
    "test/half.test.js": "const test = require('node:test');\nconst assert = require('node:assert');\n"
    "const { half } = require('../lib');\ntest('half', () => assert.strictEqual(half(6), 3));\n",
}


def _apply(repo: Path, name: str, content: str, env: dict[str, str]) -> dict[str, Any]:
    plan = write_plan(repo.parent, [{"kind": "UPDATE_FILE", "path": "lib.js", "content": content}], name=f"{name}.json")
    return apply_json(repo, plan, "-y", env={"PAPAYU_PROTOCOL_VERSION": "1", **env})


def _judged_per_test(repo: Path, env: dict[str, str]) -> None:
    broken = _apply(repo, "break", FILES["lib.js"].replace("n * 2", "n * 3"), env)
    assert (broken["state"], broken["error"]["code"]) == ("rolled_back", "ERR_CHECK_REGRESSION"), broken
    assert broken["check"]["verdict"]["broken"] == ["test/twice.test.js > twice"], broken
    comment = _apply(repo, "comment", "// Arithmetic.\n" + FILES["lib.js"], env)
    assert (comment["state"], comment["_rc"]) == ("landed", 0), comment
    assert comment["check"]["tests"]["counts"]["passed"] == 2


TWICE = "def twice(n):\n    return n * 2\n"


def _twice_judged(repo: Path, env: dict[str, str]) -> dict[str, Any]:
    """A plan breaking calc.py's twice rolls back naming its unittest test; a comment lands (its
    result returned)."""

    def apply(name: str, content: str) -> dict[str, Any]:
        plan = write_plan(repo.parent, [{"kind": "UPDATE_FILE", "path": "calc.py", "content": content}], name=name)
        return apply_json(repo, plan, "-y", env={**env, "PAPAYU_PROTOCOL_VERSION": "1"})

    broken = apply("break.json", TWICE.replace("n * 2", "n * 3"))
    assert (broken["state"], broken["error"]["code"]) == ("rolled_back", "ERR_CHECK_REGRESSION"), broken
    assert broken["check"]["verdict"]["broken"] == ["tests/test_calc.py::T::test_twice"], broken
    comment = apply("comment.json", "# Arithmetic.\n" + TWICE)
    assert (comment["state"], comment["_rc"]) == ("landed", 0), comment
    return comment


def test_pnpm_installed_with_npm_under_local_runs_in_the_check(tmp_path: Path) -> None:
    try:
        bin_dir = toolchains.npm_global(Path(os.environ["HOME"]) / ".local", f"pnpm@{toolchains.PNPM_VERSION}")
    except toolchains.Unavailable as exc:
        pytest.skip(str(exc))
    assert os.readlink(bin_dir / "pnpm") == "../lib/node_modules/pnpm/bin/pnpm.cjs"
    files = {**FILES, "package.json": json.dumps({"name": "calc", "scripts": {"test": "node --test"}})}
    repo = make_repo(tmp_path / "repo", dict(files))
    git(repo, "config", "papayu.check.command", "pnpm test")
    _judged_per_test(repo, {"PATH": f"{bin_dir}{os.pathsep}{os.environ['PATH']}"})


def test_a_runner_in_an_ignored_tools_directory_on_path_runs_in_the_check(tmp_path: Path) -> None:
    tests = "import unittest\n\nfrom calc import twice\n\n\nclass T(unittest.TestCase):\n"
    tests += "    def test_twice(self):\n        self.assertEqual(twice(3), 6)\n"
    files = {"calc.py": TWICE, "tests/__init__.py": "", "tests/test_calc.py": tests, ".gitignore": ".tools/\n"}
    repo = make_repo(tmp_path / "repo", files)
    tools = repo / ".tools" / "bin"
    tools.mkdir(parents=True)  # ignored: the plan's checkout has no .tools at all
    (tools / "run-tests").write_text(f"#!/bin/sh\nexec {sys.executable} -m unittest discover -s tests -t .\n")
    (tools / "run-tests").chmod(0o755)
    git(repo, "config", "papayu.check.command", "run-tests")
    _twice_judged(repo, {"PATH": f"{tools}{os.pathsep}{os.environ['PATH']}"})


SHOUT_GO = 'package main\n\nimport (\n\t"fmt"\n\t"os"\n\t"strings"\n)\n\nfunc main() { fmt.Println(strings.ToUpper(os.Args[1])) }\n'
SHOUT_RS = 'fn main() {\n    println!("{}", std::env::args().nth(1).unwrap().to_uppercase());\n}\n'
TOOL_TESTS = """\
import subprocess
import unittest

from calc import twice


class T(unittest.TestCase):
    def test_twice(self):
        self.assertEqual(twice(3), 6)

    def test_the_tool(self):
        out = subprocess.run(["shout", "hi"], capture_output=True, text=True, check=True).stdout
        self.assertEqual(out.strip(), "HI")
"""


def _installed(kind: str, source: Path) -> Path:
    """`go install` into ~/go/bin or `cargo install` into ~/.cargo/bin of the test's HOME: the
    directory the tool was put in, as its user has it on PATH."""
    home = Path(os.environ["HOME"])
    if kind == "go install":
        if shutil.which("go") is None:
            pytest.skip("go is not installed")
        (source / "go.mod").write_text("module example.com/shout\n\ngo 1.21\n")
        (source / "main.go").write_text(SHOUT_GO)
        env = {**os.environ, "GOBIN": str(home / "go" / "bin"), "GOTOOLCHAIN": "local", "GOFLAGS": "-buildvcs=false"}
        subprocess.run(["go", "install", "."], cwd=source, env=env, check=True, capture_output=True, timeout=600)
        return home / "go" / "bin"
    if shutil.which("cargo") is None:
        pytest.skip("cargo is not installed")
    (source / "src").mkdir()
    (source / "Cargo.toml").write_text('[package]\nname = "shout"\nversion = "0.1.0"\nedition = "2021"\n')
    (source / "src" / "main.rs").write_text(SHOUT_RS)
    root = ["--root", str(home / ".cargo")]
    env = {"RUSTUP_HOME": str(toolchains.REAL_HOME / ".rustup"), **os.environ}  # the toolchain stays where it is
    args = ["cargo", "install", "--offline", "--path", ".", *root]
    subprocess.run(args, cwd=source, env=env, check=True, capture_output=True, timeout=600)
    return home / ".cargo" / "bin"


@pytest.mark.parametrize("kind", ["go install", "cargo install"])
def test_a_tool_built_by_a_toolchains_installer_runs_in_the_check(tmp_path: Path, kind: str) -> None:
    source = tmp_path / "shout"
    source.mkdir()
    bin_dir = _installed(kind, source)
    files = {"calc.py": TWICE, "tests/__init__.py": "", "tests/test_calc.py": TOOL_TESTS}
    repo = make_repo(tmp_path / "repo", files)
    git(repo, "config", "papayu.check.command", f"{sys.executable} -m unittest discover -s tests -t .")
    comment = _twice_judged(repo, {"PATH": f"{bin_dir}{os.pathsep}{os.environ['PATH']}"})
    assert comment["check"]["tests"]["counts"]["passed"] == 2  # the tool ran in the check


NRUN_CLI = (
    "#!/usr/bin/env node\nconst { spawnSync } = require('node:child_process');\n"
    "const defaults = require('../share/defaults.json');\n"
    "process.exitCode = spawnSync(process.execPath, ['--test', ...defaults.extra], { stdio: 'inherit' }).status;\n"
)
HOME_TEST = (
    "const test = require('node:test');\nconst assert = require('node:assert');\nconst fs = require('node:fs');\n"
    "const path = require('node:path');\nconst os = require('node:os');\n"
    "test('home', () => {\n  assert.strictEqual(fs.existsSync(path.join(os.homedir(), 'bin', 'notes.txt')), false);\n"
    "  assert.ok(fs.existsSync(path.join(os.homedir(), 'bin', 'nrun')));\n});\n"
)


@pytest.mark.skipif(shutil.which("node") is None, reason="node is not installed")
def test_a_tool_linked_through_a_chain_into_a_personal_bin_runs_and_the_rest_of_it_stays_hidden(
    tmp_path: Path,
) -> None:
    """~/bin/nrun -> ../opt/nrun/bin/nrun -> ../lib/cli.js, which reads ../share: every link on
    the way is there, and of ~/bin only its programs (a note beside them is not)."""
    home = Path(os.environ["HOME"])
    prefix = home / "opt" / "nrun"
    for sub in ("bin", "lib", "share"):
        (prefix / sub).mkdir(parents=True, exist_ok=True)
    (prefix / "lib" / "cli.js").write_text(NRUN_CLI)
    (prefix / "lib" / "cli.js").chmod(0o755)
    junit = '["--test-reporter=spec", "--test-reporter-destination=stdout", '
    junit += '"--test-reporter=junit", "--test-reporter-destination=junit.xml"]'
    (prefix / "share" / "defaults.json").write_text('{"extra": %s}\n' % junit)
    (prefix / "bin" / "nrun").symlink_to("../lib/cli.js")
    (home / "bin").mkdir(exist_ok=True)
    (home / "bin" / "nrun").symlink_to("../opt/nrun/bin/nrun")
    (home / "bin" / "notes.txt").write_text("my private diary\n")
    repo = make_repo(tmp_path / "repo", {**FILES, "test/home.test.js": HOME_TEST})
    git(repo, "config", "papayu.check.command", "nrun")
    git(repo, "config", "papayu.check.junit", "junit.xml")
    env = {"PATH": f"{home / 'bin'}{os.pathsep}{os.environ['PATH']}"}
    broken = _apply(repo, "break", FILES["lib.js"].replace("n * 2", "n * 3"), env)
    assert (broken["state"], broken["error"]["code"]) == ("rolled_back", "ERR_CHECK_REGRESSION"), broken
    assert [t.rsplit(":", 1)[-1] for t in broken["check"]["verdict"]["broken"]] == ["twice"], broken
    comment = _apply(repo, "comment", "// Arithmetic.\n" + FILES["lib.js"], env)
    assert (comment["state"], comment["_rc"]) == ("landed", 0), comment
    assert comment["check"]["tests"]["counts"]["passed"] == 3  # home's test among them: the note is not there


def test_a_package_installed_for_the_user_is_seen_by_the_checks_interpreter(tmp_path: Path) -> None:
    """`pip install --user`: ~/.local/lib/pythonX.Y/site-packages, read by a base interpreter."""
    python = Path(sys.base_prefix) / "bin" / f"python{sys.version_info[0]}.{sys.version_info[1]}"
    version = f"python{sys.version_info[0]}.{sys.version_info[1]}"
    site = Path(os.environ["HOME"]) / ".local" / "lib" / version / "site-packages"
    site.mkdir(parents=True, exist_ok=True)
    (site / "usertwice.py").write_text("def expected(n):\n    return n * 2\n")
    tests = (
        "import unittest\n\nfrom usertwice import expected\n\nfrom calc import twice\n\n\nclass T(unittest.TestCase):\n"
    )
    tests += "    def test_twice(self):\n        self.assertEqual(twice(3), expected(3))\n"
    repo = make_repo(tmp_path / "repo", {"calc.py": TWICE, "tests/__init__.py": "", "tests/test_calc.py": tests})
    git(repo, "config", "papayu.check.command", f"{python} -m unittest discover -s tests -t .")
    _twice_judged(repo, {})
