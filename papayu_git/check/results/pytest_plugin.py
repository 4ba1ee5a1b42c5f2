"""papayu's pytest plugin: one record per test report, written as pytest produces it, into a
pipe to papayu (docs/DESIGN.md, "A verdict per test").

Copied into a directory of its own that the check gets read-only and on PYTHONPATH, with a
`.dist-info` whose `pytest11` entry point loads it: a pytest that cannot import it (tox without
PYTHONPATH, `python -I`, PYTEST_DISABLE_PLUGIN_AUTOLOAD, `-p no:papayu-results`) simply runs
without it, and papayu reads pytest's JUnit file as before. Only the standard library and the
hooks: it runs in the check's pytest, whatever its version.

The pipe's descriptor and identity are in a file beside this one; the plugin writes only to a
FIFO of that identity (a descriptor of the same number may be anything in a process that did
not inherit it), moved to a descriptor number of its own choosing. Records are JSON lines under
a session key drawn at random: a session's start (its JUnit file, its pid and its ancestors, so
a pytest run by a test is known as nested), each test report (pytest's node id,
setup/call/teardown or collect, the outcome, a clipped message, and the classname and name
pytest's JUnit file gives it; a subtest's report is marked as such, with its parameters), what papayu's shield refused or found changed, and the session's
end with the number of tests whose reporting path was verified.

The shield (shield.py, docs/DESIGN.md "The runtime shield") is installed when pytest imports
this module, before any conftest or test (or earlier, by the unittest reporter, when pytest
imported unittest: in_process.shield): its audit hook, and a snapshot of the reporting path
(pytest's runner and report classes, pluggy's hook calling, unittest's modules and classes, this
module and its stream; reporting_path.py) that is compared before each test's call is reported,
once collection is done and at the session's end. The stream's pipe and configuration are
in_process.py's, shared with the unittest reporter.
"""

from __future__ import annotations

import json
import os
import secrets
import sys
import unittest  # noqa: F401 (on the reporting path: TestCase.run runs unittest's tests; pytest imported it already)
from operator import attrgetter, is_
from typing import Any

import pytest

try:
    from _pytest.junitxml import bin_xml_escape, mangle_test_address
except ImportError:  # a pytest without them: the ids alone are compared
    bin_xml_escape = mangle_test_address = None  # type: ignore[assignment]

HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, HERE)  # papayu's modules beside this one, never the checked tree's of those names
try:
    import papayu_in_process as _in_process
    import papayu_reporting_path as _reporting
except ImportError:  # imported from papayu's package itself (its docs, its tests): not in a check
    from papayu_git.check.results import in_process as _in_process
    from papayu_git.check.results import reporting_path as _reporting
finally:
    sys.path.remove(HERE)

CONFIG = _in_process.CONFIG
MESSAGE_CHARS = 2000
_active: list[Reporter] = []  # the reporter of this process's session: a session started inside it is nested
_os_write, _dumps = os.write, json.dumps  # as they were before any code of the checked tree ran
_FUNCTION = attrgetter("function")
MAX_SUPPORT = 2000  # test support files said per process


class Reporter:
    def __init__(self, fd: int, config: Any) -> None:
        self.fd, self.config = fd, config
        self.session = f"{os.getpid()}.{secrets.token_hex(16)}"
        self.prefix = getattr(config.option, "junitprefix", None) or ""

    def write(self, record: dict[str, Any]) -> None:
        data = (_dumps({"session": self.session, **record}, ensure_ascii=False) + "\n").encode("utf-8", "replace")
        try:
            while data:
                data = data[_os_write(self.fd, data) :]
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
        self.write({"kind": "start", "pid": os.getpid(), "ancestors": _in_process.ancestors(), "junit": xml})

    @pytest.hookimpl(tryfirst=True)
    def pytest_collectreport(self, report: Any) -> None:
        if not report.passed:
            self.test(report, "collect")

    @pytest.hookimpl(tryfirst=True)
    def pytest_runtest_logreport(self, report: Any) -> None:
        self.test(report, report.when)

    @pytest.hookimpl(trylast=True)
    def pytest_sessionfinish(self, session: Any, exitstatus: Any) -> None:
        if _guard is not None:
            _guard.check("the session's end")
        end: dict[str, Any] = {"kind": "end", "status": int(exitstatus)}
        if _guard is not None and not self.config.pluginmanager.has_plugin("dsession"):
            end["verified"] = _guard.verified  # xdist's workers run (and verify) the tests
        self.write(end)


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


