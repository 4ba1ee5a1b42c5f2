"""The check's checkout pool (docs/DESIGN.md, "The check's trust boundary").

The check's checkouts live under `.git/papayu/checkouts/` and are reused:
`git checkout --detach` rewrites only the files that differ from the previous use.
The commit they are moved to is built in memory by `objects.py`.
"""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING, Any

from papayu_git import locks
from papayu_git.errors import PapayuError
from papayu_git.git import common_dir, run_git, write_gitfile

if TYPE_CHECKING:
    import pygit2


# The check runs in an isolated checkout, never a linked worktree of the user's repository
# (docs/DESIGN.md, "The check's trust boundary"): each slot is `<slot>/git`, a git directory of
# its own whose objects come from the user's through `objects/info/alternates`, and `<slot>/work`,
# its work tree. papayu always names both explicitly (--git-dir/--work-tree), never trusting what
# the check may have left in `work/.git`; the slot's config is papayu's own, restored before each
# use, so nothing a check wrote there (hooks, fsmonitor, filters) ever runs outside the sandbox.

CHECKOUTS = "checkouts"
SLOT_PREFIX = "slot-"
_SLOT_CONFIG = "config.papayu"  # the pristine config, beside (not inside) the slot's git dir


def pool_dir(papayu_dir: Path) -> Path:
    return papayu_dir / CHECKOUTS


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
    keep_ignored: bool = False,
    plan_id: str = "",
    on_stale: Any = None,
) -> CheckCheckout:
    """Lock a free slot and move it to ``commit``: tracked files forced to the commit (only
    changed paths are rewritten), every other file removed, ignored ones too unless
    ``keep_ignored``. A slot is created (one full checkout) only when none is free."""
    pool = pool_dir(papayu_dir)
    pool.mkdir(parents=True, exist_ok=True)
    for index in range(64):
        slot = pool / f"{SLOT_PREFIX}{index}"
        lock = pool / f"{SLOT_PREFIX}{index}.lock"
        if not locks.try_acquire(lock, on_stale=on_stale, kind="checkout", plan=plan_id, path=str(slot)):
            continue
        try:
            checkout = CheckCheckout(slot / "work", slot / "git", lock, fresh=not _slot_usable(slot))
            if checkout.fresh:
                _create_slot(repo, slot)
            _restore_slot(repo, slot)
            git_args = [f"--git-dir={checkout.gitdir}", f"--work-tree={checkout.path}"]
            run_git([*git_args, "checkout", "--detach", "--force", "-q", commit], cwd=checkout.path)
            run_git([*git_args, "clean", "-q", "-ff", "-d", *([] if keep_ignored else ["-x"])], cwd=checkout.path)
            return checkout
        except BaseException:
            locks.release(lock)
            raise
    raise PapayuError("ERR_LOCKED", "every pooled check checkout is busy", path=str(pool))


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
    _remove_tree(slot)
    (slot / "work").mkdir(parents=True)
    gitdir = slot / "git"
    run_git(["init", "-q", "--bare", "--template=", str(gitdir)], cwd=slot)
    for key, value in (
        ("core.bare", "false"),
        ("core.logAllRefUpdates", "false"),
        ("gc.auto", "0"),
        ("maintenance.auto", "false"),
        ("core.fsmonitor", "false"),
        ("core.hooksPath", str(slot / "no-hooks")),
    ):
        run_git([f"--git-dir={gitdir}", "config", key, value], cwd=slot)
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


def _remove_tree(path: Path) -> None:
    import shutil  # ~3 ms of imports (bz2, lzma) that a plain apply never needs

    if path.is_symlink():
        path.unlink()
    else:
        shutil.rmtree(path, ignore_errors=True)


def remove_idle_checkouts(repo_root: Path, papayu_dir: Path, on_stale: Any = None) -> list[Path]:
    """`gc`: remove every pool slot nobody holds (killing what a dead run's check left running),
    and the linked worktrees of the pool older papayu versions used."""
    removed: list[Path] = []
    pool = pool_dir(papayu_dir)
    for slot in sorted(p for p in pool.iterdir() if p.is_dir()) if pool.is_dir() else []:
        lock = pool / f"{slot.name}.lock"
        if not locks.try_acquire(lock, on_stale=on_stale, kind="checkout", path=str(slot)):
            continue
        try:
            _remove_tree(slot)
            removed.append(slot)
        finally:
            locks.release(lock)
    return removed + _remove_legacy_worktrees(repo_root, papayu_dir)


def _remove_legacy_worktrees(repo_root: Path, papayu_dir: Path) -> list[Path]:
    """Linked worktrees under `.git/papayu/worktrees/` (the pool before isolated checkouts)."""
    legacy = papayu_dir / "worktrees"
    if not legacy.is_dir():
        return []
    removed = []
    for path in sorted(p for p in legacy.iterdir() if p.is_dir()):
        run_git(["worktree", "remove", "-f", "-f", str(path)], cwd=repo_root, check=False)
        _remove_tree(path)
        removed.append(path)
    _remove_tree(legacy)
    run_git(["worktree", "prune"], cwd=repo_root, check=False)
    return removed
