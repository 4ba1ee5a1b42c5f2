"""Atomic file replacement: the one way papayu rewrites a file it keeps (plans, traces, memory
layers, lock data, the hook shim, a masked check log).

The new content goes to a temporary file in the same directory (so that ``os.replace`` is a
rename on one file system) under a name no other process or thread picks, then replaces the
target in one step: a reader sees the old file or the new one, never half of one. A symlink at
the target is replaced itself, never written through. On any exception, Ctrl-C included, the
temporary file is removed and the target is left as it was.
"""

from __future__ import annotations

import json
import os
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path
from typing import Any


def temp_path(path: Path) -> Path:
    """A fresh hidden name beside ``path`` (ends in `.tmp`)."""
    return path.with_name(f".{path.name}.{os.getpid()}.{os.urandom(4).hex()}.tmp")


@contextmanager
def replacing(path: Path) -> Iterator[Path]:
    """Yield a temporary path beside ``path`` for the caller to write; when the block ends
    normally it replaces ``path`` (unless the caller removed it: then ``path`` stays as it is);
    when the block raises, it is removed."""
    tmp = temp_path(path)
    try:
        yield tmp
        if os.path.lexists(tmp):
            os.replace(tmp, path)
    except BaseException:  # disk full, text with no UTF-8 form, ^C: nothing left behind
        tmp.unlink(missing_ok=True)
        raise


def write_text(path: Path, text: str, *, executable: bool = False) -> Path:
    """Replace ``path`` with ``text`` (UTF-8); ``executable`` adds the execute bits (u, g, o)."""
    with replacing(path) as tmp:
        tmp.write_text(text, encoding="utf-8")
        if executable:
            import stat

            tmp.chmod(tmp.stat().st_mode | stat.S_IXUSR | stat.S_IXGRP | stat.S_IXOTH)
    return path


def write_json(path: Path, data: Any, *, indent: int | None = 2, newline: bool = True, **dumps: Any) -> Path:
    """Replace ``path`` with ``data`` as JSON (non-ASCII kept as is)."""
    text = json.dumps(data, ensure_ascii=False, indent=indent, **dumps)
    return write_text(path, text + "\n" if newline else text)
