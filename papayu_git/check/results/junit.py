"""JUnit XML, read with junitparser: pytest's, node's, vitest's, Maven's (surefire, failsafe) and
Gradle's, and any runner's the project names (`papayu.check.junit`). Imported only when such a file is there (lxml is a feature stack
for start-up, tests/test_startup.py).

pytest's ids are rebuilt as its node ids from what pytest wrote: the classname is the collected
module's dotted path and the classes (`tests.test_url_safe.TestURLSafeTimedSerializer`), the
file is where the function is *defined*, which for an inherited test is the base class's file.
So the file only tells where a module's dotted path ends when the classname starts with it; a
module whose every test is inherited is found through the other tests of the report, else its
path ends before the first segment starting with a capital letter (a class). The limits: a
directory with a dot in its name, and such a module whose classes are not capitalized. When
papayu's pytest plugin streamed the run (results/stream.py) the ids are pytest's own and this
file only has to agree with them.
"""

from __future__ import annotations

from collections.abc import Iterator
from typing import NamedTuple

from junitparser import Attr, Error, Failure, JUnitXml, JUnitXmlError, Skipped, TestCase, TestSuite
from lxml import etree

from papayu_git.check.results.files import relative_to_root
from papayu_git.check.results.outcome import RANK, CaseResult, Outcome, ReportUnreadable

PYTEST, NODE, VITEST, BUILD, ANY = "pytest", "node", "vitest", "build", "any"
# pytest writes a test that failed and then errored in teardown as two entries, the second
# an error with this message: one test, not two.
TEARDOWN_ERROR = 'failed on teardown with "'
INTERNAL_ERROR = ("pytest", "internal")  # pytest's entry for its own crash: no test


class _Case(TestCase):
    file = Attr()  # pytest (xunit1) and newer node name the test's file


class Entry(NamedTuple):
    suites: tuple[str, ...]
    classname: str
    name: str
    file: str
    outcome: Outcome
    message: str


def read_junit(data: bytes, dialect: str, root: str = "", module: str = "") -> list[CaseResult]:
    """Every test case of the report. ``root``: the check's directory inside the check, to make
    absolute file names (node's) relative; ``module``: the Maven module or Gradle project whose
    report it is (BUILD), from the root ("" the root's own)."""
    entries = junit_entries(data)
    if dialect == BUILD:  # class and method, per module: `core/calc.CalcTest::adds`
        prefix = f"{module}/" if module else ""
        return [CaseResult(f"{prefix}{e.classname}::{e.name}", e.outcome, e.message) for e in entries]
    modules = _known_modules(entries)
    return [CaseResult(_test_id(e, dialect, root, modules), e.outcome, e.message) for e in entries]


def junit_entries(data: bytes) -> list[Entry]:
    """The report's test cases as written, pytest's teardown double of a failed test folded
    into it."""
    # The check wrote this file: no entity is expanded, no DTD or URL is loaded.
    parser = etree.XMLParser(resolve_entities=False, no_network=True, load_dtd=False)
    try:
        report = JUnitXml.fromroot(etree.fromstring(data, parser))
    except (etree.XMLSyntaxError, JUnitXmlError, ValueError) as exc:
        raise ReportUnreadable(f"not JUnit XML ({exc})") from None
    out: list[Entry] = []
    last: dict[tuple[str, str, str], int] = {}
    for suites, case in _cases(report, ()):
        entry = Entry(suites, case.classname or "", case.name or "", case.file or "", *_outcome(case))
        key = (entry.classname, entry.name, entry.file)
        if key in last and entry.outcome is Outcome.ERROR and entry.message.startswith(TEARDOWN_ERROR):
            earlier = out[last[key]]
            if RANK[earlier.outcome] < RANK[Outcome.ERROR]:
                out[last[key]] = earlier._replace(outcome=Outcome.ERROR, message=entry.message)
            continue
        last[key] = len(out)
        out.append(entry)
    return out


def _cases(node: JUnitXml | TestSuite, suites: tuple[str, ...]) -> Iterator[tuple[tuple[str, ...], _Case]]:
    for case in node.iterchildren(_Case):
        yield suites, case
    for suite in node.iterchildren(TestSuite):
        yield from _cases(suite, (*suites, suite.name or ""))


def _outcome(case: _Case) -> tuple[Outcome, str]:
    results = case.result
    for kind, outcome in ((Failure, Outcome.FAILED), (Error, Outcome.ERROR)):
        found = [r for r in results if isinstance(r, kind)]
        if found:
            return outcome, "\n\n".join("\n".join(filter(None, (r.message, (r.text or "").strip()))) for r in found)
    if any(isinstance(r, Skipped) for r in results):
        return Outcome.SKIPPED, ""
    return Outcome.PASSED, ""


def _test_id(entry: Entry, dialect: str, root: str, modules: dict[str, str]) -> str:
    name, classname, file = entry.name, entry.classname, entry.file
    if dialect == NODE:  # classname is always "test"; describe() blocks are nested suites
        return " > ".join(filter(None, (relative_to_root(file, root), *entry.suites, relative_to_root(name, root))))
    if dialect == VITEST:  # classname is the file, name has the describe() blocks
        return f"{classname} > {name}"
    if (dialect == PYTEST and file) or file.endswith(".py"):  # xunit1: pytest's own node ids
        return pytest_node_id(classname, name, file, modules)
    if classname:
        return f"{classname}::{name}"
    return " > ".join(filter(None, (*entry.suites, name)))


def _dotted(file: str) -> str:
    return file.removesuffix(".py").replace("/", ".")


def _known_modules(entries: list[Entry]) -> dict[str, str]:
    """Dotted module path -> file, from the entries whose file is their module's (not inherited)."""
    known: dict[str, str] = {}
    for entry in entries:
        module = _dotted(entry.file)
        own = entry.classname == module or entry.classname.startswith(module + ".")
        collector = not entry.classname and entry.name == module  # a module that did not collect
        if entry.file and (own or collector):
            known[module] = entry.file
    return known


def pytest_node_id(classname: str, name: str, file: str, modules: dict[str, str]) -> str:
    """pytest's node id back from its JUnit entry: `tests/test_calc.py::TestCalc::test_add` is
    written as classname `tests.test_calc.TestCalc`, name `test_add`."""
    if not classname:  # a collector (a module that failed to import or was skipped whole)
        return file if file and name == _dotted(file) else name
    parts = classname.split(".")
    for cut in range(len(parts), 0, -1):
        module = ".".join(parts[:cut])
        if module in modules:
            return "::".join([modules[module], *parts[cut:], name])
    cut = next((i for i in range(1, len(parts)) if parts[i][:1].isupper()), len(parts))
    return "::".join(["/".join(parts[:cut]) + ".py", *parts[cut:], name])
