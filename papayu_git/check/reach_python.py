"""Python code that reaches for the runner, read on its syntax tree (docs/DESIGN.md, "What
judges a plan").

Text has a next spelling: `"_py" "test"`, `"_py" + "test"`, `"%stest" % "_py"`, `f"{'_py'}test"`,
`"".join(["_", "pytest"])`, `"tsetyp_"[::-1]`, a name bound to any of these, `getattr(mod,
name)`. So the plan's Python code is parsed and its string expressions folded wherever their
parts are constants (or names bound to constants), and what the code names is read from the
folded values, the attributes it touches and the calls it makes. Where a name is computed from
something no reading can fold (`getattr(sys, input())`, `__import__(x)`, `exec(source)`), that is
said too: code that hides what it reaches cannot be reviewed by reading it.

Read: the plan's code (only the statements on lines it adds), and its new test modules, which
may do at import no more than define tests, and which may not rewrite the code they test:
assigning a function's `__code__` or an attribute of a project module outside `monkeypatch` or
`mock.patch` (undone after the test) would judge every later plan.
"""

from __future__ import annotations

import ast
import re
from collections.abc import Callable, Iterable, Iterator
from typing import NamedTuple

from papayu_git.check.constant_fold import called, dotted, value_of

# What code under test has no business naming, in any string it builds or any name it uses.
NAMES = (
    (re.compile(r"(?:^|\.)_pytest(?:\.|$)|^pluggy(?:\.|$)|\bpytestPDB\b"), "pytest's internals"),
    (re.compile(r"^pytest_[a-z_]+$"), "a pytest hook or plugin outside a conftest"),
    (re.compile(r"^(?:hookimpl|hookspec|pluginmanager|_hookexec|_inner_hookexec|_multicall|hookwrapper)$"), "the runner's plugin machinery"),
    (re.compile(r"^/proc/(?:self|thread-self|\d+)/|^/dev/fd/"), "the process's own file descriptors or memory"),
    (re.compile(r"papayu|PYTEST_ADDOPTS|junit|xmlpath", re.IGNORECASE), "the test report"),
)  # fmt: skip
# Attribute names that reach past the code itself: the modules they must come from (None: any
# object's), and why. Also read from strings where a name is computed (getattr(x, "f_" + "back")).
ATTRIBUTES: dict[str, tuple[tuple[str, ...] | None, str]] = {
    "_exit": (("os", "posix"), "os._exit: leaves without the runner's report"),
    "_getframe": (("sys",), "other frames (sys._getframe)"),
    "_current_frames": (("sys",), "other frames (sys._current_frames)"),
    "currentframe": (("inspect", "logging"), "other frames (currentframe)"),
    "stack": (("inspect",), "other frames (inspect.stack)"),
    "f_back": (None, "other frames (f_back)"),
    "tb_frame": (None, "other frames (a traceback's frame)"),
    "gi_frame": (None, "other frames (a generator's frame)"),
    "cr_frame": (None, "other frames (a coroutine's frame)"),
    "get_objects": (("gc",), "every object of the process (gc.get_objects)"),
    "get_referrers": (("gc",), "objects through gc (gc.get_referrers)"),
    "get_referents": (("gc",), "objects through gc (gc.get_referents)"),
    "settrace": (("sys", "threading"), "a trace function"),
    "setprofile": (("sys", "threading"), "a profile function"),
    "monitoring": (("sys",), "a monitoring callback (sys.monitoring)"),
    "addaudithook": (("sys",), "an audit hook"),
    "pythonapi": (("ctypes",), "the interpreter's memory (ctypes)"),
}
MODULES = {
    "ctypes": "ctypes: writes any memory of the process",
    "_ctypes": "ctypes: writes any memory of the process",
    "cffi": "cffi: writes any memory of the process",
    "_cffi_backend": "cffi: writes any memory of the process",
    "_testcapi": "the interpreter's internals",
    "_testinternalcapi": "the interpreter's internals",
}
# Modules whose attributes, computed, could be anything above.
SENSITIVE = frozenset(["sys", "os", "posix", "gc", "inspect", "builtins", "importlib", "ctypes", "traceback", "atexit"])
_IMPORTERS = ("__import__", "import_module", "find_spec", "spec_from_file_location", "load_module", "SourceFileLoader")
_RUNNERS = ("exec", "eval", "compile")
_PATCHERS = frozenset(["monkeypatch", "patch", "mocker", "mock"])


