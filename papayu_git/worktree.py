"""The check's checkout pool (docs/DESIGN.md, "The check's trust boundary").

The check's checkouts live in the user's cache, one pool per repository (locks.checkout_pool),
and are reused: `git checkout --detach` rewrites only the files that differ from the previous
use. The commit they are moved to is built in memory by `objects.py`. Never inside the user's
work tree: the pool under `.git/papayu/checkouts/` of older versions is removed once idle.
"""

from __future__ import annotations

import json
import os
import subprocess
import time
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING, Any

from papayu_git import atomic, locks
from papayu_git.errors import PapayuError
from papayu_git.git import common_dir, isolated_env, run_git, write_gitfile
from papayu_git.objects import commit_of
from papayu_git.stages import pause_point

if TYPE_CHECKING:
    import pygit2


# The check runs in an isolated checkout, never a linked worktree of the user's repository
# (docs/DESIGN.md, "The check's trust boundary"): each slot is `<slot>/git`, a git directory of
# its own whose objects come from the user's through `objects/info/alternates`, and `<slot>/work`,
# its work tree. papayu always names both explicitly (--git-dir/--work-tree), never trusting what
# the check may have left in `work/.git`; the slot's config is papayu's own, restored before each
# use, so nothing a check wrote there (hooks, fsmonitor, filters) ever runs outside the sandbox.
# Nor does anything of the user's own configuration: papayu's git there reads no global or system
# config (git.isolated_env), so the filter drivers `git lfs install` puts in ~/.gitconfig never run
# on the plan's files, whatever its `.gitattributes` says, and the check sees the blobs as they are.

CHECKOUTS = "checkouts"
SLOT_PREFIX = "slot-"
_SLOT_CONFIG = "config.papayu"  # the pristine config, beside (not inside) the slot's git dir
_SLOT_STATE = "state.papayu"  # the commit the slot was last moved to: a hint (see slot_commit)


POOL_OWNER = "repository"  # in the pool: the papayu directory it serves (for people and gc)


def pool_dir(papayu_dir: Path) -> Path:
    return locks.checkout_pool(papayu_dir)


def _open_pool(papayu_dir: Path, on_stale: Any) -> Path:
    """The repository's pool, made when missing (private to the user), with what an older
    papayu left inside the work tree removed first."""
    if (papayu_dir / CHECKOUTS).is_dir():
        _remove_legacy_pool(papayu_dir, on_stale)
    pool = pool_dir(papayu_dir)
    if not (pool / POOL_OWNER).is_file():
        pool.mkdir(parents=True, exist_ok=True, mode=0o700)
        atomic.write_text(pool / POOL_OWNER, os.path.realpath(papayu_dir) + "\n")
    return pool


@dataclass(frozen=True)
class CheckCheckout:
    path: Path  # the work tree the check runs in
    gitdir: Path  # its git directory (an overlay inside the sandbox: writes vanish)
    lock: Path
    fresh: bool  # created by this use (full checkout) rather than reused

    @property
    def slot(self) -> Path:
        return self.path.parent


def acquire_checkout(
    repo: pygit2.Repository,
    papayu_dir: Path,
    commit: str,
    *,
    plan_id: str = "",
    on_stale: Any = None,
    purpose: str = "check",
    until: float = 0.0,
) -> CheckCheckout:
    """Lock a free slot and move it to ``commit``: tracked files forced to the commit (only
    changed paths are rewritten), every other file removed, ignored ones too unless
    A slot is created (one full checkout) only when none is free.

    Free slots are tried nearest first: one already at ``commit``, then one at a parent of it
    (prepared by a prewarm: only the plan's files are rewritten), then any other. A check finding
    a prewarm still preparing such a slot waits for it rather than start a full checkout of its
    own (docs/DESIGN.md, "The check's trust boundary"). ``purpose``/``until`` are recorded in
    the slot lock (a prewarm and when it gives up)."""
    pool = _open_pool(papayu_dir, on_stale)
    wanted = {commit, *_parents(repo, commit)}
    while True:
        order = _slot_order(pool, commit, wanted)
        waiting = purpose == "check" and _prewarm_preparing(pool, wanted)
        for index, rank in order:
            if waiting and rank > _NEAR:
                break  # the slot being prepared beats a full checkout or a distant move
            slot = pool / f"{SLOT_PREFIX}{index}"
            lock = pool / f"{SLOT_PREFIX}{index}.lock"
            data = {"kind": "checkout", "plan": plan_id, "path": str(slot), "purpose": purpose, "commit": commit}
            if not locks.try_acquire(lock, on_stale=on_stale, **data, **({"until": until} if until else {})):
                continue
            return _move_slot(repo, slot, lock, commit, purpose)
        else:
            raise PapayuError("ERR_LOCKED", "every pooled check checkout is busy", path=str(pool))
        time.sleep(0.05)


