"""What each test read, and the order tests run in: the fail-first side of papayu's pytest plugin
(docs/DESIGN.md, "Fail first").

Copied beside the plugin (pytest_plugin.py) and imported by it only when papayu asks, in the
check's pytest, whatever its version: the standard library and pytest's hooks only.

Recording (a base run, the tip's code, once): for each test, the functions of the repository it
ran (Python 3.12's `sys.monitoring`, each code object's first start per test; an interpreter
without it records nothing and says why), the files of the repository it opened and the
directories it listed (audit hooks), and whether it did something no file can stand for (a
subprocess, a socket, a thread, a file outside the repository and the environment). What runs
outside any test (collection, imports, fixtures wider than one test) is recorded apart as global.
The recorder never decides anything: it only orders later runs. So it keeps to a budget (what it
spends itself stays under RECORD_BUDGET of the run, or it stops) and whatever goes wrong in it
(an exception, a tool id taken) turns it off for the rest of the run, said in the log and in the
record (`{"off": why}`).

Ordering (a plan's run): the tests papayu names first run first, in their own order, then the
rest, in one session; when one of the first fails that did not fail on the tip, the session stops
after the first part (papayu then knows enough to reject). Or only the named tests run (a re-run
of failing tests on the tip, a best-of candidate's first part), or every test but the named ones
(the rest). Nothing here can make a test pass or vanish unnoticed: papayu judges the whole
suite's results against the tip's, and a test left unrun is missing unless a failure already
rejects the plan.
"""

from __future__ import annotations

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
RECORD_BUDGET = 0.10  # the share of the run the recorder may spend itself
BUDGET_AFTER_SEC = 2.0  # judged once the run is this old (start-up is no measure)


def _top(qualname: str) -> str:
    """The unit a code object belongs to: the outermost function or method defining it
    (`Command.main.<locals>.f` -> `Command.main`); module and class bodies are `<module>`."""
    head = qualname.split(".<locals>", 1)[0]
    return head if head and not head.startswith("<") else "<module>"


def _say(text: str) -> None:
    """A line in the check's log (pytest's own output goes there too)."""
    stream = sys.__stderr__
    if stream is None:
        return
    try:
        stream.write(f"[papayu] {text}\n")
        stream.flush()
    except (OSError, ValueError):
        pass


class Recorder:
    """Per test, through sys.monitoring: the code objects of the repository it started."""

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
        self.off = ""  # why recording stopped ("" while it records)
        self.spent = 0.0  # seconds spent in the recorder's own code
        self.began = time.perf_counter()
        self.tool: int | None = None
        self.monitor = self._monitor()
        if self.monitor is None:
            return
        sys.addaudithook(self._audit)
        self._loaded()

    def _monitor(self) -> Any:
        monitoring = getattr(sys, "monitoring", None)
        if monitoring is None:
            self._stop(f"Python {sys.version_info[0]}.{sys.version_info[1]} has no sys.monitoring (3.12+)")
            return None
        for tool in (3, 4, 1):  # free ids before the profiler's and the debugger's (0, 2, 5)
            try:
                monitoring.use_tool_id(tool, "papayu-inputs")
            except ValueError:
                continue
            self.tool = tool
            monitoring.register_callback(tool, monitoring.events.PY_START, self._started)
            monitoring.set_events(tool, monitoring.events.PY_START)
            return monitoring
        self._stop("every sys.monitoring tool id papayu may use is taken")
        return None

    def _stop(self, why: str) -> None:
        """Recording ends here for this run; what was recorded so far stays, marked."""
        if self.off:
            return
        # The tool keeps its id and events (what the runtime shield compares): its callback now
        # returns at once, and with no more restarts each code object reaches it once at most.
        self.off = why
        _say(
            f"recording what each test reads turned off for this run: {why} (only the order of later runs is affected)"
        )
        self._write({"off": why})

    def _started(self, code: Any, offset: int) -> Any:
        """sys.monitoring's PY_START: the first start of ``code`` since the last switch."""
        if self.off:
            return _DISABLE
        began = time.perf_counter()
        try:
            known = self.units.get(id(code))
            number = known[1] if known is not None else self._unit(code)
            if number is not None:
                self.current["u"].add(number)
        except Exception as exc:  # a failure in the record is never a test's
            self._stop(f"{type(exc).__name__}: {exc}"[:300])
        self.spent += time.perf_counter() - began
        return _DISABLE  # this code object is not reported again until the next switch

    @staticmethod
    def _fresh() -> dict[str, Any]:
        return {"u": set(), "o": set(), "d": set(), "x": ""}

    def _switch(self, to: dict[str, Any]) -> dict[str, Any]:
        """What ran so far goes to the current inputs; from now on, to ``to``. Returns the old."""
        old, self.current = self.current, to
        if self.off or self.monitor is None:
            return old
        began = time.perf_counter()
        try:
            self.monitor.restart_events()
        except Exception as exc:
            self._stop(f"{type(exc).__name__}: {exc}"[:300])
        now = time.perf_counter()
        self.spent += now - began
        elapsed = now - self.began
        if elapsed > BUDGET_AFTER_SEC and self.spent > RECORD_BUDGET * elapsed:
            self._stop(f"it cost {self.spent / elapsed:.0%} of the run, over its budget of {RECORD_BUDGET:.0%}")
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
        if self.off:
            return
        try:
            self._audited(event, args)
        except Exception as exc:
            self._stop(f"{type(exc).__name__} in the audit hook: {exc}"[:300])

    def _audited(self, event: str, args: tuple[Any, ...]) -> None:
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
        try:
            self.handle.write(json.dumps(record, separators=(",", ":")) + "\n")
        except (OSError, ValueError):
            pass

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
        inputs = self._switch(self.global_)
        if not self.off:  # after the recorder stopped, a test's record would say it read nothing
            self._flush("t", item.nodeid, inputs, took)

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
        if not self.off:
            self._loaded()
        self._flush("g", str(os.getpid()), self.global_)
        try:
            self.handle.flush()
        except (OSError, ValueError):
            pass


