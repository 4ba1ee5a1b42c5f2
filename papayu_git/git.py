"""Git plumbing at the edge: every git subprocess goes through ``run_git``; the one reader of
`.git` files. Opening a repository is repository.open_repo's.
"""

from __future__ import annotations

import os
import subprocess
from collections.abc import Sequence
from pathlib import Path
from typing import TYPE_CHECKING, Any, NamedTuple

from papayu_git.errors import PapayuError

if TYPE_CHECKING:
    import pygit2

# Variables that would point git at another repository or index; a check command
# and our own git calls must never inherit them (docs/DESIGN.md, "The transaction and its guarantees").
_GIT_ENV_VARS = (
    "GIT_DIR",
    "GIT_WORK_TREE",
    "GIT_INDEX_FILE",
    "GIT_OBJECT_DIRECTORY",
    "GIT_ALTERNATE_OBJECT_DIRECTORIES",
    "GIT_PREFIX",
    "GIT_COMMON_DIR",
    "GIT_NAMESPACE",
)


# git then finds no hook at all (/dev/null is no directory) and asks no fsmonitor hook, which
# core.fsmonitor may name as a path in the work tree. Passed as `-c`, they reach the git processes
# git starts itself (merge's `maintenance run --auto` and its pre-auto-gc hook). For the git
# commands that land or push unless land_hooks.py allows hooks, and for papayu's own refs always.
NO_HOOKS = ("-c", "core.hooksPath=/dev/null", "-c", "core.fsmonitor=false")


def scrubbed_env(extra: dict[str, str] | None = None) -> dict[str, str]:
    env = {k: v for k, v in os.environ.items() if k not in _GIT_ENV_VARS}
    if extra:
        env.update(extra)
    return env


def isolated_env() -> dict[str, str]:
    """scrubbed_env without any of the user's git configuration but the repository's own: no
    global or system file, no `-c` or GIT_CONFIG_COUNT values inherited, no external diff. For
    git on the plan's files in papayu's own checkouts (worktree.py), whose config is papayu's:
    the user's filter drivers (`git lfs install`), fsmonitor or attributes file then never run
    or apply there (docs/DESIGN.md, "The check's trust boundary")."""
    env = {
        k: v
        for k, v in scrubbed_env().items()
        if not k.startswith("GIT_CONFIG") and k not in ("GIT_EXTERNAL_DIFF", "GIT_ATTR_SOURCE")
    }
    env.update({"GIT_CONFIG_GLOBAL": os.devnull, "GIT_CONFIG_NOSYSTEM": "1"})
    return env


class Tracked(NamedTuple):
    """Files a repository tracks (tracked_paths), and every directory holding one."""

    files: frozenset[str]
    dirs: frozenset[str]

    def holds(self, path: str) -> bool:
        """``path`` is, or is a directory holding, a tracked file."""
        return path in self.files or path in self.dirs


def tracked_paths(root: Path, paths: Sequence[str]) -> Tracked:
    """The files at or under ``paths`` (relative, literal) that ``root``'s index or HEAD tracks."""
    files: set[str] = set()
    env = scrubbed_env({"GIT_LITERAL_PATHSPECS": "1"})
    for args in (["ls-files", "-z", "--cached"], ["ls-tree", "-r", "-z", "--name-only", "HEAD"]):
        if paths:
            proc = run_git([*args, "--", *paths], cwd=root, check=False, env=env)
            if proc.returncode == 0:  # no HEAD yet: the index says it all
                files.update(name for name in proc.stdout.split("\0") if name)
    dirs = {name[:i] for name in files for i, char in enumerate(name) if char == "/"}
    return Tracked(frozenset(files), frozenset(dirs))


def run_git(
    args: Sequence[str],
    *,
    cwd: str | os.PathLike[str] | None = None,
    check: bool = True,
    input: str | bytes | None = None,
    env: dict[str, str] | None = None,
    text: bool = True,
) -> subprocess.CompletedProcess[Any]:
    """Run git; on failure raise ERR_GIT_COMMAND showing the command, rc and output."""
    cmd = ["git", *args]
    env = env if env is not None else scrubbed_env()
    proc = subprocess.run(cmd, cwd=cwd, input=input, capture_output=True, text=text, env=env)
    if check and proc.returncode != 0:
        out = proc.stderr if isinstance(proc.stderr, str) else proc.stderr.decode("utf-8", "replace")
        raise PapayuError(
            "ERR_GIT_COMMAND",
            f"`{' '.join(cmd)}` exited {proc.returncode}: {str(out).strip()[-2000:]}",
        )
    return proc


