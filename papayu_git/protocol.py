"""The response protocol's value objects and text parsing (docs/DESIGN.md, "Accepted answers").

Accepted forms: an array of actions (v1 only) or an object; JSON may arrive in a
```json fence or surrounded by prose. Actions come from `proposed_changes.actions`
when present, else from the root `actions`.
"""

from __future__ import annotations

import json
import re
from dataclasses import dataclass, field
from enum import StrEnum
from typing import Any

from papayu_git.errors import PapayuError

MAX_INPUT_BYTES = 32 * 1024 * 1024
MAX_JSON_DEPTH = 64
MAX_INT_DIGITS = 4300  # Python's default int_max_str_digits: int() refuses longer digit strings


class ActionKind(StrEnum):
    CREATE_DIR = "CREATE_DIR"
    CREATE_FILE = "CREATE_FILE"
    UPDATE_FILE = "UPDATE_FILE"
    PATCH_FILE = "PATCH_FILE"
    DELETE_FILE = "DELETE_FILE"
    DELETE_DIR = "DELETE_DIR"


# Order of application, whatever order the actions came in: create directories, write files,
# delete files, delete directories.
APPLY_ORDER = {
    ActionKind.CREATE_DIR: 0,
    ActionKind.CREATE_FILE: 1,
    ActionKind.UPDATE_FILE: 1,
    ActionKind.PATCH_FILE: 1,
    ActionKind.DELETE_FILE: 2,
    ActionKind.DELETE_DIR: 3,
}
DELETING_KINDS = frozenset({ActionKind.DELETE_FILE, ActionKind.DELETE_DIR})
WRITING_KINDS = frozenset({ActionKind.CREATE_FILE, ActionKind.UPDATE_FILE, ActionKind.PATCH_FILE})


class Mode(StrEnum):
    PLAN = "plan"
    APPLY = "apply"


NO_CHANGES_PREFIX = "NO_CHANGES:"


@dataclass(frozen=True)
class Action:
    kind: ActionKind
    path: str
    content: str | None = None
    patch: str | None = None
    base_sha256: str | None = None

    def to_dict(self) -> dict[str, str]:
        out = {"kind": self.kind.value, "path": self.path}
        for name in ("content", "patch", "base_sha256"):
            value = getattr(self, name)
            if value is not None:
                out[name] = value
        return out


@dataclass(frozen=True)
class Response:
    """A validated model response. ``data`` is the JSON as received (validated_json)."""

    data: Any
    protocol: int
    mode: Mode
    actions: tuple[Action, ...] = ()
    summary: str = ""
    context_requests: tuple[dict[str, Any], ...] = ()
    memory_patch: dict[str, Any] = field(default_factory=dict)
    questions: tuple[str, ...] = ()
    plan: tuple[dict[str, Any], ...] = ()
    risks: tuple[str, ...] = ()
    commands_to_run: tuple[str, ...] = ()
    warnings: tuple[PapayuError, ...] = ()

    @property
    def is_no_changes(self) -> bool:
        return not self.actions and self.summary.startswith(NO_CHANGES_PREFIX)

    def ordered_actions(self) -> list[Action]:
        return sorted(self.actions, key=lambda a: APPLY_ORDER[a.kind])


def raw_actions(data: Any) -> Any:
    """Actions of a response: `proposed_changes.actions` over root `actions`."""
    if isinstance(data, list):
        return data
    if isinstance(data, dict):
        proposed = data.get("proposed_changes")
        if isinstance(proposed, dict) and "actions" in proposed:
            return proposed["actions"]
        return data.get("actions", [])
    return []


_FENCE = re.compile(r"```[ \t]*(?:json|JSON)?[ \t]*\r?\n(.*?)```", re.S)