def pytest_load_initial_conftests(early_config: Any, parser: Any, args: Any) -> None:
    # Before the conftests are imported (pytest's own loader is trylast): what they import and
    # run is recorded too; and after the runner's own plugins set up their classes (tryfirst),
    # the reporting path is taken as it is.
    if not _active:
        _inputs(early_config, _WANTED)
    if _shield is not None and _guard is None:
        _start_guard(_shield, early_config)


def pytest_configure(config: Any) -> None:
    # A session inside a session: its tests are not the check's.
    if _shield is not None and _guard is None:  # a pytest that skipped the hook above
        _start_guard(_shield, config)
    if _active or (_guard is not None and _guard.registered):
        return
    if _guard is not None:  # in xdist's workers too: they run the tests
        _guard.registered = True
        config.pluginmanager.register(_guard, "papayu-shield")
    wanted = _WANTED
    # xdist's workers: their controller reports every test.
    if hasattr(config, "workerinput") or hasattr(config, "slaveinput"):
        return
    fd = _in_process.pipe(wanted)
    if fd is not None:
        reporter = Reporter(fd, config)
        _active.append(reporter)
        config.pluginmanager.register(reporter, "papayu-results-reporter")
        if _guard is not None:
            _guard.attach(reporter)


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


class Guard:
    """Around every test: the reporting path is still the objects papayu saw before any code of
    the checked tree ran (reporting_path.Snapshot: pytest's, and unittest's, through which pytest
    runs a TestCase's tests), the test about to be reported still the function collected, and no
    hook of the runner comes from a file of the plan's code."""

    HOOKS = (
        "pytest_runtest_protocol", "pytest_runtest_setup", "pytest_runtest_call", "pytest_runtest_teardown",
        "pytest_runtest_makereport", "pytest_runtest_logreport", "pytest_runtest_logstart",
        "pytest_runtest_logfinish", "pytest_report_teststatus", "pytest_pyfunc_call", "pytest_collectreport",
        "pytest_make_collect_report", "pytest_collection_modifyitems", "pytest_deselected", "pytest_sessionfinish",
        "pytest_terminal_summary", "pytest_report_to_serializable", "pytest_report_from_serializable",
        "pytest_exception_interact", "pytest_itemcollected",
    )  # fmt: skip
    SHADOWS = ("runtest", "setup", "teardown", "repr_failure", "reportinfo", "_getobj", "ihook")

    def __init__(self, shield: Any, code: frozenset[str]) -> None:
        self.shield = shield
        self.code = code  # the plan's code files: a runner hook defined there is the plan's
        self.startup_impls: set[int] = set()  # hook implementations registered before any conftest
        self.snapshot = _reporting_path(shield)
        self.unittest = _reporting.unittest_path(shield)  # TestCase.run runs unittest's tests under pytest
        self.unittest_run = _reporting.unittest_run_path()  # its loader and runner: at collection and the end
        self.classes = _reporting.TestClasses(shield, self.snapshot.describe) if self.unittest is not None else None
        self.items: dict[int, tuple[Any, Any]] = {}
        self.hooks: Any = None
        self.said = False
        self.registered = False
        self.verified = 0  # tests whose call was verified before it was reported

    def attach(self, reporter: Reporter) -> None:
        self.snapshot.value("papayu's stream", lambda: reporter.fd)
        self.snapshot.value("papayu's session key", lambda: reporter.session)
        self.snapshot.value("papayu's reporter's write", lambda: vars(reporter).get("write"))
        self.shield.stream = reporter.write

    def check(self, when: str, item: Any = None) -> bool:
        """Before ``item`` is reported; unittest's part only before a TestCase's test (and at
        collection and the session's end): a plain test does not pass through it."""
        changed = self.snapshot.changed()
        testcase = item is None or isinstance(item, _UNITTEST_ITEM)
        if not changed and testcase and self.unittest is not None:
            changed = self.unittest.changed()
        if not changed and item is None and self.unittest_run is not None:
            changed = self.unittest_run.changed()
        if not changed and item is not None and testcase and self.classes is not None:
            changed = self.classes.changed(getattr(item, "cls", None))
        changed = changed or (self.hooks.changed() if self.hooks is not None else "")
        if changed and not self.said:
            self.said = True  # once: from then on the path is not papayu's
            self.shield.emit({"kind": "changed", "what": changed, "where": when, "test": ""})
        return not changed

    @pytest.hookimpl(trylast=True)
    def pytest_collection_finish(self, session: Any) -> None:
        self.check("collection")
        manager = session.config.pluginmanager
        hooks = _reporting.Snapshot(lambda value: _reporting.defined_at(value, self.shield.rel))
        callers = [c for c in (getattr(manager.hook, name, None) for name in self.HOOKS) if c is not None]
        hooks.value("the runner's hook implementations", _impls(callers))
        for name, caller in zip(self.HOOKS, callers):  # noqa: B905 (3.8)
            for impl in caller.get_hookimpls():
                if id(impl) in self.startup_impls:
                    continue  # registered before any conftest or test: the tip's setup (a plugin project's own)
                whose = self.plans_hook(name, impl)
                if whose:
                    self.shield.emit({"kind": "changed", "what": f"{name} {whose}", "where": ""})
        hooks.value("the hook calling", lambda: getattr(manager, "_inner_hookexec", None))
        hooks.value("the trace function", sys.gettrace)
        hooks.value("the profile function", sys.getprofile)
        monitoring = getattr(sys, "monitoring", None)
        if monitoring is not None:
            hooks.value("sys.monitoring's tools", lambda: _tools(monitoring), equal=True)
        self.hooks = hooks
        for item in session.items:
            self.items[id(item)] = (item, vars(item).get("_obj"))
        if not self.shield.changed:  # the tip's run: its list judges the plans (judge_support.py)
            self.shield.emit({"kind": "support", "files": self.support(session)}, stream=False)

    def support(self, session: Any) -> list[str]:
        """The files of the checked tree this run loaded as test support (docs/DESIGN.md, "What
        judges a plan"): its plugins that no distribution's entry point loaded (`-p`,
        `pytest_plugins`, a conftest's registering) and the modules its tests' fixtures are
        defined in. The tip's list makes those files judges of a plan, as imports do."""
        manager = session.config.pluginmanager
        distributed = {id(plugin) for plugin, _ in manager.list_plugin_distinfo()}
        kind, rel, inside = self.shield.kind, self.shield.rel, self.shield.REPOSITORY
        found: dict[str, None] = {}
        shipped: list[str] = []  # a distributed plugin of the tree (the project's own) is its code
        for plugin in manager.get_plugins():
            file = getattr(plugin, "__file__", None) if isinstance(plugin, type(sys)) else None
            if not isinstance(file, str) or kind(file) != inside:
                continue
            if id(plugin) in distributed:
                package = os.path.basename(file) == "__init__.py"
                shipped.append(os.path.dirname(file) + os.sep if package else file)
            else:
                found[rel(file)] = None
        seen: set[int] = set()
        for item in session.items:
            info = getattr(item, "_fixtureinfo", None)
            if info is None or id(info) in seen:
                continue
            seen.add(id(info))
            for definitions in getattr(info, "name2fixturedefs", {}).values():
                for definition in definitions:
                    code = getattr(getattr(definition, "func", None), "__code__", None)
                    if code is not None and id(code) not in seen:
                        seen.add(id(code))
                        file = code.co_filename
                        if kind(file) == inside and not any(file.startswith(p) for p in shipped):
                            found[rel(file)] = None
            if len(found) >= MAX_SUPPORT:
                break
        return list(found)[:MAX_SUPPORT]

    def plans_hook(self, name: str, impl: Any) -> str:
        """How a runner hook registered after start-up is the plan's ("" when it is not): judged
        by its function's file, its plugin's file and who registered it (a plugin the plan's code
        builds at run time around a function of the standard library has only the last), and a
        module of the tree exposing under a hook's name a function of elsewhere that is not one."""
        rel = self.shield.rel
        function = impl.function
        where = getattr(getattr(function, "__code__", None), "co_filename", "")
        plugin_file = getattr(impl.plugin, "__file__", None) if isinstance(impl.plugin, type(sys)) else None
        for file, said in ((where, "is implemented in"), (plugin_file, "is exposed by")):
            if isinstance(file, str) and rel(file) in self.code:
                return f"{said} the plan's {rel(file)}"
        registrant = _registrants.get(id(impl))
        if registrant is not None and registrant[0] is impl:
            return f"was registered by the plan's {registrant[1]}"
        inside = self.shield.kind
        if isinstance(plugin_file, str) and inside(plugin_file) == self.shield.REPOSITORY and where != plugin_file:
            named = getattr(function, "__name__", "")
            specname = (getattr(impl, "opts", None) or {}).get("specname")
            if inside(where or "?") != self.shield.REPOSITORY and named not in (name, specname):
                return f"is {where or '?'}'s {named or '?'}, put in {rel(plugin_file)} under the hook's name"
        return ""

    @pytest.hookimpl(trylast=True)
    def pytest_collectreport(self, report: Any) -> None:
        # A module's TestCase classes as its import left them, before the next module's code runs.
        classes = self.classes
        if classes is not None and _UNITTEST_CLASS is not None:
            for node in report.result or ():
                if isinstance(node, _UNITTEST_CLASS):
                    classes.see(getattr(node, "obj", None))

    @pytest.hookimpl(tryfirst=True)
    def pytest_runtest_logstart(self, nodeid: str, location: Any) -> None:
        self.shield.current_test = nodeid  # a plain implementation: no generator a test

    @pytest.hookimpl(trylast=True)
    def pytest_runtest_logfinish(self, nodeid: str, location: Any) -> None:
        self.shield.current_test = ""

    @pytest.hookimpl(hookwrapper=True, tryfirst=True)
    def pytest_runtest_makereport(self, item: Any, call: Any) -> Any:
        # A wrapper runs whatever other implementations return first: the check cannot be skipped.
        if call.when == "call":
            self.check(item.nodeid, item)
            self.check_item(item)
            self.verified += 1
        yield

    def check_item(self, item: Any) -> None:
        own = vars(item)
        collected = self.items.get(id(item))
        shadowed = [name for name in self.SHADOWS if name in own]
        if shadowed or (collected is not None and own.get("_obj") is not collected[1]):
            what = f"the test item's {', '.join(shadowed) or 'function'} was replaced"
            self.shield.emit({"kind": "changed", "what": what, "where": item.nodeid, "test": item.nodeid})