def run_to_completion(
    cmd: Sequence[str], *, cwd: str | os.PathLike[str] | None, env: dict[str, str], input: bytes | None = None
) -> tuple[subprocess.CompletedProcess[str], bool]:
    """Run ``cmd`` so that Ctrl-C cannot split it: in its own session (the terminal's SIGINT
    reaches papayu only) and waited for to the end; `subprocess.run` would SIGKILL it on
    KeyboardInterrupt, leaving files moved without the branch. The interrupt is then dropped:
    the step it hit has completed and the command finishes normally. ``input``: its stdin.
    Returns the process and whether a Ctrl-C came meanwhile (the caller says so: landing.py)."""
    proc = subprocess.Popen(
        cmd,
        cwd=cwd,
        env=env,
        stdin=subprocess.DEVNULL if input is None else subprocess.PIPE,
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        start_new_session=True,
    )
    interrupted = False
    while True:
        try:
            stdout, stderr = proc.communicate(input)
            break
        except KeyboardInterrupt:
            interrupted = True
            input = None  # communicate goes on writing what is left of it
    text = [out.decode("utf-8", "replace") for out in (stdout, stderr)]
    return subprocess.CompletedProcess(list(cmd), proc.returncode, *text), interrupted


def find_toplevel(start: str | os.PathLike[str] | None = None) -> Path:
    proc = run_git(["rev-parse", "--show-toplevel"], cwd=start or os.getcwd(), check=False)
    if proc.returncode != 0:
        raise PapayuError("ERR_NOT_A_GIT_REPO", f"{Path(start or os.getcwd()).resolve()} is not in a git work tree")
    return Path(proc.stdout.strip())


def hooks_dir(repo_root: Path) -> Path:
    """Where git runs hooks from: honours core.hooksPath (also relative or ~/), linked worktrees."""
    out = run_git(["rev-parse", "--git-path", "hooks"], cwd=repo_root).stdout.strip()
    return (repo_root / out).resolve() if not os.path.isabs(out) else Path(out)


GITFILE_PREFIX = "gitdir:"


def git_dir_of(workdir: Path) -> Path | None:
    """The git directory of the work tree ``workdir``: its `.git` directory, or where its
    `.git` file (`gitdir: PATH`, relative to ``workdir`` or absolute) points; None without one."""
    dotgit = workdir / ".git"
    if dotgit.is_dir():
        return dotgit
    try:
        line = dotgit.read_text().strip()
    except OSError:
        return None
    if not line.startswith(GITFILE_PREFIX):
        return None
    path = Path(line[len(GITFILE_PREFIX) :].strip())
    return path if path.is_absolute() else workdir / path


def write_gitfile(workdir: Path, gitdir: Path) -> None:
    """Make ``workdir/.git`` a file pointing at ``gitdir`` (what `git_dir_of` reads back)."""
    (workdir / ".git").write_text(f"{GITFILE_PREFIX} {gitdir}\n")


def linked_worktree_dir(admin: Path) -> Path | None:
    """The work tree of a linked worktree, from its admin dir `.git/worktrees/<name>/`: its
    `gitdir` file points back at `<work tree>/.git`. None when that file is missing."""
    try:
        pointer = (admin / "gitdir").read_text().strip()
    except OSError:
        return None
    return Path(pointer).parent


def common_dir(repo: pygit2.Repository) -> Path:
    """The shared `.git` directory, also when ``repo`` is opened in a linked worktree."""
    return common_dir_of(Path(repo.path))


def common_dir_of(git_dir: Path) -> Path:
    """The shared `.git` directory of the git directory ``git_dir`` (a linked worktree's points to it)."""
    pointer = git_dir / "commondir"
    if pointer.is_file():
        return (git_dir / pointer.read_text().strip()).resolve()
    return git_dir


def papayu_dir(repo: pygit2.Repository) -> Path:
    """`.git/papayu/` of the main repository (shared by all linked worktrees)."""
    return common_dir(repo) / "papayu"
