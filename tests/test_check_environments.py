"""The check on real project environments, one per setup: the user's environment made the way
a user makes it (a venv with `pip install -e`, `uv sync`, `npm install` with workspaces, a warm
cargo `target/`, `make`), then a broken plan that must roll back and a correct one that must
land. The check's own output says whose code ran: every project prints where its code was
loaded from and a marker that only the plan's version carries; the user's committed code, which
would give another answer, never runs. Nothing the check does reaches the user's environment.

A setup is skipped only when its toolchain is absent here, and the skip says which.
"""

from __future__ import annotations

import json
import os
import shlex
import subprocess
import sys
import textwrap
from pathlib import Path
from typing import Any

import pytest
import toolchains
from helpers import apply_json, git, make_repo, rust_env, write_plan
from tiers import PACKAGING, uses

from papayu_git.check import sandbox

# Read at import, before the hermetic fixture points HOME at a temp directory: where rustup
# keeps its toolchains on this machine (a user's shell finds them through their real HOME).

pytestmark = pytest.mark.skipif(
    sandbox.unavailable_reason() is not None, reason=f"bwrap does not work here: {sandbox.unavailable_reason()}"
)

USER_MARKER = "user-committed"  # the committed code: it must never be what the check ran
BROKEN_MARKER = "plan-broken-5b1e"
FIXED_MARKER = "plan-fixed-5b1e"


# --- running things ---------------------------------------------------------------------------


def _run(argv: list[str], cwd: Path, env: dict[str, str] | None = None, timeout: float = 300) -> str:
    """A setup step as the user would run it; its output when it fails."""
    proc = subprocess.run(
        argv, cwd=cwd, capture_output=True, text=True, timeout=timeout, env={**os.environ, **(env or {})}
    )
    assert proc.returncode == 0, f"{argv} failed ({proc.returncode}):\n{proc.stdout}\n{proc.stderr}"
    return proc.stdout + proc.stderr


def _update(path: str, content: str) -> dict[str, str]:
    return {"kind": "UPDATE_FILE", "path": path, "content": content}


def _apply(
    repo: Path, tmp_path: Path, name: str, actions: list[dict[str, str]], env: dict[str, str], *args: str
) -> dict[str, Any]:
    plan = write_plan(tmp_path, actions, summary=name, name=f"{name}.json")
    return apply_json(repo, plan, "-y", *args, env={"PAPAYU_PROTOCOL_VERSION": "1", **env})


def _log(data: dict[str, Any]) -> str:
    assert data.get("check"), data
    return Path(data["check"]["log"]).read_text(encoding="utf-8", errors="replace")


def _entries(directory: Path) -> dict[str, tuple[str, int, int]]:
    """Every entry under ``directory`` (symlinks not followed): kind, size and mtime, or target."""
    out: dict[str, tuple[str, int, int]] = {}
    for dirpath, dirnames, filenames in os.walk(directory):
        for name in dirnames + filenames:
            path = Path(dirpath) / name
            info = path.lstat()
            kind = os.readlink(path) if path.is_symlink() else ("dir" if path.is_dir() else "file")
            out[str(path.relative_to(directory))] = (kind, info.st_size, info.st_mtime_ns)
    return out


def _broken_then_fixed(
    repo: Path, tmp_path: Path, path: str, broken: str, fixed: str, env: dict[str, str] | None = None
) -> tuple[str, str]:
    """The broken plan rolls back (the branch stays), the fixed one lands (the branch moves to
    its commit, the work tree has it); both checks ran sandboxed. Their logs."""
    env = env or {}
    head = git(repo, "rev-parse", "HEAD").strip()
    bad = _apply(repo, tmp_path, "broken", [_update(path, broken)], env)
    bad_log = _log(bad)
    # The tip's own test fails (its committed code is wrong): with per-test results a plan that
    # fixes nothing stops at review; by exit code alone (unittest, make) it is rolled back.
    by_exit_code = bad["check"]["tests"]["source"] == "exit code only"
    assert bad["state"] == ("rolled_back" if by_exit_code else "review") and bad["_rc"] != 0, (bad, bad_log)
    assert by_exit_code or bad["error"]["code"] == "ERR_CHECK_FIXES_NOTHING", bad["error"]
    assert bad["check"]["sandbox"] == "bwrap" and bad["check"]["exit_code"] not in (0, None), bad["check"]
    assert git(repo, "rev-parse", "HEAD").strip() == head and git(repo, "status", "--porcelain") == ""
    good = _apply(repo, tmp_path, "fixed", [_update(path, fixed)], env)
    good_log = _log(good)
    assert good["state"] == "landed" and good["_rc"] == 0, (good, good_log)
    assert good["check"]["sandbox"] == "bwrap" and good["check"]["passed"], good["check"]
    assert git(repo, "rev-parse", "HEAD").strip() == good["commit"] != head
    assert (repo / path).read_text() == fixed
    for log in (bad_log, good_log):
        assert USER_MARKER not in log, log  # the user's committed code never ran
    return bad_log, good_log


