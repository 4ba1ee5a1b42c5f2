"""Pure parsing of error text (docs/DESIGN.md, "Context"). Real tool output is exercised in
test_context_tracebacks.py; these pin the formats of tools this machine may lack."""

from __future__ import annotations

from pathlib import Path

from helpers import make_repo

from papayu_git.context import BlockKind, ContextSession
from papayu_git.context.heuristics import is_ignored_frame, parse_error_text

# Recorded from `go run .` (go1.22): the machine running the suite may have no Go toolchain.
GO_PANIC = """panic: runtime error: index out of range [5] with length 1

goroutine 1 [running]:
main.at(...)
\t{root}/main.go:4
main.main()
\t{root}/main.go:8 +0x1d
exit status 2
"""


def test_go_panic_frames_are_found_innermost_first(tmp_path: Path) -> None:
    repo = make_repo(tmp_path / "g", {"main.go": "package main\n" * 10, "go.mod": "module g\n"})
    hints = parse_error_text("fix", GO_PANIC.format(root=repo))
    assert [(Path(f.path).name, f.line) for f in hints.frames] == [("main.go", 4), ("main.go", 8)]
    blocks = ContextSession(repo, "HEAD").base_context("fix", GO_PANIC.format(root=repo))
    assert [b.path for b in blocks if b.kind is BlockKind.FILE] == ["main.go"]


def test_std_and_dependency_frames_are_ignored() -> None:
    for path in (
        "/usr/lib/python3.11/json/decoder.py",
        "/app/.venv/lib/python3.12/site-packages/x.py",
        "node:internal/modules/cjs/loader",
        "/app/node_modules/lib/index.js",
        "/rustc/59807616/library/core/src/result.rs",
        "/root/.cargo/registry/src/x/lib.rs",
        "/root/go/pkg/mod/github.com/x/y.go",
        "<frozen importlib._bootstrap>",
    ):
        assert is_ignored_frame(path), path
    assert not is_ignored_frame("src/app/venv_tools.py")


def test_test_names_need_a_failure_word() -> None:
    assert parse_error_text("test_login fails").test_names == ("test_login",)
    assert parse_error_text("падает тест test_login").test_names == ("test_login",)
    assert parse_error_text("rename test_login to test_signin").test_names == ()
    assert parse_error_text("FAILED tests/test_a.py::test_b[param-1] - assert 1 == 2").test_paths == (
        "tests/test_a.py",
    )


def test_missing_module_markers() -> None:
    for text in (
        "ModuleNotFoundError: No module named 'yaml'",
        "Error: Cannot find module 'express'",
        "error[E0432]: unresolved import `serde`",
        "java.lang.ClassNotFoundException: org.x.Y",
        "main.go:3:8: no required module provides package github.com/x/y",
    ):
        assert parse_error_text(text).missing_module, text
    assert not parse_error_text("AssertionError: 1 != 2").missing_module
