"""`go test -json`: go's test events, one JSON object a line of the check's log.

Ids are the package's import path and the test's name (`example.com/calc.TestAdd`, subtests
`example.com/calc.TestTable/one`). A package that failed with no failing test (it did not
build; TestMain or a panic outside a test) is one ERROR under its import path. A test that
started and never ended (the run was killed, or its events cut from the log) is not listed.
"""

from __future__ import annotations

import json
from typing import Any

from papayu_git.check.results.outcome import MESSAGE_CHARS, CaseResult, Outcome

_TERMINAL = {"pass": Outcome.PASSED, "fail": Outcome.FAILED, "skip": Outcome.SKIPPED}
_KEPT_OUTPUT = 4 * MESSAGE_CHARS  # per test: its message is clipped from this
_NOISE = ("=== RUN", "=== PAUSE", "=== CONT", "=== NAME")


def read_go_json(log_text: str) -> list[CaseResult] | None:
    """None when the log holds no go test event."""
    tests: dict[tuple[str, str], Outcome] = {}
    packages: dict[str, tuple[Outcome, str]] = {}
    output: dict[tuple[str, str], str] = {}
    build: dict[str, str] = {}
    for line in log_text.splitlines():
        event = _event(line)
        if event is None:
            continue
        action, package, test = event["Action"], str(event.get("Package") or ""), str(event.get("Test") or "")
        text = str(event.get("Output") or "")
        if action == "build-output":
            key = str(event.get("ImportPath"))
            build[key] = build.get(key, "") + text
        elif action == "output" and not text.startswith(_NOISE) and len(output.get((package, test), "")) < _KEPT_OUTPUT:
            output[(package, test)] = output.get((package, test), "") + text
        elif action in _TERMINAL and test:
            tests[(package, test)] = _TERMINAL[action]
        elif action in _TERMINAL and package:
            packages[package] = (_TERMINAL[action], str(event.get("FailedBuild") or ""))
    if not tests and not packages:
        return None
    out = [
        CaseResult(f"{package}.{test}", outcome, output.get((package, test), "") if outcome is Outcome.FAILED else "")
        for (package, test), outcome in tests.items()
    ]
    failing = {package for (package, _), outcome in tests.items() if outcome is Outcome.FAILED}
    for package, (outcome, failed_build) in packages.items():
        if outcome is Outcome.FAILED and package not in failing:
            out.append(CaseResult(package, Outcome.ERROR, build.get(failed_build) or output.get((package, ""), "")))
    return out


def go_plain_text(log_text: str) -> str:
    """The log as go would have printed it without -json: each event's output in order, and every
    line that is not an event (papayu's own, other commands') as it is."""
    out = []
    for line in log_text.splitlines(keepends=True):
        event = _event(line)
        out.append(line if event is None else str(event.get("Output") or ""))
    return "".join(out)


class PlainLog:
    """Splits the check's output as it comes: go's events kept (for the reader, up to ``cap``
    bytes) and their text written to the log in their place, so the log reads as go would have
    printed it. The log is then no bigger than a direct run's output, and masking it, which
    costs by the byte, costs what it would (docs/DESIGN.md, "A verdict per test")."""

    def __init__(self, cap: int) -> None:
        self.cap = cap
        self.events = bytearray()
        self.pending = b""
        self.over = 0

    def feed(self, chunk: bytes) -> bytes:
        """What of ``chunk`` goes to the log now (complete lines, events as their text)."""
        data = self.pending + chunk
        end = data.rfind(b"\n") + 1
        self.pending = data[end:]
        return self._lines(data[:end])

    def flush(self) -> bytes:
        rest, self.pending = self.pending, b""
        return self._lines(rest)

    def _lines(self, data: bytes) -> bytes:
        out = bytearray()
        for line in data.splitlines(keepends=True):
            event = _event(line.decode("utf-8", "replace")) if line.startswith(b'{"') else None
            if event is None:
                out += line
                continue
            if len(self.events) + len(line) <= self.cap:
                self.events += line
            else:
                self.over += len(line)
            out += str(event.get("Output") or "").encode("utf-8", "replace")
        return bytes(out)


def _event(line: str) -> dict[str, Any] | None:
    if not line.startswith('{"'):
        return None
    try:
        event = json.loads(line)
    except ValueError:
        return None
    return event if isinstance(event, dict) and isinstance(event.get("Action"), str) else None
