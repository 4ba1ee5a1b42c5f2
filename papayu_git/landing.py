"""Landing a generated commit on the user's branch (docs/DESIGN.md, "Landing").

A branch checked out in some worktree is fast-forwarded there; a branch checked out
nowhere gets a compare-and-swap `update-ref B new old`. Both run under one papayu
land lock per branch, after checking that B still points at the tip the commit was
built on.

The fast-forward follows the change, not the repository: the commit's own
diff, each touched file's whole content taken out and put back (land_patch.py), is applied by
`git apply --index`, which refuses unless every touched file in the index and the working tree
is exactly the tip's version and no untracked or ignored file sits where the plan creates one;
then the branch (and ORIG_HEAD, as `git merge` sets it) moves by compare-and-swap. Anything
unusual (a refusal, sparse checkout, symlinks or files where the plan needs directories,
submodules, .gitattributes edits) goes to `git merge --ff-only`, which decides and names
the files it would overwrite. A merge, rebase, cherry-pick or revert in progress on the
branch is refused up front (ERR_OPERATION_IN_PROGRESS; the checked commit is kept). A plain
merge refreshes the stat data of every file in the index: ~65 ms of a 50k-file
repository's ~95 ms, for a 10-file change (bench/apply_bench.py). Every git command here runs
with the user's hooks off unless land_hooks.py allows them (papayu.land.runHooks), and the ones
that write the plan's files with no filter driver or fsmonitor of the user's (land_drivers.py):
the work tree gets the very blobs the check ran on.
"""

from __future__ import annotations

import os
import re
import shlex
import stat
import subprocess
import time
from collections.abc import Mapping
from pathlib import Path
from typing import TYPE_CHECKING, NamedTuple

from papayu_git import locks, output, settings
from papayu_git.errors import PapayuError
from papayu_git.git import common_dir, git_dir_of, linked_worktree_dir, run_to_completion, scrubbed_env
from papayu_git.land_drivers import as_checked, no_drivers_env
from papayu_git.land_hooks import HookPolicy, hook_policy, may_have_hook, say_skipped
from papayu_git.land_patch import whole_file_patch
from papayu_git.objects import (
    MODE_EXEC,
    MODE_FILE,
    Change,
    CommitInfo,
    TreeRef,
    changed_entries,
    read_commit,
    store_of,
)
from papayu_git.refs import read_raw_ref, resolve_ref
from papayu_git.stages import pause_point

if TYPE_CHECKING:
    import pygit2


class Target(NamedTuple):
    branch: str  # short name, e.g. main
    ref: str  # refs/heads/main
    tip: str  # commit id the plan is built on


def resolve_target(repo: pygit2.Repository, onto: str | None) -> Target:
    """The current branch, or ``--onto``; a detached HEAD is refused without --onto."""
    head = read_raw_ref(Path(repo.path), "HEAD") or ""
    checked_out = head[len("ref:") :].strip() if head.startswith("ref:") else None
    if onto:
        name = onto[len("refs/heads/") :] if onto.startswith("refs/heads/") else onto
        ref = f"refs/heads/{name}"
    elif checked_out is None:
        raise PapayuError("ERR_DETACHED_HEAD", "HEAD is detached")
    else:
        ref = checked_out
        name = ref[len("refs/heads/") :]
    tip = branch_tip(repo, ref)
    if tip is None and ref == checked_out:
        raise PapayuError("ERR_NO_COMMITS", f"branch {name!r} has no commit yet", path=ref)
    if tip is None:
        raise PapayuError("ERR_BRANCH_NOT_FOUND", f"branch {name!r} does not exist or has no commit", path=ref)
    target = Target(name, ref, tip)
    checked_out_in(repo, ref)  # refuse a branch of a vanished worktree before any work is done
    return target


def branch_tip(repo: pygit2.Repository, ref: str) -> str | None:
    return resolve_ref(Path(repo.path), ref)


