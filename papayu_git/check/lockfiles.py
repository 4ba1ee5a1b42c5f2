"""The user's ignored lockfiles, carried into the check (docs/DESIGN.md, "The check's environment").

A library that ignores its `Cargo.lock` (the norm for crates) has none in the plan's checkout, so
the check resolved its dependencies anew: offline, from whatever versions the cache holds, or
not at all. The versions the user builds and tests with are in their ignored lockfile. Each one
next to a tracked manifest (`Cargo.toml` -> `Cargo.lock`, `package.json` -> `yarn.lock`, ...)
is copied into the checkout before the check, when the checkout has nothing at that path: a
carried file never covers a file of the plan's tree. The copy is the check's (a tool may update
it when a plan adds a dependency); the user's file is only read.
"""

from __future__ import annotations

import os
import posixpath
import stat
from pathlib import Path

from papayu_git.git import run_git

# A manifest and the lockfiles its tools write beside it.
LOCKFILES = {
    "Cargo.toml": ("Cargo.lock",),
    "package.json": (
        "package-lock.json",
        "npm-shrinkwrap.json",
        "yarn.lock",
        "pnpm-lock.yaml",
        "bun.lock",
        "bun.lockb",
        # yarn's Plug'n'Play install: the resolution table and its loader, at the project's root,
        # and the install state yarn checks before running a script ("doesn't seem to have been
        # installed"); the packages are in its cache (an environment directory).
        ".pnp.cjs",
        ".pnp.loader.mjs",
        ".pnp.data.json",
        ".yarn/install-state.gz",
    ),
    "pyproject.toml": ("poetry.lock", "uv.lock", "pdm.lock"),
    "Pipfile": ("Pipfile.lock",),
    "go.mod": ("go.sum",),
    "Gemfile": ("Gemfile.lock",),
    "composer.json": ("composer.lock",),
    "mix.exs": ("mix.lock",),
    "pubspec.yaml": ("pubspec.lock",),
    "Package.swift": ("Package.resolved",),
}
# Files that tie the repository's modules into one workspace, at the root with no manifest
# beside them, often ignored (each developer lists the modules they work on): Go's go.work.
WORKSPACE_FILES = ("go.work", "go.work.sum")
MAX_CANDIDATES = 200
MAX_BYTES = 64 * 1024 * 1024


def ignored_lockfiles(repo_root: Path) -> list[str]:
    """Lockfiles of the user's tree (relative) that sit next to a tracked manifest, or workspace
    files at its root, that are regular files and are ignored by git (a tracked one is in every
    checkout already)."""
    specs = [f":(glob)**/{name}" for name in LOCKFILES]
    proc = run_git(["ls-files", "-z", "--", *specs], cwd=repo_root, check=False)
    candidates: list[str] = []
    for manifest in proc.stdout.split("\0") if proc.returncode == 0 else []:
        directory, name = posixpath.split(manifest)
        if not manifest or "node_modules" in directory.split("/"):
            continue
        for lock in LOCKFILES.get(name, ()):
            path = repo_root / directory / lock
            if path.is_file() and not path.is_symlink():
                candidates.append(posixpath.join(directory, lock))
    candidates += [
        name for name in WORKSPACE_FILES if (repo_root / name).is_file() and not (repo_root / name).is_symlink()
    ]
    if not candidates:
        return []
    names = "\0".join(candidates[:MAX_CANDIDATES]) + "\0"
    proc = run_git(["check-ignore", "-z", "--stdin"], cwd=repo_root, input=names, check=False)
    ignored = set(proc.stdout.split("\0")) if proc.returncode == 0 else set()
    return [rel for rel in candidates if rel in ignored]


def carry(repo_root: Path, work: Path) -> list[str]:
    """Copy the user's ignored lockfiles into the checkout ``work`` where it has nothing at their
    path; the ones copied, relative."""
    carried = []
    for rel in ignored_lockfiles(repo_root):
        if _copy_into(repo_root / rel, work, rel):
            carried.append(rel)
    return carried


def _copy_into(source: Path, work: Path, rel: str) -> bool:
    """Copy ``source`` to ``work/rel`` with its mode and mtime. The checkout holds the plan's
    tree: no symlink on the way is followed, and nothing there is replaced."""
    try:
        src = os.open(source, os.O_RDONLY | os.O_NOFOLLOW | os.O_CLOEXEC)
    except OSError:
        return False
    try:
        info = os.fstat(src)
        if not stat.S_ISREG(info.st_mode) or info.st_size > MAX_BYTES:
            return False
        *parents, name = rel.split("/")
        directory = _open_dir(work, parents)
        if directory is None:
            return False  # a directory the plan removed, or a symlink in its place
        try:
            return _write_copy(src, info, directory, name)
        finally:
            os.close(directory)
    finally:
        os.close(src)


def _open_dir(work: Path, parents: list[str]) -> int | None:
    flags = os.O_RDONLY | os.O_DIRECTORY | os.O_NOFOLLOW | os.O_CLOEXEC
    try:
        directory = os.open(work, flags)
    except OSError:
        return None
    for part in parents:
        try:
            inner = os.open(part, flags, dir_fd=directory)
        except OSError:
            inner = None
        os.close(directory)
        if inner is None:
            return None
        directory = inner
    return directory


def _write_copy(src: int, info: os.stat_result, directory: int, name: str) -> bool:
    flags = os.O_WRONLY | os.O_CREAT | os.O_EXCL | os.O_NOFOLLOW | os.O_CLOEXEC
    try:
        dst = os.open(name, flags, stat.S_IMODE(info.st_mode) | 0o600, dir_fd=directory)
    except OSError:  # something is there already: the plan's, never covered
        return False
    try:
        with os.fdopen(dst, "wb") as writer:
            while block := os.read(src, 1024 * 1024):
                writer.write(block)
            writer.flush()
            os.utime(writer.fileno(), ns=(info.st_atime_ns, info.st_mtime_ns))
    except OSError:  # a half copy would be a broken lockfile: none at all is what the check had
        os.unlink(name, dir_fd=directory)
        return False
    return True