_DISABLE: Any = getattr(getattr(sys, "monitoring", None), "DISABLE", None)


class Orderer:
    """The order papayu asks for (docs/DESIGN.md, "Fail first"): the named tests first (by node
    id, or every test of a named file), in their own order, then the rest; the session stops
    after the first part when one of them failed that did not fail on the tip. Or only the named
    tests (``only``), or all but the named ones (``skip``). ``report`` writes a record to papayu's
    stream (how many ran first, whether it stopped)."""

    def __init__(self, path: str, report: Any = None) -> None:
        with open(path, encoding="utf-8") as handle:
            wanted = json.load(handle)
        self.first = frozenset(str(t) for t in wanted.get("first") or ())
        self.first_files = frozenset(str(f) for f in wanted.get("first_files") or ())
        self.known_failing = frozenset(str(t) for t in wanted.get("known_failing") or ())
        self.stop = bool(wanted.get("stop"))
        only = wanted.get("only")
        self.only = frozenset(str(t) for t in only) if isinstance(only, list) else None
        self.only_files = frozenset(str(f) for f in wanted.get("only_files") or ())
        # The files to collect in an ``only`` run: the named ones and those of the named tests.
        self.collect = self.only_files | {self._file(t) for t in self.only or ()}
        self.skip = frozenset(str(t) for t in wanted.get("skip") or ())
        self.skip_files = frozenset(str(f) for f in wanted.get("skip_files") or ())
        self.report = report
        self.last_first = ""  # the node id after which the first part ends
        self.in_first: set[str] = set()
        self.failed: list[str] = []  # first-part tests that failed and did not fail on the tip

    def _rel(self, path: Any, config: Any) -> str | None:
        try:
            return os.path.relpath(str(path), str(config.rootpath)).replace(os.sep, "/")
        except (ValueError, AttributeError):
            return None

    def pytest_ignore_collect(self, collection_path: Any, config: Any) -> bool | None:
        """Files none of whose tests is to run are not collected at all (nor imported)."""
        rel = self._rel(collection_path, config)
        if rel is None:
            return None
        if rel in self.skip_files:
            return True
        if self.only is not None and rel not in self.collect and os.path.isfile(str(collection_path)):
            return True
        return None

    @staticmethod
    def _file(nodeid: str) -> str:
        return nodeid.split("::", 1)[0]

    @pytest.hookimpl(trylast=True)
    def pytest_collection_modifyitems(self, session: Any, config: Any, items: list[Any]) -> None:
        try:
            self._order(config, items)
        except Exception as exc:  # an order that fails leaves pytest's own
            _say(f"the fail-first order failed ({type(exc).__name__}: {exc}); the tests run in their own order")

    def _order(self, config: Any, items: list[Any]) -> None:
        dropped = []
        if self.only is not None:
            dropped = [i for i in items if i.nodeid not in self.only and self._file(i.nodeid) not in self.only_files]
        elif self.skip:
            dropped = [i for i in items if i.nodeid in self.skip]
        if dropped:
            gone = {id(i) for i in dropped}
            config.hook.pytest_deselected(items=dropped)
            items[:] = [i for i in items if id(i) not in gone]
        if self.only is not None:  # these tests alone: all of them "first", of the whole collection
            self.in_first = {i.nodeid for i in items}
            self._report({"kind": "order", "first": len(items), "total": len(items) + len(dropped)})
        if self.first or self.first_files:
            first = [i for i in items if i.nodeid in self.first or self._file(i.nodeid) in self.first_files]
            chosen = {id(i) for i in first}
            rest = [i for i in items if id(i) not in chosen]
            items[:] = first + rest
            self.in_first = {i.nodeid for i in first}
            self.last_first = first[-1].nodeid if first and rest else ""
            worker = hasattr(config, "workerinput") or hasattr(config, "slaveinput")
            self.stop = self.stop and not worker  # xdist's workers share the suite: nobody stops alone
            self._report({"kind": "order", "first": len(first), "total": len(items)})

    def _report(self, record: dict[str, Any]) -> None:
        if self.report is not None:
            try:
                self.report(record)
            except Exception:
                pass

    @pytest.hookimpl(tryfirst=True)
    def pytest_runtest_logreport(self, report: Any) -> None:
        nodeid = report.nodeid
        counts = nodeid in self.in_first and nodeid not in self.known_failing
        if report.failed and counts and nodeid not in self.failed:
            self.failed.append(nodeid)

    @pytest.hookimpl(hookwrapper=True)
    def pytest_runtest_protocol(self, item: Any, nextitem: Any) -> Any:
        yield
        if self.stop and self.failed and item.nodeid == self.last_first:
            said = f"{len(self.failed)} of the {len(self.in_first)} tests run first failed"
            item.session.shouldstop = f"papayu: {said}; the plan is rejected without the rest"
            self._report({"kind": "order", "stopped": said, "failed": self.failed[:50]})
