"""What each test read, and which tests to run: the selective check's side of papayu's pytest
plugin (docs/DESIGN.md, "Pay for what the plan changed").

Copied beside the plugin (pytest_plugin.py) and imported by it only when papayu asks, in the
check's pytest, whatever its version: the standard library and pytest's hooks only.

Recording (the base run, the tip's code): for each test, the functions of the repository it ran
(cProfile's C profiler, reset between tests; a test that starts a thread is not selectable: the
profiler sees one thread), the files of the repository
it opened and the directories it listed (audit hooks), and whether it did something no file can
stand for (a subprocess, a socket, a file outside the repository and the environment): then it
is not selectable. What runs outside any test (collection, imports, fixtures of a wider scope
than the function, set up once for many tests) is recorded apart as global: every test may read
what it left. One JSON-lines file per process (xdist's workers too) in the report directory;
papayu reads it after the run (inside.py sends it with the reports).

Selecting (a plan's run): the node ids papayu reuses come in a file; test files all of whose tests
are reused are not collected at all (their modules are not even imported), the other reused tests
are deselected, and every other test runs, new ones included.
"""

from __future__ import annotations

import cProfile
import json
import os
import sys
import time
from typing import Any

import pytest

# Reads below these are the environment (the system, the interpreter, installed packages, the
# check's private HOME): the same for every run of one base. And the test's own scratch files.
_SYSTEM = ("/usr/", "/etc/", "/lib/", "/lib32/", "/lib64/", "/bin/", "/sbin/", "/opt/", "/nix/store/")
_SCRATCH = ("/tmp/", "/var/tmp/", "/dev/", "/proc/", "/sys/", "/run/")
_SUBPROCESS = ("subprocess.Popen", "os.system", "os.exec", "os.posix_spawn", "os.spawn", "os.fork", "os.forkpty")
_NETWORK = ("socket.connect", "socket.bind", "socket.sendto", "socket.sendmsg")


def _top(qualname: str) -> str:
    """The unit a code object belongs to: the outermost function or method defining it
    (`Command.main.<locals>.f` -> `Command.main`); module and class bodies are `<module>`."""
    head = qualname.split(".<locals>", 1)[0]
    return head if head and not head.startswith("<") else "<module>"