def _unique_keys(pairs: list[tuple[str, Any]]) -> dict[str, Any]:
    """Objects with a key twice are refused: json keeps the last value, a person reading the
    file may read the first, so the plan reviewed would not be the plan applied."""
    obj = dict(pairs)
    if len(obj) != len(pairs):
        seen: set[str] = set()
        key = next(k for k, _ in pairs if k in seen or seen.add(k))  # type: ignore[func-returns-value]
        raise PapayuError("ERR_JSON_DUPLICATE_KEY", f"key {key[:80]!r} appears twice in one JSON object", path=key[:80])
    return obj


def _bounded_int(digits: str) -> int:
    """An integer, refused over MAX_INT_DIGITS digits (or a lower sys.set_int_max_str_digits)."""
    if len(digits.lstrip("-")) > MAX_INT_DIGITS:
        raise PapayuError("ERR_JSON_NUMBER_TOO_LARGE", f"an integer with {len(digits)} digits (max {MAX_INT_DIGITS})")
    try:
        return int(digits)
    except ValueError:
        raise PapayuError("ERR_JSON_NUMBER_TOO_LARGE", f"an integer with {len(digits)} digits") from None


_DECODER = json.JSONDecoder(object_pairs_hook=_unique_keys, parse_int=_bounded_int)
# A lone surrogate can only come from a `\ud800`-style escape (or a str that already holds one):
# it cannot be written as UTF-8, so it would crash every later step that stores or commits it.
_SURROGATE_ESCAPE = re.compile(r"\\u[dD][89a-fA-F]")
# Prose around the JSON: try this many '{' / '[' positions before giving up, so a
# 10 MB answer full of braces still parses in bounded time.
MAX_EMBEDDED_CANDIDATES = 8
_JSON_PUNCTUATION = frozenset('{}[],:"')


def coerce_mode(value: object) -> Mode:
    """Mode from a CLI/trace/response value; upstream's fix-plan/chat/fixit rounds are PLAN rounds."""
    if isinstance(value, Mode):
        return value
    if value in ("apply",):
        return Mode.APPLY
    if value in ("plan", "fix-plan", "chat", "fixit"):
        return Mode.PLAN
    raise PapayuError("ERR_USAGE", f"unknown mode {value!r}", hint="Use plan or apply.")


def json_depth_ok(value: Any, limit: int = MAX_JSON_DEPTH) -> bool:
    """Iterative (never recursive) check that ``value`` nests at most ``limit`` levels."""
    level = [value] if isinstance(value, (dict, list)) else []
    depth = 1
    while level:
        if depth > limit:
            return False
        below = []
        for item in level:
            for child in item.values() if isinstance(item, dict) else item:
                if isinstance(child, (dict, list)):
                    below.append(child)
        level, depth = below, depth + 1
    return True


def _decode_error(text: str, exc: json.JSONDecodeError) -> PapayuError:
    if exc.pos >= len(text.rstrip()) or "Unterminated string" in exc.msg:
        return PapayuError("ERR_JSON_TRUNCATED", f"JSON ends early: {exc.msg} at char {exc.pos}")
    return PapayuError("ERR_JSON_INVALID", f"{exc.msg} at line {exc.lineno} column {exc.colno}")


def _decode_at(text: str, start: int) -> tuple[Any, int]:
    try:
        return _DECODER.raw_decode(text, start)
    except RecursionError:
        raise PapayuError("ERR_JSON_TOO_DEEP", f"JSON nested deeper than {MAX_JSON_DEPTH} levels") from None
    except json.JSONDecodeError as exc:
        raise _decode_error(text, exc) from None


def _check_tail(text: str, end: int) -> None:
    """Prose after the JSON is tolerated (models add explanations); more JSON, punctuation or text glued
    to the closing bracket is garbage: the model did not send one clean value."""
    rest = text[end:]
    tail = rest.lstrip()
    if not tail:
        return
    glued = len(tail) == len(rest)
    if glued or tail[0] in _JSON_PUNCTUATION or tail[0].isdigit():
        raise PapayuError("ERR_JSON_TRAILING_GARBAGE", f"unexpected {tail[:20]!r} after the JSON value")


def _decode_whole(text: str) -> Any:
    value, end = _decode_at(text, 0)
    _check_tail(text, end)
    return value