def checked_out_in(repo: pygit2.Repository, ref: str) -> Path | None:
    """The worktree whose HEAD is ``ref`` (main or linked), read from the HEAD files."""
    common = common_dir(repo)
    heads: list[tuple[Path, Path | None]] = [(common / "HEAD", None if repo.is_bare else common.parent)]
    admin = common / "worktrees"
    if admin.is_dir():
        for entry in admin.iterdir():
            workdir = linked_worktree_dir(entry)
            if workdir is not None:
                heads.append((entry / "HEAD", workdir))
    for head, workdir in heads:
        try:
            content = head.read_text().strip()
        except OSError:
            continue
        if content == f"ref: {ref}" and workdir is not None:
            return _present(workdir, ref)
    return None


def _present(workdir: Path, ref: str) -> Path:
    """git still counts a branch as checked out in a worktree whose directory was deleted (until
    `git worktree prune`); moving it there is neither a fast-forward nor safe as a bare update-ref
    (the worktree may come back, e.g. on a removable disk)."""
    if not workdir.is_dir():
        raise PapayuError(
            "ERR_WORKTREE_MISSING",
            f"{ref[len('refs/heads/') :]} is checked out in {workdir}, which no longer exists",
            path=str(workdir),
        )
    return workdir


def land_lock_path(papayu_dir: Path, target: Target) -> Path:
    safe = re.sub(r"[^A-Za-z0-9._-]", "_", target.branch)
    return locks.locks_dir(papayu_dir) / f"land-{safe}.lock"


def land(
    repo: pygit2.Repository,
    papayu_dir: Path,
    target: Target,
    commit: str,
    plan_id: str,
    checked: Mapping[str, bytes] | None = None,
) -> str:
    """Move ``target`` from its tip to ``commit``; returns "fast-forward" or "update-ref".
    ``checked``: the bytes the check ran of the files the plan changed, which the work tree
    then holds (land_drivers.as_checked).

    ERR_BRANCH_MOVED when the branch is no longer at ``target.tip``; ERR_DIRTY_WORKTREE
    (with the files) when git refuses to overwrite local changes; ERR_OPERATION_IN_PROGRESS
    during a merge, cherry-pick, revert or rebase of the branch.
    """
    with locks.held(
        land_lock_path(papayu_dir, target),
        what=f"landing on {target.branch}",
        kind="land",
        ref=target.ref,
        plan=plan_id,
    ):
        pause_point("during_land")
        ensure_at(repo, target)
        workdir = checked_out_in(repo, target.ref)
        refuse_during_operations(repo, target, workdir)
        old, new = read_commit(repo, target.tip), read_commit(repo, commit)
        hooks = hook_policy(repo, workdir, TreeRef(old.tree), TreeRef(new.tree))
        if workdir is not None:
            if not _apply_fast_forward(repo, workdir, (old, new, commit), target, plan_id, hooks):
                fast_forward(workdir, commit, target, hooks)
            rewritten = as_checked(workdir, checked or {}, no_drivers_env(workdir, _c_locale()))
            if rewritten:
                output.info(
                    f"{', '.join(rewritten[:5])}: written as the check ran {'them' if len(rewritten) > 1 else 'it'} "
                    "(git's conversions as configured here would have written other bytes)"
                )
            say_skipped(repo, workdir, "post-merge", hooks)
            return "fast-forward"
        proc = _to_completion(
            ["git", *hooks.git_args, "update-ref", "-m", f"papayu: land {plan_id}", target.ref, commit, target.tip],
            cwd=repo.path,
            env=_c_locale(),
        )
        if proc.returncode != 0:
            raise (
                _moved(target, proc.stderr)
                if "but expected" in proc.stderr
                else PapayuError("ERR_GIT_COMMAND", f"git update-ref failed: {proc.stderr.strip()}", path=target.ref)
            )
        return "update-ref"


def ensure_at(repo: pygit2.Repository, target: Target) -> None:
    current = branch_tip(repo, target.ref)
    if current != target.tip:
        raise _moved(target, f"it is now at {(current or 'nothing')[:12]}, the plan was built on {target.tip[:12]}")


