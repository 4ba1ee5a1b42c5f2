"""Helpers for the apply/transaction tests: plan files, user-state snapshots, object counts."""

from __future__ import annotations

import hashlib
import json
import os
import stat
import subprocess
import sys
from pathlib import Path
from typing import Any

from conftest import ROOT, git


def sha(data: bytes | str) -> str:
    return hashlib.sha256(data.encode() if isinstance(data, str) else data).hexdigest()


def write_plan(directory: Path, actions: list[dict[str, Any]], summary: str = "papayu test plan",
               name: str = "plan.json", **extra: Any) -> Path:
    path = directory / name
    path.write_text(json.dumps({"actions": actions, "summary": summary, **extra}), encoding="utf-8")
    return path


def patch_action(path: str, old: bytes, diff: str) -> dict[str, Any]:
    return {"kind": "PATCH_FILE", "path": path, "patch": diff, "base_sha256": sha(old)}


def processes_with(marker: str) -> list[int]:
    """Live processes whose command line contains ``marker`` (the check's processes run in the
    sandbox's own pid namespace: their `$$` means nothing out here, a marker argument does)."""
    found = []
    for entry in os.listdir("/proc"):
        if not entry.isdigit() or int(entry) == os.getpid():
            continue
        try:
            cmdline = Path(f"/proc/{entry}/cmdline").read_bytes().replace(b"\0", b" ").decode("utf-8", "replace")
            state = Path(f"/proc/{entry}/stat").read_text().rsplit(")", 1)[-1].split()[0]
        except OSError:
            continue
        if marker in cmdline and state != "Z":
            found.append(int(entry))
    return found


def wait_gone(marker: str, timeout: float = 5.0) -> list[int]:
    """Wait until no process carries ``marker``; returns the survivors (empty when all are gone)."""
    import time

    deadline = time.monotonic() + timeout
    while processes_with(marker) and time.monotonic() < deadline:
        time.sleep(0.05)
    return processes_with(marker)


def checkout_file(repo: Path, name: str) -> Path | None:
    """``name`` in the work tree of a pooled check checkout (where a check may write)."""
    found = sorted((repo / ".git/papayu/checkouts").glob(f"slot-*/work/{name}"))
    return found[0] if found else None


def worktree_files(repo: Path) -> dict[str, Any]:
    """Every work-tree file (untracked and ignored included) with its mode, or a symlink's target."""
    files: dict[str, Any] = {}
    for dirpath, dirnames, filenames in os.walk(repo):
        rel_dir = Path(dirpath).relative_to(repo)
        if rel_dir.parts[:1] == (".git",):
            dirnames[:] = []
            continue
        for name in sorted(filenames + [d for d in dirnames if (Path(dirpath) / d).is_symlink()]):
            full = Path(dirpath) / name
            info = full.lstat()
            key = str(rel_dir / name)
            if stat.S_ISLNK(info.st_mode):
                files[key] = ("link", os.readlink(full))
            else:
                files[key] = (oct(info.st_mode), full.read_bytes())
    return files


def snapshot(repo: Path) -> dict[str, Any]:
    """The user's state: every ref, HEAD, index bytes, every work-tree file (untracked and
    ignored included, with mode and symlink targets), the stash. `.git/papayu/` is ours."""
    git_dir = repo / ".git"
    return {
        "refs": git(repo, "for-each-ref", "--format=%(refname) %(objectname)"),
        "head": (git_dir / "HEAD").read_bytes(),
        "config": (git_dir / "config").read_bytes(),  # e.g. no extensions.worktreeConfig written
        "index": (git_dir / "index").read_bytes() if (git_dir / "index").exists() else b"",
        "stash": git(repo, "stash", "list", "--format=%H %gs", check=False),
        "files": worktree_files(repo),
    }


def blob(repo: Path, rev_path: str) -> bytes:
    """Exact bytes of `git cat-file blob REV:PATH` (no newline translation)."""
    return subprocess.run(["git", "cat-file", "blob", rev_path], cwd=repo, capture_output=True, check=True).stdout


def object_ids(repo: Path) -> set[str]:
    """Every object in the repository (loose and packed)."""
    out = git(repo, "cat-file", "--batch-all-objects", "--batch-check=%(objectname)")
    return set(out.split())


def run_papayu_bg(args: list[str], cwd: Path, env: dict[str, str] | None = None) -> subprocess.Popen[str]:
    return subprocess.Popen([sys.executable, "-m", "papayu_git", *args], cwd=cwd, text=True,
                            stdout=subprocess.PIPE, stderr=subprocess.PIPE,
                            env={**os.environ, **(env or {})})


def wait_for_marker(proc: subprocess.Popen[str], marker: str = "PAPAYU_PAUSED", timeout: float = 60) -> str:
    """Read stderr lines until the pause marker appears."""
    import select
    import time

    assert proc.stderr is not None
    deadline = time.monotonic() + timeout
    seen = []
    while time.monotonic() < deadline:
        ready, _, _ = select.select([proc.stderr], [], [], 0.5)
        if ready:
            line = proc.stderr.readline()
            if not line and proc.poll() is not None:
                break
            seen.append(line)
            if marker in line:
                return line
        elif proc.poll() is not None:
            break
    raise AssertionError(f"no {marker} from papayu; stderr so far: {''.join(seen)}")


def worktree_paths(repo: Path) -> list[str]:
    out = git(repo, "worktree", "list", "--porcelain")
    return [line[9:] for line in out.splitlines() if line.startswith("worktree ")]


__all__ = ["ROOT", "blob", "sha", "write_plan", "patch_action", "snapshot", "worktree_files", "object_ids", "run_papayu_bg",
           "wait_for_marker", "worktree_paths", "processes_with", "wait_gone", "checkout_file"]
