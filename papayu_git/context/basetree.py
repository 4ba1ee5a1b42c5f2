"""Reading the base commit: FILE blocks come from its blobs, never from the working tree,
because the plan's bases are checked against the same blobs (docs/DESIGN.md, "Accepted answers").

Two git processes per batch of paths (`ls-tree` for modes, `cat-file --batch` for bytes),
whatever the repository size. Everything is cached for the plan cycle.
"""

from __future__ import annotations

import hashlib
from collections.abc import Iterable
from dataclasses import dataclass
from pathlib import Path

from papayu_git.errors import PapayuError
from papayu_git.git import run_git

_LS_FORMAT = "%(objectmode) %(objecttype) %(objectname)%x09%(path)"
MODE_SYMLINK, MODE_GITLINK = "120000", "160000"


@dataclass(frozen=True)
class TreeEntry:
    path: str
    mode: str
    type: str  # blob | tree | commit (submodule)
    oid: str


@dataclass(frozen=True)
class Blob:
    path: str
    data: bytes

    @property
    def sha256(self) -> str:
        return hashlib.sha256(self.data).hexdigest()

    def text(self) -> str | None:
        """UTF-8 text, or None for binary / non-UTF-8 content (described, not dumped)."""
        if b"\0" in self.data[:8000]:
            return None
        try:
            return self.data.decode("utf-8")
        except UnicodeDecodeError:
            return None


class BaseTree:
    """The base commit's tree, read through git plumbing and cached per plan cycle."""

    def __init__(self, repo_root: Path, base_commit: str) -> None:
        # One process for both: the top level (paths are relative to it) and the base commit.
        proc = run_git(
            ["rev-parse", "--show-toplevel", "--verify", "--quiet", f"{base_commit}^{{commit}}"],
            cwd=repo_root,
            check=False,
        )
        lines = proc.stdout.split("\n")
        if proc.returncode != 0 or len(lines) < 2 or not lines[1].strip():
            if "not a git repository" in proc.stderr:
                raise PapayuError("ERR_NOT_A_GIT_REPO", f"{repo_root} is not in a git work tree")
            raise PapayuError("ERR_GIT_COMMAND", f"{base_commit!r} is not a commit of this repository")
        self.repo_root = Path(lines[0].strip())
        self.base = lines[1].strip()
        self._entries: dict[str, TreeEntry | None] = {}
        self._blobs: dict[str, Blob] = {}
        self._all_paths: list[str] | None = None
        self._by_basename: dict[str, list[str]] | None = None
        self._dirty: dict[str, str] | None = None
        self._recent: dict[int, list[str]] = {}

    def entries(self, paths: Iterable[str]) -> dict[str, TreeEntry | None]:
        wanted = [p for p in dict.fromkeys(paths) if p not in self._entries]
        if wanted:
            out = run_git(
                ["--literal-pathspecs", "ls-tree", "-z", f"--format={_LS_FORMAT}", self.base, "--", *wanted],
                cwd=self.repo_root,
                check=False,
            ).stdout
            found: dict[str, TreeEntry] = {}
            for record in out.split("\0"):
                meta, _, path = record.partition("\t")
                if path:
                    mode, kind, oid = meta.split(" ")
                    found[path] = TreeEntry(path, mode, kind, oid)
            for path in wanted:
                self._entries[path] = found.get(path)
        return {p: self._entries[p] for p in paths}

    def blobs(self, entries: Iterable[TreeEntry]) -> dict[str, Blob]:
        """path -> Blob for blob entries (one `cat-file --batch` for all that are not cached)."""
        todo = [e for e in entries if e.type == "blob" and e.path not in self._blobs]
        if todo:
            data = run_git(
                ["cat-file", "--batch"],
                cwd=self.repo_root,
                text=False,
                input="".join(f"{e.oid}\n" for e in todo).encode(),
            ).stdout
            for entry, content in zip(todo, _parse_batch(data), strict=True):
                self._blobs[entry.path] = Blob(entry.path, content)
        return {e.path: self._blobs[e.path] for e in entries if e.path in self._blobs}

    def all_paths(self) -> list[str]:
        if self._all_paths is None:
            out = run_git(["ls-tree", "-r", "-z", "--name-only", self.base], cwd=self.repo_root).stdout
            self._all_paths = [p for p in out.split("\0") if p]
        return self._all_paths

    def by_basename(self) -> dict[str, list[str]]:
        """base name -> paths: suffix lookups for frames whose path is not at the root."""
        if self._by_basename is None:
            index: dict[str, list[str]] = {}
            for path in self.all_paths():
                index.setdefault(path.rsplit("/", 1)[-1], []).append(path)
            self._by_basename = index
        return self._by_basename

    def top_level(self) -> set[str]:
        out = run_git(["ls-tree", "-z", "--name-only", self.base], cwd=self.repo_root).stdout
        return {p for p in out.split("\0") if p}

    def dirty(self, paths: Iterable[str] | None = None) -> dict[str, str]:
        """Uncommitted changes (`git status` XY code) of the given paths, or of the whole tree."""
        if self._dirty is not None:
            return self._dirty if paths is None else {p: self._dirty[p] for p in paths if p in self._dirty}
        wanted = list(paths) if paths is not None else None
        if wanted == []:
            return {}
        # --no-optional-locks: status must not write the user's index (its stat refresh).
        args = ["--no-optional-locks", "--literal-pathspecs", "status", "--porcelain=v1", "-z", "--no-renames"]
        args += ["-uno", "--", *wanted] if wanted else []
        out = run_git(args, cwd=self.repo_root, check=False).stdout
        status = {record[3:]: record[:2] for record in out.split("\0") if len(record) > 3}
        if wanted is None:
            self._dirty = status
        return status

    def recent_paths(self, commits: int) -> list[str]:
        """Files changed in the last ``commits`` commits before the base, newest first."""
        if commits not in self._recent:
            self._recent[commits] = self._read_recent(commits)
        return self._recent[commits]

    def _read_recent(self, commits: int) -> list[str]:
        out = run_git(
            ["log", f"-n{commits}", "--no-merges", "--name-only", "--format=", "-z", self.base, "--"],
            cwd=self.repo_root,
            check=False,
        ).stdout
        return list(dict.fromkeys(p.strip("\n") for p in out.split("\0") if p.strip("\n")))


def _parse_batch(data: bytes) -> list[bytes]:
    """Split `git cat-file --batch` output: `<oid> <type> <size>\\n<bytes>\\n` per object."""
    contents: list[bytes] = []
    pos = 0
    while pos < len(data):
        end = data.index(b"\n", pos)
        header = data[pos:end].split(b" ")
        if len(header) < 3:  # "<oid> missing": keep positions aligned
            contents.append(b"")
            pos = end + 1
            continue
        size = int(header[2])
        contents.append(data[end + 1 : end + 1 + size])
        pos = end + 1 + size + 1
    return contents
