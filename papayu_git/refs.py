"""Refs in git's files backend, read as libgit2 reads them and written as git writes them
(docs/DESIGN.md, "Start-up and cost"): the loose file (per-worktree refs in the worktree's git
directory, the others in the common one), else `packed-refs`.

Writing is for papayu's own branches (`papayu/<id>`, objects.py) and only where a loose file is the
whole story: a lock taken as git takes it (`<ref>.lock`, created exclusively), the reflog line,
the lock renamed into place. Where the ref is packed, locked or in the way of another, the caller
asks `git update-ref`.
"""

from __future__ import annotations

import os
import re
from pathlib import Path

from papayu_git import settings
from papayu_git.git import common_dir_of

# What git check-ref-format refuses; such a name is no ref (and no path to read).
_BAD_REF = re.compile(r"(^|/)\.|\.\.|[\x00-\x20\x7f~^:?*\[\\]|@\{|\.lock(/|$)|//|^/|/$|\.$|^@$")
_HEX = re.compile(rb"[0-9a-f]{40}")
SYMBOLIC = "ref:"
_MAX_DEPTH = 5  # symbolic refs followed, as git does
_ZERO = "0" * 40
_NO_REFLOG = frozenset({"false", "no", "off", "0"})


def resolve_ref(git_dir: Path, name: str) -> str | None:
    """The object id ``name`` points at, symbolic refs followed; None when it points nowhere."""
    for _ in range(_MAX_DEPTH):
        raw = read_raw_ref(git_dir, name)
        if raw is None or not raw.startswith(SYMBOLIC):
            return raw if raw is not None and _HEX.fullmatch(raw.encode()) else None
        name = raw[len(SYMBOLIC) :].strip()
    return None


def read_raw_ref(git_dir: Path, name: str) -> str | None:
    """The content of ref ``name`` of the worktree whose git directory is ``git_dir``: an id or
    `ref: <name>`; None when there is no such ref (or ``name`` is none git would accept)."""
    if _BAD_REF.search(name):
        return None
    per_worktree = "/" not in name or name.startswith(("refs/bisect/", "refs/worktree/", "refs/rewritten/"))
    common = common_dir_of(git_dir)
    try:
        text = ((git_dir if per_worktree else common) / name).read_text(errors="replace").strip()
    except OSError:  # absent, or a directory of refs
        text = ""
    if text:
        return text
    return _packed_ref(common, name) if name.startswith("refs/") else None


def _packed_ref(common: Path, name: str) -> str | None:
    try:
        data = (common / "packed-refs").read_bytes()
    except OSError:
        return None
    data += b"\n"
    needle = b" " + name.encode() + b"\n"
    at = data.find(needle)
    while at != -1:
        line = data.rfind(b"\n", 0, at) + 1  # "<id> <name>"; peeled tags ("^<id>") never match
        if _HEX.fullmatch(data[line:at]):
            return data[line:at].decode()
        at = data.find(needle, at + 1)
    return None


def write_loose_ref(git_dir: Path, name: str, new: str | None, ident: str, message: str) -> bool:
    """Point ref ``name`` at ``new``, or delete it (None), with its reflog line (``ident``: the
    committer's `Name <email> time zone`); False, with nothing changed, where git must do it."""
    common = common_dir_of(git_dir)
    if _BAD_REF.search(name) or not name.startswith("refs/heads/") or _packed_ref(common, name) is not None:
        return False
    prefixes = name.split("/")
    if any(_packed_ref(common, "/".join(prefixes[:n])) for n in range(3, len(prefixes))):
        return False  # a packed branch where a directory of this one would be
    path, log = common / name, common / "logs" / name
    if path.is_dir():
        return False  # refs below it: git says which
    try:
        path.parent.mkdir(parents=True, exist_ok=True)
        lock = os.open(f"{path}.lock", os.O_WRONLY | os.O_CREAT | os.O_EXCL, 0o666)
    except OSError:  # locked, or a file where a directory must be
        return False
    try:
        old = read_raw_ref(git_dir, name) or _ZERO
        if new is not None:
            os.write(lock, f"{new}\n".encode())
        os.close(lock)
        lock = -1
        if new is None:
            path.unlink(missing_ok=True)
            log.unlink(missing_ok=True)
            os.unlink(f"{path}.lock")
            for directory in (path.parent, log.parent):
                _remove_empty(directory, common)
        else:
            if _logs(name, log, str(common)):
                log.parent.mkdir(parents=True, exist_ok=True)
                with open(log, "a", encoding="utf-8") as out:
                    out.write(f"{old} {new} {ident}\t{message}\n")
            os.replace(f"{path}.lock", path)
    except BaseException:
        if lock != -1:
            os.close(lock)
        Path(f"{path}.lock").unlink(missing_ok=True)
        raise
    return new is not None or _packed_ref(common, name) is None  # a pack-refs meanwhile: git's turn


def _logs(name: str, log: Path, workdir: str) -> bool:
    """Whether git would write the reflog of ``name`` (a branch of a work tree's repository)."""
    setting = (settings.git_config_value("core.logAllRefUpdates", workdir) or "true").lower()
    return setting not in _NO_REFLOG or log.exists()


def _remove_empty(directory: Path, common: Path) -> None:
    """Remove ``directory`` and its parents while empty, below refs/heads or logs/refs/heads."""
    stops = {common / "refs" / "heads", common / "logs" / "refs" / "heads"}
    while directory not in stops and common in directory.parents:
        try:
            directory.rmdir()
        except OSError:
            return
        directory = directory.parent