def _impls(callers: list[Any]) -> Any:
    """A getter that returns the same tuple while the hooks' implementations and their functions
    are the same objects: pluggy's own lists read in place, compared in one pass (no copy a test)."""
    found: list[Any] = [getattr(c, "_hookimpls", None) for c in callers]
    listings: list[Any] = found if all(isinstance(f, list) for f in found) else []  # else an older pluggy's copies

    def current() -> list[Any]:
        if listings:
            return [impl for listing in listings for impl in listing]
        return [impl for caller in callers for impl in caller.get_hookimpls()]

    impls = tuple(current())
    functions = tuple(map(_FUNCTION, impls))

    def now() -> Any:
        found = current()
        if len(found) == len(impls) and all(map(is_, found, impls)) and all(map(is_, map(_FUNCTION, found), functions)):
            return impls
        return tuple(found)

    return now


def _tools(monitoring: Any) -> Any:
    return tuple((monitoring.get_tool(i), monitoring.get_events(i)) for i in range(6))


_guard: Guard | None = None
# pytest's item for a TestCase's test (any item, where this pytest has no such class)
_UNITTEST_ITEM: Any = getattr(sys.modules.get("_pytest.unittest"), "TestCaseFunction", None) or object
_UNITTEST_CLASS: Any = getattr(sys.modules.get("_pytest.unittest"), "UnitTestCase", None)  # a TestCase class's node
_WANTED = _in_process.config()  # read once, before any code of the checked tree runs


