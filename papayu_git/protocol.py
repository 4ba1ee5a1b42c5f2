"""The response protocol's value objects and text parsing (SPEC §2.1, §2.2).

Accepted forms: an array of actions (v1 only) or an object; JSON may arrive in a
```json fence or surrounded by prose. Actions come from `proposed_changes.actions`
when present, else from the root `actions`.
"""

from __future__ import annotations

import json
import re
from dataclasses import dataclass, field
from enum import Enum
from typing import Any

from papayu_git.errors import PapayuError

MAX_INPUT_BYTES = 32 * 1024 * 1024
MAX_JSON_DEPTH = 64


class ActionKind(str, Enum):
    CREATE_DIR = "CREATE_DIR"
    CREATE_FILE = "CREATE_FILE"
    UPDATE_FILE = "UPDATE_FILE"
    PATCH_FILE = "PATCH_FILE"
    DELETE_FILE = "DELETE_FILE"
    DELETE_DIR = "DELETE_DIR"


# SPEC §2.2 order of application.
APPLY_ORDER = {
    ActionKind.CREATE_DIR: 0, ActionKind.CREATE_FILE: 1, ActionKind.UPDATE_FILE: 1,
    ActionKind.PATCH_FILE: 1, ActionKind.DELETE_FILE: 2, ActionKind.DELETE_DIR: 3,
}
DELETING_KINDS = frozenset({ActionKind.DELETE_FILE, ActionKind.DELETE_DIR})
WRITING_KINDS = frozenset({ActionKind.CREATE_FILE, ActionKind.UPDATE_FILE, ActionKind.PATCH_FILE})


class Mode(str, Enum):
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
    """Actions of a response: `proposed_changes.actions` over root `actions` (seed 000 §2)."""
    if isinstance(data, list):
        return data
    if isinstance(data, dict):
        proposed = data.get("proposed_changes")
        if isinstance(proposed, dict) and "actions" in proposed:
            return proposed["actions"]
        return data.get("actions", [])
    return []


_FENCE = re.compile(r"```[ \t]*(?:json|JSON)?[ \t]*\r?\n(.*?)```", re.S)
_DECODER = json.JSONDecoder()


def _json_depth_ok(value: Any) -> bool:
    stack = [(value, 1)]
    while stack:
        item, depth = stack.pop()
        if depth > MAX_JSON_DEPTH:
            return False
        if isinstance(item, dict):
            stack.extend((v, depth + 1) for v in item.values())
        elif isinstance(item, list):
            stack.extend((v, depth + 1) for v in item)
    return True


def _decode_at(text: str, start: int) -> tuple[Any, int]:
    try:
        return _DECODER.raw_decode(text, start)
    except RecursionError:
        raise PapayuError("ERR_JSON_TOO_DEEP", f"JSON nested deeper than {MAX_JSON_DEPTH} levels") from None
    except json.JSONDecodeError as exc:
        if exc.pos >= len(text.rstrip()) or "Unterminated string" in exc.msg:
            raise PapayuError("ERR_JSON_TRUNCATED", f"JSON ends early: {exc.msg} at char {exc.pos}") from None
        raise PapayuError("ERR_JSON_INVALID", f"{exc.msg} at line {exc.lineno} column {exc.colno}") from None


def _check_tail(text: str, end: int) -> None:
    tail = text[end:].lstrip()
    if tail and tail[0] in "{}[],:\"":
        raise PapayuError("ERR_JSON_TRAILING_GARBAGE", f"unexpected {tail[:20]!r} after the JSON value")


def parse_json_text(text: str | bytes) -> Any:
    """Extract the one JSON value from a model answer or a file (best effort, bounded time)."""
    if isinstance(text, bytes):
        if len(text) > MAX_INPUT_BYTES:
            raise PapayuError("ERR_INPUT_TOO_LARGE", f"{len(text)} bytes (max {MAX_INPUT_BYTES})")
        try:
            text = text.decode("utf-8-sig")
        except UnicodeDecodeError as exc:
            raise PapayuError("ERR_JSON_INVALID", f"not UTF-8 text: {exc.reason} at byte {exc.start}") from None
    if len(text) > MAX_INPUT_BYTES:
        raise PapayuError("ERR_INPUT_TOO_LARGE", f"{len(text)} characters (max {MAX_INPUT_BYTES})")
    stripped = text.strip()
    if not stripped:
        raise PapayuError("ERR_JSON_INVALID", "empty input")
    if stripped[0] in "{[":
        value, end = _decode_at(stripped, 0)
        _check_tail(stripped, end)
    else:
        fence = _FENCE.search(stripped)
        if fence:
            body = fence.group(1).strip()
            value, end = _decode_at(body, 0)
            _check_tail(body, end)
        else:
            # Prose around the JSON: decode from the first '{' (or '[' when no object).
            starts = [i for i in (stripped.find("{"), stripped.find("[")) if i >= 0]
            if not starts:
                raise PapayuError("ERR_JSON_INVALID", "no JSON object or array in the text")
            value, end = _decode_at(stripped, min(starts))
            _check_tail(stripped, end)
    if not _json_depth_ok(value):
        raise PapayuError("ERR_JSON_TOO_DEEP", f"JSON nested deeper than {MAX_JSON_DEPTH} levels")
    return value
