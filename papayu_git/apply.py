"""Pure unified-diff application and new file contents from actions (docs/DESIGN.md,
"Applying a model's diff"; line endings: "Accepted answers").

Bytes in, bytes out, or a PapayuError: no I/O, no git. Model-written diffs are
tolerated, because models get line numbers and counts wrong: a hunk is tried at its
stated line, then at a unique exact match between its neighbouring hunks
(offset), then the same two steps ignoring whitespace differences; counts in
headers are recounted from the body, `@@ @@` headers are located by context
alone, a missing `\\ No newline at end of file` marker is forgiven. A match is
only taken when the stated line confirms it or it is the only one: an ambiguous
or absent match is ERR_PATCH_APPLY_FAILED with the hunk and the closest file
lines, which is what the model sees in the repair prompt.

Why not libgit2 / GNU patch: libgit2 matches only at the stated line; GNU patch
can leave a file half-patched and guesses with fuzz (measured: bench/patch_robustness.py).
"""

from __future__ import annotations

import re
from collections import Counter
from collections.abc import Callable, Sequence
from typing import NamedTuple

from papayu_git.digests import sha256_hex
from papayu_git.errors import PapayuError
from papayu_git.protocol import Action, ActionKind
from papayu_git.unified_diff import DiffLine, Hunk, parse_hunks

MAX_CANDIDATES = 4
MAX_SHOWN_LINES = 12

__all__ = ["apply_patch", "new_file_contents", "normalize_eol_text", "sha256_hex"]


def normalize_eol_text(text: str) -> str:
    """PAPAYU_NORMALIZE_EOL=lf: CRLF -> LF and a trailing newline."""
    text = text.replace("\r\n", "\n")
    return text if not text or text.endswith("\n") else text + "\n"


class FileLine(NamedTuple):
    text: str
    eol: str  # "\n", "\r\n" or "" (last line without a final newline)


class Placement(NamedTuple):
    start: int  # 0-based index of the hunk's first old line in the original file
    hunk: Hunk


_WS_RUN = re.compile(r"\s+")


def _loose(text: str) -> str:
    """Whitespace-insensitive key: trailing whitespace dropped, runs collapsed, BOM ignored."""
    return _WS_RUN.sub(" ", text.replace("\ufeff", "").rstrip())


def _decode(original: bytes, path: str) -> str:
    if b"\x00" in original:
        raise PapayuError("ERR_NON_UTF8_FILE", "the file is binary (contains NUL bytes)", path=path)
    try:
        return original.decode("utf-8")
    except UnicodeDecodeError as exc:
        raise PapayuError(
            "ERR_NON_UTF8_FILE", f"the file is not UTF-8 ({exc.reason} at byte {exc.start})", path=path
        ) from None


def _split_lines(text: str) -> list[FileLine]:
    parts = text.split("\n")
    last = parts.pop()
    lines = [FileLine(p[:-1], "\r\n") if p.endswith("\r") else FileLine(p, "\n") for p in parts]
    if last:
        lines.append(FileLine(last, ""))
    return lines


def _hunk_name(hunk: Hunk, total: int) -> str:
    return f"hunk {hunk.index} of {total} ({hunk.header})"


class _Index:
    """The file's lines for matching: exact texts and whitespace-insensitive keys, each with a
    first-line -> positions map so that a hunk is looked up, not scanned for."""

    def __init__(self, lines: Sequence[FileLine]) -> None:
        self.lines = lines
        self._keys: dict[bool, list[str]] = {}
        self._where: dict[bool, dict[str, list[int]]] = {}

    def keys(self, loose: bool) -> list[str]:
        if loose not in self._keys:
            self._keys[loose] = [_loose(ln.text) if loose else ln.text for ln in self.lines]
            where: dict[str, list[int]] = {}
            for i, key in enumerate(self._keys[loose]):
                where.setdefault(key, []).append(i)
            self._where[loose] = where
        return self._keys[loose]

    def positions(self, key: str, loose: bool) -> list[int]:
        self.keys(loose)
        return self._where[loose].get(key, [])

    def find(self, old: Sequence[str], loose: bool) -> list[int]:
        """Every start where the whole block ``old`` matches."""
        keys = self.keys(loose)
        want = [_loose(t) for t in old] if loose else list(old)
        m = len(want)
        return [p for p in self.positions(want[0], loose) if keys[p : p + m] == want]


