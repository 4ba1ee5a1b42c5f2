"""The test tiers (docs/CONTRIBUTING.md, "Test tiers"): what a test uses decides its markers, which
conftest.py applies; `make check` leaves the marked ones out, `make test` runs them all.

What a test uses is read from the test, never marked by hand on each one. conftest.py follows the
code a test can reach: its function, its parameters, the fixtures it requests, and every function
of tests/ these call, transitively (lambdas, nested functions, partials and decorated functions
included). A kind is used when that code reaches
- a helper module that declares it at its top: `USES = (TOOLCHAIN,)` in toolchains.py, whose
  `which`, `needs` and runner installs every test of a toolchain goes through;
- a fixture or helper declared with `@uses(KIND)` (the wheel, a clean venv, pre-commit's hook
  environments);
- a test module that declares `USES` for all its tests (the embedded model's);
and a test guarded by `toolchains.needs(...)` (skipped where the tool is missing) is a toolchain
test too. A helper that starts using a toolchain through toolchains.py takes every test that
calls it along.

The rest is kept to a time budget: durations.json holds what each test took in a whole run
(`make durations` records it); of the tests collected, each module keeps its cheapest, the
cheapest others fill FAST_SHARE of the suite's recorded time, and the tests beyond are `slow`. A share, not seconds:
it holds on a faster or a busier machine. A test not recorded yet counts as cheap until the next
recording.
"""

from __future__ import annotations

import functools
import hashlib
import inspect
import itertools
import json
import re
import sys
import types
from collections.abc import Callable, Iterable, Iterator
from pathlib import Path
from typing import Any, TypeVar

TOOLCHAIN = "toolchain"
PACKAGING = "packaging"
PRECOMMIT = "precommit"
LOCAL_LLM = "local_llm"
SLOW = "slow"

MARKERS = {
    TOOLCHAIN: "runs a toolchain or a runner from a registry (cargo, go, node, npm, maven, gradle, uv, ...)",
    PACKAGING: "builds the wheel or a virtual environment with pip",
    PRECOMMIT: "installs or runs pre-commit and its hook environments",
    LOCAL_LLM: "needs the real local llama.cpp model (papayu-git[local])",
}
TESTS = Path(__file__).resolve().parent
DURATIONS = TESTS / "durations.json"
# The fast tier's share of the whole suite's recorded time: the whole suite takes ~16 min on 2
# cores, `make check` must take at most 3 (start-up and collection included).
FAST_SHARE = 0.13
F = TypeVar("F", bound=Callable[..., Any])


def uses(*kinds: str) -> Callable[[F], F]:
    """Declare on a helper or fixture what calling it uses, where its code does not name it."""

    def declare(function: F) -> F:
        function.__tiers__ = frozenset(kinds)  # type: ignore[attr-defined]
        return function

    return declare


def kinds_of(roots: Iterable[object]) -> set[str]:
    """What the code reachable from ``roots`` (functions, values) uses."""
    found: set[str] = set()
    seen: set[int] = set()
    stack = list(_functions_in(roots))
    while stack:
        function = stack.pop()
        if id(function) in seen:
            continue
        seen.add(id(function))
        kinds, reached = _node(function)
        found |= kinds
        stack += reached
    return found


_NODES: dict[int, tuple[frozenset[str], list[object]]] = {}


def _node(function: object) -> tuple[frozenset[str], list[object]]:
    """What ``function`` itself uses and the functions of tests/ it reaches, read once."""
    key = id(function)
    if key not in _NODES:
        values = vars(function).values() if isinstance(function, type) else _reached(function)  # type: ignore[arg-type]
        _NODES[key] = (_declared(function), list(_functions_in(values)))
        _KEEP.append(function)  # the id stays this object's while the cache holds it
    return _NODES[key]


_KEEP: list[object] = []


def _functions_in(values: Iterable[object], depth: int = 0) -> Iterator[object]:
    """The functions and classes of tests/ among ``values`` (containers opened, a few levels deep)."""
    for value in values:
        if isinstance(value, (list, tuple, set, frozenset)) and depth < 4:
            yield from _functions_in(value, depth + 1)
        elif isinstance(value, dict) and depth < 4:
            yield from _functions_in([*value.keys(), *value.values()], depth + 1)
        elif isinstance(value, type):
            if _ours(value):
                yield value
        else:
            function = _function_of(value)
            if function is not None and _ours(function):
                yield function


