"""The check's first process: runs the user's command as its child and, once it ended, sends
the reports the runners wrote to papayu (docs/DESIGN.md, "A verdict per test").

Runs inside the sandbox as its pid 1 (bwrap --as-pid-1), from papayu's own read-only directory,
with nothing but the interpreter's standard library (`python -I -S inside.py CONFIG -- COMMAND`):
papayu's package is not visible there. Being pid 1, nothing in the check can kill it; being
not dumpable, nothing can open its descriptors through /proc; the report pipe is closed in the
command's processes. So whatever the command does (`exit`, `exec`, a trap, `os._exit`, a
background process rewriting a report), its reports are read only after it and everything it
started are gone: the command ends, the rest of the sandbox is killed, then the known report
files (and, under the root, the `papayu.check.junit` files and Maven's or Gradle's reports, when
last changed after the command started) are sent, framed, with a note of what was wrong, and
last the command's exit code:

    F <name bytes> <data bytes>\\n NAME DATA       a report
    U <name bytes> <reason bytes>\\n NAME REASON   a report that is there and was not sent
    N <bytes>\\n TEXT                            a note
    E <exit code>\\n                             the end

Unsandboxed (no pid namespace) the command runs in a process group of its own, which is killed
instead; a process that left that group is not stopped.

The stream (pytest's and unittest's records) is a pipe the command inherits. A launcher that
closes every descriptor it did not name (tox, nox, Python's subprocess) leaves the runner it
starts without it, so the stream has a second door: a FIFO in the report directory, which this
process relays into the pipe until the command and everything it started have ended. Any
process of the check could write to either door; they are the same trust.
"""

from __future__ import annotations

import fnmatch
import json
import os
import select
import signal
import stat
import sys
import threading
import time
from collections.abc import Iterator, Sequence

MAX_REPORT_BYTES = 64 * 1024 * 1024  # one report
MAX_REPORTS_BYTES = 128 * 1024 * 1024  # all of one run's
MAX_REPORT_FILES = 200
MANY_ENTRIES = 1000  # a report directory holding more than this is named in a note
MAX_DIRS_WALKED = 20000  # directories one report search may list (`**` in a large tree)
MAX_DEPTH = 12  # directories `**` goes down
CLOCK_SLACK_SEC = 1.0  # a file's time comes from a coarser clock than time.time()
_FULL_BYTES = 64 * 1024


def read_file(base: str, rel: str) -> tuple[bytes | None, str]:
    """The bytes of ``base/rel`` (None, "" when it is not there; None and why when it cannot be
    read), reached without following a symbolic link, without blocking on a FIFO, up to a size."""
    parts = [p for p in rel.split("/") if p]
    try:
        fd = os.open(base, os.O_RDONLY | os.O_DIRECTORY)
    except OSError:
        return None, ""
    try:
        for part in parts[:-1]:
            inner = os.open(part, os.O_RDONLY | os.O_DIRECTORY | os.O_NOFOLLOW, dir_fd=fd)
            os.close(fd)
            fd = inner
        inner = os.open(parts[-1], os.O_RDONLY | os.O_NOFOLLOW | os.O_NONBLOCK, dir_fd=fd)
        os.close(fd)
        fd = inner
        info = os.fstat(fd)
        if not stat.S_ISREG(info.st_mode):
            return None, "not a regular file"
        if info.st_size > MAX_REPORT_BYTES:
            return None, f"{info.st_size} bytes, over {MAX_REPORT_BYTES}"
        with os.fdopen(fd, "rb") as handle:
            fd = -1
            return handle.read(MAX_REPORT_BYTES + 1)[:MAX_REPORT_BYTES], ""
    except FileNotFoundError:
        return None, ""
    except OSError as exc:  # ELOOP: a symbolic link; ENOTDIR: a link or file where a directory was
        return None, exc.strerror or str(exc)
    finally:
        if fd >= 0:
            os.close(fd)


def matching_files(base: str, patterns: list[str]) -> list[str]:
    """Paths under ``base`` (relative, sorted, at most MAX_REPORT_FILES) of the regular files
    matching one of ``patterns`` (globs from the root: `*`, `?`, `[...]` within one segment, `**`
    for any number of directories), expanded one segment at a time without following symbolic
    links."""
    found: list[str] = []
    budget = [MAX_DIRS_WALKED]
    for pattern in patterns:
        for rel in _expand(base, "", [p for p in pattern.split("/") if p], budget, 0):
            if rel not in found:
                found.append(rel)
            if len(found) >= MAX_REPORT_FILES:
                return found
    return found


