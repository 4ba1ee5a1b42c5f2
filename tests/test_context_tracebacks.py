"""Error heuristics on what the real tools print (docs/DESIGN.md, "Context").

Every log here is produced by running the tool in the test: pytest (long/short/line), Python
(chained exceptions, SyntaxError, ModuleNotFoundError), node, cargo, go and java when installed.
"""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

import pytest
import toolchains
from helpers import make_repo

from papayu_git.context import BlockKind, ContextBlock, ContextSession

CALC = {
    "src/calc.py": "def divide(a, b):\n    return a / b\n",
    "tests/test_calc.py": (
        "import pathlib, sys\n"
        "sys.path.insert(0, str(pathlib.Path(__file__).resolve().parent.parent / 'src'))\n"
        "from calc import divide\n\n\ndef test_divide():\n    assert divide(1, 0) == 0\n"
    ),
    "pyproject.toml": "[project]\nname = 'calc'\n",
    "requirements.txt": "pytest\n",
}


def run(cmd: list[str], cwd: Path, env: dict[str, str] | None = None, timeout: float = 60) -> str:
    proc = subprocess.run(
        cmd,
        cwd=cwd,
        capture_output=True,
        text=True,
        timeout=timeout,
        env={**os.environ, "PYTHONDONTWRITEBYTECODE": "1", "PYTEST_DISABLE_PLUGIN_AUTOLOAD": "1", **(env or {})},
    )
    assert proc.returncode != 0, f"{cmd} was expected to fail:\n{proc.stdout}\n{proc.stderr}"
    return proc.stdout + proc.stderr


def files(blocks: list[ContextBlock]) -> dict[str, ContextBlock]:
    return {b.path: b for b in blocks if b.kind is BlockKind.FILE}


def context_for(repo: Path, log: str, goal: str = "fix the failure") -> dict[str, ContextBlock]:
    return files(ContextSession(repo, "HEAD").base_context(goal, log))


@pytest.mark.parametrize("tb", ["long", "short", "line"])
def test_failing_pytest_brings_the_failing_line_the_test_and_its_module(tmp_path: Path, tb: str) -> None:
    repo = make_repo(tmp_path / "calc", CALC)
    log = run([sys.executable, "-m", "pytest", f"--tb={tb}", "-p", "no:cacheprovider", "tests"], repo)
    shown = context_for(repo, log)
    assert {"src/calc.py", "tests/test_calc.py"} <= shown.keys(), log
    assert shown["src/calc.py"].priority == 0  # the innermost frame
    assert "return a / b" in shown["src/calc.py"].text


def test_chained_python_exception_brings_both_files(tmp_path: Path) -> None:
    repo = make_repo(
        tmp_path / "chain",
        {
            "pkg/loader.py": "def load(d):\n    return d['missing']\n",
            "pkg/main.py": (
                "import sys, pathlib\nsys.path.insert(0, str(pathlib.Path(__file__).parent))\n"
                "from loader import load\n\n\ndef main():\n    try:\n        load({})\n"
                "    except KeyError as exc:\n        raise RuntimeError('config broken') from exc\n\n\n"
                "main()\n"
            ),
        },
    )
    log = run([sys.executable, "pkg/main.py"], repo)
    assert "The above exception was the direct cause" in log
    shown = context_for(repo, log)
    assert shown.keys() == {"pkg/loader.py", "pkg/main.py"}
    assert shown["pkg/main.py"].priority == 0  # the last frame printed


def test_a_log_from_another_checkout_maps_by_path_tail(tmp_path: Path) -> None:
    repo = make_repo(tmp_path / "mine", CALC)
    ci = tmp_path / "home/runner/work/calc/calc"
    ci.parent.mkdir(parents=True)
    subprocess.run(["git", "clone", "-q", str(repo), str(ci)], check=True)
    log = run([sys.executable, "-m", "pytest", "--tb=native", "-p", "no:cacheprovider", "tests"], ci)
    assert f'File "{ci}/src/calc.py", line 2' in log
    shown = context_for(repo, log)
    assert {"src/calc.py", "tests/test_calc.py"} <= shown.keys() and shown["src/calc.py"].priority == 0


def test_syntax_error_brings_the_broken_file(tmp_path: Path) -> None:
    repo = make_repo(tmp_path / "syntax", {"src/bad.py": "x = 1\n\ndef f(:\n    pass\n"})
    log = run([sys.executable, "-c", "import sys; sys.path.insert(0, 'src'); import bad"], repo)
    assert "SyntaxError" in log
    assert "def f(:" in context_for(repo, log)["src/bad.py"].text