def _reporting_path(shield: Any) -> Any:
    """What turns a test's outcome into papayu's record, as it is before any code of the checked
    tree ran: pytest's runner, reports, test items and JUnit writer, pluggy's hook calling, the
    JSON encoder and this module."""
    snapshot = _reporting.Snapshot(lambda value: _reporting.defined_at(value, shield.rel))
    modules = (
        "_pytest.runner", "_pytest.reports", "_pytest.skipping", "_pytest.outcomes", "_pytest.unittest",
        "_pytest.python", "pluggy._callers", "pluggy._hooks", "pluggy._result", "pluggy._manager",
        "pluggy._caller", "pluggy._execution", "pluggy._impl", "pluggy.callers", "pluggy.hooks", "json", "json.encoder", "_pytest.junitxml",
    )  # fmt: skip
    for name in modules:
        snapshot.module_globals(name)
    classes: dict[int, tuple[str, Any]] = {}
    for module, names in (
        ("_pytest.reports", ("BaseReport", "TestReport", "CollectReport")),
        ("_pytest.runner", ("CallInfo",)),
        ("_pytest.python", ("Function",)),
        ("pluggy._hooks", ("HookImpl", "HookCaller", "_HookCaller")),
        ("pluggy._caller", ("HookCaller", "_HookCaller", "_SubsetHookCaller")),
        ("pluggy._impl", ("HookImpl",)),
        ("pluggy._result", ("Result", "_Result")),
        ("pluggy._manager", ("PluginManager",)),
        ("json.encoder", ("JSONEncoder",)),
    ):
        found = sys.modules.get(module)
        for name in names:
            cls = getattr(found, name, None)
            if isinstance(cls, type):
                classes.setdefault(id(cls), (f"{module}.{name}", cls))  # an alias is the same class
    classes[id(Reporter)] = (f"{__name__}.Reporter", Reporter)
    for name, cls in classes.values():
        snapshot.cls(name, cls)
    for _, cls in classes.values():
        for value in vars(cls).values():
            if callable(value):
                shield.protected.add(id(value))
    for module in modules:
        found = sys.modules.get(module)
        for value in vars(found).values() if found is not None else ():
            if callable(value):
                shield.protected.add(id(value))
    return snapshot


