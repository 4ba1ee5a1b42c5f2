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
import sys
from typing import Any

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

MESSAGE_CHARS = 2000
_FIXTURE = re.compile(r"^(?P<fixture>\w+) \((?P<where>[\w.]+)\)$")
_RANK = {"skipped": 0, "passed": 1, "failed": 2}
_FILES: dict[tuple[str, str], str] = {}  # (a module's file, the root) -> its path from the root


_os_write, _dumps = os.write, json.dumps  # as they were before any code of the checked tree ran
_WANTED = _in_process.config()  # read once, when unittest's import ended


class _Run:
    """The check's unittest run in this process, and the tests it has open."""

    def __init__(self, result: Any, fd: int, root: str, watch: _Watch | None) -> None:
        self.result, self.fd, self.root, self.watch = result, fd, root, watch
        self.session = "unittest.%d.%s" % (os.getpid(), os.urandom(16).hex())  # drawn at random, as the plugin's
        self.open: dict[str, list[str]] = {}  # test id -> [outcome, message]

    def write(self, record: dict[str, Any]) -> None:
        data = (_dumps(dict(record, session=self.session), ensure_ascii=False) + "\n").encode("utf-8", "replace")
        try:
            while data:
                data = data[_os_write(self.fd, data) :]
        except OSError:
            pass

    def outcome(self, test: Any, outcome: str, message: str = "") -> None:
        kind, test_id = _kind_and_id(test, self.root)
        if kind != "call":  # a fixture or a module: no startTest, no stopTest
            if self.watch is not None:
                self.watch.check(test_id)
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
            if self.watch is not None:
                self.watch.check(test_id, test)
                self.watch.verified += 1
            self.write(record)


class _Watch:
    """Around every test of the check's run (docs/DESIGN.md, "The runtime shield"): unittest's
    reporting path is still what papayu saw when unittest's import ended (reporting_path.py),
    this run's result is still of its class with its own methods, and so is the test, whose class
    is as the loader loaded it."""

    def __init__(self, shield: Any, snapshot: Any, result: Any) -> None:
        self.shield, self.snapshot = shield, snapshot
        self.result, self.result_type = result, type(result)
        self.result_methods = _reporting.callables(type(result))
        self.own = _reporting.Snapshot(snapshot.describe)
        for cls in type(result).__mro__:  # the runner's own result class (Django's, an XML runner's)
            if cls.__module__ not in _reporting.UNITTEST_MODULES and cls is not object:
                self.own.cls("%s.%s" % (cls.__module__, cls.__qualname__), cls, data=True)
        self.tests: dict[type, frozenset[str]] = {}
        self.current: tuple[Any, type] | None = None  # the test started, and its class then
        self.said = False
        self.verified = 0  # tests verified before their outcome was written

    def attach(self, run: _Run) -> None:
        self.own.value("papayu's stream", lambda: run.fd)
        self.own.value("papayu's session key", lambda: run.session)
        self.own.value("papayu's run's write", lambda: vars(run).get("write"))
        self.own.value("papayu's run", lambda: _current[0] if _current else None)
        self.shield.stream = run.write

    def start(self, test: Any, test_id: str) -> None:
        self.shield.current_test = test_id
        self.current = (test, type(test))
        if _classes:  # a test no loader loaded (a suite built by hand): its class as it starts
            _classes[0].see(type(test))

    def check(self, when: str, test: Any = None) -> None:
        try:
            changed = self.snapshot.changed() or self.own.changed() or self.objects(test)
            if not changed and test is None:  # the run's start and end: what runs around the tests too
                whole = _reporting.unittest_run_path()
                changed = whole.changed() if whole is not None else ""
        except Exception as exc:  # the check itself broken: no test of this run is verified
            changed = "the verification itself failed (%s)" % type(exc).__name__
        if changed and not self.said:
            self.said = True  # once: from then on the path is not papayu's
            self.shield.emit({"kind": "changed", "what": changed, "where": when, "test": ""})

    def objects(self, test: Any) -> str:
        """The run's result and the test about to be reported, as objects: of the class they
        were, and no attribute of their own in front of one of its methods."""
        if type(self.result) is not self.result_type:
            return "the run's result's class (replaced by %s)" % type(self.result).__qualname__
        said = _shadowing(self.result, self.result_methods, self.snapshot.describe)
        if said:
            return "the run's result's %s" % said
        if test is None:
            return ""
        if self.current is not None and self.current[0] is test and type(test) is not self.current[1]:
            return "the test's class (replaced by %s)" % type(test).__qualname__
        methods = self.tests.get(type(test))
        if methods is None:
            methods = self.tests[type(test)] = _reporting.callables(type(test))
        said = _shadowing(test, methods, self.snapshot.describe)
        if said:
            return "the test's %s" % said
        return _classes[0].changed(type(test)) if _classes else ""


def _shadowing(obj: Any, methods: frozenset[str], describe: Any) -> str:
    own = getattr(obj, "__dict__", None) or {}
    if methods.isdisjoint(own):
        return ""
    for name in sorted(methods.intersection(own)):
        where = describe(own[name])
        return "%s (replaced on the object%s)" % (name, ", by " + where if where else "")
    return ""


