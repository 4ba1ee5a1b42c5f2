"""One run's results: pytest's stream, the reports the check's first process sent, and the
log's lines of the formats the command's runners print (docs/DESIGN.md, "A verdict per test")."""

from __future__ import annotations

import fnmatch
import functools
import os
from collections.abc import Callable, Collection, Sequence
from dataclasses import replace
from pathlib import Path, PurePath
from typing import Any

from papayu_git.check.results.channel import SHIELD_DIR, Delivery
from papayu_git.check.results.gotest import read_go_json
from papayu_git.check.results.inside import OLDER, collect
from papayu_git.check.results.instrument import (
    GO_JSON,
    GOTESTSUM,
    GOTESTSUM_JSON,
    GRADLE,
    GRADLE_DIR,
    JEST,
    JEST_JSON,
    JUNIT_COPY,
    JUNIT_DIR,
    LIBTEST,
    MAVEN,
    MAVEN_DIR,
    NODE_TEST_EVENTS,
    NODE_TEST_JSON,
    PYTEST_JUNIT,
    PYTEST_STREAM,
    PYTEST_XML,
    REPORT_FILES,
    TAP,
    UNITTEST_STREAM,
    VITEST,
    VITEST_JSON,
)
from papayu_git.check.results.jest import read_jest
from papayu_git.check.results.libtest import read_libtest
from papayu_git.check.results.nodetest import read_node_test
from papayu_git.check.results.outcome import (
    SHIELD_ERROR,
    CaseResult,
    Collected,
    Outcome,
    ReportUnreadable,
    TestResults,
)
from papayu_git.check.results.stream import (
    Session,
    ShieldFiles,
    Stream,
    by_junit_name,
    differences,
    read_shield_files,
    read_stream,
    worst,
)
from papayu_git.check.results.tap import read_tap

FileReader = Callable[[bytes], list[CaseResult]]
LogReader = Callable[[str], list[CaseResult] | None]


def read_results(
    report_dir: Path,
    log_text: str,
    junit_globs: Sequence[str | PurePath] = (),
    *,
    root: str = "",
    readers: Collection[str] | None = None,
    tools: Sequence[tuple[str, str]] = (),
    since: float | None = None,
) -> TestResults:
    """The results a run left in a host directory: the report files at its top, the
    `papayu.check.junit` files under its `junit/` and the build tools' reports (``tools``:
    (directory, glob)) under it, those changed before ``since`` left out (read as the check's
    first process reads them: no links followed, no FIFO opened, bounded). ``readers``: the
    sources to read (see `instrumented`); None reads every one."""
    delivery = Delivery(ended=True)
    globs = [str(g) for g in junit_globs]
    tools_globs = [list(t) for t in tools]
    found = collect(str(report_dir), list(REPORT_FILES), str(report_dir / JUNIT_DIR), globs, tools_globs, since)
    for name, data, why in found:
        if name == OLDER:
            delivery.notes.append(why)
        elif data is not None:
            delivery.files[name] = data
        else:
            delivery.unreadable.append(f"{name}: {why}")
    return read_delivery(delivery, log_text, readers, root=root, report_dir=str(report_dir))