def _move_slot(repo: pygit2.Repository, slot: Path, lock: Path, commit: str, purpose: str) -> CheckCheckout:
    """The locked ``slot`` moved to ``commit`` (created first when not usable); the lock is
    released on any failure. The slot's state file is removed first and written last, so a
    slot whose move was interrupted (kill -9) claims no commit."""
    try:
        (slot / _SLOT_STATE).unlink(missing_ok=True)
        checkout = CheckCheckout(slot / "work", slot / "git", lock, fresh=not _slot_usable(slot))
        if checkout.fresh:
            _create_slot(repo, slot)
        try:
            _reset_slot(repo, checkout, commit, purpose)
        except (PapayuError, OSError):
            if checkout.fresh:
                raise
            # A slot that cannot be reset (a tree a check left that git cannot clean) is made
            # anew: never a wedged pool.
            checkout = CheckCheckout(slot / "work", slot / "git", lock, fresh=True)
            _create_slot(repo, slot)
            _reset_slot(repo, checkout, commit, purpose)
        atomic.write_json(slot / _SLOT_STATE, {"commit": commit, "by": purpose}, indent=None)
        return checkout
    except BaseException:
        locks.release(lock)
        raise


def _reset_slot(repo: pygit2.Repository, checkout: CheckCheckout, commit: str, purpose: str) -> None:
    _restore_slot(repo, checkout.slot)
    pause_point(f"{purpose}_checkout")
    attributes = "" if checkout.fresh else _attribute_files(checkout)
    run_slot_git(checkout.path, checkout.gitdir, ["checkout", "--detach", "--force", "-q", commit])
    if not checkout.fresh and _attribute_files(checkout) != attributes:
        # git rewrites only the files whose blobs changed: a file the plan left alone keeps the
        # bytes of the old conversion attributes. Every file is written again under the new ones,
        # as a checkout of this commit would write it (docs/DESIGN.md, "Landing").
        run_slot_git(checkout.path, checkout.gitdir, ["checkout-index", "--force", "--all", "--quiet"])
    run_slot_git(checkout.path, checkout.gitdir, ["clean", "-q", "-ff", "-d", "-x"])


def _attribute_files(checkout: CheckCheckout) -> str:
    """The slot index's `.gitattributes` entries (modes and blobs): how its files convert."""
    args = ["ls-files", "--stage", "-z", "--", ":(glob)**/.gitattributes"]
    return run_slot_git(checkout.path, checkout.gitdir, args, check=False).stdout


def run_slot_git(work: Path, gitdir: Path, args: list[str], *, check: bool = True) -> subprocess.CompletedProcess[str]:
    """git on a slot's checkout: its git dir and work tree named, the user's config left out."""
    git_args = [f"--git-dir={gitdir}", f"--work-tree={work}"]
    return run_git([*git_args, *args], cwd=work, check=check, env=isolated_env())


# A slot's rank for a commit: 0 already there, 1 at a parent (_NEAR), 2 elsewhere, 3 to be created.
_NEAR = 1
MAX_SLOTS = 64


def _slot_order(pool: Path, commit: str, wanted: set[str]) -> list[tuple[int, int]]:
    """(index, rank) of every slot, best first; the indexes not yet created last, in order."""
    ranked = []
    for index in range(MAX_SLOTS):
        slot = pool / f"{SLOT_PREFIX}{index}"
        if not slot.is_dir() or not _slot_usable(slot):
            ranked.append((index, 3))
            continue
        held = slot_commit(slot)
        ranked.append((index, 0 if held == commit else _NEAR if held in wanted else 2))
    return sorted(ranked, key=lambda item: (item[1], item[0]))


def slot_commit(slot: Path) -> str:
    """The commit ``slot`` was last moved to completely ("" when unknown). A hint for choosing
    a slot, never trusted for correctness: every use forces the checkout anyway."""
    try:
        state = json.loads((slot / _SLOT_STATE).read_text(encoding="utf-8"))
    except (OSError, ValueError):
        return ""
    held = state.get("commit") if isinstance(state, dict) else None
    return held if isinstance(held, str) else ""