def test_frames_outside_the_repo_and_in_site_packages_are_ignored(tmp_path: Path) -> None:
    repo = make_repo(
        tmp_path / "vendored",
        {
            "vendor/site-packages/fake/__init__.py": "import json\n\ndef parse(s):\n    return json.loads(s)\n",
            "app.py": "import sys\nsys.path.insert(0, 'vendor/site-packages')\nimport fake\nfake.parse('not json')\n",
        },
    )
    log = run([sys.executable, "app.py"], repo)
    assert "site-packages/fake/__init__.py" in log and "json/decoder.py" in log
    assert context_for(repo, log).keys() == {"app.py"}


def test_missing_module_brings_env_and_the_dependency_manifests(tmp_path: Path) -> None:
    repo = make_repo(tmp_path / "deps", {**CALC, "poetry.lock": "# lock\n", "requirements-dev.txt": "ruff\n"})
    log = run([sys.executable, "-c", "import surely_not_installed_pkg"], repo)
    blocks = ContextSession(repo, "HEAD").base_context("fix the import", log)
    assert blocks[0].kind is BlockKind.ENV
    assert {"pyproject.toml", "requirements.txt", "requirements-dev.txt", "poetry.lock"} <= files(blocks).keys()


@pytest.mark.parametrize(
    "goal", ["test_divide fails", "падает тест test_divide", "fix the failing test tests/test_calc.py::test_divide"]
)
def test_failing_test_named_in_the_goal_brings_the_test_file_and_the_module(tmp_path: Path, goal: str) -> None:
    repo = make_repo(tmp_path / "calc", CALC)
    shown = files(ContextSession(repo, "HEAD").base_context(goal))
    assert shown.keys() == {"tests/test_calc.py", "src/calc.py"}
    assert "sha256" not in shown["src/calc.py"].text and shown["src/calc.py"].text == CALC["src/calc.py"]


NODE = toolchains.which("node")


@toolchains.needs("node")
def test_node_stack_trace_maps_absolute_paths_to_repo_files(tmp_path: Path) -> None:
    repo = make_repo(
        tmp_path / "js",
        {
            "lib/util.js": "function parse(s) {\n  return JSON.parse(s).value.x;\n}\nmodule.exports = { parse };\n",
            "index.js": "const { parse } = require('./lib/util');\nparse('{}');\n",
            "package.json": '{"name": "js"}\n',
        },
    )
    log = run([str(NODE), "index.js"], repo)
    assert f"{repo}/lib/util.js:2" in log or f"{repo.resolve()}/lib/util.js:2" in log
    shown = context_for(repo, log)
    assert shown.keys() == {"lib/util.js", "index.js"}
    assert shown["lib/util.js"].priority == 0  # node prints the failing frame first


@pytest.mark.skipif(NODE is None, reason="node is not installed")
def test_node_cannot_find_module_brings_package_json(tmp_path: Path) -> None:
    repo = make_repo(
        tmp_path / "js",
        {
            "index.js": "require('left-pad-not-installed');\n",
            "package.json": '{"name": "js"}\n',
            "package-lock.json": "{}\n",
        },
    )
    log = run([str(NODE), "index.js"], repo)
    assert "Cannot find module" in log
    blocks = ContextSession(repo, "HEAD").base_context("fix it", log)
    assert {"index.js", "package.json"} <= files(blocks).keys()
    assert "npm (package-lock.json)" in blocks[0].text and "node: v" in blocks[0].text


@pytest.mark.skipif(NODE is None, reason="node is not installed")
def test_typescript_stack_trace_through_node_source_maps(tmp_path: Path) -> None:
    import base64
    import json

    ts = "export function parse(s: string): number {\n  return JSON.parse(s).value.x;\n}\n"
    js = "function parse(s) {\n  return JSON.parse(s).value.x;\n}\nexports.parse = parse;\n"
    source_map = {
        "version": 3,
        "file": "util.js",
        "sources": ["../src/util.ts"],
        "names": [],
        "mappings": ";".join(["AAAA"] + ["AACA"] * 3),
    }  # line n of util.js is line n of util.ts
    inline = base64.b64encode(json.dumps(source_map).encode()).decode()
    repo = make_repo(
        tmp_path / "ts",
        {
            "src/util.ts": ts,
            "package.json": '{"name": "ts"}\n',
            "dist/util.js": f"{js}//# sourceMappingURL=data:application/json;base64,{inline}\n",
            "dist/index.js": "require('./util').parse('{}');\n",
        },
    )
    log = run([str(NODE), "--enable-source-maps", "dist/index.js"], repo)
    assert "src/util.ts:2" in log, log
    shown = context_for(repo, log)
    assert {"src/util.ts", "dist/index.js"} <= shown.keys()
    assert shown["src/util.ts"].priority == 0