# --- Python: a venv with an editable install ----------------------------------------------------

# One project file for the venv and the uv setups; only how pytest is asked for differs.
PYPROJECT_HEAD = """\
[build-system]
requires = ["setuptools>=64"]
build-backend = "setuptools.build_meta"

[project]
name = "calc"
version = "0.1"
"""
PYTEST_SECTION = '\n[tool.pytest.ini_options]\naddopts = "-s"\n'
PYPROJECT = PYPROJECT_HEAD + '\n[project.optional-dependencies]\ntest = ["pytest"]\n' + PYTEST_SECTION

# Passes under pytest and unittest alike; says where calc came from and which version it is,
# and writes into the environment it runs in (the write must stay inside the check).
PY_TEST = """\
import os
import sys
import unittest

import calc


class AddTest(unittest.TestCase):
    def test_add(self):
        print(f"calc from {calc.__file__} marker {calc.MARKER} python {sys.prefix}", flush=True)
        open(os.path.join(sys.prefix, "check-was-here"), "w").close()
        self.assertEqual(calc.add(2, 3), 5)
"""


def _calc_py(marker: str, op: str) -> str:
    return f'MARKER = "{marker}"\n\n\ndef add(a, b):\n    return a {op} b\n'


def _python_repo(repo: Path, module: str) -> Path:
    return make_repo(
        repo,
        {
            ".gitignore": ".venv/\n*.egg-info/\n__pycache__/\n.pytest_cache/\n",
            "pyproject.toml": PYPROJECT,
            module: _calc_py(USER_MARKER, "-"),
            "tests/test_calc.py": PY_TEST,
        },
    )


@uses(PACKAGING)
def _editable_venv(repo: Path, requirement: str) -> None:
    """``repo``'s .venv with ``requirement`` installed editable (pip, from the registry or its cache)."""
    _run([sys.executable, "-m", "venv", ".venv"], repo)
    _run([".venv/bin/python", "-m", "pip", "install", "-q", "-e", requirement], repo)


def _assert_python_runs(repo: Path, module: str, bad_log: str, good_log: str) -> None:
    # The editable install's absolute path resolved to the plan's checkout, standing at the
    # repository's own path; the interpreter is the user's venv.
    where = f"calc from {repo / module} marker"
    assert f"{where} {BROKEN_MARKER} python {repo / '.venv'}" in bad_log, bad_log
    assert "AssertionError: 6 != 5" in bad_log, bad_log  # the broken plan's a * b, not the user's a - b
    assert f"{where} {FIXED_MARKER} python {repo / '.venv'}" in good_log, good_log


@pytest.mark.slow
@pytest.mark.parametrize("layout", ["src", "flat"])
def test_a_venv_with_an_editable_install_tests_the_plans_code(tmp_path: Path, layout: str) -> None:
    module = "src/calc/__init__.py" if layout == "src" else "calc/__init__.py"
    repo = _python_repo(tmp_path / "repo", module)
    if layout == "src":
        # Detected: pytest from the project's venv; calc is importable only through the .pth
        # the editable install wrote (src/ is on no path of its own).
        _editable_venv(repo, ".[test]")
    else:
        # -P: the working directory is not on sys.path, so calc comes through the editable
        # install's finder (an absolute path into the repository), not from the cwd.
        _editable_venv(repo, ".")
        git(repo, "config", "papayu.check.command", ".venv/bin/python -P -m unittest discover -s tests -v")
    venv_before = _entries(repo / ".venv")

    bad_log, good_log = _broken_then_fixed(
        repo, tmp_path, module, _calc_py(BROKEN_MARKER, "*"), _calc_py(FIXED_MARKER, "+")
    )

    _assert_python_runs(repo, module, bad_log, good_log)
    if layout == "src":
        assert f"{repo / '.venv/bin/python'} -m pytest -q" in good_log  # the detected command
    # What the check wrote (into the venv, bytecode and caches beside the code) stayed inside it.
    assert _entries(repo / ".venv") == venv_before
    assert not (repo / ".venv/check-was-here").exists()
    assert [p for p in repo.rglob("__pycache__") if ".venv" not in p.parts] == []
    assert not (repo / ".pytest_cache").exists()


