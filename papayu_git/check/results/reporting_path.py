"""The reporting path, verified around every test (docs/DESIGN.md, "The runtime shield"): the
objects that turn a test's outcome into papayu's record are still those papayu saw before any
code of the checked tree ran.

Copied beside papayu's pytest plugin (as `papayu_reporting_path.py`), used by the plugin
(pytest's runner and reports, pluggy) and by the unittest reporter (unittest_results.py). Not every
write is an audit event the shield's hook sees: assigning into a module or a class is not. So a
`Snapshot` holds what the path is made of (module namespaces, class dictionaries, named objects)
and compares it by identity (an object's own `__eq__` is never asked). Standard library only,
Python 3.7 and later.

unittest's part is taken once per process (`unittest_path`), when unittest's import ended (papayu's
start-up hook) or at the latest when pytest's plugin loads, before any code of the checked tree
runs; unittest's modules imported later (`unittest._log` for assertLogs, `unittest.async_case`)
are added once their own code ran (`loaded`).
"""

from __future__ import annotations

import builtins
import sys
from collections.abc import Callable
from itertools import chain, islice
from operator import is_, itemgetter
from typing import Any

# unittest's modules on the way from a test's assertion to its result. unittest.mock is a library
# the tests use, not the runner (and pytest-mock rewraps its assertions at start-up).
UNITTEST_MODULES = (
    "unittest",
    "unittest.case",
    "unittest.result",
    "unittest.runner",
    "unittest.suite",
    "unittest.loader",
    "unittest.main",
    "unittest.util",
    "unittest._log",
    "unittest.async_case",
)
# Of those, what runs before the tests and after them: verified at a run's start and end only.
RUN_MODULES = frozenset(["unittest", "unittest.loader", "unittest.main", "unittest.runner"])
PLAIN = (type(None), bool, int, float, str, bytes)  # values that run no code
_BUILTINS = frozenset(vars(builtins))
_state: dict[str, Any] = {}  # this process's unittest Snapshot, its shield, the modules in it