def read_delivery(
    delivery: Delivery, log_text: str, readers: Collection[str] | None, *, root: str, report_dir: str
) -> TestResults:
    """What the run said about each test. ``log_text``: the command's own output (not the
    proposed commands' after it); ``root`` and ``report_dir``: the check's working directory
    and report directory as the check saw them. Nothing readable: "exit code only"."""

    def allowed(source: str) -> bool:
        return readers is None or source in readers or (source.startswith(JUNIT_COPY) and JUNIT_COPY in readers)

    collected, sources = Collected(), []
    unreadable = [*delivery.notes, *_unreadable(delivery, allowed)]
    errors = list(delivery.errors)
    verified: set[str] = set()
    stream = read_stream(delivery.stream) if allowed(PYTEST_STREAM) or allowed(UNITTEST_STREAM) else None
    if stream is not None and stream.garbled:
        errors.append(f"{stream.garbled} lines of the result stream are no record of its sessions")
    order: dict[str, object] = {}
    for runner, source in (("pytest", PYTEST_STREAM), ("unittest", UNITTEST_STREAM)):
        if stream is None or not allowed(source) or not stream.streamed(runner):
            continue
        sources.append(source)
        for session in stream.sessions:
            if session.runner == runner:
                collected.extend(session.cases(), source)
                order = order or dict(session.order)
        if delivery.ended and runner == "pytest":
            verified = _verify(stream.sessions, delivery, root, report_dir, sources, errors)
    shielded, shield = _shielded(stream, delivery, unreadable)
    errors += shielded
    for name, source, reader in _reports(delivery, root):
        data = delivery.files.get(name)
        if name in verified or data is None or not allowed(source):
            continue
        try:
            cases = reader(data)
        except ReportUnreadable as exc:
            unreadable.append(f"{source}: {exc}")
            continue
        sources.append(source)
        collected.extend(cases, source)
    for source, log_reader in _log_readers(root):
        found = log_reader(log_text) if allowed(source) else None
        if found is not None:
            sources.append(source)
            collected.extend(found, source)
    results = collected.results(list(dict.fromkeys(sources)), unreadable, errors)
    said: dict[str, Any] = {}
    if shield.sites:
        said["reaching"] = tuple(shield.sites)
    if shield.support:
        said["support"] = tuple(shield.support)
    if order and not results.exit_code_only:
        said["order"] = order
    return replace(results, **said) if said else results


def _shielded(stream: Stream | None, delivery: Delivery, notes: list[str]) -> tuple[list[str], ShieldFiles]:
    """What papayu's shield (results/shield.py) refused or found changed in pytest's processes,
    from each process's file (every process's records go there; the stream carries the same for
    the main one): such a run is not trusted. The code's own reaching where the shield allows it
    goes to ``notes``; what the files said is returned (its sites, the test support loaded)."""
    found = read_shield_files(delivery.files, SHIELD_DIR + "/")
    refused, allowed = list(found.refused), list(found.allowed)
    for session in stream.sessions if stream is not None else ():
        refused += session.shield
        allowed += session.allowed
        missing = session.unverified() if session.ended else 0
        if missing:
            refused.append(f"the runner's reporting path was not verified before {missing} test(s) were reported")
    refused, allowed = list(dict.fromkeys(refused)), list(dict.fromkeys(allowed))
    if allowed:
        shown = "; ".join(allowed[:3]) + (f"; and {len(allowed) - 3} more" if len(allowed) > 3 else "")
        notes.append(f"the tip's own code reached for frames or objects, allowed (not the plan's): {shown}")
    if not refused:
        return [], found
    shown = "; ".join(refused[:5]) + (f"; and {len(refused) - 5} more" if len(refused) > 5 else "")
    return [f"{SHIELD_ERROR}: {shown}"], found


def _unreadable(delivery: Delivery, allowed: Callable[[str], bool]) -> list[str]:
    """The reports that were there and not sent, of the sources this run reads."""
    out = []
    for line in delivery.unreadable:
        name = line.split(": ", 1)[0]
        source = source_of(name)
        if allowed(source):
            out.append(f"{source}: {line.split(': ', 1)[-1]}")
    return out


def source_of(name: str) -> str:
    """The source a delivered report is read as, by its name in the delivery."""
    top = name.split("/", 1)[0]
    if top == MAVEN_DIR and "/" in name:
        return MAVEN
    if top == GRADLE_DIR and "/" in name:
        return GRADLE
    if top == JUNIT_DIR and "/" in name:
        return JUNIT_COPY + name[len(JUNIT_DIR) + 1 :]
    for pattern, source in ((JEST_JSON, JEST), (VITEST_JSON, VITEST), (NODE_TEST_JSON, NODE_TEST_EVENTS)):
        if fnmatch.fnmatchcase(name, pattern):
            return source
    return {PYTEST_XML: PYTEST_JUNIT, GOTESTSUM_JSON: GOTESTSUM}.get(name, name)


