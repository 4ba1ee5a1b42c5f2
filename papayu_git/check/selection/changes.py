"""Which units of a Python file a change touches: its functions and methods (by qualified name,
the outermost def: a nested function is part of the one defining it), or its module-level code
(imports, constants, class bodies, decorators, default values: what runs when the module is
imported, and what every importer may read).

Compared as syntax trees without positions, so moving code or editing comments changes nothing.
A new plain function (no decorator, constant defaults) only adds a name to the module: not module
code. Under `from __future__ import annotations` an undecorated function's annotations are strings
nobody evaluates at import: part of the function, not of the module. A module's or class's docstring is no module code either (only `__doc__` and doctests read
it). A file that does not parse on either side is changed whole.
"""

from __future__ import annotations

import ast
import builtins
from dataclasses import dataclass

MODULE = "<module>"


@dataclass(frozen=True)
class Change:
    module: bool  # the module-level code changed (or the file is new, gone or unreadable)
    units: frozenset[str]  # functions whose code changed (qualified names), module code aside
    docstrings: bool = False  # a module's or class's docstring changed (what a doctest reads)
    problem: str = ""  # why the file could not be compared (then it is changed whole)


def python_change(old: bytes | None, new: bytes | None) -> Change:
    """What changed from ``old`` to ``new``; a file that cannot be compared (a syntax error, an
    expression nested deeper than the interpreter's recursion allows) is changed whole."""
    if old is None or new is None:
        return Change(True, frozenset())
    try:
        return _compared(old, new)
    except (RecursionError, MemoryError) as exc:
        return Change(True, frozenset(), problem=f"too deeply nested to compare ({type(exc).__name__})")


def _compared(old: bytes, new: bytes) -> Change:
    before, after = _units(old), _units(new)
    if before is None or after is None:
        return Change(True, frozenset())
    (skeleton_before, defs_before, docs_before), (skeleton_after, defs_after, docs_after) = before, after
    changed = {name for name in defs_before.keys() | defs_after.keys() if defs_before.get(name) != defs_after.get(name)}
    return Change(skeleton_before != skeleton_after, frozenset(changed), docs_before != docs_after)


def _units(source: bytes) -> tuple[str, dict[str, str], list[str]] | None:
    """(the module without its functions' bodies and its docstrings, qualified name -> the
    function's tree, the module's and classes' docstrings)."""
    try:
        tree = ast.parse(source)
    except (SyntaxError, ValueError):
        return None
    defs: dict[str, str] = {}
    _collect(tree.body, "", defs)
    docs = _docstrings(tree)
    return ast.dump(_skeleton(tree)), defs, docs


def _docstrings(tree: ast.Module) -> list[str]:
    """The module's and its classes' docstrings, taken out of the tree: a change there is no
    module code (only `__doc__` and doctests read them)."""
    out = []
    nodes: list[ast.Module | ast.ClassDef] = [tree, *(n for n in ast.walk(tree) if isinstance(n, ast.ClassDef))]
    for node in nodes:
        body = node.body
        first = body[0] if body else None
        if isinstance(first, ast.Expr) and isinstance(first.value, ast.Constant) and isinstance(first.value.value, str):
            out.append(first.value.value)
            body[0] = ast.Pass()
    return out


def _collect(body: list[ast.stmt], prefix: str, defs: dict[str, str]) -> None:
    for node in body:
        if isinstance(node, (ast.FunctionDef, ast.AsyncFunctionDef)):
            defs[prefix + node.name] = ast.dump(node)
        elif isinstance(node, ast.ClassDef):
            _collect(node.body, f"{prefix}{node.name}.", defs)
        elif isinstance(node, (ast.If, ast.Try, ast.With)):  # defs under `if TYPE_CHECKING`, `try`
            for block in _blocks(node):
                _collect(block, prefix, defs)


