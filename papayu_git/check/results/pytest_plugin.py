"""papayu's pytest plugin: one record per test report, written as pytest produces it, into a
pipe to papayu (docs/DESIGN.md, "A verdict per test").

Copied into a directory of its own that the check gets read-only and on PYTHONPATH, with a
`.dist-info` whose `pytest11` entry point loads it: a pytest that cannot import it (tox without
PYTHONPATH, `python -I`, PYTEST_DISABLE_PLUGIN_AUTOLOAD, `-p no:papayu-results`) simply runs
without it, and papayu reads pytest's JUnit file as before. Only the standard library and the
hooks: it runs in the check's pytest, whatever its version.

The pipe's descriptor and identity are in a file beside this one; the plugin writes only to a
FIFO of that identity (a descriptor of the same number may be anything in a process that did
not inherit it). Records are JSON lines: a session's start (its JUnit file, its pid and its
ancestors, so a pytest run by a test is known as nested), each test report (pytest's node id,
setup/call/teardown or collect, the outcome, a clipped message, and the classname and name
pytest's JUnit file gives it; a subtest's report is marked as such, with its parameters), and the
session's end.
"""

from __future__ import annotations

import json
import os
import stat
import sys
from typing import Any

import pytest

try:
    from _pytest.junitxml import bin_xml_escape, mangle_test_address
except ImportError:  # a pytest without them: the ids alone are compared
    bin_xml_escape = mangle_test_address = None  # type: ignore[assignment]

CONFIG = os.path.join(os.path.dirname(os.path.abspath(__file__)), "papayu_pytest_results.json")
MESSAGE_CHARS = 2000
_active: list[Reporter] = []  # the reporter of this process's session: a session started inside it is nested


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
            with open(f"/proc/{pid}/stat", encoding="utf-8", errors="replace") as handle:
                pid = int(handle.read().rsplit(")", 1)[1].split()[1])
        except (OSError, ValueError, IndexError):
            return out or [os.getppid()]
        if pid <= 0:
            return out
        out.append(pid)
    return out


class Reporter:
    def __init__(self, fd: int, config: Any) -> None:
        self.fd, self.config = fd, config
        self.session = f"{os.getpid()}.{id(self)}"
        self.prefix = getattr(config.option, "junitprefix", None) or ""

    def write(self, record: dict[str, Any]) -> None:
        data = (json.dumps({"session": self.session, **record}, ensure_ascii=False) + "\n").encode("utf-8", "replace")
        try:
            while data:
                data = data[os.write(self.fd, data) :]
        except OSError:
            pass

    def junit_name(self, nodeid: str) -> tuple[str, str] | None:
        if mangle_test_address is None:
            return None
        names = mangle_test_address(nodeid)
        classnames = [self.prefix, *names[:-1]] if self.prefix else names[:-1]
        return ".".join(classnames), str(bin_xml_escape(names[-1]))

    def test(self, report: Any, when: str) -> None:
        record = {"kind": "test", "id": report.nodeid, "when": when, "outcome": report.outcome}
        sub = _subtest(report)
        if sub is not None:  # a report inside its test, under the test's id: part of its result
            record["subtest"] = sub
        if report.failed:
            crash = getattr(getattr(report.longrepr, "reprcrash", None), "message", "") or ""
            said = (sub, crash, report.longreprtext)
            record["message"] = "\n".join(filter(None, said))[:MESSAGE_CHARS]
        named = self.junit_name(report.nodeid)
        if named is not None:
            record["classname"], record["name"] = named
        self.write(record)

    @pytest.hookimpl(tryfirst=True)
    def pytest_sessionstart(self, session: Any) -> None:
        xml = getattr(self.config.option, "xmlpath", None) or ""
        if xml:  # as pytest's junitxml resolves it
            xml = os.path.normpath(os.path.abspath(os.path.expanduser(os.path.expandvars(xml))))
        self.write({"kind": "start", "pid": os.getpid(), "ancestors": _ancestors(), "junit": xml})

    @pytest.hookimpl(tryfirst=True)
    def pytest_collectreport(self, report: Any) -> None:
        if not report.passed:
            self.test(report, "collect")

    @pytest.hookimpl(tryfirst=True)
    def pytest_runtest_logreport(self, report: Any) -> None:
        self.test(report, report.when)

    @pytest.hookimpl(trylast=True)
    def pytest_sessionfinish(self, session: Any, exitstatus: Any) -> None:
        self.write({"kind": "end", "status": int(exitstatus)})


def _subtest(report: Any) -> str | None:
    """A subtest's report (pytest 9's own, or the pytest-subtests plugin's): its context's message
    and parameters, as pytest prints them (`[msg] (n=3)`); None for a test's own report."""
    context = getattr(report, "context", None)
    if context is None or not hasattr(context, "msg") or not hasattr(context, "kwargs"):
        return None
    kwargs = context.kwargs if isinstance(context.kwargs, dict) else {}
    parts = [f"[{context.msg}]" if context.msg is not None else ""]
    parts.append(f"({', '.join(f'{k}={v}' for k, v in kwargs.items())})" if kwargs else "")
    return " ".join(p for p in parts if p) or "subtest"


@pytest.hookimpl(tryfirst=True)
def pytest_load_initial_conftests(early_config: Any, parser: Any, args: Any) -> None:
    # Before the conftests are imported: what they import and run is recorded too.
    if not _active:
        _inputs(early_config, _config())


def pytest_configure(config: Any) -> None:
    # A session inside a session: its tests are not the check's.
    if _active:
        return
    wanted = _config()
    # xdist's workers: their controller reports every test.
    if hasattr(config, "workerinput") or hasattr(config, "slaveinput"):
        return
    fd = _pipe(wanted)
    if fd is not None:
        reporter = Reporter(fd, config)
        _active.append(reporter)
        config.pluginmanager.register(reporter, "papayu-results-reporter")


def _inputs(config: Any, wanted: dict[str, Any]) -> None:
    """Fail first (pytest_inputs.py): record each test's inputs (a base run), or run the tests in
    the order papayu asks; in xdist's workers too, which run the tests."""
    if not wanted.get("inputs_dir") and not wanted.get("order"):
        return
    manager = config.pluginmanager
    if manager.has_plugin("papayu-inputs-recorder") or manager.has_plugin("papayu-order"):
        return
    sys.path.insert(0, os.path.dirname(CONFIG))
    try:
        import papayu_pytest_inputs as inputs
    finally:
        sys.path.pop(0)
    if wanted.get("inputs_dir"):
        recorder = inputs.Recorder(str(wanted["root"]), str(wanted["inputs_dir"]))
        if recorder.monitor is not None:
            manager.register(recorder, "papayu-inputs-recorder")
    if wanted.get("order"):
        manager.register(inputs.Orderer(str(wanted["order"]), _to_stream), "papayu-order")


def _to_stream(record: dict[str, Any]) -> None:
    """A record of the order into this session's stream (none in xdist's workers)."""
    if _active:
        _active[-1].write(record)


def pytest_unconfigure(config: Any) -> None:
    reporter = config.pluginmanager.get_plugin("papayu-results-reporter")
    if reporter is not None and reporter in _active:
        _active.remove(reporter)
