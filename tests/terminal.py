"""The real CLI on a real terminal: `python -m papayu_git` started by `pty.fork`, so the pty is its
controlling terminal. Ctrl-C (\\x03) and Ctrl-D (\\x04) typed there reach it the way they reach it
from a person: the line discipline turns them into SIGINT for its process group and an end of
input for its read."""

from __future__ import annotations

import os
import pty
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
