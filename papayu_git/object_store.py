"""Raw git objects in and out, with or without pygit2 (docs/DESIGN.md, "Start-up and cost").

``CatFileStore`` reads through one `git cat-file --batch` per repository, started at the first
read, and writes loose objects itself, as git does (`<kind> <size>\\0<body>`, zlib-compressed,
into a temporary file renamed into place): a plan's commit costs no process and no pygit2 import
(~45 ms). It serves the repositories whose format it knows (repository.py decides); a
``pygit2.Repository`` given by a caller is read and written through its own object database.
Trees and commits are read (and trees written) here in git's formats, the same bytes libgit2
writes; objects.py builds a plan's trees and commits from them.
"""

from __future__ import annotations

import os
import subprocess
import threading
import zlib
from collections.abc import Iterable
from pathlib import Path
from typing import IO, TYPE_CHECKING, NamedTuple, Protocol

from papayu_git.digests import sha1_hex

if TYPE_CHECKING:
    import pygit2

# pygit2's numbers for the object kinds (git's own: OBJ_COMMIT 1, OBJ_TREE 2, OBJ_BLOB 3, OBJ_TAG 4).
_KIND_NUMBERS = {"commit": 1, "tree": 2, "blob": 3, "tag": 4}
_KIND_NAMES = {number: kind for kind, number in _KIND_NUMBERS.items()}
_HEX = frozenset("0123456789abcdef")
_REMEMBERED_SIZE = 1 << 20  # a larger file is read again when asked for again
_BATCH = 256  # ids asked at once (41 bytes each)

MODE_FILE, MODE_EXEC, MODE_LINK, MODE_TREE, MODE_GITLINK = 0o100644, 0o100755, 0o120000, 0o040000, 0o160000
_ID_BYTES = 20  # SHA-1 (repository.py opens no other format without pygit2)


class TreeEntry(NamedTuple):
    name: str
    id: str
    filemode: int


class CommitInfo(NamedTuple):
    tree: str
    parents: tuple[str, ...]


class ObjectStore(Protocol):
    def read(self, oid: str) -> tuple[str, bytes]:
        """(kind, body) of the object ``oid`` (full hex); KeyError when there is none."""
        ...

    def read_many(self, oids: list[str]) -> None:
        """Read ahead what ``read`` will be asked for (a hint; nothing is returned)."""
        ...

    def write(self, kind: str, body: bytes) -> str:
        """Store an object (blob, tree, commit); its id."""
        ...


