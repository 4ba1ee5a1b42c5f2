"""Imports run downward only (docs/ARCHITECTURE.md, "Floors"), read from the syntax tree of every
module of the package: imports inside functions included, `if TYPE_CHECKING:` blocks left out
(they never run). A circle is opened by moving a definition, never by an import inside a function:
an import inside a function is there for start-up cost only (tests/test_startup.py), so moving
every one of them to the top of its module must make no circle either.

A package's `__init__` is a module of its own: importing `papayu_git.check.gate` runs
`papayu_git/check/__init__.py` first, so it is an arrow to that package too, except from a module
inside the package (its `__init__` is already running). Imports by a computed name (cli.py's lazy
commands, schemas.py's generated validators) are not arrows here.
"""

from __future__ import annotations

import ast
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path

import papayu_git

PACKAGE = "papayu_git"
ROOT = Path(papayu_git.__file__).parent

# The plumbing floor imports only itself, never prints, and only settings reads configuration.
PLUMBING = frozenset(
    f"{PACKAGE}.{name}"
    for name in (
        "errors", "atomic", "digests", "outcomes", "invocation", "net", "git", "settings", "paths",
        "secrets", "locks", "object_store", "unified_diff", "protocol", "schemas", "schema_validators",
    )
)  # fmt: skip
# The top floor: the commands and what runs them (docs.py writes the man page from the CLI).
# Nothing below imports it.
COMMANDS = f"{PACKAGE}.commands"
TOP = frozenset({f"{PACKAGE}.cli", f"{PACKAGE}.mcp_server", f"{PACKAGE}.__main__", f"{PACKAGE}.docs"})


@dataclass(frozen=True)
class Arrow:
    source: str  # the importing module
    target: str  # the module the import runs
    line: int
    lazy: bool  # inside a function

    def where(self) -> str:
        return f"{path_of(self.source)}:{self.line}"


def modules() -> dict[str, Path]:
    """Every module of the package by its dotted name (a package by its own name)."""
    found = {}
    for path in sorted(ROOT.rglob("*.py")):
        parts = path.relative_to(ROOT.parent).with_suffix("").parts
        found[".".join(parts[:-1] if parts[-1] == "__init__" else parts)] = path
    return found


MODULES = modules()


def path_of(module: str) -> str:
    return str(MODULES[module].relative_to(ROOT.parent))


def _type_checking(test: ast.expr) -> bool:
    return (isinstance(test, ast.Name) and test.id == "TYPE_CHECKING") or (
        isinstance(test, ast.Attribute) and test.attr == "TYPE_CHECKING"
    )


def _imports(tree: ast.AST, lazy: bool = False) -> Iterator[tuple[ast.Import | ast.ImportFrom, bool]]:
    for node in ast.iter_child_nodes(tree):
        if isinstance(node, ast.Import | ast.ImportFrom):
            yield node, lazy
        elif isinstance(node, ast.If) and _type_checking(node.test):
            for other in node.orelse:
                yield from _imports(ast.Module(body=[other], type_ignores=[]), lazy)
        else:
            inside = lazy or isinstance(node, ast.FunctionDef | ast.AsyncFunctionDef | ast.Lambda)
            yield from _imports(node, inside)


def _targets(module: str, node: ast.Import | ast.ImportFrom) -> list[str]:
    """The modules of the package an import statement names (a name imported from a package is
    its submodule when one exists, else the package itself)."""
    if isinstance(node, ast.Import):
        return [alias.name for alias in node.names if alias.name.split(".")[0] == PACKAGE]
    if node.level:
        here = module.split(".") if MODULES[module].name == "__init__.py" else module.split(".")[:-1]
        base = ".".join(here[: len(here) - node.level + 1] + ([node.module] if node.module else []))
    else:
        base = node.module or ""
    if base.split(".")[0] != PACKAGE:
        return []
    return [f"{base}.{alias.name}" if f"{base}.{alias.name}" in MODULES else base for alias in node.names]


