"""The one place that prints (docs/ARCHITECTURE.md, "Conventions"): results on stdout, events and progress on stderr.

Nothing printed here carries a terminal control sequence papayu did not write itself:
text from the model, a check or a file goes through ``secrets.printable`` (via
``secrets.safe_text``, which also masks), and every line is filtered once more on its
way out, keeping only papayu's own colours (docs/FEATURES.md, "Masking secrets").
"""

from __future__ import annotations

import json
import os
import re
import sys
import threading
import time
from collections.abc import Callable, Collection, Iterator, Mapping
from contextlib import contextmanager
from typing import Any, TextIO

from papayu_git.secrets import FILE_CONTENTS, TEXT_CONTROLS, escape_control, mask_data, masker, printable, safe_text

_COLOURS = {"red": "31", "green": "32", "yellow": "33", "cyan": "36", "bold": "1", "dim": "2"}


# papayu's own colours pass; every other control is escaped as printable escapes it (secrets.py).
_OWN_OR_CONTROL = re.compile("(\x1b\\[(?:%s)m)|%s" % ("|".join(sorted({*_COLOURS.values(), "0"})), TEXT_CONTROLS))


def _own_or_escaped(match: re.Match[str]) -> str:
    return match.group(1) or escape_control(match)


def _write(text: str, stream: TextIO) -> None:
    """The way out for every line: control characters escaped, papayu's colours kept; above a
    live table, when one is on stderr."""
    board = _live
    if board is None or stream is not sys.stderr:
        print(_OWN_OR_CONTROL.sub(_own_or_escaped, text), file=stream, flush=True)
        return
    with board.lock:
        board.erase()
        print(_OWN_OR_CONTROL.sub(_own_or_escaped, text), file=stream, flush=True)
        board.draw()


class _Board:
    """The lines of a live table at the bottom of stderr (``live``): papayu's own cursor moves only."""

    def __init__(self) -> None:
        self.lines: list[str] = []
        self.lock = threading.Lock()

    def erase(self) -> None:
        if self.lines:
            sys.stderr.write(f"\033[{len(self.lines)}F\033[J")

    def draw(self) -> None:
        for line in self.lines:
            sys.stderr.write(_OWN_OR_CONTROL.sub(_own_or_escaped, line) + "\n")
        sys.stderr.flush()


_live: _Board | None = None
_quiet = threading.local()


@contextmanager
def live() -> Iterator[Callable[[list[str]], None]]:
    """An updater of lines redrawn in place at the bottom of stderr on a terminal (best-of's table,
    docs/DESIGN.md, "Best of N"); other stderr lines print above them, spinners are off. The
    caller prints the final table as a result, once: the live one is erased when the block ends
    (and left on the screen when an exception, a Ctrl-C, cuts it short). Elsewhere the updater
    does nothing."""
    global _live
    if not is_tty(sys.stderr) or _live is not None:
        yield lambda lines: None
        return
    import shutil

    board = _live = _Board()
    width = max(20, shutil.get_terminal_size().columns - 1)  # a wrapped line would break the redraw

    def update(lines: list[str]) -> None:
        with board.lock:
            board.erase()
            board.lines = [printable(line)[:width] for line in lines]
            board.draw()

    try:
        yield update
    except BaseException:
        _live = None  # what the run had reached stays on the screen
        raise
    with board.lock:
        board.erase()
        board.lines = []
    _live = None


@contextmanager
def quiet() -> Iterator[None]:
    """In this thread, info, warn and progress print nothing (events still do): best-of asks its
    models in threads under a live table, and what they would say is recorded in their plans."""
    _quiet.on = True
    try:
        yield
    finally:
        _quiet.on = False


def _quieted() -> bool:
    return bool(getattr(_quiet, "on", False))


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


_paging: list[str] | None = None  # result lines held for the pager (see paged)


def result(text: str = "") -> None:
    """A line of the command's result (stdout)."""
    if _paging is not None:
        _paging.append(_OWN_OR_CONTROL.sub(_own_or_escaped, text))
        return
    _write(text, sys.stdout)