def _moved(target: Target, detail: str) -> PapayuError:
    return PapayuError("ERR_BRANCH_MOVED", f"{target.branch} moved: {detail.strip()}", path=target.ref)


def _to_completion(
    cmd: list[str], *, cwd: str | os.PathLike[str], env: dict[str, str], input: bytes | None = None
) -> subprocess.CompletedProcess[str]:
    """A step that moves the user's branch, run by git.run_to_completion (Ctrl-C cannot split it);
    a Ctrl-C that came meanwhile is said here."""
    proc, interrupted = run_to_completion(cmd, cwd=cwd, env=env, input=input)
    if interrupted:
        output.info("Ctrl-C while moving your branch: that step was completed first")
    return proc


def _c_locale() -> dict[str, str]:
    # git's messages are parsed below: keep them in English.
    return scrubbed_env({"LC_ALL": "C", "LANG": "C", "LANGUAGE": "C"})


# Runs as one child so that, like a single `git merge`, it finishes even if papayu is killed
# or interrupted meanwhile (never files moved without the branch, or the reverse).
# The patch (on stdin; else the trees' diff with whole files as context) takes out every line of
# each touched file and puts the new ones in, so the apply refuses any local difference. A file
# whose stat data no longer matches the index (touched, copied) is refused too, though clean:
# git merge, which refreshes the index, then lands it.
_APPLY_FF = r"""
old=$1 new=$2 ref=$3 msg=$4 nohooks=$5 post_merge=$6 patch_in=$7 read_index=$8; shift 8
# $nohooks (land_hooks.NO_HOOKS, or empty), unquoted: apply (post-index-change), update-ref
# (reference-transaction) and maintenance (pre-auto-gc) run hooks too.
# A staged change (even of a mode only) of a touched path is the user's: leave it to git merge.
# Unless the work tree's stat data shows every one already (_staged_shown_by_stat).
if [ "$read_index" = yes ]; then
    GIT_LITERAL_PATHSPECS=1 git $nohooks diff-index --cached --quiet "$old" -- "$@" </dev/null || exit 10
fi
tree_patch() {
    git $nohooks diff-tree -p --binary --full-index --no-renames --no-ext-diff --no-textconv \
        --unified=999999999 "$old" "$new"
}
apply_patch() { git $nohooks apply --index --whitespace=nowarn --no-ignore-whitespace "$@"; }
if [ "$patch_in" = stdin ]; then apply_patch; else tree_patch | apply_patch; fi || exit 10
if printf 'update %s %s %s\nupdate ORIG_HEAD %s\n' "$ref" "$new" "$old" "$old" |
        git $nohooks update-ref -m "$msg" --stdin; then
    [ "$post_merge" = no ] || git hook run --ignore-missing post-merge -- 0 </dev/null >&2
    git $nohooks maintenance run --auto --quiet </dev/null >&2  # as git merge and git commit do (loose objects)
    exit 0
fi
tree_patch | apply_patch -R && exit 11
exit 12
"""
# Beyond this many touched files the path list is left to `git merge` (argument size).
_MAX_FAST_PATHS = 2000
_OPERATIONS = {
    "MERGE_HEAD": "a merge",
    "CHERRY_PICK_HEAD": "a cherry-pick",
    "REVERT_HEAD": "a revert",
    "sequencer": "a cherry-pick or revert",
    "rebase-merge": "a rebase",
    "rebase-apply": "a rebase or am",
}


def refuse_during_operations(repo: pygit2.Repository, target: Target, workdir: Path | None) -> None:
    """ERR_OPERATION_IN_PROGRESS when the worktree that has the branch is in the middle of a
    merge, cherry-pick or revert (git merge --ff-only refuses there too), or when some worktree
    is rebasing the branch (its HEAD is detached meanwhile; the rebase would then fail to move
    the branch it started from)."""
    if workdir is not None:
        gitdir = git_dir_of(workdir)
        for name, what in _OPERATIONS.items():
            if gitdir is not None and (gitdir / name).exists():
                raise _in_progress(f"{what} is in progress in {workdir}", target)
    common = common_dir(repo)
    admin = common / "worktrees"
    for gitdir in [common, *(sorted(admin.iterdir()) if admin.is_dir() else [])]:
        for state in ("rebase-merge", "rebase-apply"):
            try:
                head_name = (gitdir / state / "head-name").read_text().strip()
            except OSError:
                continue
            if head_name == target.ref:
                raise _in_progress(f"{target.branch} is being rebased ({gitdir / state})", target)


