"""TAP in the check's log: what `node --test` prints when asked for it (`--test-reporter=tap`)
and, on Node 20, whenever its output is not a terminal; other TAP producers' results are named
by their result lines. Read only after a `TAP version` line.

Node nests subtests four spaces deeper, after a `# Subtest: name` line; ids join the names with
" > ". A test whose subtests reported results is a suite, not a test of its own.
"""

from __future__ import annotations

import re
from typing import TypeVar

from papayu_git.check.results.files import relative_to_root
from papayu_git.check.results.outcome import CaseResult, Outcome

_VERSION = re.compile(r"^TAP version \d+\s*$", re.MULTILINE)
_RESULT = re.compile(r"^(?P<indent> *)(?P<not>not )?ok\b(?: \d+)?(?: -)?(?: (?P<rest>.*))?$")
_SUBTEST = re.compile(r"^(?P<indent> *)# Subtest: (?P<name>.*)$")
_DIRECTIVE = re.compile(r"\s*(?<!\\)#\s*(?P<kind>skip|todo)\b.*$", re.IGNORECASE)
_INDENT = 4
T = TypeVar("T")


def read_tap(log_text: str, root: str = "") -> list[CaseResult] | None:
    """None when the log holds no TAP. ``root``: the check's directory inside the check, to make
    the absolute file names node gives a test file that failed to load relative."""
    if not _VERSION.search(log_text):
        return None
    names: list[str] = []  # the open tests' names, by depth
    has_results: list[bool] = []  # by depth: the open test there has subtests with results
    out = []
    lines = log_text.splitlines()
    for index, line in enumerate(lines):
        if match := _SUBTEST.match(line):
            depth = len(match["indent"]) // _INDENT
            _pad(names, depth, "")
            _pad(has_results, depth, False)
            names[depth:] = [match["name"]]
            has_results[depth:] = [False]
        elif match := _RESULT.match(line):
            depth = len(match["indent"]) // _INDENT
            _pad(names, depth, "")
            _pad(has_results, depth, False)
            if depth > 0:
                has_results[depth - 1] = True
            suite = len(has_results) > depth and has_results[depth]
            has_results[depth:] = [False]
            rest = match["rest"] or ""
            directive = _DIRECTIVE.search(rest)
            name = _unescape(rest[: directive.start()] if directive else rest).strip()
            if suite:
                continue
            if directive:
                outcome = Outcome.SKIPPED
            else:
                outcome = Outcome.FAILED if match["not"] else Outcome.PASSED
            message = _diagnostics(lines, index + 1) if outcome is Outcome.FAILED else ""
            path = [relative_to_root(part, root) for part in (*names[:depth], name) if part]
            out.append(CaseResult(" > ".join(path), outcome, message))
    return out


def _pad(items: list[T], depth: int, value: T) -> None:
    items.extend([value] * (depth - len(items)))


def _unescape(name: str) -> str:
    return name.replace("\\#", "#").replace("\\\\", "\\")


def _diagnostics(lines: list[str], start: int) -> str:
    """The YAML block after a result (`  ---` ... `  ...`), without its timings."""
    if start >= len(lines) or lines[start].strip() != "---":
        return ""
    block = []
    for line in lines[start + 1 : start + 200]:
        if line.strip() == "...":
            break
        if not line.strip().startswith("duration_ms:"):
            block.append(line.strip())
    return "\n".join(block)
