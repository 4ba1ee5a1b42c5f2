"""Preparing the check's checkout while the model thinks (docs/DESIGN.md, "The check's trust boundary").

`plan` and `fix` call ``start`` before they ask the model: it spawns ``python -m
papayu_git.prewarm ROOT`` in its own session, detached from the terminal, and returns at once.
That process moves a free pool slot to the tip the plan will be built on (creating the slot, one
full checkout, when there is none) and releases it, so that the check later finds a slot where
only the plan's files differ (worktree.acquire_checkout prefers it). A process, not a thread:
`plan` exits long before the user runs `apply ID`, and the preparation must be able to finish.

It writes only under `.git/papayu/` (a lock in `locks/`) and in the repository's checkout pool (the
slot: worktree.py), runs no code
of the repository (papayu's own git calls with the slot's own config, as for the check), holds
the slot's lock while it works (a running check never shares a slot), gives up after
``TIMEOUT_SEC``, and one runs at a time per repository. A kill -9 at any point leaves a stale
lock, cleared by the next command (housekeeping.clear_stale, killing its git), and at worst a
half-made slot that the next use recreates.
"""

from __future__ import annotations

import signal
import subprocess
import sys
import time
from pathlib import Path
from typing import Any

from papayu_git import locks, output, settings
from papayu_git.check import resolve_command
from papayu_git.errors import PapayuError
from papayu_git.git import papayu_dir, scrubbed_env
from papayu_git.housekeeping import dead_check
from papayu_git.landing import resolve_target
from papayu_git.objects import GitTree
from papayu_git.repository import open_repo
from papayu_git.worktree import prewarm_slot

TIMEOUT_SEC = 600  # a full checkout took 3-33 s at 10k-50k files; past this the plan is long done
LOCK_NAME = "prewarm.lock"
_spawned: list[subprocess.Popen[bytes]] = []  # kept, so that no ResourceWarning is raised for them


def enabled(repo_root: Path, *, no_check: bool = False) -> bool:
    return not no_check and settings.get_bool("check_prewarm", str(repo_root))


def start(repo_root: Path, *, check: str | None = None, no_check: bool = False, onto: str | None = None) -> bool:
    """Start preparing the check's checkout in the background; False when it is off
    (``papayu.check.prewarm=false``, ``--no-check``) or could not be started. Whether a check
    command resolves, and whether the repository has a commit, is judged by the background
    process itself: that needs the tip's tree, which `plan` need not open before the model."""
    if not enabled(repo_root, no_check=no_check):
        return False
    argv = [sys.executable, "-m", "papayu_git.prewarm", str(repo_root)]
    argv += ["--onto", onto] if onto else []
    argv += ["--explicit-check"] if check else []
    try:
        proc = subprocess.Popen(
            argv,
            cwd=repo_root,
            stdin=subprocess.DEVNULL,
            stdout=subprocess.DEVNULL,
            stderr=subprocess.DEVNULL,
            start_new_session=True,  # no terminal: ^C and a closed terminal reach papayu only
            close_fds=True,
            env=scrubbed_env(),
        )
    except OSError:
        return False  # an optimisation only: the check prepares its own checkout
    _spawned.append(proc)
    return True


def prepare(repo_root: Path, onto: str | None, explicit_check: bool, *, timeout_sec: float = TIMEOUT_SEC) -> str:
    """Move a pool slot to the tip; returns what happened (for tests and the bench)."""
    repo = open_repo(repo_root)
    if repo.workdir is None or repo.head_is_unborn:
        return "no commits"
    pdir = papayu_dir(repo)
    lock = locks.locks_dir(pdir) / LOCK_NAME
    if not locks.try_acquire(lock, kind="prewarm"):
        return "already running"
    try:
        try:
            tip = resolve_target(repo, onto).tip
        except PapayuError:
            tip = str(repo.head.target)  # detached HEAD: `apply --onto` will build on its own tip
        command = None if explicit_check else resolve_command(repo_root, GitTree(repo, repo[tip].tree), None)
        if not explicit_check and command is None:
            return "no check"
        slot = prewarm_slot(
            repo,
            pdir,
            tip,
            on_stale=dead_check,
            until=time.time() + timeout_sec,
        )
        said = f"prepared {slot.name}" if slot else "already prepared"
        if command is not None and settings.get_bool("check_prewarm_base", str(repo_root)):
            said += "; " + _base(repo, pdir, tip, command, repo_root, timeout_sec)
        return said
    finally:
        locks.release(lock)


def _base(repo: Any, pdir: Path, tip: str, command: Any, repo_root: Path, timeout_sec: float) -> str:
    """The base run of the tip (the check on it, sandboxed as any check), cached for the plans
    built on it (check/base.py): computed while the model thinks."""
    from papayu_git.check.base import base_run
    from papayu_git.check.sandbox import resolve as resolve_sandbox

    box = resolve_sandbox(str(repo_root))
    if not box.sandboxed:
        return "base not run (no sandbox: only a check papayu was asked for runs unsandboxed)"
    run = base_run(repo, pdir, tip, command, box, repo_root, timeout_sec=timeout_sec, origin="the prewarm")
    return f"base {'cached' if run.cached else 'computed'} ({run.results.source})"


class _GiveUp(BaseException):
    """Raised by the timeout and by SIGTERM/SIGHUP: unwinds through the slot's release (the
    running git is killed by subprocess.run on the way out)."""


def _give_up(signum: int, frame: Any) -> None:
    raise _GiveUp(signum)


def main(argv: list[str]) -> int:
    """The background process; its one-line report goes to stdout (/dev/null unless a test reads it)."""
    if not argv or argv[0].startswith("-"):
        output.error("usage: python -m papayu_git.prewarm ROOT [--onto BRANCH] [--explicit-check]")
        return 2
    root = Path(argv[0])
    onto = argv[argv.index("--onto") + 1] if "--onto" in argv[1:-1] else None
    for name in ("SIGALRM", "SIGTERM", "SIGHUP"):
        if hasattr(signal, name):
            signal.signal(getattr(signal, name), _give_up)
    if hasattr(signal, "alarm"):
        signal.alarm(TIMEOUT_SEC)
    try:
        output.result(prepare(root, onto, "--explicit-check" in argv))
    except (Exception, _GiveUp):
        return 1  # nobody is listening; the check prepares its own checkout
    return 0


if __name__ == "__main__":
    raise SystemExit(main(sys.argv[1:]))