def _parents(repo: pygit2.Repository, commit: str) -> list[str]:
    try:
        return [str(p) for p in commit_of(repo, commit).parent_ids]
    except (KeyError, ValueError, TypeError):
        return []


def _prewarm_preparing(pool: Path, wanted: set[str]) -> bool:
    """A live prewarm holds a slot it is moving to one of ``wanted`` and has not given up yet."""
    for lock in pool.glob(f"{SLOT_PREFIX}*.lock"):
        info = locks.read_lock(lock)
        if info is None or info.data.get("purpose") != "prewarm" or info.data.get("commit") not in wanted:
            continue
        until = info.data.get("until")
        if isinstance(until, (int, float)) and until > time.time() and info.alive:
            return True
    return False


def prewarm_slot(repo: pygit2.Repository, papayu_dir: Path, commit: str, *, on_stale: Any, until: float) -> Path | None:
    """Move a free slot to ``commit`` ahead of the check (prewarm.py) and release it; None when
    a free slot is already there. The index is then refreshed once a second has passed: files
    written in the same second as the index are "racily clean" to git, which would otherwise
    re-read every one of them at the check's own checkout (0.1 s instead of 0.7 s at 50k files)."""
    pool = pool_dir(papayu_dir)
    for index, rank in _slot_order(pool, commit, {commit}) if pool.is_dir() else []:
        if rank == 0 and locks.read_lock(pool / f"{SLOT_PREFIX}{index}.lock") is None:
            return None
    checkout = acquire_checkout(repo, papayu_dir, commit, on_stale=on_stale, purpose="prewarm", until=until)
    try:
        try:
            written = (checkout.gitdir / "index").stat().st_mtime
        except OSError:
            written = time.time()
        time.sleep(max(0.0, int(written) + 1.05 - time.time()))  # git may compare whole seconds
        run_slot_git(checkout.path, checkout.gitdir, ["update-index", "-q", "--refresh"], check=False)
    finally:
        release_checkout(checkout)
    return checkout.slot


def release_checkout(checkout: CheckCheckout) -> None:
    locks.release(checkout.lock)


def _slot_usable(slot: Path) -> bool:
    work, gitdir = slot / "work", slot / "git"
    return (
        not work.is_symlink()
        and work.is_dir()
        and not gitdir.is_symlink()
        and (gitdir / "HEAD").is_file()
        and (slot / _SLOT_CONFIG).is_file()
    )


def _create_slot(repo: pygit2.Repository, slot: Path) -> None:
    remove_tree(slot)
    (slot / "work").mkdir(parents=True)
    gitdir = slot / "git"
    run_git(["init", "-q", "--bare", "--template=", str(gitdir)], cwd=slot, env=isolated_env())
    for key, value in (
        ("core.bare", "false"),
        ("core.logAllRefUpdates", "false"),
        ("gc.auto", "0"),
        ("maintenance.auto", "false"),
        ("core.fsmonitor", "false"),
        ("core.hooksPath", str(slot / "no-hooks")),
    ):
        run_git([f"--git-dir={gitdir}", "config", key, value], cwd=slot, env=isolated_env())
    (slot / _SLOT_CONFIG).write_bytes((gitdir / "config").read_bytes())


def _restore_slot(repo: pygit2.Repository, slot: Path) -> None:
    """Undo whatever an unsandboxed check may have changed in the slot's git directory that
    could make papayu's own git commands there run code or reach the user's repository."""
    import shutil

    gitdir = slot / "git"
    (gitdir / "config").write_bytes((slot / _SLOT_CONFIG).read_bytes())
    for name in ("hooks", "info", "commondir", "config.worktree", "modules", "index.lock", "HEAD.lock"):
        victim = gitdir / name
        if victim.is_dir() and not victim.is_symlink():
            shutil.rmtree(victim, ignore_errors=True)
        elif victim.exists() or victim.is_symlink():
            victim.unlink()
    alternates = gitdir / "objects" / "info"
    alternates.mkdir(parents=True, exist_ok=True)
    (alternates / "alternates").write_text(f"{common_dir(repo) / 'objects'}\n")
    dot_git = slot / "work" / ".git"  # lets git inside the check find the slot's git dir
    if dot_git.is_dir() and not dot_git.is_symlink():
        shutil.rmtree(dot_git)
    elif dot_git.exists() or dot_git.is_symlink():
        dot_git.unlink()
    write_gitfile(slot / "work", gitdir)