def _declared(value: object) -> frozenset[str]:
    """``@uses`` on a function, or ``USES`` of the tests/ module it is defined in (its functions
    only: naming the module's exception or constants uses nothing)."""
    if not inspect.isfunction(value):
        return frozenset()
    module = sys.modules.get(value.__module__)
    declared = getattr(module, "USES", ()) if module is not None and _ours_module(value.__module__) else ()
    return frozenset(getattr(value, "__tiers__", ())) | frozenset(declared)


def _function_of(value: object) -> types.FunctionType | None:
    for _ in range(8):
        if inspect.isfunction(value):
            return value
        inner = getattr(value, "func", None) or getattr(value, "__wrapped__", None)  # partial, decorators
        if inner is None or inner is value:
            return None
        value = inner
    return None


def _ours(value: object) -> bool:
    """Defined in a file of tests/: what the suite itself wrote, not papayu or a library."""
    name = getattr(value, "__module__", None)
    return isinstance(name, str) and _ours_module(name)


@functools.cache
def _ours_module(name: str) -> bool:
    file = getattr(sys.modules.get(name), "__file__", None)
    return file is not None and Path(file).resolve().parent == TESTS


def _reached(function: types.FunctionType) -> Iterator[object]:
    """The values ``function`` names: its constants (but its docstring), the globals and closure
    values it reads, and the functions of a tests/ module it reads an attribute of."""
    scope = function.__globals__
    modules = [v for v in scope.values() if isinstance(v, types.ModuleType) and _ours_module(v.__name__)]
    yield from (cell.cell_contents for cell in function.__closure__ or () if _filled(cell))
    yield from function.__defaults__ or ()
    for code in _codes(function.__code__):
        consts = code.co_consts
        if function.__doc__ and consts[:1] == (function.__doc__,):
            consts = consts[1:]
        yield from (c for c in consts if not isinstance(c, types.CodeType))
        for name in code.co_names:
            if name in scope:
                yield scope[name]
            yield from (vars(m)[name] for m in modules if name in vars(m))


def _codes(code: types.CodeType) -> Iterator[types.CodeType]:
    yield code
    for const in code.co_consts:
        if isinstance(const, types.CodeType):
            yield from _codes(const)


def _filled(cell: types.CellType) -> bool:
    try:
        cell.cell_contents  # noqa: B018
    except ValueError:
        return False
    return True


# --- the time budget ------------------------------------------------------------------------------


def test_id(nodeid: str) -> str:
    """``nodeid`` without the `@group` pytest-xdist's --dist loadgroup appends; a long one (a
    parameter of 700 kB) cut, with a digest of the whole."""
    nodeid = re.sub(r"@[^\[\]/:@]+$", "", nodeid)
    return nodeid if len(nodeid) <= 160 else f"{nodeid[:120]}...{hashlib.sha256(nodeid.encode()).hexdigest()[:16]}"


def recorded(path: Path = DURATIONS) -> dict[str, float]:
    """Seconds per test id of the last whole run recorded; empty when there is none."""
    try:
        files = json.loads(path.read_text(encoding="utf-8"))["seconds"]
        return {f"{file}::{name}": float(took) for file, tests in files.items() for name, took in tests.items()}
    except (OSError, ValueError, KeyError, TypeError, AttributeError):
        return {}


def record(path: Path, seconds: dict[str, float], machine: str) -> None:
    """``seconds`` per test id as ``recorded`` reads them: by file, a test per line."""
    files: dict[str, dict[str, float]] = {}
    for test, took in sorted(seconds.items()):
        file, _, name = test.partition("::")
        files.setdefault(file, {})[name] = round(took, 2)
    text = json.dumps({"machine": machine, "seconds": files}, indent=1, ensure_ascii=False)
    path.write_text(text + "\n", encoding="utf-8")


def beyond_budget(candidates: Iterable[str], seconds: dict[str, float]) -> set[str]:
    """The ids of ``candidates`` beyond the budget, FAST_SHARE of all recorded time: every test
    module keeps its cheapest candidate (each part of papayu is exercised, the real sandboxed
    check included), then the cheapest others fill what is left."""
    known = sorted((seconds[t], t) for t in candidates if t in seconds)
    floor = {min(group)[1] for _, group in itertools.groupby(sorted(known, key=_module), key=_module)}
    spent = sum(seconds[t] for t in floor)
    budget, over = FAST_SHARE * sum(seconds.values()), set()
    for took, test in known:
        if test in floor:
            continue
        spent += took
        if spent > budget:
            over.add(test)
    return over


def _module(entry: tuple[float, str]) -> str:
    return entry[1].partition("::")[0]
