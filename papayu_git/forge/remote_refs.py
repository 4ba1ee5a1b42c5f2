"""The branches of a git remote, read and fetched (docs/DESIGN.md, "Hooks and PRs").

`git ls-remote` and `git fetch` run without a terminal prompt, asked again when the connection
broke mid-way (a reset, an empty reply, a 502); a failure is named by what git said: the remote refused the credentials (ERR_REMOTE_AUTH), has no such repository
(ERR_FORGE_NOT_FOUND), or did not answer (ERR_REMOTE_UNREACHABLE). An empty answer is never
read as "the branch is not there" when git failed.
"""

from __future__ import annotations

import re
import subprocess
import time
from pathlib import Path

from papayu_git.errors import PapayuError
from papayu_git.forge.http import shown
from papayu_git.git import run_git, scrubbed_env

_AUTH = re.compile(
    r"authentication failed|could not read (username|password)|permission denied|access denied|"
    r"returned error: 40[13]|unauthori[sz]ed|forbidden",
    re.I,
)
_MISSING = re.compile(
    r"repository '.*' not found|repository not found|does not appear to be a git repository|"
    r"returned error: 404|no such file or directory|not a git repository|project you were looking for could not",
    re.I,
)


# A connection that broke mid-way, not a remote that is down or refuses: worth asking again.
_TRANSIENT = re.compile(
    r"connection reset|empty reply from server|recv failure|send failure|rpc failed|early eof|"
    r"unexpected disconnect|operation timed out|returned error: 50[234]|remote end hung up unexpectedly",
    re.I,
)
TRIES = 3  # a transient failure is tried again twice, after 0.5 s and 1.5 s


def _env() -> dict[str, str]:
    return scrubbed_env({"GIT_TERMINAL_PROMPT": "0", "LC_ALL": "C", "LANG": "C"})


def _remote_git(args: list[str], root: Path) -> subprocess.CompletedProcess[str]:
    """``git ARGS`` against a remote, asked again when the connection broke mid-way (a reset, an
    empty reply, a 502): what fails the same way three times is said as it failed."""
    for attempt in range(TRIES):
        proc = run_git(args, cwd=root, check=False, env=_env())
        if proc.returncode == 0 or not _TRANSIENT.search(proc.stderr) or attempt == TRIES - 1:
            return proc
        time.sleep(0.5 * 3**attempt)
    return proc


def remote_url(root: Path, remote: str) -> str:
    proc = run_git(["remote", "get-url", remote], cwd=root, check=False)
    if proc.returncode != 0:
        raise PapayuError("ERR_REMOTE_NOT_FOUND", f"no remote {remote!r}", path=remote)
    return proc.stdout.strip()


def _failure(root: Path, remote: str, what: str, stderr: str) -> PapayuError:
    url = shown(remote_url(root, remote))
    said = " ".join(stderr.strip().split())[-600:] or "no message"
    said = shown(said)
    if _AUTH.search(said):
        return PapayuError(
            "ERR_REMOTE_AUTH",
            f"{what} {remote} ({url}): the remote refused the credentials: {said}",
            path=remote,
            hint=f"Check that 'git ls-remote {remote}' works without a prompt (credential helper, token, ssh key).",
        )
    if _MISSING.search(said):
        return PapayuError(
            "ERR_FORGE_NOT_FOUND",
            f"{what} {remote} ({url}): no such repository there: {said}",
            path=remote,
            hint=f"Check the URL of {remote}: git remote -v.",
        )
    return PapayuError(
        "ERR_REMOTE_UNREACHABLE",
        f"{what} {remote} ({url}): the remote did not answer: {said}",
        path=remote,
        hint=f"Is the forge up at {url}? Check the URL of {remote} (git remote -v) and try again.",
    )


def remote_heads(root: Path, remote: str, branches: list[str]) -> dict[str, str]:
    """{branch: sha} of those of ``branches`` the remote has."""
    refs = [f"refs/heads/{b}" for b in branches]
    proc = _remote_git(["ls-remote", remote, *refs], root)
    if proc.returncode != 0:
        raise _failure(root, remote, "git ls-remote", proc.stderr)
    heads: dict[str, str] = {}
    for line in proc.stdout.splitlines():
        sha, _, ref = line.partition("\t")
        if ref in refs:
            heads[ref[len("refs/heads/") :]] = sha
    return heads


def fetch_branch(root: Path, remote: str, branch: str, scratch_ref: str) -> str:
    """Fetch ``branch`` of ``remote`` into ``scratch_ref`` (papayu's own, not a branch) and
    return its commit; the caller deletes the scratch ref when it is done."""
    proc = _remote_git(  # --refmap= : no remote-tracking ref moves as a side effect
        [
            "fetch",
            "--no-tags",
            "--quiet",
            "--no-write-fetch-head",
            "--refmap=",
            remote,
            f"+refs/heads/{branch}:{scratch_ref}",
        ],
        root,
    )
    if proc.returncode != 0:
        raise _failure(root, remote, "git fetch", proc.stderr)
    return run_git(["rev-parse", "--verify", f"{scratch_ref}^{{commit}}"], cwd=root).stdout.strip()


def note_remote_tip(root: Path, remote: str, branch: str, sha: str) -> None:
    """After a landing that took the remote's ``branch``: its remote-tracking ref, if the user
    has one, says so too (as `git fetch` would), so `git status` does not call the branch ahead."""
    ref = f"refs/remotes/{remote}/{branch}"
    if run_git(["rev-parse", "--verify", "-q", ref], cwd=root, check=False).returncode == 0:
        run_git(["update-ref", "-m", "papayu: the forge's merge", ref, sha], cwd=root, check=False)