def pager_command() -> str | None:
    """The pager git would use: GIT_PAGER, core.pager, PAGER, else less; none when it is
    empty or `cat`, or when stdout is not a terminal."""
    if not is_tty(sys.stdout):
        return None
    command = os.environ.get("GIT_PAGER")
    if command is None:
        import subprocess

        found = subprocess.run(["git", "config", "core.pager"], capture_output=True, text=True)
        command = found.stdout.strip() if found.returncode == 0 else os.environ.get("PAGER", "less")
    return None if command.strip() in ("", "cat") else command


@contextmanager
def paged() -> Iterator[None]:
    """Results printed inside go through the user's pager on a terminal (with git's LESS=FRX
    default, so a short text is printed and the pager quits); elsewhere they print as usual."""
    global _paging
    command = pager_command()
    if command is None or _paging is not None:
        yield
        return
    lines: list[str] = []
    _paging = lines
    try:
        yield
    finally:
        _paging = None
        _page("\n".join(lines) + "\n", command)


def _page(text: str, command: str) -> None:
    import subprocess

    env = {**os.environ, "LESS": os.environ.get("LESS", "FRX"), "LV": os.environ.get("LV", "-c")}
    sys.stdout.flush()
    try:
        proc = subprocess.run(command, shell=True, input=text.encode(), env=env, check=False)
    except OSError:
        proc = None
    if proc is None or proc.returncode == 127:  # no such pager: print it plainly
        sys.stdout.write(text)
        sys.stdout.flush()


def info(text: str) -> None:
    """Human progress/notes (stderr), so stdout stays clean for --json and pipes."""
    if not _quieted():
        _write(text, sys.stderr)


def warn(text: str) -> None:
    if not _quieted():
        _write(colour(f"warning: {text}", "yellow", sys.stderr), sys.stderr)


def notice(text: str) -> None:
    """A warning said even where others are quiet: the settings' notices (a deprecated name, an
    unknown key), each said once per process (settings.notices_to) wherever it is first read."""
    _write(colour(f"warning: {text}", "yellow", sys.stderr), sys.stderr)


def error(text: str) -> None:
    _write(colour(text, "red", sys.stderr), sys.stderr)


# JSON escapes C0 itself; DEL and C1 it would write raw with ensure_ascii=False.
_JSON_RAW_CONTROLS = {c: f"\\u{c:04x}" for c in range(0x7F, 0xA0)}


def emit_json(data: Any, verbatim: Collection[str] = ()) -> None:
    """``data`` as JSON on stdout, every string masked (secrets.mask_data) but the file
    contents of actions (secrets.FILE_CONTENTS) and the values of the keys in ``verbatim``."""
    text = json.dumps(
        mask_data(data, keep=FILE_CONTENTS | set(verbatim)), ensure_ascii=False, indent=2, sort_keys=False, default=str
    )
    sys.stdout.write(text.translate(_JSON_RAW_CONTROLS) + "\n")
    sys.stdout.flush()


def events_enabled() -> bool:
    return os.environ.get("PAPAYU_LOG", "") not in ("", "0", "off")


def _format_value(value: object) -> str:
    text = value if isinstance(value, str) else json.dumps(value, ensure_ascii=False, default=str)
    if text == "" or any(c in text for c in ' "=\n'):
        return json.dumps(text, ensure_ascii=False)
    return text


def format_event(name: str, fields: Mapping[str, object]) -> str:
    """`EVENT key=value ...`: one stable, grep-able format (docs/DESIGN.md, "Traces")."""
    parts = [name] + [f"{k}={_format_value(v)}" for k, v in fields.items()]
    return " ".join(parts)


def event(name: str, **fields: object) -> None:
    """A stderr event (LLM_REQUEST_SENT, APPLY_SUCCESS, ...), shown with -v or PAPAYU_LOG=1."""
    if events_enabled():
        # Mask each value before quoting (a quoted password with spaces), then the whole line.
        mask = masker()
        masked = {k: mask(v) if isinstance(v, str) else v for k, v in fields.items()}
        _write(mask(format_event(name, masked)), sys.stderr)


