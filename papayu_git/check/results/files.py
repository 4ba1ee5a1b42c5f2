"""Reading what the check wrote, as papayu on the host: the check is hostile (docs/DESIGN.md,
"The check's trust boundary"), so a report is read only as a regular file reached without
following a symbolic link (the check could point one at the user's keys), without blocking on a
FIFO, and up to a size."""

from __future__ import annotations

import fnmatch
import os
import stat
from collections.abc import Sequence
from pathlib import Path, PurePosixPath

from papayu_git.check.results.outcome import ReportUnreadable

MAX_REPORT_BYTES = 64 * 1024 * 1024
MAX_COPIED_FILES = 200


def read_report(base: Path, rel: str) -> bytes | None:
    """The bytes of ``base/rel``, None when it is not there. ``base`` is papayu's own directory;
    everything under it may have been made by the check."""
    parts = PurePosixPath(rel).parts
    try:
        fd = os.open(base, os.O_RDONLY | os.O_DIRECTORY)
    except FileNotFoundError:
        return None
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
            raise ReportUnreadable(f"{rel}: not a regular file")
        if info.st_size > MAX_REPORT_BYTES:
            raise ReportUnreadable(f"{rel}: {info.st_size} bytes, over {MAX_REPORT_BYTES}")
        with os.fdopen(fd, "rb") as handle:
            fd = -1
            return handle.read(MAX_REPORT_BYTES + 1)[:MAX_REPORT_BYTES]
    except FileNotFoundError:
        return None
    except OSError as exc:  # ELOOP: a symbolic link; ENOTDIR: a link or file where a directory was
        raise ReportUnreadable(f"{rel}: {exc.strerror or exc}") from None
    finally:
        if fd >= 0:
            os.close(fd)


def matching_files(base: Path, patterns: Sequence[str]) -> list[str]:
    """Paths under ``base`` (relative, sorted) of the regular files matching one of ``patterns``
    (shell globs from the repository's root: `*`, `?`, `[...]` within one path segment), found
    without following symbolic links."""
    wanted = [PurePosixPath(p).parts for p in patterns]
    found: list[str] = []
    for top, dirs, files in os.walk(base, followlinks=False):
        dirs.sort()
        for name in sorted(files):
            rel = PurePosixPath(os.path.relpath(os.path.join(top, name), base))
            if any(_matches(rel.parts, parts) for parts in wanted) and not os.path.islink(os.path.join(top, name)):
                found.append(str(rel))
                if len(found) >= MAX_COPIED_FILES:
                    return found
    return found


def _matches(parts: tuple[str, ...], pattern: tuple[str, ...]) -> bool:
    return len(parts) == len(pattern) and all(fnmatch.fnmatchcase(p, q) for p, q in zip(parts, pattern, strict=True))


def relative_to_root(path: str, root: str) -> str:
    """``path`` from ``root`` when it is an absolute path under it (runners that name test files
    absolutely: the root differs between a sandboxed and an unsandboxed check)."""
    base = root.rstrip("/")
    if base and path.startswith(base + "/"):
        return path[len(base) + 1 :]
    return path
