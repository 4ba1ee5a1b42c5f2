"""Code that reaches for the test runner (docs/DESIGN.md, "What judges a plan").

The regression run judges the plan's code with the tip's tests, but that code runs inside the
test process: it can register a pytest hook that turns failures into passes, rewrite the report
at exit, leave through `os._exit(0)` after printing a runner's success lines, or swap a module in
`sys.modules`. No sandbox separates a function under test from the runner calling it. So the lines
a plan adds to its code are read before its verdict is trusted, and a plan whose code names the
runner's internals, its hooks, its report or the process's own descriptors is held for a human
with those lines named. So is a new test module that does more at import than define tests
(assignments into other modules, calls at the top level): it would judge every later plan.

This is a tripwire for the known routes, not a proof: code can reach the same places in ways no
pattern names (docs/DESIGN.md says where the guarantee ends).
"""

from __future__ import annotations

import ast
import re
from collections import Counter
from collections.abc import Iterable, Sequence
from typing import NamedTuple, Protocol

from papayu_git.judges import TEST_DIRS, is_code
from papayu_git.paths import is_protected as _matches


class _Tree(Protocol):
    def entry_kind(self, path: str) -> str | None: ...
    def read_blob(self, path: str) -> bytes | None: ...


class Reach(NamedTuple):
    path: str
    line: int
    text: str
    why: str

    def __str__(self) -> str:
        return f"{self.path}:{self.line}: {self.text.strip()[:120]} ({self.why})"


_REPORT = r"papayu|PYTEST_ADDOPTS|junit|xmlpath|--junit"
_FDS = r"/proc/self/|/proc/\d+/fd|/dev/fd/"
# (pattern, why) per language, on the lines a plan adds to its code.
_PYTHON = (
    (r"\b_pytest\b", "pytest's internals"),
    (r"\bpytest_\w+", "a pytest hook or plugin outside a conftest"),
    (r"\bpluggy\b|\bhookimpl\b|\bpluginmanager\b|\bhookwrapper\b", "the runner's plugin machinery"),
    (r"\b(?:os|posix)\._exit\b", "os._exit: leaves without the runner's report"),
    (_FDS, "the process's own file descriptors"),
    (_REPORT, "the test report"),
    (
        r"\bsys\.modules\s*(?:\[[^\]]*\]\s*=(?!=)|\.(?:pop|update|setdefault|clear|__setitem__|__delitem__)\b)"
        r"|\bdel\s+sys\.modules\b",
        "sys.modules surgery",
    ),
    (r"\b(?:builtins|__builtins__)\s*(?:\.\s*\w+|\[[^\]]*\])\s*=(?!=)", "replaces a builtin"),
)
_JS = (
    (r"\bprocess\s*\.\s*(?:exit|reallyExit|abort)\b", "process.exit: leaves without the runner's report"),
    (r"\bprocess\s*\.\s*(?:on|once|addListener|prependListener)\s*\(\s*['\"](?:exit|beforeExit)", "an exit hook"),
    (r"\brequire\s*\.\s*cache\b", "the module cache"),
    (r"@jest/|\bjest-circus\b|\bvitest/(?:runner|node|suite)\b|\bnode:test/reporters\b", "the runner's internals"),
    (_FDS, "the process's own file descriptors"),
    (_REPORT, "the test report"),
)
_GO = (
    (r"\bos\.Exit\s*\(|\bsyscall\.Exit\s*\(", "os.Exit outside a main package"),
    (r"\btesting\.(?:MainStart|Init)\b|\bflag\.(?:Set|CommandLine\.Set)\s*\(\s*\"test\.", "the test runner"),
    (_FDS, "the process's own file descriptors"),
    (_REPORT, "the test report"),
)
_RUST = (
    (r"\bprocess::(?:exit|abort)\b|\blibc::_?exit\b", "process::exit outside a binary"),
    (_FDS, "the process's own file descriptors"),
    (_REPORT, "the test report"),
)
_BY_SUFFIX = {
    ".py": _PYTHON,
    ".pyx": _PYTHON,
    ".js": _JS,
    ".mjs": _JS,
    ".cjs": _JS,
    ".jsx": _JS,
    ".ts": _JS,
    ".mts": _JS,
    ".cts": _JS,
    ".tsx": _JS,
    ".go": _GO,
    ".rs": _RUST,
}
_ATEXIT = re.compile(r"\batexit\b|\bregister_at_fork\b")
_REPORT_WORDS = re.compile(_REPORT + r"|\.xml\b|report", re.IGNORECASE)


def runner_reach(
    tip: _Tree, writes: dict[str, bytes], *, tests: Sequence[str] = (), command_files: frozenset[str] = frozenset()
) -> list[Reach]:
    """What the plan's writes (path -> new bytes, over ``tip``) add that reaches for the runner:
    in its code (judges.is_code), the lines added; in its new test modules, what they do at
    import beyond defining tests."""
    found: list[Reach] = []
    for path, data in sorted(writes.items()):
        old = tip.read_blob(path)
        if old == data:
            continue
        text = data.decode("utf-8", "replace")
        if is_code(path, tip, tests=tests, command_files=command_files):
            found += _added_reach(path, text, (old or b"").decode("utf-8", "replace"))
        elif old is None and tip.entry_kind(path) is None and _is_test_module(path, tests):
            found += _new_test_module(path, text)
    return found


