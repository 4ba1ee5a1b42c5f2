"""Lock files under `.git/papayu/locks/` guarded by the owner's pid (docs/DESIGN.md,
"The transaction and its guarantees").

A lock is a small JSON file created with O_EXCL. It is stale when its process is
gone (or the pid was reused: the process start time differs). Every command
clears stale locks; what a dead owner left behind (its generated branch, git's
own `*.lock` files of refs it was updating) is cleaned by the caller via
``on_stale`` callbacks registered per lock kind.
"""

from __future__ import annotations

import hashlib
import json
import os
import re
import time
from collections.abc import Callable, Iterator, Mapping
from contextlib import contextmanager
from pathlib import Path
from typing import Any, NamedTuple

from papayu_git import atomic
from papayu_git.errors import PapayuError


def locks_dir(papayu_dir: Path) -> Path:
    return papayu_dir / "locks"


# Locks live only in these directories of `.git/papayu/` and in a repository's checkout pool, under
# names papayu makes (an id, a sanitized branch, a slot number): a name from outside can never make
# a lock path reach a user's file (a `yarn.lock` beside the repository's package.json).
LOCK_DIRS = ("locks", "checkouts", "worktrees")
POOLS = ("papayu-git", "checkouts")  # under the user's cache: one directory per repository


def checkout_pool(papayu_dir: Path) -> Path:
    """Where the check's checkouts of the repository whose papayu directory is ``papayu_dir``
    live, with their locks: the user's cache, outside every work tree, one directory per
    repository (its name and a digest of its papayu directory's real path). Under `.git/` the
    copies of the tests were found by the user's own scanners: `node --test` walks every directory
    but node_modules (docs/DESIGN.md, "The transaction and its guarantees")."""
    real = os.path.realpath(papayu_dir)
    digest = hashlib.sha256(real.encode("utf-8", "surrogateescape")).hexdigest()[:16]
    common = os.path.dirname(real)
    name = os.path.basename(os.path.dirname(common) if os.path.basename(common) == ".git" else common)
    name = re.sub(r"[^A-Za-z0-9._-]", "_", name)[:40].lstrip(".") or "repository"
    return Path(os.path.expanduser("~")) / ".cache" / POOLS[0] / POOLS[1] / f"{name}-{digest}"


_LOCK_NAME = re.compile(r"[A-Za-z0-9][A-Za-z0-9._-]{0,200}\.lock")
_LOCK_LEFTOVER = re.compile(r"\.[A-Za-z0-9][A-Za-z0-9._-]{0,200}\.lock\.(?:stale\.)?(\d+)\.\d+")


def check_path(path: Path) -> Path:
    """``path`` when it is one papayu may use as a lock, else ERR_INTERNAL (a bug: refused unused)."""
    parent = path.parent
    in_pool = (parent.parent.parent.name, parent.parent.name) == POOLS
    in_papayu = parent.name in LOCK_DIRS and parent.parent.name == "papayu"
    if _LOCK_NAME.fullmatch(path.name) is None or not (in_papayu or in_pool):
        raise PapayuError("ERR_INTERNAL", f"refusing to use {str(path)[:200]!r} as a lock file", path=str(path))
    return path


def process_start_time(pid: int) -> str:
    """Process start time from /proc (Linux); "" elsewhere, which disables the pid-reuse check."""
    try:
        stat = Path(f"/proc/{pid}/stat").read_text()
    except OSError:
        return ""
    return stat.rsplit(")", 1)[-1].split()[19]


def pid_alive(pid: int, start_time: str = "") -> bool:
    if not 0 < pid < 2**31:
        return False  # no such process (os.kill would overflow)
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    except PermissionError:
        return True
    if start_time:
        current = process_start_time(pid)
        if current and current != start_time:
            return False  # the pid now belongs to another process
    if Path(f"/proc/{pid}/stat").exists():
        state = Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[-1].split()[0]
        return state != "Z"  # a zombie holds nothing
    return True


class LockInfo(NamedTuple):
    path: Path
    pid: int
    start_time: str
    data: dict[str, Any]

    @property
    def alive(self) -> bool:
        return pid_alive(self.pid, self.start_time)

    @property
    def ours(self) -> bool:
        """The file parses as a lock papayu wrote (a pid and its start time). Anything else is
        never removed: papayu's locks are never half-written (see try_acquire)."""
        return 0 < self.pid < 2**31 and "start_time" in self.data


def read_lock(path: Path) -> LockInfo | None:
    try:
        data = json.loads(path.read_text(encoding="utf-8"))
        pid = data["pid"]
        if type(pid) is not int:
            raise TypeError("pid")
        return LockInfo(path, pid, str(data.get("start_time", "")), data)
    except FileNotFoundError:
        return None
    except (OSError, ValueError, KeyError, TypeError):
        return LockInfo(path, 0, "", {})  # not papayu's (LockInfo.ours is False): held, never removed


