"""Tolerant parsing of model-written unified diffs into hunks (docs/DESIGN.md, "Applying a model's diff").

Models get hunk headers wrong: counts that do not add up, `@@ @@` without line
numbers, a lost `\\ No newline at end of file`, blank context lines without
their leading space. A strict parser drops or misreads such hunks silently
(measured with unidiff: `@@ @@` gives zero hunks, a short count drops the
hunk's last lines without an error). So a scanner reads each hunk body up to
the next header and recounts it. A diff that yields no hunk, or a hunk that
changes nothing, is an error, never a silent no-op. On well-formed diffs the
tests hold this scanner to unidiff's reading (tests/test_apply_patch.py).
"""

from __future__ import annotations

import codecs
import re
from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any, NamedTuple

from papayu_git.errors import PapayuError

_HEADER = re.compile(r"^@@+(.*?)@@")
_OLD_RANGE = re.compile(r"-(\d+)(?:,(\d+))?")
_NEW_RANGE = re.compile(r"\+(\d+)(?:,(\d+))?")
_MARKER = "\\"

# git extended headers a PATCH_FILE cannot honour: it edits text lines of one file only.
_UNSUPPORTED = {
    "old mode": "changes the file mode",
    "new mode": "changes the file mode",
    "deleted file mode": "deletes the file (use DELETE_FILE)",
    "rename from": "renames the file (use CREATE_FILE + DELETE_FILE)",
    "rename to": "renames the file (use CREATE_FILE + DELETE_FILE)",
    "copy from": "copies the file (use CREATE_FILE)",
    "copy to": "copies the file (use CREATE_FILE)",
    "Binary files": "is a binary diff",
    "GIT binary patch": "is a binary diff",
}


class DiffLine(NamedTuple):
    tag: str  # " " context, "-" removed, "+" added
    text: str  # without the line ending
    crlf: bool  # the diff line itself ended with CRLF


@dataclass(frozen=True)
class Hunk:
    index: int  # 1-based position in the diff
    header: str
    old_start: int | None  # None for a header without line numbers
    lines: tuple[DiffLine, ...]
    old_no_eol: bool = False  # "\ No newline at end of file" after the last old line
    new_no_eol: bool = False

    @property
    def old_lines(self) -> tuple[str, ...]:
        return tuple(dl.text for dl in self.lines if dl.tag != "+")

    @property
    def new_lines(self) -> tuple[str, ...]:
        return tuple(dl.text for dl in self.lines if dl.tag != "-")

    def rewrites_last_line_unchanged(self) -> bool:
        """Ends with a change run whose last removed and last added lines are equal: git's shape
        for a change of the final newline (only the lost marker made them look equal)."""
        if not self.lines or self.lines[-1].tag != "+":
            return False
        run: list[DiffLine] = []
        for dl in reversed(self.lines):
            if dl.tag == " ":
                break
            run.append(dl)
        removed = [dl.text for dl in reversed(run) if dl.tag == "-"]
        return bool(removed) and removed[-1] == self.lines[-1].text


class _Row(NamedTuple):
    text: str
    crlf: bool


def _rows(patch: str) -> list[_Row]:
    parts = patch.split("\n")
    if parts and parts[-1] == "":
        parts.pop()
    return [_Row(p[:-1], True) if p.endswith("\r") else _Row(p, False) for p in parts]


def _range(regex: re.Pattern[str], inner: str) -> tuple[int | None, int | None]:
    m = regex.search(inner)
    if not m:
        return None, None
    return int(m.group(1)), (int(m.group(2)) if m.group(2) is not None else 1)


def _is_file_header(rows: Sequence[_Row], j: int) -> bool:
    return rows[j].text.startswith("--- ") and j + 1 < len(rows) and rows[j + 1].text.startswith("+++ ")


def _next_change(rows: Sequence[_Row], j: int) -> int:
    """Index of the next '+'/'-' line before a header ends the hunk, or -1."""
    for k in range(j, len(rows)):
        text = rows[k].text
        if text.startswith(("@@", "diff --git ", "--- ", "+++ ")) or text == "-- ":
            return -1
        if text[:1] in ("+", "-"):
            return k
    return -1


class _Body(NamedTuple):
    lines: tuple[DiffLine, ...]
    old_no_eol: bool
    new_no_eol: bool
    end: int  # index of the first row after the body


