"""papayu's unittest reporter: one record per test, written as unittest reports it, into the pipe
papayu's pytest plugin writes to (docs/DESIGN.md, "A verdict per test": unittest).

Loaded by papayu's start-up hook (sitecustomize.py) once `unittest.result` is imported, in any
Python process of the check: `python -m unittest`, `manage.py test`, `setup.py test`, a script
calling `unittest.main()`, a runner papayu never heard of. It extends the methods of unittest's
base result class, which every runner's result class extends (TextTestResult, Django's, the XML
runners'): the test's outcome passes through papayu's record on its way to the runner's own.

Only the outermost run of a process is the check's: the result whose `startTestRun` came first,
up to its `stopTestRun`. A run started by a test (a test of a test helper) uses another result
object and is left out, and so is a run inside pytest (pytest reports those tests itself), as a
session in a process whose pytest session is open. Ids are pytest's for the same test, so that a
project read either way names its tests alike: `tests/test_x.py::CalcTest::test_add`, from the
file of the test's class when it lies under the check's root (unittest's own dotted id where it
does not: a doctest, a test of an installed package). A module that fails to import is an error
under its file; a failing `setUpClass` or `setUpModule` an error under the class's or module's id
and the fixture's name. Subtests are their test's: it fails when one of them fails.

Records are the plugin's (pytest_plugin.py): a session's start (pid and ancestors, runner
"unittest"), one per test (phase "call", "setup" for a fixture, "collect" for a module), the end.
Standard library only, Python 3.7 and later: it runs in the project's interpreter.
"""

from __future__ import annotations

import json
import os
import re
import stat
import sys
from typing import Any

CONFIG = os.path.join(os.path.dirname(os.path.abspath(__file__)), "papayu_pytest_results.json")
MESSAGE_CHARS = 2000
_FIXTURE = re.compile(r"^(?P<fixture>\w+) \((?P<where>[\w.]+)\)$")
_RANK = {"skipped": 0, "passed": 1, "failed": 2}


class _Run:
    """The check's unittest run in this process, and the tests it has open."""

    def __init__(self, result: Any, fd: int, root: str) -> None:
        self.result, self.fd, self.root = result, fd, root
        self.session = "unittest.%d.%d" % (os.getpid(), id(result))
        self.open: dict[str, list[str]] = {}  # test id -> [outcome, message]

    def write(self, record: dict[str, Any]) -> None:
        data = (json.dumps(dict(record, session=self.session), ensure_ascii=False) + "\n").encode("utf-8", "replace")
        try:
            while data:
                data = data[os.write(self.fd, data) :]
        except OSError:
            pass

    def outcome(self, test: Any, outcome: str, message: str = "") -> None:
        kind, test_id = _kind_and_id(test, self.root)
        if kind != "call":  # a fixture or a module: no startTest, no stopTest
            self.write({"kind": "test", "id": test_id, "when": kind, "outcome": outcome, "message": message})
            return
        state = self.open.setdefault(test_id, ["", ""])
        if not state[0] or _RANK[outcome] > _RANK[state[0]]:
            state[0] = outcome
            state[1] = message or state[1]

    def stop(self, test: Any) -> None:
        _, test_id = _kind_and_id(test, self.root)
        state = self.open.pop(test_id, None)
        if state is not None and state[0]:
            record = {"kind": "test", "id": test_id, "when": "call", "outcome": state[0]}
            if state[1]:
                record["message"] = state[1][:MESSAGE_CHARS]
            self.write(record)


_current: list[_Run] = []


def _config() -> dict[str, Any]:
    try:
        with open(CONFIG, encoding="utf-8") as handle:
            wanted = json.load(handle)
    except (OSError, ValueError):
        return {}
    return wanted if isinstance(wanted, dict) else {}


def _pipe(wanted: dict[str, Any]) -> int | None:
    """The stream: the pipe this process inherited, else the FIFO the check's first process relays
    into it (inside.py: a launcher such as tox or nox closed the pipe on the way)."""
    try:
        fd = int(wanted["fd"])
        info = os.fstat(fd)
        if stat.S_ISFIFO(info.st_mode) and info.st_ino == wanted.get("ino"):
            return fd
    except (OSError, ValueError, KeyError, TypeError):
        pass
    path = wanted.get("fifo")
    if not isinstance(path, str) or not path:
        return None
    try:
        fd = os.open(path, os.O_WRONLY | os.O_NONBLOCK | os.O_NOFOLLOW | os.O_CLOEXEC)
    except OSError:  # no reader: not in a check
        return None
    if not stat.S_ISFIFO(os.fstat(fd).st_mode):
        os.close(fd)
        return None
    os.set_blocking(fd, True)
    return fd


def _ancestors() -> list[int]:
    out: list[int] = []
    pid = os.getpid()
    for _ in range(64):
        try:
            with open("/proc/%d/stat" % pid, encoding="utf-8", errors="replace") as handle:
                pid = int(handle.read().rsplit(")", 1)[1].split()[1])
        except (OSError, ValueError, IndexError):
            return out or [os.getppid()]
        if pid <= 0:
            return out
        out.append(pid)
    return out