def _expand(base: str, rel: str, parts: list[str], budget: list[int], depth: int) -> Iterator[str]:
    if parts[0] == "**":
        yield from _deeper(base, rel, parts, budget, depth)
        return
    for entry in _listing(base, rel, budget):
        if not fnmatch.fnmatchcase(entry.name, parts[0]):
            continue
        sub = f"{rel}/{entry.name}" if rel else entry.name
        if len(parts) == 1 and entry.is_file(follow_symlinks=False):
            yield sub
        elif len(parts) > 1 and entry.is_dir(follow_symlinks=False):
            yield from _expand(base, sub, parts[1:], budget, depth + 1)


def _deeper(base: str, rel: str, parts: list[str], budget: list[int], depth: int) -> Iterator[str]:
    """`**`: none or more directories; never a hidden one, node_modules, or the directory the
    next segment names (`**/target/...` does not search inside `target`), at most MAX_DEPTH deep."""
    rest = parts[1:]
    if not rest:
        return
    yield from _expand(base, rel, rest, budget, depth)
    if depth >= MAX_DEPTH:
        return
    for entry in _listing(base, rel, budget):
        skip = entry.name.startswith(".") or entry.name in ("node_modules", rest[0])
        if not skip and entry.is_dir(follow_symlinks=False):
            yield from _deeper(base, f"{rel}/{entry.name}" if rel else entry.name, parts, budget, depth + 1)


def _listing(base: str, rel: str, budget: list[int]) -> list[os.DirEntry[str]]:
    if budget[0] <= 0:
        return []
    budget[0] -= 1
    try:
        with os.scandir(os.path.join(base, rel) if rel else base) as listing:
            return sorted(listing, key=lambda e: e.name)
    except OSError:
        return []


def collect(
    report_dir: str,
    names: list[str],
    root: str,
    junit: list[str],
    tools: list[list[str]] | None = None,
    since: float | None = None,
    globs: Sequence[str] = (),
) -> Iterator[tuple[str, bytes | None, str]]:
    """(name, bytes or None, why not) of each report there: ``names`` (or globs) in
    ``report_dir``, then the ``junit`` globs under ``root`` as `junit/<path>`, and each
    (directory, glob) of ``tools`` under ``root`` as `<directory>/<path>`; at most
    MAX_REPORTS_BYTES in all. Files under the root last changed before ``since`` (the check's
    start) are no results of this check (a build of the user's, seen through the overlay of
    `target/`): said as one entry named "older", not read."""
    total = 0
    wanted = [(report_dir, r, r) for r in _names(report_dir, names)]
    wanted += [(report_dir, r, r) for r in matching_files(report_dir, list(globs))]  # the selective check's
    wanted += [(root, r, f"junit/{r}") for r in matching_files(root, junit)]
    for directory, glob in tools or []:
        wanted += [(root, r, f"{directory}/{r}") for r in matching_files(root, [glob])]
    older = []
    for base, rel, name in wanted:
        if base == root and since is not None and _older(os.path.join(root, rel), since):
            older.append(rel)
            continue
        data, why = read_file(base, rel)
        if data is not None and total + len(data) > MAX_REPORTS_BYTES:
            data, why = None, f"over the {MAX_REPORTS_BYTES} bytes all reports may have"
        if data is not None or why:
            total += len(data or b"")
            yield name, data, why
    if older:
        yield OLDER, None, f"{len(older)} report(s) older than the check, not read: {', '.join(older[:3])}"


OLDER = "older"


def _names(report_dir: str, names: list[str]) -> list[str]:
    out: list[str] = []
    for name in names:
        out += matching_files(report_dir, [name]) if any(c in name for c in "*?[") else [name]
    return out


def _older(path: str, since: float) -> bool:
    try:
        return os.lstat(path).st_mtime < since - CLOCK_SLACK_SEC
    except OSError:
        return False


def report_dir_notes(report_dir: str) -> list[str]:
    """What a check did to the report directory beyond writing reports: filled it, or filled it
    with files."""
    notes = []
    try:
        info = os.statvfs(report_dir)
        if info.f_bavail * info.f_frsize < _FULL_BYTES:
            notes.append(f"the report directory was full ({info.f_blocks * info.f_frsize // (1024 * 1024)} MiB)")
        with os.scandir(report_dir) as listing:
            count = sum(1 for _ in zip(range(MANY_ENTRIES * 100 + 1), listing, strict=False))
        if count > MANY_ENTRIES:
            more = "more than " if count > MANY_ENTRIES * 100 else ""
            notes.append(f"the report directory held {more}{min(count, MANY_ENTRIES * 100)} entries")
    except OSError:
        pass
    return notes