def test_typescript_compiler_errors(tmp_path: Path) -> None:
    tsc = toolchains.which("tsc")
    if tsc is None:
        pytest.skip("tsc (TypeScript compiler) is not installed; node cannot run .ts files itself before v22.6")
    repo = make_repo(tmp_path / "ts", {"src/x.ts": "const n: number = 'text';\nexport default n;\n"})
    log = run([tsc, "--noEmit", "src/x.ts"], repo)
    assert "src/x.ts" in context_for(repo, log)


@toolchains.needs("cargo")
def test_rust_panic_and_backtrace_map_to_the_crate_in_a_subdirectory(tmp_path: Path) -> None:
    cargo = Path(str(toolchains.which("cargo")))
    repo = make_repo(
        tmp_path / "rs",
        {
            "crates/app/Cargo.toml": '[package]\nname = "app"\nversion = "0.1.0"\nedition = "2021"\n',
            "crates/app/src/main.rs": (
                "fn parse(s: &str) -> i32 {\n    s.parse().unwrap()\n}\n\n"
                'fn main() {\n    println!("{}", parse("x"));\n}\n'
            ),
        },
    )
    env = {
        "CARGO_HOME": str(cargo.parent.parent),
        "RUSTUP_HOME": str(cargo.parent.parent.parent / ".rustup"),
        "CARGO_TARGET_DIR": str(tmp_path / "target"),
        "RUST_BACKTRACE": "1",
        "PATH": f"{cargo.parent}:{os.environ.get('PATH', '')}",
    }
    try:
        log = run([str(cargo), "run", "--offline", "-q"], repo / "crates/app", env=env, timeout=60)
    except subprocess.TimeoutExpired:
        pytest.skip("cargo run of a one-file crate took more than 60 s on this machine")
    if "panicked at" not in log:
        pytest.skip(f"cargo could not build the crate here: {log[-300:]}")
    shown = context_for(repo, log)
    assert shown.keys() == {"crates/app/src/main.rs"}
    assert shown["crates/app/src/main.rs"].priority == 0


def test_go_panic(tmp_path: Path) -> None:
    go = toolchains.which("go")
    if go is None:
        pytest.skip("go is not installed")
    repo = make_repo(
        tmp_path / "go",
        {
            "go.mod": "module example.com/g\n\ngo 1.20\n",
            "main.go": "package main\n\nfunc at(xs []int, i int) int {\n\treturn xs[i]\n}\n\n"
            "func main() {\n\tprintln(at([]int{1}, 5))\n}\n",
        },
    )
    log = run(
        [go, "run", "."],
        repo,
        env={
            "GOFLAGS": "-mod=mod",
            "GOTOOLCHAIN": "local",
            "GOCACHE": str(tmp_path / "gocache"),
            "GOPATH": str(tmp_path / "gopath"),
        },
    )
    assert "panic:" in log
    assert context_for(repo, log).keys() == {"main.go"}


JAVA = toolchains.which("java")


@toolchains.needs("java")
def test_java_stack_trace_maps_package_frames_to_source_files(tmp_path: Path) -> None:
    path = "src/main/java/com/example/App.java"
    repo = make_repo(
        tmp_path / "java",
        {
            path: (
                "package com.example;\n\npublic class App {\n    static int parse(String s) {\n"
                "        return Integer.parseInt(s);\n    }\n\n    public static void main(String[] args) {\n"
                '        System.out.println(parse("x"));\n    }\n}\n'
            ),
            "pom.xml": "<project/>\n",
        },
    )
    log = run([str(JAVA), path], repo)
    assert "at com.example.App.parse(App.java:5)" in log and "java.base/" in log
    blocks = ContextSession(repo, "HEAD").base_context("fix it", log)
    assert files(blocks).keys() == {path}
    assert "java: " in blocks[0].text
