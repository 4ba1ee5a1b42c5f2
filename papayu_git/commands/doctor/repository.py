"""`doctor`: git's version and the repository."""

from __future__ import annotations

import re
import subprocess

from papayu_git.commands.doctor.items import FAIL, OK, Here, Item
from papayu_git.errors import PapayuError
from papayu_git.git import common_dir, find_toplevel
from papayu_git.repository import open_repo

# `git ls-tree --format` (context/basetree.py) arrived in git 2.36.
MIN_GIT = (2, 36)


def git_item() -> Item:
    try:
        proc = subprocess.run(
            ["git", "--version"], capture_output=True, text=True, timeout=10, stdin=subprocess.DEVNULL
        )
    except (OSError, subprocess.TimeoutExpired) as exc:
        return Item("git", FAIL, f"`git --version` did not run: {exc}", "Install git (2.36 or newer).")
    text = proc.stdout.strip()
    found = re.search(r"(\d+)\.(\d+)(?:\.(\d+))?", text)
    if proc.returncode != 0 or not found:
        return Item(
            "git", FAIL, f"`git --version` said {text or proc.stderr.strip()!r}", "Install git (2.36 or newer)."
        )
    version = tuple(int(g or 0) for g in found.groups())
    need = ".".join(map(str, MIN_GIT))
    data = {"version": ".".join(map(str, version)), "minimum": need}
    if version[:2] < MIN_GIT:
        return Item("git", FAIL, f"{text}; papayu needs {need} or newer", f"Upgrade git to {need} or newer.", data=data)
    return Item("git", OK, f"{text} (papayu needs >= {need})", data=data)


def repository_item(here: Here) -> Item:
    try:
        here.root = find_toplevel()
        here.repo = open_repo(here.root)
    except OSError as exc:
        return Item("repository", FAIL, f"git did not run: {exc}", "Install git (2.36 or newer).")
    except PapayuError as exc:
        return Item(
            "repository",
            FAIL,
            f"{exc.code}: {exc.reason}",
            "cd into a git work tree (or `git init`), then `git papayu doctor`.",
            code=exc.code,
        )
    here.gitdir = common_dir(here.repo)
    branch = (
        "(no commit yet)"
        if here.repo.head_is_unborn
        else ("detached HEAD" if here.repo.head_is_detached else here.repo.head.shorthand)
    )
    return Item("repository", OK, f"{here.root} on {branch}", data={"root": str(here.root), "branch": branch})
