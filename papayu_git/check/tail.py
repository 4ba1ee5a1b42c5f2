"""The end of a check's log as a report shows it: the runner's warnings left out (docs/TRANSACTION.md,
"What next").

A red check is read from its last lines, and on a project with deprecations those are mostly
warnings: pytest's "warnings summary" section, Python's `file:line: SomeWarning: text` records
with the source line under them, node's `(node:PID) [DEP0040] DeprecationWarning: ...`, npm's
`npm WARN`, and rustc's `warning: ...` blocks. None of them says why a test failed. They are told
apart by the form each tool writes, not by a list of messages, left out of the tail, and counted
in one line naming the log, which keeps every one of them. Pure: text in, text out.
"""

from __future__ import annotations

import re

# pytest: the section's header, and the line that ends it (pytest prints it last in the section).
_PYTEST_SECTION = re.compile(r"^=+ warnings summary =+\s*$")
_PYTEST_SECTION_END = re.compile(r"^-- Docs: \S*capture-warnings\S*\s*$")
_SECTION_HEADER = re.compile(r"^=+ .+ =+\s*$")
# Python's warnings.formatwarning: "path:line: Category: message", then the source line indented.
_PYTHON_WARNING = re.compile(r"^(\s*)\S.*:\d+: [A-Z]\w*Warning: ")
# node: "(node:1234) [DEP0040] DeprecationWarning: ..." and its "(Use `node --trace-warnings ...`" line.
_NODE_WARNING = re.compile(r"^\(node:\d+\) (?:\[\w+\] )?[A-Z]\w*Warning: |^\(Use `node --trace-\w+ \.\.\.`")
_NPM_WARNING = re.compile(r"^npm (?:WARN|warn) ")
# rustc and cargo: "warning: ..." then its " --> file", " |" lines up to a blank line.
_RUST_WARNING = re.compile(r"^warning(?:\[\w+\])?: ")
_RUST_DETAIL = re.compile(r"^\s*(?:-->|\||=|\d+\s*\||\.\.\.)")


def without_warnings(text: str) -> tuple[str, int]:
    """``text`` without the runner's warnings, and how many lines were left out."""
    lines = text.split("\n")
    keep = [True] * len(lines)
    _drop_pytest_sections(lines, keep)
    index = 0
    while index < len(lines):
        end = _warning_end(lines, index) if keep[index] else index
        if end > index:
            keep[index:end] = [False] * (end - index)
            index = end
        else:
            index += 1
    kept = [line for line, k in zip(lines, keep, strict=True) if k]
    return "\n".join(kept), len(lines) - len(kept)


def _drop_pytest_sections(lines: list[str], keep: list[bool]) -> None:
    """pytest's warnings summary, from its header (or the start of the text, when the tail begins
    inside it) through its closing "-- Docs:" line."""
    start: int | None = 0  # a section cut off at the top of the tail starts there
    for index, line in enumerate(lines):
        if _PYTEST_SECTION.match(line):
            start = index
        elif _SECTION_HEADER.match(line):
            start = None
        elif _PYTEST_SECTION_END.match(line) and start is not None:
            keep[start : index + 1] = [False] * (index + 1 - start)
            start = None


def _warning_end(lines: list[str], index: int) -> int:
    """The index after the warning record starting at ``index`` (``index`` when none starts there)."""
    line = lines[index]
    python = _PYTHON_WARNING.match(line)
    if python:  # the source line(s) printed under it are indented deeper
        depth, end = len(python.group(1)), index + 1
        while end < len(lines) and lines[end].strip() and _indent(lines[end]) > depth:
            end += 1
        return end
    if _NODE_WARNING.match(line) or _NPM_WARNING.match(line):
        return index + 1
    if _RUST_WARNING.match(line):
        end = index + 1
        while end < len(lines) and lines[end].strip() and (_RUST_DETAIL.match(lines[end]) or lines[end][:1] == " "):
            end += 1
        return end + 1 if end < len(lines) and not lines[end].strip() else end
    return index


def _indent(line: str) -> int:
    return len(line) - len(line.lstrip())