# --- Python: a uv project, offline from its cache -----------------------------------------------

UV_PYPROJECT = PYPROJECT_HEAD + 'requires-python = ">=3.9"\n\n[dependency-groups]\ndev = ["pytest"]\n' + PYTEST_SECTION


@pytest.mark.slow
@toolchains.needs("uv")
def test_a_uv_project_runs_offline_from_its_cache_on_the_plans_code(tmp_path: Path) -> None:
    uv = toolchains.which("uv")
    assert uv is not None
    module = "src/calc/__init__.py"
    repo = make_repo(
        tmp_path / "repo",
        {
            ".gitignore": ".venv/\n*.egg-info/\n__pycache__/\n.pytest_cache/\n",
            "pyproject.toml": UV_PYPROJECT,
            module: _calc_py(USER_MARKER, "-"),
            "tests/test_calc.py": PY_TEST,
        },
    )
    # The user's `uv sync` (network allowed here): pytest and the build backend land in
    # ~/.cache/uv, the project is installed editable into .venv, uv.lock is committed.
    env = {"UV_PYTHON": sys.executable, "UV_PYTHON_DOWNLOADS": "never"}
    _run([uv, "sync"], repo, env)
    git(repo, "add", "uv.lock")
    git(repo, "commit", "-q", "-m", "lock")
    git(repo, "config", "papayu.check.command", f"{shlex.quote(uv)} run --offline pytest -q")
    cache = Path(os.environ["HOME"]) / ".cache/uv"
    assert cache.is_dir()  # what the check may read: environment.HOME_CACHES
    venv_before, cache_before = _entries(repo / ".venv"), _entries(cache)

    bad_log, good_log = _broken_then_fixed(
        repo, tmp_path, module, _calc_py(BROKEN_MARKER, "*"), _calc_py(FIXED_MARKER, "+")
    )

    _assert_python_runs(repo, module, bad_log, good_log)
    assert _entries(repo / ".venv") == venv_before and _entries(cache) == cache_before
    assert not (repo / ".venv/check-was-here").exists()


# --- npm workspaces ---------------------------------------------------------------------------


def _calc_js(marker: str, op: str) -> str:
    return f'exports.MARKER = "{marker}";\nexports.add = (a, b) => a {op} b;\n'


APP_TEST_JS = """\
const test = require("node:test");
const assert = require("node:assert");
const fs = require("node:fs");
const path = require("node:path");
const calc = require("@demo/calc");
const pad = require("pad");

test("add", () => {
  console.log(`calc from ${require.resolve("@demo/calc")} marker ${calc.MARKER} pad v${pad.v}`);
  fs.writeFileSync(path.join(__dirname, "../../../node_modules/check-was-here"), "x");
  assert.strictEqual(calc.add(2, 3), 5);
});
"""