class Snapshot:
    """Identities of mappings (module and class dictionaries) and named objects. A part taken
    with ``data``: a plain value (None, a number, a string) put in place of another is no change
    (`TestCase.maxDiff = None`); a callable or a descriptor is."""

    def __init__(self, describe: Callable[[Any], str] = lambda value: "") -> None:
        self.describe = describe  # where a new object comes from: "calc.py:12"
        self.parts: list[tuple[str, Any, tuple[Any, ...], tuple[Any, ...], bool]] = []
        # (name, namespace, keys, values, pick by key, builtins it must not shadow, data, fast pick,
        # the namespace's size then)
        self.names: list[tuple[str, Any, tuple[str, ...], tuple[Any, ...], Any, Any, bool, Any, int]] = []
        self.objects: list[tuple[str, Callable[[], Any], Any, bool]] = []
        self._flat: tuple[Any, ...] | None = None  # the mappings' values, in one tuple: the fast path
        self._views: list[Any] = []
        self._spaces: list[tuple[Any, Any, tuple[Any, ...], int]] = []

    def mapping(self, name: str, mapping: Any, data: bool = False) -> None:
        self.parts.append((name, mapping, tuple(mapping.keys()), tuple(mapping.values()), data))
        self._flat = None

    def module(self, name: str) -> None:
        module = sys.modules.get(name)
        if module is not None:
            self.mapping(name, vars(module))

    def module_globals(self, name: str) -> None:
        """The names of module ``name`` that its own functions look up at run time (what they
        call and construct): replacing one changes what they do. Its other names do not."""
        module = sys.modules.get(name)
        if module is not None:
            used = _used_names(module, name)
            self._namespace(name, vars(module), tuple(sorted(used & vars(module).keys())), used, False)

    def namespace(self, name: str, data: bool = False) -> None:
        """Every name module ``name`` holds now (what other modules reach through it, as
        `runner.TextTestRunner`): replaced or removed is a change, added is not, but for a builtin
        its functions use (`isinstance`, shadowed in the module, is no longer the builtin)."""
        module = sys.modules.get(name)
        if module is not None:
            self._namespace(name, vars(module), tuple(vars(module)), _used_names(module, name), data)

    def _namespace(self, name: str, namespace: Any, keys: tuple[str, ...], used: set[str], data: bool) -> None:
        shadows = frozenset((used & _BUILTINS) - namespace.keys())
        if not keys:
            return
        pick = itemgetter(*keys) if len(keys) > 1 else lambda space: (space[keys[0]],)
        values = pick(namespace)  # itemgetter: one C call for all of them, a tuple
        fast = _fast(namespace, keys, pick)
        self.names.append((name, namespace, keys, values, pick, shadows, data, fast, len(namespace)))
        self._flat = None

    def cls(self, name: str, cls: Any, data: bool = False) -> None:
        if isinstance(cls, type):
            self.mapping(name, vars(cls), data)

    def value(self, name: str, get: Callable[[], Any], equal: bool = False) -> None:
        """``get()`` must keep returning the same object (``equal``: an equal value)."""
        was = get()
        if equal:  # the value first seen stands for every equal one: the fast path's identity holds
            plain = get

            def get() -> Any:
                now = plain()
                return was if type(now) is type(was) and now == was else now

        self.objects.append((name, get, was, equal))
        self._flat = None

    def _unchanged(self, is_: Any = is_, chain: Any = chain) -> bool:  # bound here: not the module's names
        """The fast path: identity passes in C over every mapping's values (live views, no copy),
        each namespace's names and each named object; a mismatch, or a mapping or namespace that
        grew or shrank, goes to the slow path, which names it or accepts it."""
        if self._flat is None:
            self._views = [mapping.values() for _, mapping, _, _, _ in self.parts]
            self._flat = tuple(chain.from_iterable(values for _, _, _, values, _ in self.parts))
            self._spaces = [(space, fast, values, size) for _, space, _, values, _, _, _, fast, size in self.names]
        try:
            views, flat = self._views, self._flat
            if sum(map(len, views)) != len(flat) or not all(map(is_, chain.from_iterable(views), flat)):
                return False
            for space, fast, values, size in self._spaces:
                if len(space) != size or not all(map(is_, fast(space), values)):
                    return False
            return all(get() is was for _, get, was, _ in self.objects)
        except Exception:
            return False

    def changed(self) -> str:
        """What is no longer the object it was ("" when all are)."""
        if self._unchanged():
            return ""
        self._flat = None  # the slow path below may accept a change: look at everything again
        for index, (name, mapping, keys, values, data) in enumerate(self.parts):
            if len(mapping) == len(keys) and all(map(is_, mapping.values(), values)):
                continue  # a name renamed would change the order of what follows it
            which = _which(mapping, keys, values, self.describe, data)
            if which:
                return f"{name}.{which}"
            self.parts[index] = (name, mapping, tuple(mapping.keys()), tuple(mapping.values()), data)
        for index, (name, namespace, keys, values, pick, shadows, data, fast, _) in enumerate(self.names):
            unchanged = len(namespace) >= len(keys) and all(map(is_, fast(namespace), values))
            if not unchanged or (shadows and not namespace.keys().isdisjoint(shadows)):
                which = self._names_which(namespace, keys, values, pick, shadows, data)
                if which:
                    return f"{name}.{which}"
                keys = tuple(key for key in namespace if key in set(keys))  # the same names, in today's order
                pick = itemgetter(*keys) if len(keys) > 1 else lambda space, keys=keys: (space[keys[0]],)
                values, fast = pick(namespace), _fast(namespace, keys, pick)
            # accepted (a plain value, a name added): the namespace as it is now is the one compared
            self.names[index] = (name, namespace, keys, values, pick, shadows, data, fast, len(namespace))
        for name, get, was, equal in self.objects:
            try:
                current = get()
            except Exception:
                return name
            if current is not was and not (equal and type(current) is tuple and current == was):
                return name
        return ""

    def _names_which(
        self, namespace: Any, keys: tuple[str, ...], values: tuple[Any, ...], pick: Any, shadows: Any, data: bool
    ) -> str:
        shadowing = sorted(shadows & namespace.keys())
        if shadowing:
            where = self.describe(namespace[shadowing[0]])
            return f"{shadowing[0]} (added, shadowing the builtin{', by ' + where if where else ''})"
        try:
            now = pick(namespace)
        except KeyError:
            return f"{next(k for k in keys if k not in namespace)} (removed)"
        for key, new, old in zip(keys, now, values):  # noqa: B905 (3.7)
            if new is not old and not (data and isinstance(new, PLAIN)):
                where = self.describe(new)
                return f"{key} (replaced{', by ' + where if where else ''})"
        return ""