_current: list[_Run] = []
_classes: list[Any] = []  # the checked tree's test classes as loaded (reporting_path.TestClasses), with a shield


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
    """The module's file relative to the root ("" when it is elsewhere, or unknown); once per
    file of an imported module (a test's start and its record each ask)."""
    found = getattr(sys.modules.get(module), "__file__", None)
    if not isinstance(found, str):
        return _file_among([], module, root)
    said = _FILES.get((found, root))
    if said is None:
        said = _FILES[(found, root)] = _file_among([found], module, root)
    return said


def _file_among(candidates: list[str], module: str, root: str) -> str:
    if module and not candidates:  # a module that did not import: where an import would find it
        for entry in sys.path:
            base = os.path.join(entry or os.getcwd(), *module.split("."))
            candidates += [base + ".py", os.path.join(base, "__init__.py")]
    for path in candidates:
        real = os.path.realpath(path)
        if root and os.path.isfile(real) and real.startswith(root.rstrip("/") + "/"):
            return os.path.relpath(real, root).replace(os.sep, "/")
    return ""


def install(base: Any) -> None:
    """Extend unittest's base result class ``base`` (unittest.result.TestResult), once unittest's
    import ended; and install this process's shield with unittest's reporting path as it is now,
    where the check asks for one (in_process.shield)."""
    if getattr(base, "_papayu_reporting", False):
        return
    fd = _in_process.pipe(_WANTED)
    shield = _in_process.shield(_WANTED)
    if fd is not None:
        _extend(base, fd, os.path.realpath(str(_WANTED.get("root") or os.getcwd())), shield)
        if shield is not None:
            _loading(sys.modules["unittest.loader"].TestLoader)
    snapshot = _reporting.unittest_path(shield)  # after the extension: papayu's methods are on the path
    if snapshot is not None:
        snapshot.module_globals(__name__)
        _reporting.unittest_run_path().namespace(_in_process.__name__)  # the pipe is opened before the run
        for cls in (_Run, _Watch):
            snapshot.cls("%s.%s" % (__name__, cls.__name__), cls)
        _classes.append(_reporting.TestClasses(shield, snapshot.describe))


def _loading(loader: Any) -> None:
    """The test classes the loader loads, seen as loaded (TestClasses): before their tests run,
    and before the modules imported after theirs ran."""
    original = loader.loadTestsFromTestCase

    def loadTestsFromTestCase(self: Any, testCaseClass: Any) -> Any:
        suite = original(self, testCaseClass)
        try:
            if _classes:
                _classes[0].see(testCaseClass)
        except Exception:  # a class papayu cannot read is seen at its first test's start
            pass
        return suite

    loader.loadTestsFromTestCase = loadTestsFromTestCase


def loaded(name: str) -> None:
    """unittest's module ``name`` imported after unittest itself (`unittest._log`, at the first
    assertLogs): on the reporting path from now on."""
    _reporting.loaded(name)


def _extend(base: Any, fd: int, root: str, shield: Any) -> None:
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
        if _current or _inside_pytest():
            return
        snapshot = _reporting.unittest_path(shield)
        watch = _Watch(shield, snapshot, result) if snapshot is not None else None
        run = _Run(result, fd, root, watch)
        _current.append(run)
        start = {"kind": "start", "pid": os.getpid(), "ancestors": _in_process.ancestors(), "junit": ""}
        run.write(dict(start, runner="unittest"))
        if watch is not None:
            watch.attach(run)
            watch.check("the run's start")

    def stop_run(result: Any) -> None:
        run = ours(result)
        if run is not None:
            run.open.clear()
            end = {"kind": "end", "status": 0 if result.wasSuccessful() else 1}
            if run.watch is not None:
                run.watch.check("the run's end")
                end["verified"] = run.watch.verified
                run.watch.shield.stream = None
            run.write(end)
            _current.remove(run)

    def outcome(kind: str) -> Any:
        def after(result: Any, test: Any, *args: Any) -> None:
            run = ours(result)
            if run is not None:
                message = ""
                if kind == "failed" and args and isinstance(args[0], tuple):
                    message = _message(result, args[0], test)
                elif kind == "skipped" and args and isinstance(args[0], str):
                    message = args[0]
                run.outcome(test, kind, message)

        return after

    def subtest(result: Any, test: Any, sub: Any, err: Any) -> None:
        run = ours(result)
        if run is not None and err is not None:  # a failing subtest fails its test
            run.outcome(test, "failed", "%s\n%s" % (sub, _message(result, err, test)))

    def start_test(result: Any, test: Any) -> None:
        run = ours(result)
        if run is not None and run.watch is not None:
            run.watch.start(test, _kind_and_id(test, root)[1])

    def stop_test(result: Any, test: Any) -> None:
        run = ours(result)
        if run is not None:
            run.stop(test)

    wrap("startTestRun", start_run)
    wrap("startTest", start_test)
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


def _message(result: Any, err: Any, test: Any) -> str:
    """A failure's text as the runner prints it ("" when that fails: the outcome stands)."""
    try:
        return str(result._exc_info_to_string(err, test))
    except Exception:
        return ""