def _stated_start(hunk: Hunk) -> int | None:
    if hunk.old_start is None:
        return None
    # "-5,0" means "insert after line 5"; otherwise old_start is the first old line (1-based).
    return hunk.old_start if not hunk.old_lines else max(hunk.old_start - 1, 0)


def _choose(hunk: Hunk, index: _Index, lo: int, hi: int) -> int | None:
    """The hunk's start within [lo, hi), or None while it is absent or ambiguous there.

    Exact matches first, whitespace-insensitive ones only when no exact one fits.
    Among several, the header's line decides; without it the hunk stays open until its
    neighbours narrow [lo, hi) (hunks are in file order and never overlap).
    """
    stated = _stated_start(hunk)
    old = hunk.old_lines
    if not old:
        # Pure insertion without context cannot be verified anywhere: accept only the two
        # places a header can state unmistakably, the start and the end of the file.
        edges = {0, len(index.lines)}
        if not index.lines:
            return 0  # an empty file has one place
        return stated if stated in edges and lo <= stated <= hi else None
    for loose in (False, True):
        valid = [p for p in index.find(old, loose) if lo <= p and p + len(old) <= hi]
        if stated in valid or len(valid) == 1:
            return stated if stated in valid else valid[0]
        if valid:
            return None
    return None


def _bounds(i: int, starts: Sequence[int | None], hunks: Sequence[Hunk], size: int) -> tuple[int, int]:
    lo = next((s + len(hunks[j].old_lines) for j in range(i - 1, -1, -1) if (s := starts[j]) is not None), 0)
    hi = next((s for j in range(i + 1, len(hunks)) if (s := starts[j]) is not None), size)
    return lo, hi


def _place_all(hunks: Sequence[Hunk], lines: Sequence[FileLine], path: str) -> list[Placement]:
    index = _Index(lines)
    starts: list[int | None] = [None] * len(hunks)
    progress = True
    while progress:
        progress = False
        for i, hunk in enumerate(hunks):
            if starts[i] is None:
                starts[i] = _choose(hunk, index, *_bounds(i, starts, hunks, len(lines)))
                progress = progress or starts[i] is not None
    for i, hunk in enumerate(hunks):
        if starts[i] is None:
            raise _failure(hunk, len(hunks), index, *_bounds(i, starts, hunks, len(lines)), path=path)
    return [Placement(s, h) for s, h in zip(starts, hunks, strict=True) if s is not None]


def _failure(hunk: Hunk, total: int, index: _Index, lo: int, hi: int, *, path: str) -> PapayuError:
    old = hunk.old_lines
    if not old:
        return PapayuError(
            "ERR_PATCH_APPLY_FAILED",
            f"{_hunk_name(hunk, total)} has no context or removed lines to locate it "
            "(only the start or the end of the file can be given by line number); "
            "add context lines copied from the file",
            path=path,
        )
    for loose in (False, True):
        found = index.find(old, loose)
        valid = [p for p in found if lo <= p and p + len(old) <= hi]
        if len(valid) > 1:
            return _ambiguous(hunk, total, index.lines, valid, path)
        if found and not valid:
            return PapayuError(
                "ERR_PATCH_APPLY_FAILED",
                f"{_hunk_name(hunk, total)} matches only at line {found[0] + 1}, outside lines {lo + 1}-{hi} "
                "left between its neighbouring hunks; hunks must be in file order and must not overlap",
                path=path,
                hint="Order hunks by line number and merge overlapping hunks into one.",
            )
    return _absent(hunk, total, index, path)