class TestClasses:
    """The checked tree's test classes (a test's class and its bases, up to the runner's own), as
    first seen, before their tests run: one of their functions replaced or removed, or a callable
    added in front of one a later class of the test's bases defines (`AddTest.assertEqual = ...`),
    is a change. Plain values, and callables that stand in front of nothing (`cls.patcher =
    mock.patch(...)` in setUpClass), are not."""

    def __init__(self, shield: Any, describe: Callable[[Any], str]) -> None:
        self.shield, self.describe = shield, describe
        # class -> [(a class of its bases, its functions' names and the functions, every value)]
        self.seen: dict[type, list[list[Any]]] = {}

    def see(self, cls: type) -> None:
        if cls in self.seen or not isinstance(cls, type):
            return
        parts = []
        for klass in cls.__mro__:
            if klass.__module__ in UNITTEST_MODULES or klass is object:
                break
            found = getattr(sys.modules.get(klass.__module__), "__file__", None)
            if isinstance(found, str) and self.shield.repository(found):  # the checked tree's
                namespace = vars(klass)
                functions = {key: value for key, value in namespace.items() if _behaviour(value)}
                parts.append([klass, functions, tuple(namespace.values())])
        self.seen[cls] = parts

    def changed(self, cls: type, is_: Any = is_) -> str:
        """What of ``cls`` is no longer as first seen ("" when all is)."""
        self.see(cls)
        for part in self.seen.get(cls, ()):
            klass, functions, values = part
            namespace = vars(klass)
            if len(namespace) == len(values) and all(map(is_, namespace.values(), values)):
                continue  # the fast path: every value the same object, in the same place
            name = "%s.%s" % (klass.__module__, klass.__qualname__)
            for key, was in functions.items():
                now = namespace.get(key, _GONE)
                if now is not was:
                    where = self.describe(now) if now is not _GONE else ""
                    said = "removed" if now is _GONE else "replaced" + (", by " + where if where else "")
                    return "%s.%s (%s)" % (name, key, said)
            later = cls.__mro__[cls.__mro__.index(klass) + 1 :]
            for key in sorted(namespace.keys() - functions.keys()):
                value = namespace[key]
                if _behaviour(value) and any(key in vars(base) for base in later):
                    where = self.describe(value)
                    return "%s.%s (added in front of the inherited one%s)" % (
                        name, key, ", by " + where if where else ""
                    )  # fmt: skip
            part[2] = tuple(namespace.values())  # values, and what stands in front of nothing: no change
        return ""


_GONE = object()


def _behaviour(value: Any) -> bool:
    """A value that runs code when looked up or called (a function, a method, a property)."""
    return not isinstance(value, PLAIN) and (callable(value) or hasattr(type(value), "__get__"))


def _fast(namespace: Any, keys: tuple[str, ...], pick: Any) -> Any:
    """How the fast path reads ``keys`` of ``namespace``: when they are its first names (every
    name of a module, a name added since comes after them), its values in order, no lookup; else
    by key."""
    count = len(keys)
    if tuple(islice(namespace, count)) == keys:
        return lambda space: islice(space.values(), count)
    return pick


def _used_names(module: Any, name: str) -> set[str]:
    """The names the functions of module ``name`` (and its classes' methods) load."""
    used: set[str] = set()
    for value in list(vars(module).values()):
        functions = [value] if callable(value) and not isinstance(value, type) else []
        if isinstance(value, type) and getattr(value, "__module__", None) == name:
            functions = [getattr(v, "__func__", v) for v in vars(value).values()]
            functions += [getattr(v, "fget", None) for v in vars(value).values() if isinstance(v, property)]
        for function in functions:
            if getattr(function, "__module__", None) == name:
                used |= _global_names(getattr(function, "__code__", None))
    return used


def _global_names(code: Any) -> set[str]:
    """The names ``code`` and the code nested in it load (globals, and attributes: a superset)."""
    out: set[str] = set()
    stack = [code] if code is not None else []
    while stack:
        current = stack.pop()
        out.update(current.co_names)
        stack.extend(c for c in current.co_consts if hasattr(c, "co_names"))
    return out