def remove_tree(path: Path) -> None:
    """Remove ``path`` without recursion and without long paths: a check may leave a tree
    deeper than PATH_MAX (or Python's recursion limit), which must not wedge the pool. Each
    directory is opened relative to its parent's descriptor; the stack is ours."""
    if path.is_symlink() or path.is_file():
        path.unlink(missing_ok=True)
        return
    try:
        top = os.open(path, _DIR_FLAGS)
    except OSError:
        return
    stack: list[tuple[int, str]] = [(top, "")]
    try:
        while stack:
            fd, name = stack[-1]
            sub = _clear_files(fd)
            if sub is not None:
                stack.append((_open_dir(sub, fd), sub))
                continue
            os.close(fd)
            stack.pop()
            if stack:
                os.rmdir(name, dir_fd=stack[-1][0])
        path.rmdir()
    except OSError:
        for fd, _ in stack:
            os.close(fd)


_DIR_FLAGS = os.O_RDONLY | os.O_DIRECTORY | os.O_NOFOLLOW


def _open_dir(name: str, parent: int) -> int:
    try:
        return os.open(name, _DIR_FLAGS, dir_fd=parent)
    except PermissionError:  # a check may leave a directory without permissions
        os.chmod(name, 0o700, dir_fd=parent, follow_symlinks=False)
        return os.open(name, _DIR_FLAGS, dir_fd=parent)


def _clear_files(fd: int) -> str | None:
    """Unlink every non-directory in the directory ``fd``; the name of a subdirectory, if any."""
    sub = None
    with os.scandir(fd) as entries:
        for entry in entries:
            if entry.is_dir(follow_symlinks=False):
                sub = sub or entry.name
                continue
            try:
                os.unlink(entry.name, dir_fd=fd)
            except FileNotFoundError:
                pass
    return sub


def remove_idle_checkouts(repo_root: Path, papayu_dir: Path, on_stale: Any = None) -> list[Path]:
    """`gc`: remove every pool slot nobody holds (killing what a dead run's check left running),
    and the linked worktrees of the pool older papayu versions used."""
    pool = pool_dir(papayu_dir)
    removed = _remove_idle_slots(pool, on_stale)
    if pool.is_dir() and not any(p.name != POOL_OWNER for p in pool.iterdir()):
        remove_tree(pool)  # nothing of the repository's left in the user's cache
    return removed + _remove_legacy_pool(papayu_dir, on_stale) + _remove_legacy_worktrees(repo_root, papayu_dir)


def _remove_idle_slots(pool: Path, on_stale: Any) -> list[Path]:
    removed: list[Path] = []
    for slot in sorted(p for p in pool.iterdir() if p.is_dir()) if pool.is_dir() else []:
        lock = pool / f"{slot.name}.lock"
        if not locks.try_acquire(lock, on_stale=on_stale, kind="checkout", path=str(slot)):
            continue
        try:
            remove_tree(slot)
            removed.append(slot)
        finally:
            locks.release(lock)
    return removed


def _remove_legacy_pool(papayu_dir: Path, on_stale: Any) -> list[Path]:
    """The pool older papayu versions kept in `.git/papayu/checkouts/`, inside the work tree: its
    idle slots (a slot an older papayu still holds stays until it is released), then the directory."""
    legacy = papayu_dir / CHECKOUTS
    if not legacy.is_dir() or legacy.is_symlink():
        return []
    removed = _remove_idle_slots(legacy, on_stale)
    if not any(p.is_dir() for p in legacy.iterdir()):
        remove_tree(legacy)
    return removed


def _remove_legacy_worktrees(repo_root: Path, papayu_dir: Path) -> list[Path]:
    """Linked worktrees under `.git/papayu/worktrees/` (the pool before isolated checkouts)."""
    legacy = papayu_dir / "worktrees"
    if not legacy.is_dir():
        return []
    removed = []
    for path in sorted(p for p in legacy.iterdir() if p.is_dir()):
        run_git(["worktree", "remove", "-f", "-f", str(path)], cwd=repo_root, check=False)
        remove_tree(path)
        removed.append(path)
    remove_tree(legacy)
    run_git(["worktree", "prune"], cwd=repo_root, check=False)
    return removed