def _show(lines: Sequence[FileLine], start: int, stop: int) -> list[str]:
    stop = min(stop, len(lines), start + MAX_SHOWN_LINES)
    return [f"  {i + 1:>5} | {lines[i].text}" for i in range(max(start, 0), stop)]


def _ambiguous(hunk: Hunk, total: int, lines: Sequence[FileLine], found: list[int], path: str) -> PapayuError:
    m = len(hunk.old_lines)
    places = ", ".join(f"lines {p + 1}-{p + m}" for p in found[:MAX_CANDIDATES])
    more = f" and {len(found) - MAX_CANDIDATES} more" if len(found) > MAX_CANDIDATES else ""
    shown = [f"candidate at line {p + 1}:\n" + "\n".join(_show(lines, p, p + min(m, 4))) for p in found[:2]]
    stated = _stated_start(hunk)
    header = "the header has no line number" if stated is None else f"the header's line {stated + 1} is none of them"
    reason = (
        f"{_hunk_name(hunk, total)} is ambiguous: its {m} context/removed lines match at "
        f"{len(found)} places ({places}{more}) and {header}.\n" + "\n".join(shown)
    )
    return PapayuError(
        "ERR_PATCH_APPLY_FAILED",
        reason,
        path=path,
        hint="Give the exact line numbers in the @@ header, or add context lines that occur only once in the file.",
    )


def _closest(index: _Index, old: Sequence[str], stated: int | None) -> tuple[int, int]:
    """(start, matching line count) of the window that best matches ``old``, ignoring whitespace."""
    votes: Counter[int] = Counter()
    for j, text in enumerate(old):
        for i in index.positions(_loose(text), loose=True):
            votes[i - j] += 1
    anchor = stated if stated is not None else 0
    if not votes:
        return anchor, 0
    start, score = max(votes.items(), key=lambda kv: (kv[1], -abs(kv[0] - anchor)))
    return start, score


def _window(lines: Sequence[FileLine], old: Sequence[str], start: int) -> list[str]:
    """The file lines at ``start``, each differing one followed by what the hunk expected."""
    out = []
    for j, want in enumerate(old[:MAX_SHOWN_LINES]):
        i = start + j
        have = lines[i].text if 0 <= i < len(lines) else None
        if have is not None:
            out.append(f"  {i + 1:>5} | {have}")
        if have is None or _loose(have) != _loose(want):
            out.append(f"        ^ hunk line {j + 1} expects: {want!r}")
    return out


def _absent(hunk: Hunk, total: int, index: _Index, path: str) -> PapayuError:
    old, lines = hunk.old_lines, index.lines
    detail = [
        f"{_hunk_name(hunk, total)} does not match the file: its {len(old)} context/removed lines "
        "were not found, exactly or ignoring whitespace."
    ]
    applied = index.find(hunk.new_lines, loose=False) if hunk.new_lines else []
    if applied:
        detail.append(
            f"Its result lines are already in the file at line {applied[0] + 1}: the change looks already applied."
        )
    start, score = _closest(index, old, _stated_start(hunk))
    if not lines:
        detail.append("The file is empty.")
    elif score:
        detail.append(f"Closest place in the file, from line {max(start, 0) + 1} ({score} of {len(old)} lines match):")
        detail.extend(_window(lines, old, start))
    else:
        detail.append("No line of the hunk's context occurs in the file.")
    return PapayuError("ERR_PATCH_APPLY_FAILED", "\n".join(detail), path=path)


class EolStyle(NamedTuple):
    uniform: str | None  # "\n" / "\r\n" when every line ending of the file agrees, else None

    def for_added(self, line: DiffLine) -> str:
        # Uniform file: keep its style whatever the diff used (a CRLF file stays CRLF).
        # Mixed or no line endings at all: follow the diff line's own ending.
        if self.uniform is not None:
            return self.uniform
        return "\r\n" if line.crlf else "\n"


def _eol_style(lines: Sequence[FileLine]) -> EolStyle:
    kinds = {ln.eol for ln in lines if ln.eol}
    return EolStyle(kinds.pop() if len(kinds) == 1 else None)