def _inside_pytest() -> bool:
    plugin = sys.modules.get("papayu_pytest_results")
    return bool(getattr(plugin, "_active", None))


def _kind_and_id(test: Any, root: str) -> tuple[str, str]:
    """("call", id) for a test; ("setup", id) for a class or module fixture that failed or
    skipped; ("collect", file) for a module that did not load."""
    name = type(test).__name__
    if name == "_ErrorHolder":
        match = _FIXTURE.match(str(getattr(test, "description", "")))
        if match is None:
            return "setup", str(getattr(test, "description", name))
        where = match.group("where")
        module, _, cls = where.rpartition(".") if where not in sys.modules else (where, "", "")
        file = _file_of(module, root)
        parts = [file or module] + ([cls] if cls else []) + [match.group("fixture")]
        return "setup", "::".join(parts)
    if name == "_FailedTest":
        module = str(getattr(test, "_testMethodName", ""))
        return "collect", _file_of(module, root) or module or test.id()
    method = getattr(test, "_testMethodName", None)
    file = _file_of(type(test).__module__, root)
    if file and method:
        return "call", "::".join([file, *type(test).__qualname__.split("."), method])
    return "call", str(test.id())


def _file_of(module: str, root: str) -> str:
    """The module's file relative to the root ("" when it is elsewhere, or unknown)."""
    found = getattr(sys.modules.get(module), "__file__", None)
    candidates = [found] if found else []
    if module and not found:  # a module that did not import: where an import would find it
        for entry in sys.path:
            base = os.path.join(entry or os.getcwd(), *module.split("."))
            candidates += [base + ".py", os.path.join(base, "__init__.py")]
    for path in candidates:
        real = os.path.realpath(path)
        if root and os.path.isfile(real) and real.startswith(root.rstrip("/") + "/"):
            return os.path.relpath(real, root).replace(os.sep, "/")
    return ""


def install(base: Any) -> None:
    """Extend unittest's base result class ``base`` (unittest.result.TestResult)."""
    wanted = _config()
    fd = _pipe(wanted)
    if fd is None or getattr(base, "_papayu_reporting", False):
        return
    root = os.path.realpath(str(wanted.get("root") or os.getcwd()))
    base._papayu_reporting = True

    def ours(result: Any) -> _Run | None:
        return _current[0] if _current and _current[0].result is result else None

    def wrap(name: str, after: Any) -> None:
        original = getattr(base, name)

        def method(self: Any, *args: Any, **kwargs: Any) -> Any:
            value = original(self, *args, **kwargs)
            try:
                after(self, *args)
            except Exception:  # the runner's result must never see papayu's errors
                pass
            return value

        method.__name__ = name
        setattr(base, name, method)

    def start_run(result: Any) -> None:
        if not _current and not _inside_pytest():
            run = _Run(result, fd, root)
            _current.append(run)
            run.write(
                {"kind": "start", "pid": os.getpid(), "ancestors": _ancestors(), "junit": "", "runner": "unittest"}
            )

    def stop_run(result: Any) -> None:
        run = ours(result)
        if run is not None:
            for test_id in list(run.open):
                run.open.pop(test_id)
            run.write({"kind": "end", "status": 0 if result.wasSuccessful() else 1})
            _current.remove(run)

    def outcome(kind: str) -> Any:
        def after(result: Any, test: Any, *args: Any) -> None:
            run = ours(result)
            if run is None:
                return
            message = ""
            if kind == "failed" and args and isinstance(args[0], tuple):
                message = result._exc_info_to_string(args[0], test)
            elif kind == "skipped" and args and isinstance(args[0], str):
                message = args[0]
            run.outcome(test, kind, message)

        return after

    def subtest(result: Any, test: Any, sub: Any, err: Any) -> None:
        run = ours(result)
        if run is not None and err is not None:  # a failing subtest fails its test
            run.outcome(test, "failed", "%s\n%s" % (sub, result._exc_info_to_string(err, test)))

    def stop_test(result: Any, test: Any) -> None:
        run = ours(result)
        if run is not None:
            run.stop(test)

    wrap("startTestRun", start_run)
    wrap("addSuccess", outcome("passed"))
    wrap("addFailure", outcome("failed"))
    wrap("addError", outcome("failed"))
    wrap("addUnexpectedSuccess", outcome("failed"))
    wrap("addSkip", outcome("skipped"))
    wrap("addExpectedFailure", outcome("skipped"))
    wrap("addSubTest", subtest)
    wrap("stopTest", stop_test)
    original_stop_run = base.stopTestRun

    def stop_test_run(self: Any) -> Any:
        try:
            stop_run(self)
        except Exception:
            pass
        return original_stop_run(self)

    base.stopTestRun = stop_test_run