def _added_reach(path: str, text: str, old: str) -> list[Reach]:
    suffix = path[path.rfind(".") :].casefold() if "." in path else ""
    patterns = _BY_SUFFIX.get(suffix, ())
    if not patterns or _exempt_entry_point(path, text, suffix):
        patterns = tuple(p for p in patterns if "exit" not in p[1])
    before = Counter(old.splitlines())
    found = []
    report_file = bool(_REPORT_WORDS.search(text))
    for number, line in enumerate(text.splitlines(), 1):
        if before[line] > 0:
            before[line] -= 1
            continue  # the tip had this line
        for pattern, why in patterns:
            if re.search(pattern, line):
                found.append(Reach(path, number, line, why))
                break
        else:
            if report_file and _ATEXIT.search(line):
                found.append(Reach(path, number, line, "an exit hook in a file that names a report"))
    return found


def _exempt_entry_point(path: str, text: str, suffix: str) -> bool:
    """A program's own entry point may exit: Go's package main, Rust's binaries, `__main__.py`."""
    name = path.rsplit("/", 1)[-1]
    if suffix == ".go":
        return re.search(r"(?m)^package\s+main\b", text) is not None
    if suffix == ".rs":
        return name == "main.rs" or "/bin/" in f"/{path}"
    return name == "__main__.py"


def _is_test_module(path: str, tests: Sequence[str]) -> bool:
    parts = path.split("/")
    name = parts[-1]
    if tests and _matches(path, tests):
        return True
    return (
        name.startswith("test_")
        or name.endswith(("_test.py", "_test.go"))
        or ".test." in name
        or ".spec." in name
        or any(part in TEST_DIRS for part in parts[:-1])
    )


def _new_test_module(path: str, text: str) -> list[Reach]:
    if path.endswith(".py"):
        return _python_module(path, text)
    if path.endswith(".go"):
        pattern = re.compile(r"^\s*func\s+(?:init|TestMain)\s*\(")
        why = "runs before every test of the package"
        return [Reach(path, n, line, why) for n, line in enumerate(text.splitlines(), 1) if pattern.search(line)]
    if path.endswith((".js", ".mjs", ".cjs", ".jsx", ".ts", ".mts", ".cts", ".tsx")):
        return _js_module(path, text)
    return []


def _python_module(path: str, text: str) -> list[Reach]:
    lines = text.splitlines()
    try:
        tree = ast.parse(text)
    except (SyntaxError, ValueError):
        return []  # the test fails to import: the own run says so
    modules = _imported_names(tree)
    found: list[Reach] = []

    def say(node: ast.AST, why: str) -> None:
        number = getattr(node, "lineno", 1)
        found.append(Reach(path, number, lines[number - 1] if number <= len(lines) else "", why))

    for statement in tree.body:
        if not _defines(statement):
            say(statement, "runs at import")
    for node in ast.walk(tree):
        targets: Iterable[ast.AST] = ()
        if isinstance(node, ast.Assign):
            targets = node.targets
        elif isinstance(node, (ast.AugAssign, ast.AnnAssign)):
            targets = (node.target,)
        elif isinstance(node, ast.Delete):
            targets = node.targets
        elif isinstance(node, ast.Call) and _call_name(node) in ("setattr", "delattr") and node.args:
            targets = (ast.Attribute(value=node.args[0], attr="_", ctx=ast.Store()),)
        for target in targets:
            root = _root_name(target)
            if root is not None and (root in modules or root == "sys") and not isinstance(target, ast.Name):
                say(node, f"assigns into module {root}")
                break
    return _unique(found)


def _defines(node: ast.stmt) -> bool:
    """What a test module may do at import: import, define, name constants, branch on those."""
    if isinstance(node, (ast.Import, ast.ImportFrom, ast.FunctionDef, ast.AsyncFunctionDef, ast.ClassDef, ast.Pass)):
        return True
    if isinstance(node, ast.Expr):
        return isinstance(node.value, ast.Constant)  # a docstring
    if isinstance(node, ast.Assign):
        names = [t for t in node.targets if isinstance(t, ast.Name)]
        return len(names) == len(node.targets) and all(t.id != "pytest_plugins" for t in names)
    if isinstance(node, ast.AnnAssign):
        return isinstance(node.target, ast.Name)
    if isinstance(node, ast.If):
        return all(_defines(n) for n in node.body + node.orelse)
    if isinstance(node, ast.Try):
        handlers = [n for h in node.handlers for n in h.body]
        return all(_defines(n) for n in node.body + handlers + node.orelse + node.finalbody)
    return False


def _imported_names(tree: ast.Module) -> set[str]:
    names: set[str] = set()
    for node in ast.walk(tree):
        if isinstance(node, ast.Import):
            names.update((alias.asname or alias.name).split(".")[0] for alias in node.names)
        elif isinstance(node, ast.ImportFrom):
            names.update(alias.asname or alias.name for alias in node.names)
    return names


def _root_name(node: ast.AST) -> str | None:
    while isinstance(node, (ast.Attribute, ast.Subscript)):
        node = node.value
    return node.id if isinstance(node, ast.Name) else None


def _call_name(node: ast.Call) -> str:
    return node.func.id if isinstance(node.func, ast.Name) else ""


_JS_BINDING = re.compile(
    r"""(?:const|let|var)\s+(\w+)\s*=\s*require\(|import\s+\*\s+as\s+(\w+)\s+from|import\s+(\w+)\s+from"""
)


def _js_module(path: str, text: str) -> list[Reach]:
    bound = {name for match in _JS_BINDING.finditer(text) for name in match.groups() if name}
    if not bound:
        return []
    assigns = re.compile(
        r"^\s*(?:" + "|".join(map(re.escape, sorted(bound))) + r")\s*(?:\.\s*\w+|\[[^\]]*\])+\s*=(?!=)"
    )
    return [
        Reach(path, n, line, "assigns into a module it imports")
        for n, line in enumerate(text.splitlines(), 1)
        if assigns.search(line)
    ]


def _unique(found: list[Reach]) -> list[Reach]:
    return list(dict.fromkeys(found))
