"""Modification times that keep incremental builds correct (docs/DESIGN.md, "The check's
environment").

The check reuses the user's build state (`target/` and friends, laid over the checkout
copy-on-write). Build tools compare modification times, so a file of the checkout identical to
the user's copy gets the user's mtime (its build output is reused) and a file that differs gets
a fresh one (it is rebuilt). Without the second rule a warm `target/` built from the user's
uncommitted edits would be newer than the plan's file, and the plan's change would never be
compiled.
"""

from __future__ import annotations

import os
import time
from pathlib import Path

from papayu_git.git import run_git
from papayu_git.worktree import run_slot_git

# Environment directories holding build state judged by modification times; Go's build cache
# among them: go test reuses a package's result only if the files its tests opened kept their
# modification times (and the variables they read their values).
BUILD_STATE_DIRS = frozenset({"target", "node_modules", ".tox", ".nox", "go-build"})


def sync(repo_root: Path, work: Path, gitdir: Path) -> int:
    """Set the checkout's mtimes by the rule above; the number of files changed."""
    user = _staged(run_git(["ls-files", "-s", "-z"], cwd=repo_root, check=False).stdout)
    plan = _staged(run_slot_git(work, gitdir, ["ls-files", "-s", "-z"], check=False).stdout)
    dirty = _really_dirty(repo_root, user, plan)
    now = time.time_ns()
    changed = 0
    for path, oid in plan.items():
        target = work / path
        try:
            current = os.lstat(target)
        except OSError:
            continue
        wanted: int | None = None
        if user.get(path) == oid and path not in dirty:
            try:
                # In nanoseconds: a float second loses the last digits, and cargo's build scripts
                # (`rerun-if-changed`) compare them exactly: every check rebuilt such a crate.
                wanted = os.lstat(repo_root / path).st_mtime_ns
            except OSError:
                wanted = None
        if wanted is None:  # differs from the user's copy: newer than any build of it, so "now"
            wanted = now  # even when written a moment ago (the user may have built since)
        elif current.st_mtime_ns == wanted:
            continue
        os.utime(target, ns=(wanted, wanted), follow_symlinks=False)
        changed += 1
    return changed


def _really_dirty(repo_root: Path, user: dict[str, str], plan: dict[str, str]) -> set[str]:
    """Files of the user's tree whose content is not their index's: `git diff-files` by stat,
    then the content hashed for those the plan has as the index does (a touched file is clean)."""
    by_stat = _names(run_git(["diff-files", "--name-only", "-z"], cwd=repo_root, check=False).stdout)
    suspects = [p for p in by_stat if p in plan and user.get(p) == plan[p] and (repo_root / p).is_file()]
    dirty = set(by_stat) - set(suspects)
    if suspects:
        proc = run_git(
            ["hash-object", "--no-filters", "--stdin-paths"], cwd=repo_root, input="\n".join(suspects) + "\n"
        )
        for path, oid in zip(suspects, proc.stdout.split(), strict=False):
            if oid != user[path]:
                dirty.add(path)
    return dirty


def _staged(listing: str) -> dict[str, str]:
    """{path: blob id} of an index's `ls-files -s -z` (regular files and symlinks; no submodules)."""
    out = {}
    for record in _names(listing):
        meta, _, path = record.partition("\t")
        mode, oid, _stage = meta.split(" ", 2)
        if mode != "160000":
            out[path] = oid
    return out


def _names(raw: str) -> list[str]:
    return [n for n in raw.split("\0") if n]
