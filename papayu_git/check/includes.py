"""`papayu.check.include`: the user's ignored files the tests need, given to the check read-only
(docs/DESIGN.md, "The check's environment").

An include never covers a file of the project: a file tracked in the user's tree, or present in
the checkout the check runs on, is the plan's to set. Mounting the user's copy over it would test
the user's bytes while the plan's land. So an included file that is tracked is left out, and an
included directory holding tracked files is given file by file: its untracked and ignored files
and its directories that hold nothing tracked, never the rest. The check's log says which.
"""

from __future__ import annotations

import glob
import os
import stat
from pathlib import Path

from papayu_git import settings
from papayu_git.git import Tracked, tracked_paths

MAX_MOUNTS = 256  # entries of directories given file by file (each is one bind of the sandbox)
MAX_VISITED = 20000  # entries read to find them


def included(repo_root: Path) -> list[Path]:
    """What `papayu.check.include` names in the user's tree (globs from the root): never inside
    `.git`, never a symlink. Their values are masked wherever papayu prints (secret_files.py)."""
    out = []
    for item in settings.get("check_include", str(repo_root)).split(","):
        item = item.strip()
        if not item:
            continue
        for match in sorted(glob.glob(str(repo_root / item), include_hidden=True)):
            path = Path(match)
            rel = path.relative_to(repo_root) if repo_root in path.parents else None
            if rel is None or rel.parts[0] == ".git" or path.is_symlink():
                continue
            out.append(path)
    return out


def included_mounts(repo_root: Path, work: Path) -> tuple[list[Path], list[str]]:
    """The included paths the check gets (``work``: the checkout it runs on), and what its log
    says about those it does not get whole."""
    matches = {path: path.relative_to(repo_root).as_posix() for path in included(repo_root)}
    tracked = tracked_paths(repo_root, sorted(matches.values()))
    mounts: list[Path] = []
    notes: list[str] = []
    for path, rel in matches.items():
        project = tracked.holds(rel) or os.path.lexists(work / rel)
        if not project:
            mounts.append(path)
        elif not path.is_dir():
            notes.append(f"papayu.check.include: {rel} is a file of the project: the check tests the plan's copy")
        else:
            given, left = _untracked_under(repo_root, work, rel, tracked)
            mounts += given
            notes.append(
                f"papayu.check.include: {rel}/ holds files of the project: only its {len(given)} untracked "
                f"or ignored entries are given, the plan's files are tested as they are"
                + (f" ({left} more not given: over {MAX_MOUNTS})" if left else "")
            )
    return mounts, notes


def _untracked_under(repo_root: Path, work: Path, rel: str, tracked: Tracked) -> tuple[list[Path], int]:
    """The entries under ``rel`` that are nobody's but the user's: files neither tracked nor in
    ``work``, and directories holding none of those (given whole). Symlinks are left out (one
    would show its target, wherever that is). Also how many were left out over MAX_MOUNTS."""
    found: list[Path] = []
    stack, visited = [rel], 0
    while stack and visited < MAX_VISITED:
        current = stack.pop()
        try:
            entries = sorted(os.scandir(repo_root / current), key=lambda e: e.name)
        except OSError:
            continue
        for entry in entries:
            visited += 1
            child = f"{current}/{entry.name}"
            try:
                mode = entry.stat(follow_symlinks=False).st_mode
            except OSError:
                continue
            if stat.S_ISLNK(mode):
                continue
            project = tracked.holds(child) or os.path.lexists(work / child)
            if stat.S_ISDIR(mode) and project:
                stack.append(child)
            elif not project and (stat.S_ISDIR(mode) or stat.S_ISREG(mode)):
                found.append(Path(entry.path))
    return found[:MAX_MOUNTS], max(0, len(found) - MAX_MOUNTS)