class CatFileStore:
    """Objects of the repository whose object directory is ``objects`` (SHA-1)."""

    def __init__(self, git_dir: Path, objects: Path, env: dict[str, str]) -> None:
        self.git_dir, self.objects = git_dir, objects
        # The raw objects, never a replacement (refs/replace) of them: what pygit2 reads too.
        self._env = {**env, "GIT_DIR": str(git_dir), "GIT_NO_REPLACE_OBJECTS": "1"}
        self._batch: subprocess.Popen[bytes] | None = None
        self._asking = threading.Lock()  # one question and its answer at a time on the pipe
        # Objects read or written by this run: landing reads again what validation read and the
        # commit wrote (its trees, the old and new files).
        self._seen: dict[str, tuple[str, bytes]] = {}

    def read(self, oid: str) -> tuple[str, bytes]:
        if oid in self._seen:
            return self._seen[oid]
        if len(oid) != 40 or not _HEX.issuperset(oid):
            raise KeyError(oid)  # only ids: a name would be resolved by git (HEAD, tip:path)
        with self._asking:
            stdin, stdout = self._pipes()
            stdin.write(oid.encode() + b"\n")
            stdin.flush()
            header = stdout.readline().split()
            if len(header) != 3:  # "<oid> missing"
                raise KeyError(oid)
            body = stdout.read(int(header[2]))
            stdout.read(1)  # the newline after each object
        return self._remember(oid, header[1].decode(), body)

    def read_many(self, oids: list[str]) -> None:
        """Read ``oids`` ahead in one exchange (a question per id, then the answers), so that the
        ``read`` of each costs no round trip; missing ones are skipped."""
        wanted = [oid for oid in dict.fromkeys(oids) if oid not in self._seen and _HEX.issuperset(oid)]
        for start in range(0, len(wanted), _BATCH):  # the questions fit the pipe: no deadlock
            chunk = wanted[start : start + _BATCH]
            with self._asking:
                stdin, stdout = self._pipes()
                stdin.write(b"".join(oid.encode() + b"\n" for oid in chunk))
                stdin.flush()
                for oid in chunk:
                    header = stdout.readline().split()
                    if len(header) == 3:
                        body = stdout.read(int(header[2]))
                        stdout.read(1)
                        self._remember(oid, header[1].decode(), body)

    def write(self, kind: str, body: bytes) -> str:
        raw = b"%s %d\0%s" % (kind.encode(), len(body), body)
        oid = sha1_hex(raw)
        path = self.objects / oid[:2] / oid[2:]
        if path.exists():
            try:
                os.utime(path)  # only freshened, as git does, so that no prune takes it now
            except OSError:
                pass
        else:
            self._write_loose(path, raw)
        self._remember(oid, kind, body)
        return oid

    def _write_loose(self, path: Path, raw: bytes) -> None:
        path.parent.mkdir(exist_ok=True)
        temporary = path.parent / f"tmp_obj_{os.getpid()}_{os.urandom(4).hex()}"
        descriptor = os.open(temporary, os.O_WRONLY | os.O_CREAT | os.O_EXCL, 0o444)
        try:
            with os.fdopen(descriptor, "wb") as out:
                out.write(zlib.compress(raw, 1))  # core.looseCompression's default
            os.replace(temporary, path)  # whole or not at all; a twin written meanwhile is the same bytes
        except BaseException:
            temporary.unlink(missing_ok=True)
            raise

    def _remember(self, oid: str, kind: str, body: bytes) -> tuple[str, bytes]:
        if len(body) <= _REMEMBERED_SIZE:
            self._seen[oid] = (kind, body)
        return kind, body

    def close(self) -> None:
        if self._batch is not None:
            batch, self._batch = self._batch, None
            for pipe in (batch.stdin, batch.stdout):
                if pipe is not None:
                    pipe.close()
            batch.wait()

    def _pipes(self) -> tuple[IO[bytes], IO[bytes]]:
        if self._batch is None or self._batch.poll() is not None:
            self._batch = subprocess.Popen(
                ["git", "cat-file", "--batch"],
                cwd=self.git_dir,
                env=self._env,
                stdin=subprocess.PIPE,
                stdout=subprocess.PIPE,
                stderr=subprocess.DEVNULL,
            )
        assert self._batch.stdin is not None and self._batch.stdout is not None
        return self._batch.stdin, self._batch.stdout


class Pygit2Store:
    """The object database of a ``pygit2.Repository`` (a caller's, or one repository.open_repo opened
    through pygit2)."""

    def __init__(self, repo: pygit2.Repository) -> None:
        self.odb = repo.odb

    def read(self, oid: str) -> tuple[str, bytes]:
        try:
            number, body = self.odb.read(oid)
        except ValueError as exc:  # not an id
            raise KeyError(oid) from exc
        return _KIND_NAMES[int(number)], body

    def read_many(self, oids: list[str]) -> None:
        """Nothing to save: libgit2 reads in this process."""

    def write(self, kind: str, body: bytes) -> str:
        return str(self.odb.write(_KIND_NUMBERS[kind], body))


# Parsed trees by id, for any repository (an id names one content): validation, the commit and
# the landing walk the same few; written ones are known without a read.
_TREES: dict[str, dict[str, TreeEntry]] = {}
_TREES_KEPT = 4096


