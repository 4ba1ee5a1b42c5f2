"""Landing a generated commit on the user's branch (SPEC §4.1, §4.5).

A branch checked out in some worktree is fast-forwarded by `git merge --ff-only`
run in that worktree: git itself refuses when a touched file has uncommitted
changes and keeps every other change (issue 3: a raw update-ref of a checked-out
branch would leave that worktree stale). A branch checked out nowhere gets a
compare-and-swap `update-ref B new old`. Both run under one papayu land lock per
branch, after checking that B still points at the tip the commit was built on.
"""

from __future__ import annotations

import re
import time
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING

from papayu_git import locks
from papayu_git.errors import PapayuError
from papayu_git.git import common_dir, run_git, scrubbed_env
from papayu_git.stages import pause_point

if TYPE_CHECKING:
    import pygit2


@dataclass(frozen=True)
class Target:
    branch: str   # short name, e.g. main
    ref: str      # refs/heads/main
    tip: str      # commit id the plan is built on


def resolve_target(repo: "pygit2.Repository", onto: str | None) -> Target:
    """The current branch, or ``--onto``; a detached HEAD is refused without --onto (SPEC §4.1)."""
    if onto:
        name = onto[len("refs/heads/"):] if onto.startswith("refs/heads/") else onto
        ref = f"refs/heads/{name}"
    else:
        if repo.head_is_detached:
            raise PapayuError("ERR_DETACHED_HEAD", "HEAD is detached")
        ref = str(repo.references["HEAD"].target)
        name = ref[len("refs/heads/"):]
    tip = branch_tip(repo, ref)
    if tip is None:
        raise PapayuError("ERR_BRANCH_NOT_FOUND", f"branch {name!r} does not exist or has no commit", path=ref)
    return Target(name, ref, tip)


def branch_tip(repo: "pygit2.Repository", ref: str) -> str | None:
    reference = repo.references.get(ref)
    return None if reference is None else str(reference.resolve().target)


def checked_out_in(repo: "pygit2.Repository", ref: str) -> Path | None:
    """The worktree whose HEAD is ``ref`` (main or linked), read from the HEAD files."""
    common = common_dir(repo)
    heads: list[tuple[Path, Path | None]] = [(common / "HEAD", None if repo.is_bare else common.parent)]
    admin = common / "worktrees"
    if admin.is_dir():
        for entry in admin.iterdir():
            gitdir = entry / "gitdir"
            if gitdir.is_file():
                heads.append((entry / "HEAD", Path(gitdir.read_text().strip()).parent))
    for head, workdir in heads:
        try:
            content = head.read_text().strip()
        except OSError:
            continue
        if content == f"ref: {ref}" and workdir is not None:
            return workdir
    return None


def land_lock_path(papayu_dir: Path, target: Target) -> Path:
    safe = re.sub(r"[^A-Za-z0-9._-]", "_", target.branch)
    return locks.locks_dir(papayu_dir) / f"land-{safe}.lock"


def land(repo: "pygit2.Repository", papayu_dir: Path, target: Target, commit: str, plan_id: str) -> str:
    """Move ``target`` from its tip to ``commit``; returns "fast-forward" or "update-ref".

    ERR_BRANCH_MOVED when the branch is no longer at ``target.tip``; ERR_DIRTY_WORKTREE
    (with the files) when git refuses to overwrite local changes.
    """
    with locks.held(land_lock_path(papayu_dir, target), what=f"landing on {target.branch}",
                    kind="land", ref=target.ref, plan=plan_id):
        pause_point("during_land")
        ensure_at(repo, target)
        workdir = checked_out_in(repo, target.ref)
        if workdir is not None:
            fast_forward(workdir, commit, target)
            return "fast-forward"
        proc = run_git(["update-ref", "-m", f"papayu: land {plan_id}", target.ref, commit, target.tip],
                       cwd=repo.path, check=False, env=_c_locale())
        if proc.returncode != 0:
            raise _moved(target, proc.stderr) if "but expected" in proc.stderr else PapayuError(
                "ERR_GIT_COMMAND", f"git update-ref failed: {proc.stderr.strip()}", path=target.ref)
        return "update-ref"


def ensure_at(repo: "pygit2.Repository", target: Target) -> None:
    current = branch_tip(repo, target.ref)
    if current != target.tip:
        raise _moved(target, f"it is now at {(current or 'nothing')[:12]}, the plan was built on {target.tip[:12]}")


def _moved(target: Target, detail: str) -> PapayuError:
    return PapayuError("ERR_BRANCH_MOVED", f"{target.branch} moved: {detail.strip()}", path=target.ref)


def _c_locale() -> dict[str, str]:
    # git's messages are parsed below: keep them in English.
    return scrubbed_env({"LC_ALL": "C", "LANG": "C", "LANGUAGE": "C"})


_LISTED = re.compile(r"^\t(.+)$", re.M)


def fast_forward(workdir: Path, commit: str, target: Target) -> None:
    env = _c_locale()
    env["GIT_MERGE_AUTOEDIT"] = "no"
    # --no-overwrite-ignore: an ignored file of the user's at a path the plan creates is data, not debris.
    args = ["merge", "--ff-only", "--no-overwrite-ignore", "--no-stat", "-q", commit]
    proc = run_git(args, cwd=workdir, check=False, env=env)
    if proc.returncode == 0:
        return
    message = proc.stderr + proc.stdout
    if "would be overwritten" in message or "would be removed" in message:
        files = _LISTED.findall(message)
        raise PapayuError("ERR_DIRTY_WORKTREE",
                          f"uncommitted changes in files the plan touches: {', '.join(files) or '?'}",
                          path=str(workdir))
    if "Not possible to fast-forward" in message or "not possible to fast-forward" in message.lower():
        raise _moved(target, "it is no longer an ancestor of the plan's commit")
    raise PapayuError("ERR_GIT_COMMAND", f"git merge --ff-only in {workdir} failed: {message.strip()[-1500:]}",
                      path=target.ref)


def clear_dead_land(info: locks.LockInfo, git_common: Path) -> None:
    """Stale land lock: remove the ref lock git may have left for it (only if old enough
    that no git child of the dead process can still be writing it)."""
    ref = str(info.data.get("ref", ""))
    if not ref.startswith("refs/heads/"):
        return
    lock = git_common / f"{ref}.lock"
    try:
        if time.time() - lock.stat().st_mtime > 5.0:
            lock.unlink()
    except OSError:
        pass