def _build(placed: Sequence[Placement], lines: Sequence[FileLine], style: EolStyle) -> list[FileLine]:
    out: list[FileLine] = []
    cur = 0
    for start, hunk in placed:
        out.extend(lines[cur:start])
        q = start
        for dl in hunk.lines:
            if dl.tag == " ":
                out.append(lines[q])  # context keeps the file's own text and ending
                q += 1
            elif dl.tag == "-":
                q += 1
            else:
                out.append(FileLine(dl.text, style.for_added(dl)))
        cur = q
    out.extend(lines[cur:])
    # The old last line may lack a newline and now be followed by added lines.
    for i in range(len(out) - 1):
        if not out[i].eol:
            out[i] = FileLine(out[i].text, style.uniform or out[i + 1].eol or "\n")
    return out


def _final_newline(placed: Sequence[Placement], lines: Sequence[FileLine]) -> bool | None:
    """The final-newline state the result must have, or None to leave the built lines as they are."""
    if not placed:
        return None
    start, hunk = placed[-1]
    if start + len(hunk.old_lines) != len(lines):
        return None  # the last hunk ends before the end of the file: the last line is untouched
    original = not lines or lines[-1].eol != ""
    if hunk.old_no_eol != hunk.new_no_eol:
        return not hunk.new_no_eol  # the diff states a change of the final newline
    if not hunk.old_no_eol and hunk.rewrites_last_line_unchanged():
        return True  # git's shape for "add the final newline" with its marker lost
    return original


def apply_patch(original: bytes, patch: str, *, path: str, normalize_eol: bool = False) -> bytes:
    """Apply a model-written unified diff to one file's bytes (docs/DESIGN.md, "Applying a model's diff")."""
    text = _decode(original, path)
    hunks = parse_hunks(patch, path=path)
    lines = _split_lines(text)
    placed = _place_all(hunks, lines, path)
    style = _eol_style(lines)
    out = _build(placed, lines, style)
    want_newline = _final_newline(placed, lines)
    if out and want_newline is not None:
        last = out[-1]
        out[-1] = FileLine(last.text, (last.eol or style.uniform or "\n") if want_newline else "")
    result = "".join(ln.text + ln.eol for ln in out)
    if result == text:
        raise PapayuError(
            "ERR_PATCH_APPLY_FAILED",
            f"the patch changes nothing in the file ({len(hunks)} hunk(s) matched; already applied?)",
            path=path,
            hint="Send a diff against the file as shown (FILE block), with real changes.",
        )
    if normalize_eol:
        result = normalize_eol_text(result)
    return result.encode("utf-8")


def _encode_content(action: Action, normalize_eol: bool) -> bytes:
    text = action.content or ""
    if normalize_eol:
        text = normalize_eol_text(text)
    try:
        return text.encode("utf-8")
    except UnicodeEncodeError as exc:
        raise PapayuError(
            "ERR_NON_UTF8_FILE", f"content cannot be encoded as UTF-8 ({exc.reason})", path=action.path
        ) from None


def new_file_contents(
    actions: Sequence[Action], read_blob: Callable[[str], bytes | None], *, normalize_eol: bool = False
) -> dict[str, bytes]:
    """path -> new bytes for every CREATE_FILE / UPDATE_FILE / PATCH_FILE action.

    ``read_blob(path)`` returns the file's bytes at the base (the branch tip) or None.
    Base sha256 checks are the transaction's job, not this function's.
    """
    out: dict[str, bytes] = {}
    for action in actions:
        if action.kind in (ActionKind.CREATE_FILE, ActionKind.UPDATE_FILE):
            out[action.path] = _encode_content(action, normalize_eol)
        elif action.kind is ActionKind.PATCH_FILE:
            original = read_blob(action.path)
            if original is None:
                raise PapayuError(
                    "ERR_PATCH_MISSING_FILE", "PATCH_FILE for a file that does not exist", path=action.path
                )
            out[action.path] = apply_patch(original, action.patch or "", path=action.path, normalize_eol=normalize_eol)
    return out