class Found(NamedTuple):
    line: int
    why: str


def code_reach(text: str, added: Callable[[int], bool]) -> list[Found]:
    """What the statements on added lines of a module of the plan's code reach for."""
    tree = _parse(text)
    if tree is None:
        return []
    return _Reader(tree).read(added)


def test_module_reach(text: str, project: Callable[[str], bool]) -> list[Found]:
    """What a new test module does beyond defining tests: runs at import, rewrites the code it
    tests (``project``: whether a top-level module name is the project's), or reaches for the
    runner like code would."""
    tree = _parse(text)
    if tree is None:
        return []  # it fails to import: the runs say so
    found = [Found(getattr(s, "lineno", 1), "runs at import") for s in tree.body if not _defines(s)]
    reader = _Reader(tree, project=project)
    found += reader.read()
    found += reader.rewrites()
    return found


def _parse(text: str) -> ast.Module | None:
    try:
        return ast.parse(text)
    except (SyntaxError, ValueError):
        return None


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


class _Reader:
    """One module's syntax tree: its names bound to constants, and what it reaches for."""

    def __init__(self, tree: ast.Module, project: Callable[[str], bool] | None = None) -> None:
        self.tree = tree
        self.project = project
        self.bound: dict[str, ast.expr] = {}  # name -> the one expression assigned to it
        self.modules: dict[str, str] = {}  # local name -> the module it is bound to
        seen: set[str] = set()
        for node in ast.walk(tree):
            if isinstance(node, ast.Assign) and len(node.targets) == 1 and isinstance(node.targets[0], ast.Name):
                name = node.targets[0].id
                if name in seen:
                    self.bound.pop(name, None)  # bound twice: no one value
                else:
                    self.bound[name] = node.value
                seen.add(name)
            elif isinstance(node, ast.Import):
                for alias in node.names:
                    local = alias.asname or alias.name.split(".")[0]
                    self.modules[local] = alias.name if alias.asname else alias.name.split(".")[0]
            elif isinstance(node, ast.ImportFrom) and node.module and not node.level:
                for alias in node.names:
                    self.modules.setdefault(alias.asname or alias.name, f"{node.module}.{alias.name}")
        for name, value in self.bound.items():
            module = self.module_of(value)
            if module is not None:
                self.modules.setdefault(name, module)

    # -- folding ----------------------------------------------------------------------------------

    def fold(self, node: ast.AST | None) -> str | None:
        """The string ``node`` makes when its parts are constants (constant_fold.py), else None."""
        value = value_of(node, self.bound)
        if isinstance(value, bytes):
            return value.decode("latin-1")
        return value if isinstance(value, str) else None

    def module_of(self, node: ast.AST) -> str | None:
        """The module an expression is: a name bound to one, `importlib.import_module(C)`,
        `__import__(C)`, `sys.modules[C]` with C folded."""
        if isinstance(node, ast.Name):
            return self.modules.get(node.id)
        if isinstance(node, ast.Call) and called(node) in ("import_module", "__import__") and node.args:
            return self.fold(node.args[0])
        if isinstance(node, ast.Subscript) and dotted(node.value) == "sys.modules":
            return self.fold(node.slice)
        return None

    # -- reading ----------------------------------------------------------------------------------

    def read(self, added: Callable[[int], bool] | None = None) -> list[Found]:
        """What the module reaches for; with ``added``, only in statements on added lines (the
        first such line of each node is named)."""
        found: list[Found] = []
        for node in ast.walk(self.tree):
            line = getattr(node, "lineno", 0)
            if added is not None:
                span = range(line, (getattr(node, "end_lineno", None) or line) + 1)
                line = next((n for n in span if added(n)), 0)
                if not line:
                    continue
            found += [Found(line, why) for why in self._node(node)]
        return _unique(found)

    def _node(self, node: ast.AST) -> Iterator[str]:
        if isinstance(node, ast.Import | ast.ImportFrom):
            yield from self._import(node)
        elif isinstance(node, ast.Attribute):
            yield from self._attribute(node.attr, self.module_of(node.value), dotted(node.value))
        elif isinstance(node, ast.FunctionDef | ast.AsyncFunctionDef):
            yield from self._named(node.name)
        elif isinstance(node, ast.Call):
            yield from self._call(node)
        elif isinstance(node, ast.Subscript):
            yield from self._namespace_key(node)
        if isinstance(node, ast.expr) and not isinstance(node, ast.Name | ast.Attribute):
            folded = self.fold(node)
            if folded is not None:
                yield from self._named(folded)
        if isinstance(node, ast.Assign | ast.AugAssign | ast.Delete | ast.AnnAssign):
            yield from self._writes(node)

    def _import(self, node: ast.Import | ast.ImportFrom) -> Iterator[str]:
        if isinstance(node, ast.Import):
            for alias in node.names:
                yield from self._named(alias.name)
            return
        module = node.module or ""
        yield from self._named(module)
        for alias in node.names:
            yield from self._named(f"{module}.{alias.name}")
            yield from self._attribute(alias.name, module, module)

    def _named(self, text: str) -> Iterator[str]:
        for pattern, why in NAMES:
            if pattern.search(text):
                yield why
                return
        top = text.split(".", 1)[0]
        if top in MODULES:
            yield MODULES[top]

    def _attribute(self, name: str, owner: str | None, dotted: str = "", computed: bool = False) -> Iterator[str]:
        """``owner``: the module the attribute is read from, when known."""
        known = ATTRIBUTES.get(name)
        if known is not None:
            modules, why = known
            top = (owner or dotted).split(".")[0]
            if modules is None or top in modules or (computed and owner is None):
                yield why
        elif name.startswith(("pytest_", "_pytest", "hook", "plugin", "_inner_hook")):
            yield from self._named(name)

    def _call(self, node: ast.Call) -> Iterator[str]:
        name = called(node)
        first = node.args[0] if node.args else None
        whole = dotted(node.func)
        if (
            name in ("getattr", "setattr", "delattr", "hasattr")
            and isinstance(node.func, ast.Name)
            and len(node.args) > 1
        ):
            attribute = self.fold(node.args[1])
            owner = self.module_of(node.args[0])
            if attribute is not None:
                yield from self._attribute(attribute, owner, dotted(node.args[0]), computed=True)
            elif self._sensitive(node.args[0]):
                yield f"{name} with a computed name on a module that reaches the process"
            if name in ("setattr", "delattr") and (owner or dotted(node.args[0])) in (
                "builtins",
                "sys",
                "__builtins__",
            ):
                yield "replaces a builtin or part of sys"
        elif name in _IMPORTERS and first is not None:
            module = self.fold(first)
            if module is None:
                yield f"imports a module whose name is computed ({name})"
        elif name in _RUNNERS and isinstance(node.func, ast.Name) and first is not None:
            source = self.fold(first)
            if source is None and not isinstance(first, ast.Name | ast.Attribute):
                yield f"{name} of code built at run time"
            elif source is None:
                yield f"{name} of code that is not in the file"
            else:
                inner = _parse(source) if name != "eval" else _parse_expression(source)
                if inner is not None:
                    yield from (f.why for f in _Reader(inner).read())
        elif whole.startswith("sys.modules.") and name in (
            "update",
            "pop",
            "setdefault",
            "clear",
            "__setitem__",
            "__delitem__",
            "popitem",
        ):
            yield "sys.modules surgery"
        elif whole in ("marshal.loads", "pickle.loads") or (
            name == "loads" and self.module_of(node.func) in ("marshal", "marshal.loads")
        ):
            yield f"{whole or name}: code or objects built from bytes"

    def _namespace_key(self, node: ast.Subscript) -> Iterator[str]:
        """`vars(os)["_exit"]`, `os.__dict__["_exit"]`, `sys.modules["_pytest.runner"]`."""
        container = node.value
        owner = None
        if isinstance(container, ast.Call) and called(container) == "vars" and container.args:
            owner = self.module_of(container.args[0]) or ""
        elif isinstance(container, ast.Attribute) and container.attr == "__dict__":
            owner = self.module_of(container.value) or ""
        elif dotted(container) == "sys.modules" or (isinstance(container, ast.Call) and called(container) == "globals"):
            owner = ""
        if owner is None:
            return
        key = self.fold(node.slice)
        if key is not None:
            yield from self._attribute(key, owner or None, computed=True)
            yield from self._named(key)

    def _writes(self, node: ast.stmt) -> Iterator[str]:
        targets: Iterable[ast.AST]
        if isinstance(node, ast.Assign | ast.Delete):
            targets = node.targets
        else:
            targets = (node.target,)  # type: ignore[attr-defined]
        for target in targets:
            if isinstance(target, ast.Subscript):
                container = target.value
                if dotted(container) == "sys.modules":
                    yield "sys.modules surgery"
                elif (
                    isinstance(container, ast.Call)
                    and called(container) in ("vars", "globals")
                    and (not container.args or self._is_module(container.args[0]))
                ):
                    yield "writes a module's namespace (vars(), globals())"
                elif isinstance(container, ast.Attribute) and container.attr == "__dict__":
                    yield "writes an object's __dict__"
            elif isinstance(target, ast.Attribute):
                root = _root(target)
                if root in ("builtins", "__builtins__") or (root and self.modules.get(root) == "builtins"):
                    yield "replaces a builtin"
                elif target.attr == "__code__":
                    yield "assigns a function's __code__"

    def _sensitive(self, node: ast.AST) -> bool:
        module = self.module_of(node)
        return module is not None and (module.split(".")[0] in SENSITIVE or _named_runner(module))

    def _is_module(self, node: ast.AST) -> bool:
        return self.module_of(node) is not None or dotted(node) in ("builtins", "sys", "__builtins__")

    # -- rewriting the code under test (new test modules) ------------------------------------------

    def rewrites(self) -> list[Found]:
        """Assignments into the project's modules, or of any function's code, outside the
        patchers that undo themselves after the test."""
        project = self.project or (lambda name: False)
        found = []
        for node in ast.walk(self.tree):
            line = getattr(node, "lineno", 0)
            targets: list[ast.AST] = []
            if isinstance(node, ast.Assign):
                targets = list(node.targets)
            elif isinstance(node, ast.AugAssign | ast.AnnAssign):
                targets = [node.target]
            elif isinstance(node, ast.Delete):
                targets = list(node.targets)
            elif _is_setattr(node):
                assert isinstance(node, ast.Call)
                attribute = self.fold(node.args[1]) if len(node.args) > 1 else None
                targets = [ast.Attribute(value=node.args[0], attr=attribute or "?")]
            for target in targets:
                module = self._module_written(target)
                if module is not None and (project(module.split(".")[0]) or module.split(".")[0] in SENSITIVE):
                    found.append(Found(line, f"rewrites module {module} outside monkeypatch"))
                elif isinstance(target, ast.Attribute) and target.attr in (
                    "__code__",
                    "__defaults__",
                    "__kwdefaults__",
                ):
                    found.append(Found(line, f"rewrites a function's {target.attr}"))
        return _unique(found)

    def _module_written(self, target: ast.AST) -> str | None:
        """The module an assignment target writes into: `calc.f = `, `calc.f.__code__ = `,
        `vars(calc)['f'] = `, `calc.__dict__['f'] = `, `sys.modules['calc'].f = `."""
        node = target
        while isinstance(node, ast.Attribute | ast.Subscript):
            inner = node.value
            if (
                isinstance(node, ast.Subscript)
                and isinstance(inner, ast.Call)
                and called(inner) == "vars"
                and inner.args
            ):
                return self.module_of(inner.args[0])
            if isinstance(node, ast.Subscript) and isinstance(inner, ast.Attribute) and inner.attr == "__dict__":
                return self.module_of(inner.value)
            module = self.module_of(inner)
            if module is not None and not _is_patcher(module):
                return module
            node = inner
        return None


def _is_setattr(node: ast.AST) -> bool:
    """`setattr(x, ...)`, `delattr(x, ...)`, `object.__setattr__(x, ...)`: a write, as a call."""
    if not isinstance(node, ast.Call) or not node.args or called(node) not in ("setattr", "delattr", "__setattr__"):
        return False
    return isinstance(node.func, ast.Name) or dotted(node.func) in ("builtins.setattr", "object.__setattr__")


def _is_patcher(module: str) -> bool:
    return module.split(".")[-1] in _PATCHERS


def _named_runner(module: str) -> bool:
    return any(pattern.search(module) for pattern, _ in NAMES[:1])


def _parse_expression(source: str) -> ast.Module | None:
    try:
        return ast.Module(body=[ast.Expr(ast.parse(source, mode="eval").body)], type_ignores=[])
    except (SyntaxError, ValueError):
        return None


def _root(node: ast.AST) -> str | None:
    while isinstance(node, ast.Attribute | ast.Subscript):
        node = node.value
    return node.id if isinstance(node, ast.Name) else None


def _unique(found: list[Found]) -> list[Found]:
    return sorted(dict.fromkeys(found), key=lambda f: f.line)
