"""Synthetic repositories for the benchmarks: one commit built with `git fast-import`, cached."""

from __future__ import annotations

import shutil
import subprocess
from collections.abc import Callable
from pathlib import Path

READY = "papayu-bench-ready"


def build_repo(repo: Path, n_files: int, path_of: Callable[[int], str], content_of: Callable[[int], bytes]) -> Path:
    """A repository at ``repo`` with ``n_files`` files on main, checked out; reused when ready."""
    if (repo / ".git" / READY).exists():
        return repo
    shutil.rmtree(repo, ignore_errors=True)
    repo.mkdir(parents=True)
    git = ["git", "-C", str(repo)]
    subprocess.run([*git, "init", "-q", "-b", "main"], check=True)
    chunks = [
        b"commit refs/heads/main\ncommitter Bench <bench@example.com> 1700000000 +0000\ndata 15\nsynthetic repo\n"
    ]
    for i in range(n_files):
        data = content_of(i)
        chunks.append(b"M 100644 inline %s\ndata %d\n%s\n" % (path_of(i).encode(), len(data), data))
    subprocess.run([*git, "fast-import", "--quiet"], input=b"".join(chunks), check=True)
    subprocess.run([*git, "checkout", "-q", "-f", "main"], check=True)
    (repo / ".git" / READY).touch()
    return repo