def try_acquire(path: Path, /, on_stale: StaleHandler | None = None, **data: Any) -> bool:
    """Create the lock atomically; clear it first when its owner is dead (after calling
    ``on_stale`` with the dead owner's lock, to clean what it left). False if held.

    The body is written to a private file first and hard-linked into place, so a lock is
    never visible half-written (a reader would take an empty lock for a dead one).
    """
    check_path(path).parent.mkdir(parents=True, exist_ok=True)
    pid = os.getpid()
    body = json.dumps({"pid": pid, "start_time": process_start_time(pid), "created": time.time(), **data})
    tmp = path.with_name(f".{path.name}.{pid}.{time.monotonic_ns()}")
    tmp.write_text(body, encoding="utf-8")
    try:
        for _ in range(5):
            try:
                os.link(tmp, path)
                return True
            except FileExistsError:
                info = read_lock(path)
                if info is None:
                    continue  # released meanwhile; never unlink here: it may be a new owner's lock
                if not info.ours or info.alive:
                    return False
                if on_stale is not None:
                    on_stale(info)
                remove_stale(info)
        return False
    finally:
        _unlink(tmp)


def remove_stale(info: LockInfo) -> None:
    """Remove the dead owner's lock ``info`` read earlier, and only that one: it is renamed
    away first, and put back if another process's live lock had replaced it meanwhile. Only a
    lock papayu wrote, in a lock directory, is ever removed."""
    if not info.ours:
        return
    check_path(info.path)
    grave = info.path.with_name(f".{info.path.name}.stale.{os.getpid()}.{time.monotonic_ns()}")
    try:
        os.rename(info.path, grave)
    except FileNotFoundError:
        return
    now = read_lock(grave)
    if now is not None and now.data != info.data:
        try:
            os.link(grave, info.path)
        except FileExistsError:
            pass
    _unlink(grave)


def _unlink(path: Path) -> None:
    try:
        path.unlink()
    except FileNotFoundError:
        pass


def update(path: Path, /, **data: Any) -> None:
    """Add ``data`` to a lock this process holds (e.g. the check's process group, so that the
    next command can kill what a killed papayu left running). Replaced atomically."""
    info = read_lock(check_path(path))
    if info is None or info.pid != os.getpid():
        return
    atomic.write_json(path, {**info.data, **data}, indent=None, newline=False)


def release(path: Path) -> None:
    info = read_lock(check_path(path))
    if info is not None and info.pid == os.getpid():
        _unlink(path)


@contextmanager
def held(path: Path, /, *, wait_sec: float = 30.0, what: str = "", **data: Any) -> Iterator[None]:
    """Hold the lock for the block, waiting up to ``wait_sec`` for another owner."""
    deadline = time.monotonic() + wait_sec
    while not try_acquire(path, **data):
        if time.monotonic() > deadline:
            info = read_lock(path)
            if info is not None and not info.ours:
                raise PapayuError(
                    "ERR_LOCKED",
                    f"{path.name} is not a lock papayu wrote",
                    path=str(path),
                    hint="No papayu running? Move that file away, then try again.",
                )
            raise PapayuError(
                "ERR_LOCKED", f"{what or path.name} is held by pid {info.pid if info else '?'}", path=str(path)
            )
        time.sleep(0.02)
    try:
        yield
    finally:
        release(path)


StaleHandler = Callable[[LockInfo], None]


def clear_stale(papayu_dir: Path, handlers: Mapping[str, StaleHandler] | None = None) -> list[LockInfo]:
    """Remove locks of dead processes, calling ``handlers[kind]`` first so leftovers are cleaned."""
    cleared: list[LockInfo] = []
    dirs = (locks_dir(papayu_dir), checkout_pool(papayu_dir), papayu_dir / "checkouts", papayu_dir / "worktrees")
    for directory in dirs:
        if not directory.is_dir():
            continue
        for tmp in directory.glob(".*.lock.*"):  # a body whose writer died before linking it
            owner = _LOCK_LEFTOVER.fullmatch(tmp.name)
            if owner is not None and not pid_alive(int(owner.group(1))):
                _unlink(tmp)
        for path in directory.glob("*.lock"):
            info = read_lock(path) if _LOCK_NAME.fullmatch(path.name) else None
            if info is None or not info.ours or info.alive:
                continue
            handler = (handlers or {}).get(str(info.data.get("kind", "")))
            if handler is not None:
                handler(info)
            remove_stale(info)
            cleared.append(info)
    return cleared