def _read_body(rows: Sequence[_Row], start: int, want: tuple[int | None, int | None]) -> _Body:
    lines: list[DiffLine] = []
    old_no_eol = new_no_eol = False
    change_ahead = -1
    old_n = new_n = 0
    j = start
    while j < len(rows):
        text, crlf = rows[j]
        if text.startswith("@@") or text.startswith("diff --git "):
            break
        # Until the header's counts are reached, "--- x" is a removed "-- x" line (SQL, Lua).
        reached = want[0] is None or (old_n >= want[0] and new_n >= (want[1] or 0))
        if reached and (_is_file_header(rows, j) or text == "-- "):
            break  # next file, or a `git format-patch` signature
        if text == "" or text[0] in " -+":
            tag = text[:1] or " "  # an empty row is a blank context line that lost its space
            lines.append(DiffLine(tag, text[1:], crlf))
            old_n += tag != "+"
            new_n += tag != "-"
        elif text[0] == _MARKER:
            if lines and lines[-1].tag != "+":
                old_no_eol = True
            if lines and lines[-1].tag != "-":
                new_no_eol = True
        elif j < change_ahead or (change_ahead := _next_change(rows, j + 1)) > j:
            # A context line that lost its leading space; it only narrows the match, because
            # context lines are copied from the file, never from the diff.
            lines.append(DiffLine(" ", text, crlf))
            old_n += 1
            new_n += 1
        else:
            break
        j += 1
    # Blank rows past the stated counts (or at the end of the patch) are padding, not context.
    while (
        lines
        and lines[-1].tag == " "
        and not lines[-1].text
        and ((want[0] is not None and old_n > want[0]) or (want[0] is None and j == len(rows)))
    ):
        lines.pop()
        old_n -= 1
    return _Body(tuple(lines), old_no_eol, new_no_eol, j)


def _unquote(name: str) -> str:
    """git's C-style quoting of unusual paths: "a/caf\\303\\251.py" -> a/café.py."""
    try:
        raw = codecs.escape_decode(name[1:-1].encode("utf-8"))[0]
        return raw.decode("utf-8") if isinstance(raw, bytes) else name[1:-1]
    except (UnicodeDecodeError, ValueError):
        return name[1:-1]


def _section_name(row: str) -> str | None:
    name = row.split("\t")[0].strip()
    if len(name) >= 2 and name.startswith('"') and name.endswith('"'):
        name = _unquote(name)
    if name == "/dev/null":
        return None
    return name[2:] if name[:2] in ("a/", "b/") else name


def _same_file(name: str | None, path: str) -> bool:
    if name is None:
        return True
    return name == path or path.endswith("/" + name) or name.endswith("/" + path)


@dataclass
class _Scan:
    path: str
    hunks: list[tuple[str | None, Hunk]]
    section: str | None = None

    def fail(self, code: str, reason: str) -> PapayuError:
        return PapayuError(code, reason, path=self.path)


def _read_hunk(scan: _Scan, rows: Sequence[_Row], i: int) -> int:
    header = _HEADER.match(rows[i].text)
    if header is None:
        raise scan.fail(
            "ERR_PATCH_NOT_UNIFIED", f"line {i + 1} ({rows[i].text[:60]!r}) is not a hunk header '@@ -l,n +l,n @@'"
        )
    inner = header.group(1)
    old_start, old_count = _range(_OLD_RANGE, inner)
    _new_start, new_count = _range(_NEW_RANGE, inner)
    want = (old_count, new_count) if old_count is not None and new_count is not None else (None, None)
    body = _read_body(rows, i + 1, want)
    hunk = Hunk(len(scan.hunks) + 1, rows[i].text.strip(), old_start, body.lines, body.old_no_eol, body.new_no_eol)
    scan.hunks.append((scan.section, hunk))
    return body.end


def _check_header_row(scan: _Scan, row: str) -> None:
    for prefix, what in _UNSUPPORTED.items():
        if row.startswith(prefix):
            raise scan.fail("ERR_PATCH_UNSUPPORTED", f"the diff {what} ({row.strip()!r})")
    if row.startswith("new file mode") and row.split()[-1] != "100644":
        raise scan.fail(
            "ERR_PATCH_UNSUPPORTED", f"the diff creates a symlink, submodule or executable ({row.strip()!r})"
        )


def _scan(patch: str, path: str) -> list[tuple[str | None, Hunk]]:
    scan = _Scan(path, [])
    rows = _rows(patch)
    i = 0
    while i < len(rows):
        row = rows[i].text
        if row.startswith("@@"):
            i = _read_hunk(scan, rows, i)
            continue
        if row == "-- ":
            break  # `git format-patch` signature: nothing after it is diff
        if row.startswith("diff --git "):
            scan.section = _section_name(row.rsplit(" ", 1)[-1])
        elif _is_file_header(rows, i):
            target = rows[i + 1].text[4:]
            if _section_name(target) is None:
                raise scan.fail("ERR_PATCH_UNSUPPORTED", "the diff deletes the file (+++ /dev/null); use DELETE_FILE")
            scan.section = _section_name(target)
            i += 2
            continue
        elif row[:1] in ("+", "-") and not row.startswith(("+++", "---")):
            raise scan.fail("ERR_PATCH_NOT_UNIFIED", f"line {i + 1} ({row[:60]!r}) is a change outside any '@@' hunk")
        else:
            _check_header_row(scan, row)
        i += 1
    return scan.hunks


