"""What each test read, and which tests to run: the selective check's side of papayu's pytest
plugin (docs/DESIGN.md, "Pay for what the plan changed").

Copied beside the plugin (pytest_plugin.py) and imported by it only when papayu asks, in the
check's pytest, whatever its version: the standard library and pytest's hooks only.

Recording (the base run, the tip's code): for each test, the functions of the repository it ran
(a trace function that sees every new Python frame, not every line), the files of the repository
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

import json
import os
import sys
import threading
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
        self.disabled = sys.gettrace() is not None  # coverage or a debugger traces already
        if self.disabled:
            self.global_["x"] = "a trace function was already set (coverage, a debugger)"
        else:
            sys.settrace(self._trace)
            threading.settrace(self._trace)
        sys.addaudithook(self._audit)

    @staticmethod
    def _fresh() -> dict[str, Any]:
        return {"u": set(), "o": set(), "d": set(), "x": ""}

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

    def _trace(self, frame: Any, event: str, arg: Any) -> None:
        if event == "call":
            code = frame.f_code
            known = self.units.get(id(code))
            number = known[1] if known is not None else self._unit(code)
            if number is not None:
                self.current["u"].add(number)
        return None

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
        self.current = self._fresh()
        if sys.gettrace() != self._trace and not self.disabled:
            self.current["x"] = "the trace function was replaced during the session"
            sys.settrace(self._trace)
        start = time.perf_counter()
        yield
        if sys.gettrace() != self._trace and not self.disabled:
            self.current["x"] = "the trace function was replaced by the test"
        self._flush("t", item.nodeid, self.current, time.perf_counter() - start)
        self.current = self.global_

    @pytest.hookimpl(hookwrapper=True)
    def pytest_fixture_setup(self, fixturedef: Any, request: Any) -> Any:
        # A fixture wider than one test is set up once and read by every test after: global.
        if getattr(fixturedef, "scope", "function") == "function":
            yield
            return
        saved, self.current = self.current, self.global_
        try:
            yield
        finally:
            self.current = saved

    @pytest.hookimpl(trylast=True)
    def pytest_sessionfinish(self, session: Any, exitstatus: Any) -> None:
        self._flush("g", str(os.getpid()), self.global_)
        self.handle.flush()


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
