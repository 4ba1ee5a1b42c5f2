"""Raw git objects in and out, with or without pygit2 (docs/DESIGN.md, "Start-up and cost").

``CatFileStore`` reads through one `git cat-file --batch` per repository, started at the first
read, and writes loose objects itself, as git does (`<kind> <size>\\0<body>`, zlib-compressed,
into a temporary file renamed into place): a plan's commit costs no process and no pygit2 import
(~45 ms). It serves the repositories whose format it knows (repository.py decides); a
``pygit2.Repository`` given by a caller is read and written through its own object database.
Objects are bytes here; their formats (trees, commits) are objects.py's.
"""

from __future__ import annotations

import hashlib
import os
import subprocess
import threading
import zlib
from pathlib import Path
from typing import IO, TYPE_CHECKING, Protocol

if TYPE_CHECKING:
    import pygit2

# pygit2's numbers for the object kinds (git's own: OBJ_COMMIT 1, OBJ_TREE 2, OBJ_BLOB 3, OBJ_TAG 4).
_KIND_NUMBERS = {"commit": 1, "tree": 2, "blob": 3, "tag": 4}
_KIND_NAMES = {number: kind for kind, number in _KIND_NUMBERS.items()}
_HEX = frozenset("0123456789abcdef")
_REMEMBERED_SIZE = 1 << 20  # a larger file is read again when asked for again


class ObjectStore(Protocol):
    def read(self, oid: str) -> tuple[str, bytes]:
        """(kind, body) of the object ``oid`` (full hex); KeyError when there is none."""
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

    def write(self, kind: str, body: bytes) -> str:
        raw = b"%s %d\0%s" % (kind.encode(), len(body), body)
        oid = hashlib.sha1(raw).hexdigest()
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
    """The object database of a ``pygit2.Repository`` (a caller's, or one git.open_repo opened
    through pygit2)."""

    def __init__(self, repo: pygit2.Repository) -> None:
        self.odb = repo.odb

    def read(self, oid: str) -> tuple[str, bytes]:
        try:
            number, body = self.odb.read(oid)
        except ValueError as exc:  # not an id
            raise KeyError(oid) from exc
        return _KIND_NAMES[int(number)], body

    def write(self, kind: str, body: bytes) -> str:
        return str(self.odb.write(_KIND_NUMBERS[kind], body))
