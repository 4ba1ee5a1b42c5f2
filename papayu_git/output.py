"""The one place that prints (STYLE.md §5): results on stdout, events and progress on stderr."""

from __future__ import annotations

import json
import os
import sys
import threading
import time
from collections.abc import Iterator, Mapping
from contextlib import contextmanager
from typing import Any, TextIO

_COLOURS = {"red": "31", "green": "32", "yellow": "33", "cyan": "36", "bold": "1", "dim": "2"}


def is_tty(stream: TextIO) -> bool:
    try:
        return stream.isatty()
    except (AttributeError, ValueError):
        return False


def use_colour(stream: TextIO) -> bool:
    if os.environ.get("NO_COLOR"):
        return False
    if os.environ.get("PAPAYU_COLOR") == "always":
        return True
    return is_tty(stream)


def colour(text: str, name: str, stream: TextIO | None = None) -> str:
    if not use_colour(stream or sys.stdout):
        return text
    return f"\033[{_COLOURS[name]}m{text}\033[0m"


def result(text: str = "") -> None:
    """A line of the command's result (stdout)."""
    print(text, file=sys.stdout, flush=True)


def info(text: str) -> None:
    """Human progress/notes (stderr), so stdout stays clean for --json and pipes."""
    print(text, file=sys.stderr, flush=True)


def warn(text: str) -> None:
    print(colour(f"warning: {text}", "yellow", sys.stderr), file=sys.stderr, flush=True)


def error(text: str) -> None:
    print(colour(text, "red", sys.stderr), file=sys.stderr, flush=True)


def emit_json(data: Any) -> None:
    json.dump(data, sys.stdout, ensure_ascii=False, indent=2, sort_keys=False, default=str)
    sys.stdout.write("\n")
    sys.stdout.flush()


def events_enabled() -> bool:
    return os.environ.get("PAPAYU_LOG", "") not in ("", "0", "off")


def _format_value(value: object) -> str:
    text = value if isinstance(value, str) else json.dumps(value, ensure_ascii=False, default=str)
    if text == "" or any(c in text for c in ' "=\n'):
        return json.dumps(text, ensure_ascii=False)
    return text


def format_event(name: str, fields: Mapping[str, object]) -> str:
    """`EVENT key=value ...`: one stable, grep-able format (SPEC §7)."""
    parts = [name] + [f"{k}={_format_value(v)}" for k, v in fields.items()]
    return " ".join(parts)


def event(name: str, **fields: object) -> None:
    """A stderr event (LLM_REQUEST_SENT, APPLY_SUCCESS, ...), shown with -v or PAPAYU_LOG=1."""
    if events_enabled():
        from papayu_git.secrets import masker

        # Mask each value before quoting (a quoted password with spaces), then the whole line.
        mask = masker()
        masked = {k: mask(v) if isinstance(v, str) else v for k, v in fields.items()}
        print(mask(format_event(name, masked)), file=sys.stderr, flush=True)


@contextmanager
def progress(label: str) -> Iterator[None]:
    """A spinner with elapsed time on a TTY; silent when stderr is not a terminal (SPEC §1)."""
    if not is_tty(sys.stderr):
        yield
        return
    done = threading.Event()
    start = time.monotonic()

    def spin() -> None:
        frames = "|/-\\"
        i = 0
        while not done.wait(0.1):
            sys.stderr.write(f"\r{frames[i % 4]} {label} {time.monotonic() - start:5.1f}s")
            sys.stderr.flush()
            i += 1

    thread = threading.Thread(target=spin, daemon=True)
    thread.start()
    try:
        yield
    finally:
        done.set()
        thread.join()
        sys.stderr.write(f"\r{' ' * (len(label) + 12)}\r")
        sys.stderr.flush()
