"""One run's results: every report the runners wrote, then every runner's lines in the log."""

from __future__ import annotations

from collections.abc import Callable, Sequence
from pathlib import Path, PurePath

from papayu_git.check.results.files import matching_files, read_report
from papayu_git.check.results.gotest import read_go_json
from papayu_git.check.results.instrument import JEST_JSON, JUNIT_DIR, NODE_XML, PYTEST_XML, VITEST_XML
from papayu_git.check.results.jest import read_jest
from papayu_git.check.results.libtest import read_libtest
from papayu_git.check.results.outcome import CaseResult, Collected, ReportUnreadable, TestResults
from papayu_git.check.results.tap import read_tap

FileReader = Callable[[bytes], list[CaseResult]]


def read_results(
    report_dir: Path, log_text: str, junit_globs: Sequence[str | PurePath] = (), *, root: str = ""
) -> TestResults:
    """What the check run said about each test.

    ``report_dir``: the host path of the directory given to `instrument`, a new one for each run
    (whatever is in it is this run's). ``junit_globs``: the `papayu.check.junit` globs, whose
    copies in it are read. ``root``: the check's working directory as seen inside the check;
    runners that name files absolutely are made relative to it. Nothing readable: ``source`` is
    "exit code only", and the verdict is the exit code's."""
    collected, sources, unreadable = Collected(), [], []
    for rel, source, reader in _reports(report_dir, [str(g) for g in junit_globs], root):
        try:
            data = read_report(report_dir, rel)
            cases = reader(data) if data is not None else None
        except ReportUnreadable as exc:
            unreadable.append(f"{source}: {exc}")
            continue
        if cases is not None:
            sources.append(source)
            collected.extend(cases)
    logs: list[tuple[str, Callable[[str], list[CaseResult] | None]]] = [
        ("go test -json", read_go_json),
        ("cargo libtest", read_libtest),
        ("tap", lambda text: read_tap(text, root)),
    ]
    for source, log_reader in logs:
        found = log_reader(log_text)
        if found is not None:
            sources.append(source)
            collected.extend(found)
    return collected.results(sources, unreadable)


def _reports(report_dir: Path, junit_globs: list[str], root: str) -> list[tuple[str, str, FileReader]]:
    """(path in the report directory, source, reader) of every report a run may have left."""
    reports: list[tuple[str, str, FileReader]] = [
        (PYTEST_XML, "pytest junit", lambda data: _junit(data, "pytest", root)),
        (NODE_XML, "node junit", lambda data: _junit(data, "node", root)),
        (JEST_JSON, "jest json", lambda data: read_jest(data, root)),
        (VITEST_XML, "vitest junit", lambda data: _junit(data, "vitest", root)),
    ]
    copies = matching_files(report_dir / JUNIT_DIR, junit_globs) if junit_globs else []
    reports += [(f"{JUNIT_DIR}/{rel}", f"junit:{rel}", lambda data: _junit(data, "any", root)) for rel in copies]
    return reports


def _junit(data: bytes, dialect: str, root: str) -> list[CaseResult]:
    # Imported here: junitparser brings lxml, which commands that never read a report (and
    # checks that write none) do not load (docs/DESIGN.md, "Start-up and cost").
    from papayu_git.check.results.junit import read_junit

    return read_junit(data, dialect, root)
