"""JUnit XML, read with junitparser: pytest's, node's, vitest's, and any runner's the project
names (`papayu.check.junit`). Imported only when such a file is there (lxml is a feature stack
for start-up, tests/test_startup.py)."""

from __future__ import annotations

from collections.abc import Iterator

from junitparser import Attr, Error, Failure, JUnitXml, JUnitXmlError, Skipped, TestCase, TestSuite
from lxml import etree

from papayu_git.check.results.files import relative_to_root
from papayu_git.check.results.outcome import CaseResult, Outcome, ReportUnreadable

PYTEST, NODE, VITEST, ANY = "pytest", "node", "vitest", "any"


class _Case(TestCase):
    file = Attr()  # pytest (xunit1) and newer node name the test's file


def read_junit(data: bytes, dialect: str, root: str = "") -> list[CaseResult]:
    """Every test case of the report. ``root``: the check's directory inside the check, to make
    absolute file names (node's) relative."""
    # The check wrote this file: no entity is expanded, no DTD or URL is loaded.
    parser = etree.XMLParser(resolve_entities=False, no_network=True, load_dtd=False)
    try:
        report = JUnitXml.fromroot(etree.fromstring(data, parser))
    except (etree.XMLSyntaxError, JUnitXmlError, ValueError) as exc:
        raise ReportUnreadable(f"not JUnit XML ({exc})") from None
    out = []
    for suites, case in _cases(report, ()):
        out.append(CaseResult(_test_id(case, suites, dialect, root), *_outcome(case)))
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


def _test_id(case: _Case, suites: tuple[str, ...], dialect: str, root: str) -> str:
    name, classname, file = case.name or "", case.classname or "", case.file or ""
    if dialect == NODE:  # classname is always "test"; describe() blocks are nested suites
        return " > ".join(filter(None, (relative_to_root(file, root), *suites, relative_to_root(name, root))))
    if dialect == VITEST:  # classname is the file, name has the describe() blocks
        return f"{classname} > {name}"
    if file.endswith(".py") and (dialect == PYTEST or classname.startswith(_module(file))):
        return _pytest_node_id(file, classname, name)
    if classname:
        return f"{classname}::{name}"
    return " > ".join(filter(None, (*suites, name)))


def _module(file: str) -> str:
    return file[: -len(".py")].replace("/", ".")


def _pytest_node_id(file: str, classname: str, name: str) -> str:
    """pytest's node id back from its report: `tests/test_calc.py::TestCalc::test_add` is written
    as file `tests/test_calc.py`, classname `tests.test_calc.TestCalc`, name `test_add`."""
    module = _module(file)
    inner = classname[len(module) + 1 :].replace(".", "::") if classname.startswith(module + ".") else ""
    return "::".join(filter(None, (file, inner, name)))
