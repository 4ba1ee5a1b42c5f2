"""Git plumbing at the edge: every git subprocess goes through ``run_git``.

pygit2 is imported lazily (``open_repo``) so that commands which do not need it
start fast (docs/DESIGN.md, "Start-up and cost"; bench/validate_bench.py).
"""

from __future__ import annotations

import os
import subprocess
from collections.abc import Sequence
from pathlib import Path
from typing import TYPE_CHECKING, Any

from papayu_git import output
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


def scrubbed_env(extra: dict[str, str] | None = None) -> dict[str, str]:
    env = {k: v for k, v in os.environ.items() if k not in _GIT_ENV_VARS}
    if extra:
        env.update(extra)
    return env


def run_git(
    args: Sequence[str],
    *,
    cwd: str | os.PathLike[str] | None = None,
    check: bool = True,
    input: str | bytes | None = None,
    env: dict[str, str] | None = None,
    text: bool = True,
    uninterruptible: bool = False,
) -> subprocess.CompletedProcess[Any]:
    """Run git; on failure raise ERR_GIT_COMMAND showing the command, rc and output.
    ``uninterruptible``: see run_to_completion (the steps that move the user's branch)."""
    cmd = ["git", *args]
    env = env if env is not None else scrubbed_env()
    if uninterruptible:
        proc = run_to_completion(cmd, cwd=cwd, env=env)
    else:
        proc = subprocess.run(cmd, cwd=cwd, input=input, capture_output=True, text=text, env=env)
    if check and proc.returncode != 0:
        out = proc.stderr if isinstance(proc.stderr, str) else proc.stderr.decode("utf-8", "replace")
        raise PapayuError(
            "ERR_GIT_COMMAND",
            f"`{' '.join(cmd)}` exited {proc.returncode}: {str(out).strip()[-2000:]}",
        )
    return proc


def run_to_completion(
    cmd: Sequence[str], *, cwd: str | os.PathLike[str] | None, env: dict[str, str]
) -> subprocess.CompletedProcess[str]:
    """Run ``cmd`` so that Ctrl-C cannot split it: in its own session (the terminal's SIGINT
    reaches papayu only) and waited for to the end; `subprocess.run` would SIGKILL it on
    KeyboardInterrupt, leaving files moved without the branch. The interrupt is then dropped:
    the step it hit has completed and the command finishes normally."""
    proc = subprocess.Popen(
        cmd,
        cwd=cwd,
        env=env,
        stdin=subprocess.DEVNULL,
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
        start_new_session=True,
    )
    interrupted = False
    while True:
        try:
            stdout, stderr = proc.communicate()
            break
        except KeyboardInterrupt:
            interrupted = True
    if interrupted:
        output.info("Ctrl-C while moving your branch: that step was completed first")
    return subprocess.CompletedProcess(list(cmd), proc.returncode, stdout, stderr)


def find_toplevel(start: str | os.PathLike[str] | None = None) -> Path:
    proc = run_git(["rev-parse", "--show-toplevel"], cwd=start or os.getcwd(), check=False)
    if proc.returncode != 0:
        raise PapayuError("ERR_NOT_A_GIT_REPO", f"{Path(start or os.getcwd()).resolve()} is not in a git work tree")
    return Path(proc.stdout.strip())


def open_repo(start: str | os.PathLike[str] | None = None) -> pygit2.Repository:
    import pygit2

    path = pygit2.discover_repository(str(start or os.getcwd()))
    if path is None:
        raise PapayuError("ERR_NOT_A_GIT_REPO", f"{Path(start or os.getcwd()).resolve()} is not in a git repository")
    return pygit2.Repository(path)


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
    git_dir = Path(repo.path)
    pointer = git_dir / "commondir"
    if pointer.is_file():
        return (git_dir / pointer.read_text().strip()).resolve()
    return git_dir


def papayu_dir(repo: pygit2.Repository) -> Path:
    """`.git/papayu/` of the main repository (shared by all linked worktrees)."""
    return common_dir(repo) / "papayu"