def arrows() -> list[Arrow]:
    """Every import arrow between modules of the package, with the packages it runs on the way."""
    out = []
    for module, path in MODULES.items():
        for node, lazy in _imports(ast.parse(path.read_text(encoding="utf-8"), str(path))):
            for target in _targets(module, node):
                parts = target.split(".")
                for depth in range(2, len(parts) + 1):
                    name = ".".join(parts[:depth])
                    if name in MODULES and name != module and not module.startswith(name + "."):
                        out.append(Arrow(module, name, node.lineno, lazy))
    return out


ARROWS = arrows()


def circles(arrows: list[Arrow]) -> list[list[Arrow]]:
    """One circle of arrows through each strongly connected group of modules (Tarjan)."""
    graph: dict[str, list[Arrow]] = {}
    for arrow in arrows:
        graph.setdefault(arrow.source, []).append(arrow)
    index: dict[str, int] = {}
    low: dict[str, int] = {}
    stack: list[str] = []
    groups: list[set[str]] = []

    def visit(node: str) -> None:
        index[node] = low[node] = len(index)
        stack.append(node)
        for arrow in graph.get(node, []):
            if arrow.target not in index:
                visit(arrow.target)
                low[node] = min(low[node], low[arrow.target])
            elif arrow.target in stack:
                low[node] = min(low[node], index[arrow.target])
        if low[node] == index[node]:
            group = set()
            while True:
                member = stack.pop()
                group.add(member)
                if member == node:
                    break
            if len(group) > 1:
                groups.append(group)

    for node in sorted(graph):
        if node not in index:
            visit(node)
    return [_circle_in(group, graph) for group in groups]


def _circle_in(group: set[str], graph: dict[str, list[Arrow]]) -> list[Arrow]:
    """A shortest way from the group's first module back to itself, inside the group."""
    start = min(group)
    paths: dict[str, list[Arrow]] = {start: []}
    frontier = [start]
    while frontier:
        following = []
        for node in frontier:
            for arrow in sorted(graph.get(node, []), key=lambda a: (a.target, a.line)):
                if arrow.target not in group:
                    continue
                if arrow.target == start:
                    return [*paths[node], arrow]
                if arrow.target not in paths:
                    paths[arrow.target] = [*paths[node], arrow]
                    following.append(arrow.target)
        frontier = following
    raise AssertionError(f"no circle in {group}")


def said(circle: list[Arrow]) -> str:
    steps = " -> ".join([circle[0].source, *(a.target for a in circle)])
    return (
        steps
        + "\n    "
        + "\n    ".join(f"{a.where()}: {'(in a function) ' if a.lazy else ''}imports {a.target}" for a in circle)
    )


def floor(module: str) -> str:
    if module in PLUMBING or any(module.startswith(p + ".") for p in PLUMBING):
        return "plumbing"
    if module in TOP or module == COMMANDS or module.startswith(COMMANDS + "."):
        return "top"
    return "features"


def test_the_package_is_read_whole() -> None:
    """The reader sees every module and its imports, lazy ones too (a reader that saw nothing would
    pass every test below)."""
    assert len(MODULES) > 150 and f"{PACKAGE}.check.gate" in MODULES and f"{PACKAGE}.commands.apply" in MODULES
    assert len(ARROWS) > 500
    lazy = {(a.source, a.target) for a in ARROWS if a.lazy}
    assert (f"{PACKAGE}.answers", f"{PACKAGE}.llm.rounds") in lazy  # start-up: the model stack
    assert (f"{PACKAGE}.__main__", f"{PACKAGE}.cli") in lazy
    # `from papayu_git.check.gate import ...` runs the check package first
    assert any(a.source == f"{PACKAGE}.transaction.run" and a.target == f"{PACKAGE}.check" for a in ARROWS)


def test_no_import_circle_at_the_top_of_the_modules() -> None:
    found = circles([a for a in ARROWS if not a.lazy])
    assert not found, "import circle(s):\n" + "\n".join(said(c) for c in found)