def _install_shield() -> Any:
    """The audit hook, now (pytest imports this module before any conftest), unless the unittest
    reporter installed it already in this process; and unittest's reporting path as it is now."""
    shield = _in_process.shield(_WANTED)
    _reporting.unittest_path(shield)
    return shield


def _watch_registrations(shield: Any, manager: Any, code: frozenset[str]) -> None:
    """Who registers each hook implementation from now on: the plan's file:line on the stack (or
    a thread the repository started), kept for Guard.plans_hook. Wrapped before the reporting
    path's snapshot is taken: the wrapper is then part of what is verified."""
    callers = [c for c in vars(manager.hook).values() if callable(getattr(c, "_add_hookimpl", None))]
    cls = type(callers[0]) if callers and code else None
    original = vars(cls).get("_add_hookimpl") if cls is not None else None
    if cls is None or original is None:
        return
    rel, frames = shield.rel, shield._frames

    def _add_hookimpl(self: Any, hookimpl: Any) -> Any:
        found = ""
        for frame in frames():
            if rel(frame.f_code.co_filename) in code:
                found = f"{rel(frame.f_code.co_filename)}:{frame.f_lineno}"
                break
        if not found and shield._get_ident() in shield.tainted_threads:
            found = "thread"
        if found:
            _registrants[id(hookimpl)] = (hookimpl, found)
        return original(self, hookimpl)

    _add_hookimpl.__qualname__ = original.__qualname__
    cls._add_hookimpl = _add_hookimpl


# id(hook implementation) -> (it, the plan's file:line that registered it)
_registrants: dict[int, tuple[Any, str]] = {}


def _start_guard(shield: Any, config: Any = None) -> None:
    global _guard
    wanted = _WANTED.get("shield") or {}
    code = frozenset(str(p) for p in wanted.get("code") or ())
    manager = getattr(config, "pluginmanager", None)
    if manager is not None:
        _watch_registrations(shield, manager, code)
    _guard = Guard(shield, code)
    _guard.snapshot.module_globals(__name__)  # this module as it is from now on
    for caller in vars(manager.hook).values() if manager is not None else ():
        get = getattr(caller, "get_hookimpls", None)
        if callable(get):
            _guard.startup_impls.update(id(impl) for impl in get())


_shield = _install_shield()
