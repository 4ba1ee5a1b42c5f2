"""Test support written as code: judged by what the tests use (docs/DESIGN.md, "What judges a
plan").

An assertion helper inside the package (`pkg/testing.py`), a fixture module that a conftest
loads through `pytest_plugins`, a Go file of helpers importing "testing", a `#[cfg(test)]` Rust
module: each is a source file outside any test directory, and each decides what the tip's tests
expect. A plan that weakens one along with the code would be judged by its own weakened judge.
Names cannot tell them apart from the code under test (`calc.py` is imported only by tests too),
so the tip's import graph and the file's own content decide, on the tip's version of the file
(a plan cannot make its judge look like code by editing it):

- a file is test support when the tip's tests import it (directly, or through a conftest, a
  fixture module, `pytest_plugins`, a Node `require`/`import`), the project's other code does not,
  and the file itself shows it serves tests: it imports a test framework, defines fixtures or
  runner hooks, defines `assert…` helpers, or is named for tests (`testing.py`, `test_utils.js`);
- a Go file that is not a `_test.go` but imports "testing" (or httptest, fstest, quick) exists
  for tests; so does a Rust file under `#![cfg(test)]` or declared under `#[cfg(test)]`.

A helper the package itself also uses stays code. Everything found here is taken from the tip
in the regression run, like any judge, and the plan's version held where it makes the
difference (check/verdict.py).
"""

from __future__ import annotations

import ast
import posixpath
import re
from collections.abc import Iterable, Iterator
from typing import Protocol, runtime_checkable

MAX_FILES_READ = 4000  # files whose imports one plan's question may read (the tip's tests and code)
MAX_FILE_BYTES = 512 * 1024
TEST_FRAMEWORKS_PY = frozenset(
    ["pytest", "_pytest", "unittest", "hypothesis", "nose", "nose2", "mock", "testfixtures", "pytest_mock", "responses"]
)
TEST_FRAMEWORKS_JS = re.compile(
    r"""(?:require\(\s*|from\s+|import\s+)['"](?:jest|vitest|mocha|chai|sinon|ava|tap|tape|uvu|node:test|"""
    r"""@jest/[\w-]+|@testing-library/[\w-]+|@vitest/[\w-]+|supertest|nock|msw)(?:/[\w./-]*)?['"]"""
)
GO_TEST_PACKAGES = re.compile(r'"(?:testing|testing/[\w/]+|net/http/httptest)"')
TESTISH = re.compile(
    r"^_?(?:test(?:ing)?[_-]?(?:utils?|helpers?|support|tools|lib|common)?|testutils?|testhelpers?|fixtures?|"
    r"mocks?|fakes?|stubs?|factories|test[_-]?fixtures)$|[_-](?:testing|test[_-]?utils?|test[_-]?helpers?|fixtures)$",
    re.IGNORECASE,
)
_SKIP_DIRS = frozenset(
    ["node_modules", "venv", "site-packages", "dist-packages", "__pycache__", "target", "build", "dist"]
)
_JS_SUFFIXES = (".js", ".mjs", ".cjs", ".jsx", ".ts", ".mts", ".cts", ".tsx")


@runtime_checkable
class Tree(Protocol):
    def entry_kind(self, path: str) -> str | None: ...
    def read_blob(self, path: str) -> bytes | None: ...
    def names_in(self, directory: str) -> list[str]: ...


def test_support(tip: Tree, code: Iterable[str], is_test: _IsTest, loaded: Iterable[str] = ()) -> set[str]:
    """Which of ``code`` (paths the plan changes that judges.is_code calls code) are test support
    on ``tip``. ``is_test(path)``: whether a path of the tip is a test or test configuration;
    ``loaded``: the files the tip's own run loaded as test support (a plugin named by `-p` or by
    a `pytest_plugins` built at run time, a fixture's module), which no import shows."""
    sure: set[str] = set()
    if_only_tests: list[str] = []
    if_not_code: list[str] = []
    by_run = frozenset(loaded)
    for path in code:
        old = tip.read_blob(path)
        if old is None or len(old) > MAX_FILE_BYTES:
            continue  # new in the plan (no test of the tip uses it), or too big to be a helper
        serves = _serves_tests(path, old.decode("utf-8", "replace"), tip)
        if serves is True:
            sure.add(path)
        elif path in by_run:
            if_not_code.append(path)
        elif serves is None:
            if_only_tests.append(path)
    if not if_only_tests and not if_not_code:
        return sure
    graph = _Graph(tip, is_test)
    sure |= {p for p in if_only_tests if graph.used_by_tests_only(p)}
    return sure | {p for p in if_not_code if not graph.used_by_code(p)}