class Recorder:
    """Per test, through cProfile's C profiler (a trace function in Python made click's suite 6x
    slower; the profiler costs a fraction of that): the functions it called, by code object."""

    def __init__(self, root: str, out: str) -> None:
        self.root = root.rstrip("/") + "/"
        prefixes = {sys.prefix, sys.base_prefix, sys.exec_prefix, os.path.expanduser("~"), *sys.path}
        self.environment = (*_SYSTEM, *(p.rstrip("/") + "/" for p in prefixes if p and p not in (".", "/", root)))
        os.makedirs(out, exist_ok=True)
        self.path = os.path.join(out, f"{os.getpid()}.jsonl")
        self.handle = open(self.path, "a", encoding="utf-8")  # noqa: SIM115 (open for the session)
        # id(code) -> (code, unit number or None: not the repository's); the code object is kept so
        # that its id is never another's (hashing a code object hashes its whole contents).
        self.units: dict[int, tuple[Any, int | None]] = {}
        self.numbers: dict[tuple[str, str], int] = {}
        self.global_ = self._fresh()
        self.current = self.global_
        self.monitor = _monitor(self._started)  # Python 3.12: sys.monitoring, far cheaper
        self.profiler = cProfile.Profile(subcalls=False, builtins=False)
        self.disabled = self.monitor is None and sys.getprofile() is not None
        if self.disabled:
            self.global_["x"] = "a profile function was already set"
        elif self.monitor is None:
            self.profiler.enable()
        sys.addaudithook(self._audit)
        self._loaded()

    def _started(self, code: Any, offset: int) -> Any:
        """sys.monitoring's PY_START: the first start of ``code`` since the last switch."""
        known = self.units.get(id(code))
        number = known[1] if known is not None else self._unit(code)
        if number is not None:
            self.current["u"].add(number)
        return _DISABLE  # this code object is not reported again until the next switch

    @staticmethod
    def _fresh() -> dict[str, Any]:
        return {"u": set(), "o": set(), "d": set(), "x": ""}

    def _switch(self, to: dict[str, Any]) -> dict[str, Any]:
        """What ran so far goes to the current inputs; from now on, to ``to``. Returns the old."""
        if self.monitor is not None:
            old, self.current = self.current, to
            self.monitor.restart_events()
            return old
        if not self.disabled:
            self.profiler.disable()
            if sys.getprofile() is not None:
                self.current["x"] = self.current["x"] or "a profile function was set meanwhile"
            for entry in self.profiler.getstats():
                code = entry.code
                if isinstance(code, str):
                    continue  # a builtin
                known = self.units.get(id(code))
                number = known[1] if known is not None else self._unit(code)
                if number is not None:
                    self.current["u"].add(number)
            self.profiler.clear()
        old, self.current = self.current, to
        if not self.disabled:
            self.profiler.enable()
        return old

    def _unit(self, code: Any) -> int | None:
        filename = code.co_filename
        if not filename.startswith(self.root):
            self.units[id(code)] = (code, None)
            return None
        key = (filename[len(self.root) :], _top(getattr(code, "co_qualname", code.co_name)))
        number = self.numbers.get(key)
        if number is None:
            number = self.numbers[key] = len(self.numbers)
            self._write({"n": number, "f": key[0], "q": key[1]})
        self.units[id(code)] = (code, number)
        return number

    def _audit(self, event: str, args: tuple[Any, ...]) -> None:
        if event == "open":
            self._opened(args)
        elif event in ("os.listdir", "os.scandir"):
            path = args[0] if args else "."
            if isinstance(path, (str, bytes)):
                self._path(path, "d")
        elif event.startswith(_SUBPROCESS) and not self.current["x"]:
            self.current["x"] = f"started a process ({event})"
        elif event.startswith(_NETWORK) and not self.current["x"]:
            self.current["x"] = f"used a socket ({event})"
        elif event == "_thread.start_new_thread" and not self.current["x"]:
            self.current["x"] = "started a thread (its calls are not recorded)"

    def _opened(self, args: tuple[Any, ...]) -> None:
        path, mode = args[0], args[1] if len(args) > 1 else None
        if not isinstance(path, (str, bytes)):
            return
        name = os.fsdecode(path)
        if name.endswith((".pyc", ".pyo")) or (name.endswith(".py") and mode == "r"):
            return  # an import: the functions it runs are what counts
        writing = isinstance(mode, str) and any(c in mode for c in "wax+")
        if not writing:
            self._path(name, "o")

    def _path(self, path: str | bytes, kind: str) -> None:
        name = os.path.abspath(os.fsdecode(path))
        if name.startswith(self.root):
            self.current[kind].add(name[len(self.root) :])
        elif name + "/" == self.root:
            self.current[kind].add("")
        elif not name.startswith((*self.environment, *_SCRATCH)) and not self.current["x"]:
            self.current["x"] = f"read {name}, outside the repository and the environment"

    def _write(self, record: dict[str, Any]) -> None:
        self.handle.write(json.dumps(record, separators=(",", ":")) + "\n")

    def _flush(self, key: str, value: str, inputs: dict[str, Any], seconds: float = 0.0) -> None:
        record: dict[str, Any] = {key: value, "u": sorted(inputs["u"]), "o": sorted(inputs["o"])}
        record["d"] = sorted(inputs["d"])
        if inputs["x"]:
            record["x"] = inputs["x"]
        if seconds:
            record["s"] = round(seconds, 4)
        self._write(record)

    @pytest.hookimpl(hookwrapper=True)
    def pytest_runtest_protocol(self, item: Any, nextitem: Any) -> Any:
        self._switch(self._fresh())
        start = time.perf_counter()
        yield
        took = time.perf_counter() - start
        self._flush("t", item.nodeid, self._switch(self.global_), took)

    @pytest.hookimpl(hookwrapper=True)
    def pytest_fixture_setup(self, fixturedef: Any, request: Any) -> Any:
        # A fixture wider than one test is set up once and read by every test after: global.
        if getattr(fixturedef, "scope", "function") == "function":
            yield
            return
        test = self._switch(self.global_)
        try:
            yield
        finally:
            self._switch(test)

    def _loaded(self) -> None:
        """The repository's modules imported so far (before recording began too: plugins, the
        runner's own imports) count as run outside any test: their module code ran."""
        for module in list(sys.modules.values()):
            filename = getattr(module, "__file__", None)
            if isinstance(filename, str) and filename.startswith(self.root):
                key = (filename[len(self.root) :], "<module>")
                number = self.numbers.get(key)
                if number is None:
                    number = self.numbers[key] = len(self.numbers)
                    self._write({"n": number, "f": key[0], "q": key[1]})
                self.global_["u"].add(number)

    @pytest.hookimpl(trylast=True)
    def pytest_sessionfinish(self, session: Any, exitstatus: Any) -> None:
        self._switch(self.global_)
        self._loaded()
        self._flush("g", str(os.getpid()), self.global_)
        self.handle.flush()


_DISABLE: Any = None


def _monitor(callback: Any) -> Any:
    """sys.monitoring (Python 3.12+) reporting each code object's first start, or None."""
    global _DISABLE
    monitoring = getattr(sys, "monitoring", None)
    if monitoring is None:
        return None
    for tool in (3, 4, 1):  # free ids before the profiler's and the debugger's (0, 2, 5)
        try:
            monitoring.use_tool_id(tool, "papayu-inputs")
        except ValueError:
            continue
        _DISABLE = monitoring.DISABLE
        monitoring.register_callback(tool, monitoring.events.PY_START, callback)
        monitoring.set_events(tool, monitoring.events.PY_START)
        return monitoring
    return None


class Selector:
    """Leaves out the tests papayu reuses: a test file all of whose tests are reused is not
    collected; the others run, those papayu does not know (new ones) included."""

    def __init__(self, path: str) -> None:
        with open(path, encoding="utf-8") as handle:
            wanted = json.load(handle)
        self.reuse = frozenset(str(t) for t in wanted["reuse"])
        self.skip_files = frozenset(str(f) for f in wanted["skip_files"])

    def pytest_ignore_collect(self, collection_path: Any, config: Any) -> bool | None:
        try:
            rel = os.path.relpath(str(collection_path), str(config.rootpath)).replace(os.sep, "/")
        except ValueError:
            return None
        return True if rel in self.skip_files else None

    @pytest.hookimpl(trylast=True)
    def pytest_collection_modifyitems(self, session: Any, config: Any, items: list[Any]) -> None:
        dropped = [item for item in items if item.nodeid in self.reuse]
        if dropped:
            config.hook.pytest_deselected(items=dropped)
            items[:] = [item for item in items if item.nodeid not in self.reuse]