def _in_progress(reason: str, target: Target) -> PapayuError:
    return PapayuError("ERR_OPERATION_IN_PROGRESS", reason, path=target.ref)


def _apply_fast_forward(
    repo: pygit2.Repository,
    workdir: Path,
    commits: tuple[CommitInfo, CommitInfo, str],
    target: Target,
    plan_id: str,
    hooks: HookPolicy,
) -> bool:
    """The fast path; False (nothing changed) when `git merge --ff-only` must decide instead.
    ``commits``: the tip's and the landing commit's, and the landing commit's id."""
    old, new, commit = commits
    changes = changed_entries(repo, TreeRef(old.tree), TreeRef(new.tree))
    if (
        list(new.parents) != [target.tip]
        or changes is None
        or len(changes) > _MAX_FAST_PATHS
        or not _plain_worktree(workdir, changes)
    ):
        return False
    patch = whole_file_patch(store_of(repo), changes)
    try:
        proc = _to_completion(
            [
                "sh",
                "-c",
                _APPLY_FF,
                "papayu-land",
                target.tip,
                commit,
                target.ref,
                f"papayu: land {plan_id}",
                " ".join(hooks.git_args),  # split again by the shell: no spaces inside an argument
                "yes" if hooks.run and may_have_hook(repo, "post-merge") else "no",
                "stdin" if patch is not None else "trees",
                "no" if _staged_shown_by_stat(workdir, changes) else "yes",
                *(path for path, _before, _after in changes),
            ],
            cwd=workdir,
            env=no_drivers_env(workdir, scrubbed_env()),
            input=patch,
        )  # the user's locale: hooks run
    except OSError:  # no POSIX sh (some Windows setups): git merge does it all
        return False
    if proc.returncode in (0, 10):
        return proc.returncode == 0
    if proc.returncode == 11:
        raise _moved(target, proc.stderr)
    raise PapayuError(
        "ERR_GIT_COMMAND",
        f"landing in {workdir} failed half-way and could not be undone: {proc.stderr.strip()[-1500:]}",
        path=target.ref,
        hint=f"The plan's commit is {commit}: compare 'git status' with 'git diff {target.tip[:12]} {commit[:12]}'.",
    )


def _staged_shown_by_stat(workdir: Path, changes: list[Change]) -> bool:
    """Whether a staged change of a touched file would show without reading the index, so that
    the land need not read it twice (`git diff-index --cached`, then `git apply --index`: ~9 ms
    of ~40 at 50k files; docs/DESIGN.md, "Landing"). `git apply --index` refuses a file whose stat
    data differs from its index entry's (assume-unchanged and skip-worktree entries included: it
    checks them anyway; a racily clean one by its content), and the whole-file patch refuses one
    whose content is not the tip's: a staged edit of a file the plan changes or deletes therefore
    stops the fast path by itself. Left is a staged mode, which the work tree's executable bit
    shows when git compares it, and what only the index holds about a path the plan creates
    (conflict stages, files staged below it): then, or where stat data are trusted less
    (core.fileMode, core.trustCtime, core.checkStat), the index is read."""
    where = str(workdir)
    for key, weak in _WEAK_STAT.items():
        value = settings.git_config_value(key, where)
        if value is not None and value.strip().lower() in weak:
            return False
    for path, before, _after in changes:
        if before is None or before.filemode not in (MODE_FILE, MODE_EXEC):
            return False
        try:
            mode = os.lstat(workdir / path).st_mode
        except OSError:
            return False
        if not stat.S_ISREG(mode) or bool(mode & stat.S_IXUSR) != (before.filemode == MODE_EXEC):
            return False
    return True