def _candidates(text: str) -> list[int]:
    starts: list[int] = []
    for opener in "{[":  # objects first: '[' in prose is often a footnote
        pos = text.find(opener)
        while pos >= 0 and len(starts) < MAX_EMBEDDED_CANDIDATES:
            starts.append(pos)
            pos = text.find(opener, pos + 1)
    return starts


def _decode_embedded(text: str) -> Any:
    first_error: PapayuError | None = None
    failed_until = -1
    for start in _candidates(text):
        if start < failed_until:
            continue  # inside a value that already failed: its pieces are not the answer
        try:
            value, end = _DECODER.raw_decode(text, start)
        except RecursionError:
            raise PapayuError("ERR_JSON_TOO_DEEP", f"JSON nested deeper than {MAX_JSON_DEPTH} levels") from None
        except json.JSONDecodeError as exc:
            error = _decode_error(text, exc)
            if error.code == "ERR_JSON_TRUNCATED":
                raise error from None
            first_error, failed_until = first_error or error, exc.pos
            continue
        if isinstance(value, (dict, list)):
            _check_tail(text, end)
            return value
    if first_error is not None:
        raise first_error
    raise PapayuError("ERR_JSON_INVALID", "no JSON object or array in the text")


def _as_text(text: str | bytes) -> str:
    if isinstance(text, bytes):
        if len(text) > MAX_INPUT_BYTES:
            raise PapayuError("ERR_INPUT_TOO_LARGE", f"{len(text)} bytes (max {MAX_INPUT_BYTES})")
        try:
            return text.decode("utf-8-sig")
        except UnicodeDecodeError as exc:
            raise PapayuError("ERR_JSON_INVALID", f"not UTF-8 text: {exc.reason} at byte {exc.start}") from None
    if len(text) > MAX_INPUT_BYTES:
        raise PapayuError("ERR_INPUT_TOO_LARGE", f"{len(text)} characters (max {MAX_INPUT_BYTES})")
    try:
        text.encode("utf-8")
    except UnicodeEncodeError as exc:
        raise _surrogate_error(text[exc.start : exc.end]) from None
    return text


def _surrogate_error(char: str) -> PapayuError:
    return PapayuError("ERR_JSON_INVALID_UNICODE", f"unpaired UTF-16 surrogate {char!r} in a string")


def _check_unicode(text: str, value: Any) -> None:
    """Refuse strings (keys too) holding a lone surrogate; only searched when the text has an escape
    that can produce one, so a plain answer pays one regex scan."""
    if _SURROGATE_ESCAPE.search(text) is None:
        return
    stack = [value]
    while stack:
        item = stack.pop()
        if isinstance(item, dict):
            stack.extend(item.keys())
            stack.extend(item.values())
        elif isinstance(item, list):
            stack.extend(item)
        elif isinstance(item, str):
            try:
                item.encode("utf-8")
            except UnicodeEncodeError as exc:
                raise _surrogate_error(item[exc.start : exc.end]) from None


def parse_json_text(text: str | bytes) -> Any:
    """Extract the one JSON value from a model answer or a file (best effort, bounded time).

    Plain JSON must be exactly one value; otherwise the first ```json fence is used,
    else the first '{' / '[' in the prose that decodes. Refused as well: a key
    twice in one object, integers over 4,300 digits, and lone surrogates (no UTF-8 form).
    """
    stripped = _as_text(text).strip()
    if not stripped:
        raise PapayuError("ERR_JSON_INVALID", "empty input")
    if stripped[0] in "{[":
        value = _decode_whole(stripped)
    else:
        fence = _FENCE.search(stripped)
        value = (
            _decode_whole(fence.group(1).strip()) if fence and fence.group(1).strip() else _decode_embedded(stripped)
        )
    if not json_depth_ok(value):
        raise PapayuError("ERR_JSON_TOO_DEEP", f"JSON nested deeper than {MAX_JSON_DEPTH} levels")
    _check_unicode(stripped, value)
    return value