class _IsTest(Protocol):
    def __call__(self, path: str) -> bool: ...


def _serves_tests(path: str, text: str, tip: Tree) -> bool | None:
    """True: the file is test support by its content alone (a Go helper importing "testing", a
    Rust test-only module); None: it shows it serves tests, if only tests use it; False: it
    shows nothing of the kind."""
    name = posixpath.basename(path)
    stem, _, suffix = name.rpartition(".")
    if suffix == "go":
        return bool(GO_TEST_PACKAGES.search(_go_imports(text)))
    if suffix == "rs":
        return _rust_test_only(path, text, tip)
    directories = posixpath.dirname(path).split("/") if posixpath.dirname(path) else []
    if TESTISH.search(stem if stem != "__init__" else "") or any(TESTISH.search(d) for d in directories):
        return None  # named for tests, or inside a package named so (`calc_testing/_impl.py`)
    if suffix in ("py", "pyi"):
        return None if _python_serves_tests(text) else False
    if "." + suffix in _JS_SUFFIXES:
        return None if TEST_FRAMEWORKS_JS.search(text) else False
    return False


def _python_serves_tests(text: str) -> bool:
    try:
        tree = ast.parse(text)
    except (SyntaxError, ValueError):
        return False
    for node in ast.walk(tree):
        if isinstance(node, ast.Import):
            modules = [a.name for a in node.names]
        elif isinstance(node, ast.ImportFrom) and not node.level:
            modules = [node.module or ""]
        elif isinstance(node, ast.FunctionDef | ast.AsyncFunctionDef):
            if node.name.startswith(("pytest_", "assert")) or any(_fixture(d) for d in node.decorator_list):
                return True
            continue
        else:
            continue
        if any(m.split(".")[0] in TEST_FRAMEWORKS_PY for m in modules):
            return True
    return False


def _fixture(decorator: ast.expr) -> bool:
    target = decorator.func if isinstance(decorator, ast.Call) else decorator
    name = target.attr if isinstance(target, ast.Attribute) else target.id if isinstance(target, ast.Name) else ""
    return name in ("fixture", "yield_fixture")


def _go_imports(text: str) -> str:
    block = re.search(r"(?ms)^import\s*\((.*?)^\)", text)
    singles = re.findall(r'(?m)^import\s+(?:\w+\s+)?("[^"]+")', text)
    return (block.group(1) if block else "") + " ".join(singles)


def _rust_test_only(path: str, text: str, tip: Tree) -> bool:
    if re.search(r"(?m)^\s*#!\[cfg\(test\)\]", text):
        return True
    stem = posixpath.basename(path)[: -len(".rs")]
    directory = posixpath.dirname(path)
    module = posixpath.basename(directory) if stem == "mod" else stem
    parent_dir = posixpath.dirname(directory) if stem == "mod" else directory
    parents = [posixpath.join(parent_dir, n) for n in ("lib.rs", "main.rs", "mod.rs")]
    parents.append(parent_dir + ".rs" if parent_dir else "")
    declared = re.compile(r"#\[cfg\(test\)\]\s*(?:pub(?:\([^)]*\))?\s+)?mod\s+" + re.escape(module) + r"\s*;")
    for parent in filter(None, parents):
        data = tip.read_blob(parent)
        if data is not None and declared.search(data.decode("utf-8", "replace")):
            return True
    return False


class _Graph:
    """Who imports a file on the tip: its tests (and their conftests, fixture modules and
    pytest_plugins) or the project's other code. Read lazily, bounded."""

    def __init__(self, tip: Tree, is_test: _IsTest) -> None:
        self.tip = tip
        self.is_test = is_test
        self._files: list[str] | None = None
        self._texts: dict[str, str] = {}

    def files(self) -> list[str]:
        if self._files is None:
            self._files = list(_walk(self.tip, "", 0))[:MAX_FILES_READ]
        return self._files

    def text(self, path: str) -> str:
        if path not in self._texts:
            data = self.tip.read_blob(path) or b""
            self._texts[path] = data[:MAX_FILE_BYTES].decode("utf-8", "replace")
        return self._texts[path]

    def used_by_tests_only(self, path: str) -> bool:
        by_tests, by_code = self._users(path, 0)
        return by_tests and not by_code

    def used_by_code(self, path: str) -> bool:
        return self._users(path, 0)[1]

    def _users(self, path: str, depth: int) -> tuple[bool, bool]:
        """Whether tests import ``path``, and whether the project's other code does."""
        names = _module_names(path)
        if not names:
            return False, False
        by_tests = by_code = False
        for other in self.files():
            if other == path or not other.endswith((".py", *_JS_SUFFIXES)):
                continue
            text = self.text(other)
            if not any(_last_name(n) in text for n in names):
                continue  # cheap: the file does not even mention it
            if not _imports(other, text, path, names):
                continue
            if self.is_test(other) or self._support_importer(other, depth):
                by_tests = True
            else:
                by_code = True
                break
        return by_tests, by_code

    def _support_importer(self, other: str, depth: int) -> bool:
        """Whether ``other``, an importer that is no test, is itself test support that only the
        tests use (`calc_testing/__init__.py` re-exporting its `_impl.py`): then what it imports
        is the tests' too. Followed three importers deep."""
        if depth >= 2 or _serves_tests(other, self.text(other), self.tip) is False:
            return False
        by_tests, by_code = self._users(other, depth + 1)
        return by_tests and not by_code


