"""Cleaning what dead papayu processes left (docs/DESIGN.md, "The transaction and its guarantees") and `gc`.

Every command calls ``clear_stale`` first: locks whose process is gone are removed,
after their leftovers are cleaned (the generated branch of a killed apply, a ref
lock a killed land may have left). ``gc`` also removes idle pooled check checkouts and
generated branches older than N days.
"""

from __future__ import annotations

import time
from pathlib import Path
from typing import TYPE_CHECKING, NamedTuple

from papayu_git import locks
from papayu_git.errors import PapayuError
from papayu_git.git import common_dir, papayu_dir
from papayu_git.landing import clear_dead_land
from papayu_git.objects import branch_name, commit_of, delete_branch, generated_branches
from papayu_git.outcomes import ApplyState
from papayu_git.repository import open_repo

if TYPE_CHECKING:
    import pygit2

# A branch kept on purpose (--review, --keep-failed, dirty).
KEPT_STATES = frozenset(
    {
        ApplyState.REVIEW,
        ApplyState.ROLLED_BACK,
        ApplyState.REFUSED,
        ApplyState.REFUSED_BRANCH_MOVED,
        ApplyState.INTERRUPTED,
    }
)


def clear_stale(repo: pygit2.Repository, pdir: Path) -> list[locks.LockInfo]:
    git_common = common_dir(repo)

    def dead_apply(info: locks.LockInfo) -> None:
        from papayu_git.plans import is_id  # lazy: dead process's leftovers only, see _kept_on_purpose

        plan_id = str(info.data.get("plan", ""))
        if is_id(plan_id) and not _kept_on_purpose(repo, pdir, plan_id):
            delete_branch(repo, plan_id)

    def dead_run(info: locks.LockInfo) -> None:
        from papayu_git.bestof.runs import clear_dead  # lazy: a dead best-of's leftovers only

        clear_dead(repo, pdir, info)

    handlers = {
        "apply": dead_apply,
        "land": lambda info: clear_dead_land(info, git_common),
        "checkout": dead_check,
        "bestof": dead_run,
    }
    return locks.clear_stale(pdir, handlers)


def dead_check(info: locks.LockInfo) -> None:
    """A check checkout whose papayu died: check.run.dead_check kills what its check left running."""
    # lazy: only for a dead papayu's leftovers; check (+ sandbox) and plans (+ protocol, hashlib)
    # at module top made `papayu gc` start ~10 ms slower (120 -> 130 ms, median of 11 runs).
    from papayu_git.check.run import dead_check as kill_check_leftovers

    kill_check_leftovers(info)


def _kept_on_purpose(repo: pygit2.Repository, pdir: Path, plan_id: str) -> bool:
    """The branch is the one an earlier, finished run kept (review / --keep-failed)."""
    from papayu_git import plans  # lazy: dead process's leftovers only, see dead_check

    try:
        outcome = plans.load(pdir, plan_id).extra.get("apply") or {}
    except Exception:
        return False
    commit = generated_branches(repo).get(plan_id)
    return outcome.get("state") in KEPT_STATES and commit is not None and outcome.get("commit") == commit


class GcReport(NamedTuple):
    """What `gc` removed. A NamedTuple: every command loads this module (open_checkout)."""

    locks: list[str]
    worktrees: list[str]
    branches: list[str]
    logs: list[str]


def gc(repo: pygit2.Repository, repo_root: Path, pdir: Path, days: float) -> GcReport:
    # `gc` only: every command opens its checkout through this module (open_checkout), and the
    # check's pool is not theirs to load (docs/DESIGN.md, "Start-up and cost").
    from papayu_git.worktree import remove_idle_checkouts

    locks_removed = [str(i.path) for i in clear_stale(repo, pdir)]
    worktrees = [str(p) for p in remove_idle_checkouts(repo_root, pdir, on_stale=dead_check)]
    cutoff = time.time() - days * 86400
    from papayu_git.bestof import runs  # lazy: plans and protocol would slow every command, see dead_check

    branches = runs.gc(repo, pdir, cutoff)  # a best-of run's candidates, papayu/<run>/<i>
    for plan_id, commit in sorted(generated_branches(repo).items()):
        if runs.parse_key(plan_id) or _applying(pdir, plan_id) or commit_of(repo, commit).commit_time > cutoff:
            continue
        if delete_branch(repo, plan_id):
            branches.append(branch_name(plan_id))
    logs = []
    checks = pdir / "checks"
    for log in sorted(checks.glob("*.log")) if checks.is_dir() else []:
        if log.stat().st_mtime < cutoff:
            log.unlink(missing_ok=True)
            logs.append(str(log))
    return GcReport(locks_removed, worktrees, branches, logs)


def _applying(pdir: Path, plan_id: str) -> bool:
    info = locks.read_lock(locks.locks_dir(pdir) / f"apply-{plan_id}.lock")
    return info is not None and info.alive


def open_checkout(start: str | None = None) -> tuple[pygit2.Repository, Path, Path]:
    """(repo, work tree root, .git/papayu) for a command, after clearing stale locks."""
    repo = open_repo(start)
    if repo.workdir is None:
        raise PapayuError("ERR_NOT_A_GIT_REPO", f"{repo.path} is a bare repository; run papayu in a work tree")
    pdir = papayu_dir(repo)
    clear_stale(repo, pdir)
    return repo, Path(repo.workdir), pdir