def _blocks(node: ast.stmt) -> list[list[ast.stmt]]:
    if isinstance(node, ast.If):
        return [node.body, node.orelse]
    if isinstance(node, ast.Try):
        return [node.body, *(h.body for h in node.handlers), node.orelse, node.finalbody]
    if isinstance(node, ast.With):
        return [node.body]
    return []


class _Bodiless(ast.NodeTransformer):
    """Function bodies emptied: what runs at import is left. A plain module-level function whose
    name nothing else binds (no import, assignment, other def or builtin of that name) is dropped:
    it only adds a name. Methods are kept whatever they are: a new one may override another."""

    def __init__(self, droppable: frozenset[str], lazy_annotations: bool) -> None:
        self.droppable = droppable
        self.lazy_annotations = lazy_annotations  # `from __future__ import annotations`: never evaluated
        self.depth = 0

    def visit_ClassDef(self, node: ast.ClassDef) -> ast.AST:
        self.depth += 1
        try:
            self.generic_visit(node)
        finally:
            self.depth -= 1
        return node

    def visit_FunctionDef(self, node: ast.FunctionDef) -> ast.AST | None:
        return self._def(node)

    def visit_AsyncFunctionDef(self, node: ast.AsyncFunctionDef) -> ast.AST | None:
        return self._def(node)

    def _def(self, node: ast.FunctionDef | ast.AsyncFunctionDef) -> ast.AST | None:
        transparent = all(_decorator_name(d) in TRANSPARENT for d in node.decorator_list)
        plain = transparent and _constant_defaults(node.args)
        if plain and self.depth == 0 and node.name in self.droppable:
            return None
        node.body = [ast.Pass()]
        if self.lazy_annotations and transparent:
            # Strings nobody evaluates at import (a decorator might: then they stay).
            node.returns = None
            for arg in (
                *node.args.posonlyargs,
                *node.args.args,
                *node.args.kwonlyargs,
                node.args.vararg,
                node.args.kwarg,
            ):
                if arg is not None:
                    arg.annotation = None
        return node


# Decorators that wrap or mark a function without reading its signature when the module is
# imported: the function's own changes stay the function's.
TRANSPARENT = frozenset(
    {
        "contextmanager", "asynccontextmanager", "staticmethod", "classmethod", "property", "setter", "getter",
        "deleter", "cached_property", "cache", "lru_cache", "wraps", "overload", "override", "abstractmethod",
        "final", "no_type_check",
    }
)  # fmt: skip


def _decorator_name(node: ast.expr) -> str:
    """`contextlib.contextmanager` -> contextmanager; `lru_cache(maxsize=8)` -> lru_cache."""
    if isinstance(node, ast.Call):
        node = node.func
    if isinstance(node, ast.Attribute):
        return node.attr
    return node.id if isinstance(node, ast.Name) else ""


def _constant_defaults(args: ast.arguments) -> bool:
    defaults = [*args.defaults, *(d for d in args.kw_defaults if d is not None)]
    return all(isinstance(d, ast.Constant) for d in defaults)


def _skeleton(tree: ast.Module) -> ast.Module:
    bound: dict[str, int] = {}
    for node in ast.walk(tree):
        for name in _binds(node):
            bound[name] = bound.get(name, 0) + 1
    droppable = frozenset(n for n, count in bound.items() if count == 1 and n not in _BUILTINS)
    lazy = any(
        isinstance(node, ast.ImportFrom)
        and node.module == "__future__"
        and any(a.name == "annotations" for a in node.names)
        for node in tree.body
    )
    return _Bodiless(droppable, lazy).visit(tree)


def _binds(node: ast.AST) -> list[str]:
    if isinstance(node, (ast.FunctionDef, ast.AsyncFunctionDef, ast.ClassDef)):
        return [node.name]
    if isinstance(node, (ast.Import, ast.ImportFrom)):
        return [(a.asname or a.name).split(".")[0] for a in node.names]
    if isinstance(node, ast.Name) and isinstance(node.ctx, ast.Store):
        return [node.id]
    if isinstance(node, ast.Global):
        return list(node.names)
    return []


_BUILTINS = frozenset(dir(builtins))