def send(out: int, config: dict[str, object], exit_code: int, since: float | None = None) -> None:
    with os.fdopen(out, "wb") as pipe:
        report_dir, root = str(config["report_dir"]), str(config["root"])
        for note in report_dir_notes(report_dir):
            pipe.write(_frame("N", note.encode()))
        names = [str(n) for n in config["names"]]  # type: ignore[attr-defined]
        junit = [str(g) for g in config["junit"]]  # type: ignore[attr-defined]
        globs = [str(g) for g in config.get("globs", [])]  # type: ignore[attr-defined]
        tools = [[str(d), str(g)] for d, g in config.get("tools") or []]  # type: ignore[attr-defined]
        for name, data, why in collect(report_dir, names, root, junit, tools, since, globs):
            if name == OLDER:
                pipe.write(_frame("N", why.encode()))
                continue
            kind, body = ("F", data) if data is not None else ("U", why.encode())
            pipe.write(f"{kind} {len(name.encode())} {len(body)}\n".encode() + name.encode() + body)
        pipe.write(f"E {exit_code}\n".encode())


def _frame(kind: str, body: bytes) -> bytes:
    return f"{kind} {len(body)}\n".encode() + body


def _undumpable() -> None:
    """Nothing else in the sandbox may open this process's descriptors (/proc/1/fd) or memory."""
    try:
        import ctypes

        ctypes.CDLL(None).prctl(4, 0, 0, 0, 0)  # PR_SET_DUMPABLE, 0
    except (ImportError, OSError, AttributeError):
        pass


def _start(command: list[str], keep: int) -> int:
    pid = os.fork()
    if pid == 0:
        try:
            os.setpgid(0, 0)
            if keep >= 0:
                os.set_inheritable(keep, True)
            os.execvp(command[0], command)
        finally:
            os._exit(127)
    return pid


def _wait(child: int) -> int:
    """The child's exit code, as a shell gives it (128 + N when killed by signal N); as pid 1,
    every orphan that ends meanwhile is reaped."""
    while True:
        pid, status = os.waitpid(-1, 0)
        if pid == child:
            code = os.waitstatus_to_exitcode(status)
            return code if code >= 0 else 128 - code


def _stop_the_rest(child: int, pid1: bool) -> None:
    if not pid1:
        try:
            os.killpg(child, signal.SIGKILL)
        except OSError:
            pass
        return
    for _ in range(100):  # kill(-1): every process of the namespace but this one
        try:
            os.kill(-1, signal.SIGKILL)
        except ProcessLookupError:
            return
        try:
            while True:
                os.waitpid(-1, 0)
        except ChildProcessError:
            pass


def _killed(child: int) -> None:
    try:
        os.killpg(child, signal.SIGKILL)
    finally:
        os._exit(143)


class _Relay(threading.Thread):
    """Copies what the FIFO at ``path`` receives into the stream pipe, until told to stop; then
    what is left in it, and closes the pipe."""

    def __init__(self, path: str, stream: int) -> None:
        super().__init__(daemon=True)
        os.mkfifo(path, 0o600)
        self.read = os.open(path, os.O_RDONLY | os.O_NONBLOCK)
        self.hold = os.open(path, os.O_WRONLY)  # no end of file while no writer is there
        self.stream = stream
        self.done = threading.Event()
        self.start()

    def run(self) -> None:
        while not self.done.is_set():
            if select.select([self.read], [], [], 0.2)[0]:
                self._copy()

    def _copy(self) -> None:
        try:
            while chunk := os.read(self.read, 65536):
                view = memoryview(chunk)
                while view:
                    view = view[os.write(self.stream, view) :]
        except BlockingIOError:
            pass

    def finish(self) -> None:
        self.done.set()
        self.join()
        self._copy()
        for fd in (self.read, self.hold, self.stream):
            os.close(fd)


def _relay(config: dict[str, object], stream: int) -> _Relay | None:
    name = config.get("stream_fifo")
    if stream < 0 or not isinstance(name, str) or not name:
        return None
    try:
        return _Relay(os.path.join(str(config["report_dir"]), name), stream)
    except OSError:
        return None


def main(argv: list[str]) -> int:
    config = json.loads(argv[1])
    command = argv[3:]
    out, stream = int(config["files_fd"]), int(config["stream_fd"])
    pid1 = os.getpid() == 1
    if pid1:
        _undumpable()
    if out >= 0:
        os.set_inheritable(out, False)
    relay = _relay(config, stream)
    since = time.time()
    child = _start(command, stream)
    if stream >= 0 and relay is None:
        os.close(stream)
    # Outside a sandbox, papayu's timeout signals this process's group, not the child's own.
    signal.signal(signal.SIGTERM, lambda *_: _killed(child))
    code = _wait(child)
    _stop_the_rest(child, pid1)
    if relay is not None:
        relay.finish()
    if out >= 0:
        send(out, config, code, since)
    return code


if __name__ == "__main__":
    sys.exit(main(sys.argv))