def _walk(tip: Tree, directory: str, depth: int) -> Iterator[str]:
    if depth > 12:
        return
    for name in sorted(tip.names_in(directory)):
        path = f"{directory}/{name}" if directory else name
        kind = tip.entry_kind(path)
        if kind == "dir":
            if not name.startswith(".") and name not in _SKIP_DIRS:
                yield from _walk(tip, path, depth + 1)
        elif kind == "file":
            yield path


def _last_name(name: str) -> str:
    """What an importer must mention: `testing` of `pkg.testing`, `test-utils` of `lib/test-utils.js`."""
    if name.endswith(_JS_SUFFIXES):
        return posixpath.basename(name).rsplit(".", 1)[0]
    return name.rsplit(".", 1)[-1]


def _module_names(path: str) -> list[str]:
    """The names a file is imported by: Python's dotted names from each possible source root
    (`src/pkg/testing.py`: `pkg.testing`, `src.pkg.testing`), or the path itself for Node."""
    if path.endswith(_JS_SUFFIXES):
        return [path]
    if not path.endswith((".py", ".pyi")):
        return []
    parts = path[: path.rfind(".")].split("/")
    if parts[-1] == "__init__":
        parts = parts[:-1]
    return [".".join(parts[i:]) for i in range(len(parts)) if parts[i:]]


def _imports(importer: str, text: str, path: str, names: list[str]) -> bool:
    if importer.endswith(_JS_SUFFIXES):
        return _js_imports(importer, text, path)
    try:
        tree = ast.parse(text)
    except (SyntaxError, ValueError):
        return False
    wanted = set(names)
    for node in ast.walk(tree):
        if isinstance(node, ast.Import):
            if any(a.name in wanted for a in node.names):
                return True
        elif isinstance(node, ast.ImportFrom):
            base = _absolute(importer, node.module or "", node.level)
            if base in wanted or any(f"{base}.{a.name}" in wanted for a in node.names):
                return True
        elif isinstance(node, ast.Assign) and any(
            isinstance(t, ast.Name) and t.id == "pytest_plugins" for t in node.targets
        ):
            plugins = node.value.elts if isinstance(node.value, ast.List | ast.Tuple) else [node.value]
            if any(isinstance(p, ast.Constant) and p.value in wanted for p in plugins):
                return True
        elif isinstance(node, ast.Call) and _call_name(node) in ("import_module", "__import__", "importorskip"):
            first = node.args[0] if node.args else None
            if isinstance(first, ast.Constant) and first.value in wanted:
                return True
    return False


def _absolute(importer: str, module: str, level: int) -> str:
    if not level:
        return module
    package = importer.split("/")[:-1]
    package = package[: len(package) - (level - 1)] if level > 1 else package
    return ".".join([*package, *([module] if module else [])])


def _call_name(node: ast.Call) -> str:
    func = node.func
    return func.attr if isinstance(func, ast.Attribute) else func.id if isinstance(func, ast.Name) else ""


_JS_SPECIFIER = re.compile(r"""(?:require\(\s*|from\s+|import\s*\(\s*|import\s+)['"](\.{1,2}/[^'"]+)['"]""")


def _js_imports(importer: str, text: str, path: str) -> bool:
    here = posixpath.dirname(importer)
    stem = path[: path.rfind(".")]
    for match in _JS_SPECIFIER.finditer(text):
        target = posixpath.normpath(posixpath.join(here, match.group(1)))
        if target in (path, stem) or target + "/index" == stem:
            return True
    return False