def confirm(question: str, default: bool = False) -> bool:
    """Ask a yes/no question on stderr and read the answer from stdin: Ctrl-C raises
    KeyboardInterrupt, Ctrl-D click's Abort (its ``__context__`` an EOFError), as click.confirm.

    Not click.confirm: it reads through input(), which writes the prompt and then blocks in
    read(); a Ctrl-C that lands between the two is handled by Python's signal handler and never
    interrupts the read, so the question waits for Enter (a person typing Ctrl-C the moment the
    question shows hit it about once in two). Here the read is a select() loop of short waits,
    after each of which a pending Ctrl-C is raised."""
    import click

    choices = "[Y/n]" if default else "[y/N]"
    while True:
        sys.stderr.write(f"{question} {choices}: ")
        sys.stderr.flush()
        try:
            answer = _read_line(sys.stdin).strip().lower()
        except EOFError:
            raise click.Abort() from None  # __context__ stays the EOFError: Ctrl-D
        if answer in ("y", "yes"):
            return True
        if answer in ("n", "no"):
            return False
        if not answer:
            return default
        sys.stderr.write("Error: invalid input\n")


def _read_line(stream: TextIO) -> str:
    import select

    fd, got = stream.fileno(), b""
    while True:
        if not select.select([fd], [], [], 0.2)[0]:
            continue  # a Ctrl-C that came before the select is raised here
        chunk = os.read(fd, 4096)
        if not chunk:
            if got:
                return got.decode("utf-8", "replace")
            raise EOFError
        got += chunk
        if b"\n" in got:
            return got.split(b"\n", 1)[0].decode("utf-8", "replace")


# The terminal's signals are for the main thread: a read of the user's answer or a wait on a
# lock is interrupted only by a signal delivered to the thread doing it, and the kernel gives a
# process's signal to any thread that does not block it. A Ctrl-C that reached a helper thread
# left the question waiting for Enter. Every thread papayu starts blocks them
# (docs/ARCHITECTURE.md, "Conventions").
_MAIN_SIGNALS = ("SIGINT", "SIGTERM", "SIGHUP", "SIGALRM")


def block_signals() -> None:
    """Block the terminal's signals in the calling thread (a thread pool's ``initializer``)."""
    import signal

    if hasattr(signal, "pthread_sigmask"):
        signal.pthread_sigmask(signal.SIG_BLOCK, {getattr(signal, n) for n in _MAIN_SIGNALS if hasattr(signal, n)})


def start_thread(thread: threading.Thread) -> threading.Thread:
    """Start ``thread`` with the terminal's signals blocked in it (a new thread inherits the
    mask of the one that starts it); a signal arriving meanwhile waits for the caller."""
    import signal

    if not hasattr(signal, "pthread_sigmask"):
        thread.start()
        return thread
    wanted = {getattr(signal, n) for n in _MAIN_SIGNALS if hasattr(signal, n)}
    before = signal.pthread_sigmask(signal.SIG_BLOCK, wanted)
    try:
        thread.start()
    finally:
        signal.pthread_sigmask(signal.SIG_SETMASK, before)
    return thread


_labels: list[str] = []  # the live spinners' labels, innermost last: stage() renames the innermost


@contextmanager
def progress(label: str) -> Iterator[None]:
    """A spinner with elapsed time on a TTY; silent when stderr is not a terminal (or holds a live
    table). ``stage`` renames it while it spins (what it waits for now)."""
    if not is_tty(sys.stderr) or _live is not None or _quieted():
        yield
        return

    _labels.append(safe_text(label))  # written with \r, past _write
    done = threading.Event()
    start = time.monotonic()
    width = [len(_labels[-1])]

    def spin() -> None:
        frames = "|/-\\"
        i = 0
        while not done.wait(0.1):
            shown = _labels[-1] if _labels else label
            pad = " " * max(0, width[0] - len(shown))
            width[0] = len(shown)
            sys.stderr.write(f"\r{frames[i % 4]} {shown} {time.monotonic() - start:5.1f}s{pad}")
            sys.stderr.flush()
            i += 1

    thread = start_thread(threading.Thread(target=spin, daemon=True))
    try:
        yield
    finally:
        done.set()
        thread.join()
        _labels.pop()
        sys.stderr.write(f"\r{' ' * (width[0] + 12)}\r")
        sys.stderr.flush()


def stage(label: str) -> None:
    """What the innermost spinner waits for from now on (a no-op without one)."""
    if _labels:
        _labels[-1] = safe_text(label)