def test_no_import_inside_a_function_hides_a_circle() -> None:
    """Every import inside a function moved to the top of its module still makes no circle: each is
    there for start-up cost, none to dodge a circle (a circle is opened by moving a definition)."""
    found = circles(ARROWS)
    assert not found, "import circle(s) closed by imports inside functions:\n" + "\n".join(said(c) for c in found)


def test_nothing_below_the_commands_imports_them() -> None:
    upward = [
        f"{a.where()}: {a.source} imports {a.target}"
        for a in ARROWS
        if floor(a.target) == "top" and floor(a.source) != "top"
    ]
    assert upward == []


def test_the_plumbing_floor_imports_only_itself() -> None:
    upward = [
        f"{a.where()}: {a.source} imports {a.target} ({floor(a.target)})"
        for a in ARROWS
        if floor(a.source) == "plumbing" and floor(a.target) != "plumbing"
    ]
    assert upward == []


def _run_code(tree: ast.AST) -> Iterator[ast.AST]:
    """Every node but a module's `python -m` entry (its `main`, its `if __name__ == "__main__":`
    block): a developer's tool, which prints."""
    for child in ast.iter_child_nodes(tree):
        if isinstance(child, ast.FunctionDef) and child.name == "main":
            continue
        if isinstance(child, ast.If) and "__main__" in ast.unparse(child.test):
            continue
        yield child
        yield from _run_code(child)


def test_the_plumbing_floor_never_prints_and_only_settings_reads_configuration() -> None:
    """No print, no sys.stdout / sys.stderr (a module's `main`, its `python -m` developer tool,
    aside); no named environment variable read and no `git config` run but in settings.py."""
    found = []
    for module, path in MODULES.items():
        if floor(module) != "plumbing" or module.startswith(f"{PACKAGE}.schema_validators"):
            continue
        for node in _run_code(ast.parse(path.read_text(encoding="utf-8"))):
            where = f"{path_of(module)}:{getattr(node, 'lineno', '?')}"
            if isinstance(node, ast.Call) and isinstance(node.func, ast.Name) and node.func.id == "print":
                found.append(f"{where}: print")
            if isinstance(node, ast.Attribute) and node.attr in ("stdout", "stderr") and _named(node.value, "sys"):
                found.append(f"{where}: sys.{node.attr}")
            if module == f"{PACKAGE}.settings":
                continue
            if isinstance(node, ast.Call) and isinstance(node.func, ast.Attribute):
                called = node.func
                if called.attr == "getenv" or (called.attr == "get" and _named(called.value, "environ")):
                    found.append(f"{where}: reads an environment variable")
                if any(isinstance(arg, ast.List) and _says_config(arg) for arg in node.args):
                    found.append(f"{where}: runs git config")
            if isinstance(node, ast.Subscript) and _named(node.value, "environ") and isinstance(node.ctx, ast.Load):
                found.append(f"{where}: reads an environment variable")
    assert found == []


def _named(node: ast.AST, name: str) -> bool:
    return (isinstance(node, ast.Name) and node.id == name) or (isinstance(node, ast.Attribute) and node.attr == name)


def _says_config(items: ast.List) -> bool:
    return bool(items.elts) and isinstance(items.elts[0], ast.Constant) and items.elts[0].value == "config"


def test_the_reader_finds_a_circle_and_says_where() -> None:
    """The circle test can fail: two made-up modules importing each other, one of them lazily."""
    made_up = Arrow(f"{PACKAGE}.errors", f"{PACKAGE}.git", 3, True)
    found = circles([*ARROWS, made_up])
    assert len(found) == 1 and {a.source for a in found[0]} == {f"{PACKAGE}.git", f"{PACKAGE}.errors"}
    assert "papayu_git/errors.py:3: (in a function) imports papayu_git.git" in said(found[0])
    assert "papayu_git/git.py:" in said(found[0]) and "imports papayu_git.errors" in said(found[0])
    assert circles([a for a in [*ARROWS, made_up] if not a.lazy]) == []
