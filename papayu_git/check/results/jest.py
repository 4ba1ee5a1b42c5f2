"""jest's own JSON report (`--json --outputFile=…`): no reporter package needed."""

from __future__ import annotations

import json
from typing import Any

from papayu_git.check.results.files import relative_to_root
from papayu_git.check.results.outcome import CaseResult, Outcome, ReportUnreadable

_STATUS = {
    "passed": Outcome.PASSED,
    "failed": Outcome.FAILED,
    "pending": Outcome.SKIPPED,
    "skipped": Outcome.SKIPPED,
    "todo": Outcome.SKIPPED,
    "disabled": Outcome.SKIPPED,
}


def read_jest(data: bytes, root: str = "") -> list[CaseResult]:
    """Ids: the test file from ``root``, the describe() blocks, the title, joined by " > "."""
    try:
        report = json.loads(data)
        files = report["testResults"]
    except (ValueError, KeyError, TypeError) as exc:
        raise ReportUnreadable(f"not a jest JSON report ({exc})") from None
    out = []
    for file in files if isinstance(files, list) else []:
        if not isinstance(file, dict):
            continue
        path = relative_to_root(str(file.get("name", "")), root)
        cases = [c for c in file.get("assertionResults") or [] if isinstance(c, dict)]
        for case in cases:
            outcome = _STATUS.get(str(case.get("status")))
            if outcome is not None:
                out.append(
                    CaseResult(_case_id(path, case), outcome, "\n".join(map(str, case.get("failureMessages") or [])))
                )
        if not cases and file.get("status") == "failed":  # the file itself did not run (a syntax error)
            out.append(CaseResult(path, Outcome.ERROR, str(file.get("message") or "")))
    return out


def _case_id(path: str, case: dict[str, Any]) -> str:
    titles = [str(t) for t in case.get("ancestorTitles") or []]
    return " > ".join([path, *titles, str(case.get("title", ""))])