@toolchains.needs("npm", "node")
def test_npm_workspaces_link_to_the_plans_packages(tmp_path: Path) -> None:
    def package(name: str, **fields: Any) -> str:
        return json.dumps({"name": name, "version": "1.0.0", **fields}, indent=2) + "\n"

    # Two copies of `pad` make npm put the app's own node_modules next to its manifest: the
    # check must see environment directories at any depth, not only at the root.
    repo = make_repo(
        tmp_path / "repo",
        {
            ".gitignore": "node_modules/\n",
            "package.json": package(
                "mono",
                private=True,
                workspaces=["packages/*"],
                dependencies={"pad": "file:vendor/pad1"},
                scripts={"test": "npm test --workspaces --if-present"},
            ),
            "vendor/pad1/package.json": package("pad"),
            "vendor/pad1/index.js": "exports.v = 1;\n",
            "vendor/pad2/package.json": package("pad", version="2.0.0"),
            "vendor/pad2/index.js": "exports.v = 2;\n",
            "packages/calc/package.json": package("@demo/calc", main="index.js"),
            "packages/calc/index.js": _calc_js(USER_MARKER, "-"),
            "packages/app/package.json": package(
                "@demo/app",
                dependencies={"@demo/calc": "1.0.0", "pad": "file:../../vendor/pad2"},
                scripts={"test": "node --test"},
            ),
            "packages/app/test/app.test.js": APP_TEST_JS,
        },
    )
    env = {"npm_config_update_notifier": "false", "npm_config_audit": "false", "npm_config_fund": "false"}
    _run(["npm", "install", "--offline"], repo, env)
    git(repo, "add", "package-lock.json")
    git(repo, "commit", "-q", "-m", "lock")
    assert os.readlink(repo / "node_modules/@demo/calc") == "../../packages/calc"
    assert (repo / "packages/app/node_modules/pad").is_symlink()
    modules_before = {p: _entries(repo / p) for p in ("node_modules", "packages/app/node_modules")}

    bad_log, good_log = _broken_then_fixed(  # detected: npm test
        repo, tmp_path, "packages/calc/index.js", _calc_js(BROKEN_MARKER, "*"), _calc_js(FIXED_MARKER, "+"), env
    )

    # The workspace link resolved to the plan's package at the repository's own path; pad v2
    # came from packages/app/node_modules (without it, node would find the root's v1).
    where = f"calc from {repo / 'packages/calc/index.js'} marker"
    assert f"{where} {BROKEN_MARKER} pad v2" in bad_log and "6 !== 5" in bad_log, bad_log
    assert f"{where} {FIXED_MARKER} pad v2" in good_log, good_log
    assert "$ npm test" in good_log
    assert {p: _entries(repo / p) for p in modules_before} == modules_before
    assert not (repo / "node_modules/check-was-here").exists()


# --- cargo: a workspace with a warm target/ -----------------------------------------------------


needs_cargo = toolchains.needs("cargo")


def _calc_rs(marker: str, op: str) -> str:
    return textwrap.dedent(f"""\
        pub const MARKER: &str = "{marker}";
        pub const SOURCE: &str = concat!(env!("CARGO_MANIFEST_DIR"), "/src/lib.rs");

        pub fn add(a: i32, b: i32) -> i32 {{
            a {op} b
        }}
        """)


CARGO_FILES = {
    ".gitignore": "/target\n",
    "Cargo.toml": '[workspace]\nmembers = ["calc", "app", "untouched"]\nresolver = "2"\n',
    "calc/Cargo.toml": '[package]\nname = "calc"\nversion = "0.1.0"\nedition = "2021"\n',
    "untouched/Cargo.toml": '[package]\nname = "untouched"\nversion = "0.1.0"\nedition = "2021"\n',
    "untouched/src/lib.rs": "pub fn zero() -> i32 {\n    0\n}\n",
    "app/Cargo.toml": '[package]\nname = "app"\nversion = "0.1.0"\nedition = "2021"\n\n'
    '[dependencies]\ncalc = { path = "../calc" }\nuntouched = { path = "../untouched" }\n',
    "app/src/lib.rs": "pub fn answer() -> i32 {\n    calc::add(2, 3) + untouched::zero()\n}\n",
    "app/tests/answer.rs": textwrap.dedent("""\
        #[test]
        fn adds() {
            println!("calc from {} marker {}", calc::SOURCE, calc::MARKER);
            assert_eq!(app::answer(), 5);
        }
        """),
}
CARGO_CHECK = "cargo test -- --nocapture"


def _cargo_repo(tmp_path: Path, env: dict[str, str]) -> Path:
    repo = make_repo(tmp_path / "repo", {**CARGO_FILES, "calc/src/lib.rs": _calc_rs(USER_MARKER, "-")})
    _run(["cargo", "generate-lockfile", "--offline"], repo, env)
    git(repo, "add", "Cargo.lock")
    git(repo, "commit", "-q", "-m", "lock")
    git(repo, "config", "papayu.check.command", CARGO_CHECK)
    return repo