def _reports(delivery: Delivery, root: str) -> list[tuple[str, str, FileReader]]:
    """(name in the delivery, source, reader) of every report a run may have left."""
    reports: list[tuple[str, str, FileReader]] = [
        (PYTEST_XML, PYTEST_JUNIT, lambda data: _junit(data, "pytest", root)),
        (GOTESTSUM_JSON, GOTESTSUM, lambda data: read_go_json(data.decode("utf-8", "replace")) or []),
    ]
    for name in sorted(delivery.files):
        source = source_of(name)
        if source in (JEST, VITEST):  # vitest's JSON reporter writes jest's format
            reports.append((name, source, lambda data: read_jest(data, root)))
        elif source == NODE_TEST_EVENTS:
            reports.append((name, source, lambda data: read_node_test(data, root)))
        elif source in (MAVEN, GRADLE):
            reports.append(
                (name, source, functools.partial(_junit, dialect="build", root=root, module=build_module(name)))
            )
        elif source.startswith(JUNIT_COPY):
            reports.append((name, source, lambda data: _junit(data, "any", root)))
    return reports


def build_module(name: str) -> str:
    """The module (Maven) or project (Gradle) directory of a build tool's report, from the root:
    `maven/core/target/surefire-reports/TEST-x.xml` is core's, `maven/target/...` the root's."""
    path = "/" + name.split("/", 1)[1]
    for marker in ("/target/surefire-reports/", "/target/failsafe-reports/", "/build/test-results/"):
        if marker in path:
            return path[: path.rindex(marker)].strip("/")
    return ""


def _log_readers(root: str) -> list[tuple[str, LogReader]]:
    return [(GO_JSON, read_go_json), (LIBTEST, read_libtest), (TAP, lambda text: read_tap(text, root))]


def _verify(
    sessions: list[Session], delivery: Delivery, root: str, report_dir: str, sources: list[str], errors: list[str]
) -> set[str]:
    """Each JUnit file a streamed pytest session wrote (the last session's, where several wrote
    one) against what that session streamed. Returns the files compared: they are no results of
    their own. A file that is gone, unreadable or says otherwise is an error of the run."""
    written: dict[str, Session] = {}
    for session in sessions:
        name = _delivered_name(session.junit, root, report_dir)
        if session.ended and name is not None:
            written[name] = session
    for name, session in written.items():
        source = source_of(name)
        data = delivery.files.get(name)
        said = "the report pytest was asked for" if name == PYTEST_XML else f"{name[len(JUNIT_DIR) + 1 :]}"
        if data is None:
            why = next((u.split(": ", 1)[1] for u in delivery.unreadable if u.startswith(name + ": ")), "")
            errors.append(f"{said} is {'unreadable: ' + why if why else 'missing'}, though pytest ended its session")
            continue
        problem = _compare(session, data, root)
        if problem:
            errors.append(f"{said} was rewritten after the runner ended: {problem}")
        sources.append(source)  # read, and compared: the error says what it said
    return set(written)


def _delivered_name(junit: str, root: str, report_dir: str) -> str | None:
    if not junit:
        return None
    if junit == os.path.normpath(f"{report_dir}/{PYTEST_XML}"):
        return PYTEST_XML
    base = root.rstrip("/") + "/"
    return f"{JUNIT_DIR}/{junit[len(base) :]}" if root and junit.startswith(base) else None


def _compare(session: Session, data: bytes, root: str) -> str:
    from papayu_git.check.results.junit import INTERNAL_ERROR, junit_entries, read_junit

    try:
        entries = junit_entries(data)
    except ReportUnreadable as exc:
        return str(exc)
    streamed = by_junit_name(session)
    reported: dict[object, Outcome] = {}
    if streamed is not None:
        for entry in entries:
            if (entry.classname, entry.name) != INTERNAL_ERROR:
                worst(reported, (entry.classname, entry.name), entry.outcome)
        return "; ".join(differences(dict(streamed), reported))
    by_id: dict[object, Outcome] = {}
    for case in session.cases():
        worst(by_id, case.test_id, case.outcome)
    for case in read_junit(data, "pytest", root):
        worst(reported, case.test_id, case.outcome)
    return "; ".join(differences(by_id, reported))


def _junit(data: bytes, dialect: str, root: str, module: str = "") -> list[CaseResult]:
    # Imported here: junitparser brings lxml, which commands that never read a report (and
    # checks that write none) do not load (docs/DESIGN.md, "Start-up and cost").
    from papayu_git.check.results.junit import read_junit

    return read_junit(data, dialect, root, module)