def _which(
    mapping: Any, keys: tuple[Any, ...], values: tuple[Any, ...], describe: Callable[[Any], str], data: bool
) -> str:
    """The first name whose object changed, and where its new object was defined; "" when the
    only change is a plain value added (a flag pytest sets on a class), or with ``data`` put in
    place of another: neither callable nor a descriptor, it changes no behaviour."""
    before = dict(zip(keys, values))  # noqa: B905 (the check's Python may be 3.7)
    for key in list(mapping.keys()) + list(before):
        if key not in mapping:
            if data and isinstance(before[key], PLAIN):
                continue
            return f"{key} (removed)"
        value = mapping[key]
        if key not in before:
            if callable(value) or hasattr(type(value), "__get__"):
                where = describe(value)
                return f"{key} (added{', by ' + where if where else ''})"
        elif value is not before[key] and not (data and isinstance(value, PLAIN)):
            where = describe(value)
            return f"{key} (replaced{', by ' + where if where else ''})"
    return ""


def defined_at(value: Any, rel: Callable[[str], str]) -> str:
    """Where a function (or a property's getter, a bound method's function) was defined; a
    class, by its module's file."""
    for candidate in (value, getattr(value, "fget", None), getattr(value, "__func__", None)):
        code = getattr(candidate, "__code__", None)
        if code is not None:
            return f"{rel(code.co_filename)}:{code.co_firstlineno}"
    if isinstance(value, type):
        found = getattr(sys.modules.get(value.__module__), "__file__", None)
        return rel(found) if isinstance(found, str) else ""
    return ""


def unittest_path(shield: Any) -> Snapshot | None:
    """This process's Snapshot of unittest's reporting path as each test's outcome passes along it
    (TestCase, its module, the result classes, the suite, with the JSON encoder both reporters
    write with, and this module), taken at the first call; None without a shield or unittest."""
    if "snapshot" in _state:
        return _state["snapshot"]
    if shield is None or "unittest.case" not in sys.modules:
        return None
    snapshot = Snapshot(lambda value: defined_at(value, shield.rel))
    _state.update(snapshot=snapshot, run=Snapshot(snapshot.describe), shield=shield, modules=set())
    for cls in (Snapshot, TestClasses):
        snapshot.cls(f"{__name__}.{cls.__name__}", cls)
    snapshot.namespace(__name__)
    for name in ("json", "json.encoder"):
        snapshot.module_globals(name)
    snapshot.cls("json.encoder.JSONEncoder", getattr(sys.modules.get("json.encoder"), "JSONEncoder", None))
    for name in UNITTEST_MODULES:
        loaded(name)
    return snapshot


def unittest_run_path() -> Snapshot | None:
    """The rest of unittest's path, what runs before the tests and after them (the package's
    names, the loader, the program, the runner): verified at a run's start and end."""
    return _state.get("run")


def loaded(name: str) -> None:
    """unittest's module ``name``, once its own code ran, into the snapshots (when taken): its
    namespace, each class it defines and each object of those classes it holds (the default
    loader), plain values free to change; a result class, and all of the modules a test's
    outcome passes through, in the one verified around every test. Their functions are the
    runner's (shield.protected)."""
    snapshot, module = _state.get("snapshot"), sys.modules.get(name)
    if snapshot is None or module is None or name not in UNITTEST_MODULES or name in _state["modules"]:
        return
    _state["modules"].add(name)
    around = name not in RUN_MODULES
    (snapshot if around else _state["run"]).namespace(name, data=True)
    shield = _state["shield"]
    protect(shield, vars(module).values())
    result = getattr(sys.modules.get("unittest.result"), "TestResult", None)
    for key, value in sorted(vars(module).items()):
        if isinstance(value, type) and value.__module__ == name:
            each = around or (isinstance(result, type) and issubclass(value, result))
            (snapshot if each else _state["run"]).cls(f"{name}.{value.__qualname__}", value, data=True)
            protect(shield, vars(value).values())
        elif type(value).__module__ == name and not isinstance(value, type) and hasattr(value, "__dict__"):
            (snapshot if around else _state["run"]).mapping(f"{name}.{key}", vars(value), data=True)


def callables(cls: type) -> frozenset[str]:
    """The names of what ``cls`` and its bases call as methods: an object's own attribute of
    one of those names stands in front of the method (`result.addFailure = ...`)."""
    return frozenset(
        key
        for klass in cls.__mro__
        if klass is not object
        for key, value in vars(klass).items()
        if callable(value) or isinstance(value, (staticmethod, classmethod))
    )


def protect(shield: Any, values: Any) -> None:
    """The functions among ``values`` are on the reporting path: the shield refuses rewriting
    their code or defaults, whoever asks (shield.Shield._on_setattr)."""
    for value in list(values):
        function = getattr(value, "__func__", value)
        if callable(function):
            shield.protected.add(id(function))