@needs_cargo
def test_a_cargo_workspace_reuses_the_warm_target_and_rebuilds_what_the_plan_changed(tmp_path: Path) -> None:
    env = rust_env()
    repo = _cargo_repo(tmp_path, env)
    # The user's own build: every crate and test binary in target/, for the committed code.
    _run(["cargo", "test", "--no-run", "--offline"], repo, env)
    target_before = _entries(repo / "target")

    bad_log, good_log = _broken_then_fixed(
        repo, tmp_path, "calc/src/lib.rs", _calc_rs(BROKEN_MARKER, "*"), _calc_rs(FIXED_MARKER, "+"), env
    )

    where = f"calc from {repo / 'calc/src/lib.rs'} marker"
    assert f"{where} {BROKEN_MARKER}" in bad_log and "left: 6" in bad_log, bad_log
    assert f"{where} {FIXED_MARKER}" in good_log, good_log
    # Incremental: what the plan changed (calc, and app above it) was rebuilt; the crate it did
    # not touch came from the user's warm target/ as it was.
    for log in (bad_log, good_log):
        assert "Compiling calc" in log and "Compiling app" in log, log
        assert "Compiling untouched" not in log, log
    assert _entries(repo / "target") == target_before


@needs_cargo
def test_a_users_uncommitted_build_in_target_cannot_pass_a_buggy_plan(tmp_path: Path) -> None:
    env = rust_env()
    repo = _cargo_repo(tmp_path, env)
    # A first plan puts the pool's checkout in place; the next plan reuses it, and git rewrites
    # only the files that differ: its calc/src/lib.rs stays older than the user's build below
    # (by a second or less on a fast machine, which once let a "fresh enough" file through).
    notes = [{"kind": "CREATE_FILE", "path": "NOTES.md", "content": "n\n"}]
    first = _apply(repo, tmp_path, "notes", notes, env, "--check", "true")
    assert first["state"] == "landed", first
    # The user fixes add() without committing and builds: target/ holds their fixed calc, newer
    # than the committed lib.rs sitting in the pooled checkout.
    (repo / "calc/src/lib.rs").write_text(_calc_rs("user-uncommitted", "+"))
    assert "calc from" in _run(["cargo", "test", "--offline", "--", "--nocapture"], repo, env)
    target_before = _entries(repo / "target")
    head = git(repo, "rev-parse", "HEAD").strip()

    # The plan claims the fix but leaves the committed (buggy) add() alone.
    claim = "// add() is fixed\npub fn answer() -> i32 {\n    calc::add(2, 3) + untouched::zero()\n}\n"
    data = _apply(repo, tmp_path, "claims-fix", [_update("app/src/lib.rs", claim)], env)
    log = _log(data)

    # calc/src/lib.rs differs from the user's copy, so it got a fresh mtime and was rebuilt from
    # the committed code: the test ran the plan's calc and failed. Without that rule cargo
    # would have reused the user's uncommitted build and passed.
    assert data["state"] == "review" and data["error"]["code"] == "ERR_CHECK_FIXES_NOTHING", (data, log)
    assert data["check"]["exit_code"] not in (0, None), (data, log)
    assert "Compiling calc" in log, log
    assert f"calc from {repo / 'calc/src/lib.rs'} marker {USER_MARKER}" in log, log
    assert "left: -1" in log and "user-uncommitted" not in log, log
    assert git(repo, "rev-parse", "HEAD").strip() == head
    assert "user-uncommitted" in (repo / "calc/src/lib.rs").read_text()  # the user's edit is theirs
    assert _entries(repo / "target") == target_before


# --- package caches named by the environment ------------------------------------------------------


# Caches named by an environment variable: files a tool reads from them, and a private file of
# the same tool home that must stay out.
NAMED_CACHES: dict[str, tuple[list[str], str | None]] = {
    "CARGO_HOME": (["registry/cache/index.example/demo-1.0.0.crate", "git/db/demo-0123/HEAD"], "credentials.toml"),
    "GOPATH": (["pkg/mod/cache/download/example.com/demo/@v/v1.0.0.zip"], "src/example.com/private/main.go"),
    "GOMODCACHE": (["cache/download/example.com/demo/@v/v1.0.0.zip"], None),
    "UV_CACHE_DIR": (["wheels-v5/pypi/demo/demo-1.0-py3-none-any.whl"], None),
    "PIP_CACHE_DIR": (["http-v2/a/b/demo"], None),
    "npm_config_cache": (["_cacache/index-v5/00/demo"], None),
}