# Values under which git compares less of a file's stat data with its index entry ("" is an empty
# value, false to git, or a key without one, true: either way the index is read).
_FALSE = frozenset({"false", "no", "off", "0", ""})
_WEAK_STAT = {"core.filemode": _FALSE, "core.trustctime": _FALSE, "core.checkstat": frozenset({"minimal"})}


def _plain_worktree(workdir: Path, changes: list[Change]) -> bool:
    """No sparse checkout, every directory the change needs is a real directory or absent
    (git apply would write through a symlink to a directory), and no tracked file the change
    touches is missing (git apply restores a missing file from the index while it checks,
    even when it then refuses: tests/test_landing_differential.py)."""
    gitdir = git_dir_of(workdir)
    if gitdir is None or (gitdir / "info" / "sparse-checkout").exists():
        return False
    seen: set[str] = set()
    for path, before, _after in changes:
        if path.rsplit("/", 1)[-1] == ".gitattributes":
            return False  # changes how every other file converts
        parts = path.split("/")[:-1]
        for depth in range(1, len(parts) + 1):
            prefix = "/".join(parts[:depth])
            if prefix in seen:
                continue
            seen.add(prefix)
            try:
                mode = os.lstat(workdir / prefix).st_mode
            except FileNotFoundError:
                break
            if not stat.S_ISDIR(mode):
                return False
        if before is not None and not os.path.lexists(workdir / path):
            return False
    return True


_LISTED = re.compile(r"^\t(.+)$", re.M)


def fast_forward(workdir: Path, commit: str, target: Target, hooks: HookPolicy) -> None:
    env = no_drivers_env(workdir, {**_c_locale(), "GIT_MERGE_AUTOEDIT": "no"})
    # --no-overwrite-ignore: an ignored file of the user's at a path the plan creates is data, not debris.
    args = [*hooks.git_args, "merge", "--ff-only", "--no-overwrite-ignore", "--no-stat", "-q", commit]
    proc = _to_completion(["git", *args], cwd=workdir, env=env)
    if proc.returncode == 0:
        return
    message = proc.stderr + proc.stdout
    if "would be overwritten" in message or "would be removed" in message:
        files = _LISTED.findall(message)
        raise PapayuError(
            "ERR_DIRTY_WORKTREE",
            f"uncommitted changes in files the plan touches: {', '.join(files) or '?'}",
            path=str(workdir),
        )
    if "Not possible to fast-forward" in message or "not possible to fast-forward" in message.lower():
        raise _moved(target, "it is no longer an ancestor of the plan's commit")
    raise PapayuError(
        "ERR_GIT_COMMAND", f"git merge --ff-only in {workdir} failed: {message.strip()[-1500:]}", path=target.ref
    )


def clear_dead_land(info: locks.LockInfo, git_common: Path) -> None:
    """Stale land lock: remove the ref lock git may have left for it (only if old enough
    that no git child of the dead process can still be writing it)."""
    ref = str(info.data.get("ref", ""))
    if not ref.startswith("refs/heads/") or any(part in ("", ".", "..") for part in ref.split("/")):
        return  # only the lock of a branch ref, never a path elsewhere in .git
    lock = git_common / f"{ref}.lock"
    try:
        if time.time() - lock.stat().st_mtime > 5.0:
            lock.unlink()
    except OSError:
        pass


def stash_around(paths: list[str], command: str, *, untracked: bool = False) -> str:
    """The one-liner that gets a command past the user's uncommitted edits in ``paths`` and gives
    them back whatever it ends in (docs/TRANSACTION.md, "What next"): stash them, run it, pop
    them, and exit with the command's status, so a red apply (or a pop that conflicts) still
    fails the line. POSIX sh; ``{ }`` runs in the user's shell, so nothing exits it."""
    quoted = " ".join(shlex.quote(p) for p in paths)
    return (
        f"git stash push {'-u ' if untracked else ''}-- {quoted} && "
        f"{{ {command}; papayu_status=$?; git stash pop && [ $papayu_status -eq 0 ]; }}"
    )
