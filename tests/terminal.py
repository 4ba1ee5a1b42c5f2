"""The real CLI on a real terminal: `python -m papayu_git` started by `pty.fork`, so the pty is its
controlling terminal. Ctrl-C (\\x03) and Ctrl-D (\\x04) typed there reach it the way they reach it
from a person: the line discipline turns them into SIGINT for its process group and an end of
input for its read."""

from __future__ import annotations

import os
import pty
import re
import select
import sys
import time
from pathlib import Path

from helpers import ROOT

CTRL_C, CTRL_D = b"\x03", b"\x04"


class Terminal:
    def __init__(self, args: list[str], cwd: Path, env: dict[str, str] | None = None) -> None:
        environ = {**os.environ, "GIT_PAGER": "cat", "PYTHONPATH": str(ROOT), **(env or {})}
        argv = [sys.executable, "-m", "papayu_git", *args]
        pid, fd = pty.fork()
        if pid == 0:  # the child: exec at once (the test process has threads)
            try:
                os.chdir(cwd)
                os.execve(sys.executable, argv, environ)
            finally:
                os._exit(127)
        self.pid, self.fd = pid, fd
        self.seen = b""
        self.returncode: int | None = None

    @property
    def text(self) -> str:
        """Everything the terminal showed so far (CRLF as the tty writes it, read as \\n)."""
        return self.seen.decode("utf-8", "replace").replace("\r\n", "\n")

    def _read(self, timeout: float) -> bool:
        """One read of what is there within ``timeout``; False at the end of the output."""
        if not select.select([self.fd], [], [], timeout)[0]:
            return True
        try:
            chunk = os.read(self.fd, 65536)
        except OSError:  # EIO: the child closed its side
            return False
        self.seen += chunk
        return bool(chunk)

    def expect(self, text: str, timeout: float = 240) -> str:
        """Wait until ``text`` is on the screen; returns the screen so far."""
        deadline = time.monotonic() + timeout
        while text not in self.text:
            assert time.monotonic() < deadline, f"no {text!r} on the terminal:\n{self.text}"
            if not self._read(0.5):
                assert text in self.text, f"papayu ended without {text!r}:\n{self.text}"
        return self.text

    def type(self, data: bytes) -> float:
        """Type ``data``; returns when it was typed (time.monotonic)."""
        os.write(self.fd, data)
        return time.monotonic()

    def wait(self, timeout: float = 120) -> int:
        """Read to the end of the output and reap the child: its exit code (128 + N for a signal)."""
        deadline = time.monotonic() + timeout
        while self._read(0.2):
            assert time.monotonic() < deadline, f"papayu still runs after {timeout}s:\n{self.text}"
        _pid, status = os.waitpid(self.pid, 0)
        os.close(self.fd)
        self.returncode = os.waitstatus_to_exitcode(status)
        return self.returncode if self.returncode >= 0 else 128 - self.returncode


_CSI = re.compile(r"\x1b\[(\d*)([A-Za-z])")


def screen(text: str) -> list[str]:
    """The lines a terminal shows for ``text`` (scrollback included), for what papayu draws in place:
    carriage returns (spinners), `ESC[nF` (to the start of the line n up) and `ESC[J` (erase to the
    end of the screen: a live table redrawn or taken away); colours are dropped."""
    lines, row, col, at = [""], 0, 0, 0
    while at < len(text):
        found = _CSI.match(text, at)
        if found:
            count, command = int(found.group(1) or 1), found.group(2)
            if command == "F":
                row, col = max(0, row - count), 0
            elif command == "J":
                del lines[row + 1 :]
                lines[row] = lines[row][:col]
            at = found.end()
            continue
        char = text[at]
        at += 1
        if char == "\n":
            row, col = row + 1, 0
            if row == len(lines):
                lines.append("")
        elif char == "\r":
            col = 0
        else:
            line = lines[row].ljust(col)
            lines[row] = line[:col] + char + line[col + 1 :]
            col += 1
    return [line.rstrip() for line in lines]