@pytest.mark.parametrize("name", list(NAMED_CACHES))
def test_a_package_cache_named_by_the_environment_is_readable_offline_and_nothing_beside_it(
    tmp_path: Path, name: str
) -> None:
    # A cache outside HOME (a relocated toolchain, a CI cache volume): offline installs and
    # builds need it; a tool home's credentials beside it stay out.
    cached, private = NAMED_CACHES[name]
    base = tmp_path / "elsewhere"
    files = {rel: f"cached {i}\n" for i, rel in enumerate(cached)}
    if private:
        files[private] = 'token = "cache-home-secret-0123"\n'
    for rel, text in files.items():
        (base / rel).parent.mkdir(parents=True, exist_ok=True)
        (base / rel).write_text(text)
    (tmp_path / "beside.txt").write_text("cache-home-secret-0123\n")
    repo = make_repo(tmp_path / "repo")
    reads = " ".join(f'"${name}/{rel}"' for rel in cached)
    check = f'cat {reads} && (cat "${name}/{private or "missing"}" "{tmp_path}/beside.txt" || echo "nothing beside")'
    notes = [{"kind": "CREATE_FILE", "path": "NOTES.md", "content": "n\n"}]
    data = _apply(repo, tmp_path, "notes", notes, {name: str(base)}, "--check", check)
    log = _log(data)
    assert data["state"] == "landed", log
    assert "".join(f"cached {i}\n" for i in range(len(cached))) in log, log
    assert "nothing beside" in log and "cache-home-secret" not in log, log


# --- C with make --------------------------------------------------------------------------------

MAKEFILE = """\
CFLAGS ?= -O0 -Wall
# Absolute source paths: __FILE__ says which file was compiled.
%.o: %.c calc.h
\t$(CC) $(CFLAGS) -c $(CURDIR)/$< -o $@
calc_test: calc.o test_calc.o
\t$(CC) -o $@ $^
test: calc_test
\t./calc_test
.PHONY: test
"""
CALC_H = "extern const char *calc_marker;\nconst char *calc_source(void);\nint add(int a, int b);\n"
TEST_C = """\
#include <stdio.h>
#include "calc.h"

int main(void) {
    printf("calc from %s marker %s\\n", calc_source(), calc_marker);
    int got = add(2, 3);
    if (got != 5) {
        printf("FAIL: add(2, 3) = %d, expected 5\\n", got);
        return 1;
    }
    printf("ok\\n");
    return 0;
}
"""


def _calc_c(marker: str, op: str) -> str:
    return (
        f'#include "calc.h"\n\nconst char *calc_marker = "{marker}";\n\n'
        "const char *calc_source(void) {\n    return __FILE__;\n}\n\n"
        f"int add(int a, int b) {{\n    return a {op} b;\n}}\n"
    )


@toolchains.needs("make", "cc")
def test_a_c_project_with_make_builds_and_tests_the_plans_code(tmp_path: Path) -> None:
    repo = make_repo(
        tmp_path / "repo",
        {
            ".gitignore": "*.o\ncalc_test\n",
            "Makefile": MAKEFILE,
            "calc.h": CALC_H,
            "calc.c": _calc_c(USER_MARKER, "-"),
            "test_calc.c": TEST_C,
        },
    )
    git(repo, "config", "papayu.check.command", "make test")
    _run(["make", "calc_test"], repo)  # the user's build: ignored outputs the check never sees
    built_before = {name: (repo / name).read_bytes() for name in ("calc.o", "test_calc.o", "calc_test")}

    bad_log, good_log = _broken_then_fixed(
        repo, tmp_path, "calc.c", _calc_c(BROKEN_MARKER, "*"), _calc_c(FIXED_MARKER, "+")
    )

    where = f"calc from {repo / 'calc.c'} marker"
    assert f"{where} {BROKEN_MARKER}" in bad_log and "FAIL: add(2, 3) = 6, expected 5" in bad_log, bad_log
    assert f"{where} {FIXED_MARKER}" in good_log and "\nok\n" in good_log, good_log
    for log in (bad_log, good_log):
        assert f"-c {repo}/calc.c -o calc.o" in log, log  # built in the check, from the plan's source
    assert {name: (repo / name).read_bytes() for name in built_before} == built_before
