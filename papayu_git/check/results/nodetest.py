"""`node --test`'s results as papayu's reporter wrote them (node_test_reporter.cjs): one JSON
object a line, per test of one runner process.

Ids: the test's file from the root, its describe() blocks or parent tests, its name, joined by
" > " (`test/x.test.js > suite > name`): two files with a test of the same name are two tests.
A file that failed to load is one test under its path, as Node reports it.
"""

from __future__ import annotations

import json

from papayu_git.check.results.files import relative_to_root
from papayu_git.check.results.outcome import CaseResult, Outcome, ReportUnreadable

_OUTCOMES = {"passed": Outcome.PASSED, "failed": Outcome.FAILED, "skipped": Outcome.SKIPPED}


def read_node_test(data: bytes, root: str = "") -> list[CaseResult]:
    out = []
    for number, line in enumerate(data.splitlines(), start=1):
        try:
            record = json.loads(line)
            outcome = _OUTCOMES[record["outcome"]]
            path = [str(p) for p in record["path"]]
            file = relative_to_root(str(record.get("file") or ""), root)
        except (ValueError, KeyError, TypeError) as exc:
            raise ReportUnreadable(f"line {number} is no record of papayu's node reporter ({exc})") from None
        if file and path[-1:] and relative_to_root(path[-1], root) == file:
            path = path[:-1]  # a file that did not load is named after itself
        out.append(CaseResult(" > ".join([p for p in (file, *path) if p]), outcome, str(record.get("message") or "")))
    return out