def read_tree(store: ObjectStore, oid: str) -> dict[str, TreeEntry]:
    """name -> entry of tree ``oid`` (not to be changed), modes as libgit2 normalizes them (100664
    is a 100644)."""
    if oid not in _TREES:
        _keep_tree(oid, _parse_tree(store, oid))
    return _TREES[oid]


def _keep_tree(oid: str, entries: dict[str, TreeEntry]) -> None:
    if len(_TREES) >= _TREES_KEPT:
        _TREES.clear()
    _TREES[oid] = entries


def _parse_tree(store: ObjectStore, oid: str) -> dict[str, TreeEntry]:
    kind, body = store.read(oid)
    if kind != "tree":
        raise KeyError(oid)
    return _parse_body(body)


def _parse_body(body: bytes) -> dict[str, TreeEntry]:
    entries: dict[str, TreeEntry] = {}
    at = 0
    while at < len(body):
        space = body.index(b" ", at)
        nul = body.index(b"\0", space)
        name = body[space + 1 : nul].decode("utf-8", "surrogateescape")
        entries[name] = TreeEntry(name, body[nul + 1 : nul + 1 + _ID_BYTES].hex(), _canonical(int(body[at:space], 8)))
        at = nul + 1 + _ID_BYTES
    return entries


def write_tree(store: ObjectStore, entries: Iterable[TreeEntry]) -> str:
    """Store a tree of ``entries`` (any order); its id."""
    named = _in_git_order(entries)
    oid = store.write("tree", _body(named))
    _keep_tree(oid, {entry.name: entry for _raw, entry in named})
    return oid


def tree_body(entries: Iterable[TreeEntry]) -> bytes:
    """A tree object's body."""
    return _body(_in_git_order(entries))


def _in_git_order(entries: Iterable[TreeEntry]) -> list[tuple[bytes, TreeEntry]]:
    """(name as bytes, entry), sorted as git sorts a tree's entries: a directory as its name plus "/"."""
    named = [(e.name.encode("utf-8", "surrogateescape"), e) for e in entries]
    named.sort(key=lambda item: item[0] + b"/" if item[1].filemode == MODE_TREE else item[0])
    return named


def _body(named: list[tuple[bytes, TreeEntry]]) -> bytes:
    return b"".join(b"%o %s\0%s" % (e.filemode, raw, bytes.fromhex(e.id)) for raw, e in named)


def _canonical(mode: int) -> int:
    if mode in (MODE_TREE, MODE_LINK, MODE_GITLINK):
        return mode
    return MODE_EXEC if mode & 0o111 else MODE_FILE


def commit_info(store: ObjectStore, oid: str) -> CommitInfo:
    """The tree and parents of commit ``oid`` (an annotated tag is peeled)."""
    for _ in range(8):
        kind, body = store.read(str(oid))
        head = body.split(b"\n\n", 1)[0].split(b"\n")
        if kind == "tag" and head and head[0].startswith(b"object "):
            oid = head[0][len(b"object ") :].decode()
            continue
        if kind != "commit" or not head[0].startswith(b"tree "):
            break
        parents = tuple(line[len(b"parent ") :].decode() for line in head if line.startswith(b"parent "))
        return CommitInfo(head[0][len(b"tree ") :].decode(), parents)
    raise KeyError(oid)


def read_paths(store: ObjectStore, root: str, paths: list[str]) -> None:
    """Read ahead the trees and files along ``paths`` below tree ``root``: one exchange per
    directory level, and one for the files, rather than one per object."""
    level = [(root, path.split("/")) for path in paths]
    files = []
    while level:
        store.read_many([tree for tree, _parts in level if tree not in _TREES])
        below = []
        for tree, (name, *rest) in level:
            entry = read_tree(store, tree).get(name)
            if entry is not None and rest and entry.filemode == MODE_TREE:
                below.append((entry.id, rest))
            elif entry is not None and not rest and entry.filemode in (MODE_FILE, MODE_EXEC):
                files.append(entry.id)
        level = below
    store.read_many(files)