def _check_hunk(hunk: Hunk, total: int, path: str) -> None:
    name = f"hunk {hunk.index} of {total} ({hunk.header})"
    if not any(dl.tag != " " for dl in hunk.lines):
        raise PapayuError(
            "ERR_PATCH_APPLY_FAILED",
            f"{name} has no '+' or '-' line: it changes nothing",
            path=path,
            hint="Every hunk must add or remove lines; drop hunks without changes.",
        )
    same = hunk.old_lines == hunk.new_lines and hunk.old_no_eol == hunk.new_no_eol
    if same and not hunk.rewrites_last_line_unchanged():
        raise PapayuError(
            "ERR_PATCH_APPLY_FAILED",
            f"{name} removes and adds the same lines: it changes nothing",
            path=path,
            hint="Every hunk must change the file; drop hunks without changes.",
        )


def parse_hunks(patch: str, *, path: str) -> tuple[Hunk, ...]:
    """The hunks of a one-file unified diff, in order; raise when there are none or one is empty."""
    found = _scan(patch, path)
    names = {name for name, _ in found}
    if len(names) > 1 or not all(_same_file(name, path) for name in names):
        others = ", ".join(sorted(repr(n) for n in names if n is not None and n != path))
        mine = [h for name, h in found if name is not None and name == path]
        if not mine:
            raise PapayuError(
                "ERR_PATCH_NOT_UNIFIED",
                f"the diff is for {others}, not for this file; a PATCH_FILE patch changes only its own path",
                path=path,
            )
        found = [(path, h) for h in mine]
    hunks = tuple(
        Hunk(i + 1, h.header, h.old_start, h.lines, h.old_no_eol, h.new_no_eol) for i, (_, h) in enumerate(found)
    )
    if not hunks:
        raise PapayuError("ERR_PATCH_NOT_UNIFIED", "the patch has no '@@' hunk", path=path)
    for hunk in hunks:
        _check_hunk(hunk, len(hunks), path)
    return hunks


@dataclass(frozen=True)
class FileSection:
    """One file's part of a multi-file diff: its names (None = /dev/null) and its text."""

    old: str | None
    new: str | None
    text: str
    hunks: int


def split_files(patch: str) -> list[FileSection]:
    """Split a multi-file unified diff into per-file sections (`git papayu agent`'s apply_patch).

    Hunk extents are found the way `parse_hunks` finds them (a body read up to the next header,
    counts honoured while they last), so a removed line that looks like `--- x` does not start a
    new file; each section is then applied by the same tolerant engine as PATCH_FILE (docs/DESIGN.md,
    "Applying a model's diff"). A hunk before any file header is ERR_PATCH_NOT_UNIFIED."""
    raw = patch.split("\n")
    rows = _rows(patch)
    sections: list[list[Any]] = []  # [start, old, new, hunks, has_names]
    i = 0
    while i < len(rows):
        text = rows[i].text
        if text.startswith("diff --git "):
            sections.append([i, None, None, 0, False])
        elif _is_file_header(rows, i):
            current = sections[-1] if sections else None
            if current is None or current[3] or current[4]:
                current = [i, None, None, 0, False]
                sections.append(current)
            current[1], current[2], current[4] = _section_name(text[4:]), _section_name(rows[i + 1].text[4:]), True
            i += 2
            continue
        elif text.startswith("@@"):
            if not sections or not sections[-1][4]:
                raise PapayuError(
                    "ERR_PATCH_NOT_UNIFIED",
                    f"line {i + 1} ({text[:60]!r}) is a hunk before any '--- a/PATH' / '+++ b/PATH' file header",
                )
            header = _HEADER.match(text)
            inner = header.group(1) if header else ""
            _old_start, old_count = _range(_OLD_RANGE, inner)
            _new_start, new_count = _range(_NEW_RANGE, inner)
            want = (old_count, new_count) if old_count is not None and new_count is not None else (None, None)
            sections[-1][3] += 1
            i = _read_body(rows, i + 1, want).end
            continue
        elif text == "-- ":
            break
        i += 1
    ends = [s[0] for s in sections[1:]] + [i]
    out = []
    for (start, old, new, hunks, _named), end in zip(sections, ends, strict=True):
        out.append(FileSection(old, new, "\n".join(raw[start:end]) + "\n", hunks))
    return out
