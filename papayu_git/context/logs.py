"""`logs` context requests: the last N lines of a configured log file.

Sources are configured by the user, never named by the model: `git config papayu.logs.<source> PATH`
(PATH relative to the repository root, or absolute). Secrets are masked before anything is sent.
"""

from __future__ import annotations

import os
from collections.abc import Sequence
from pathlib import Path

from papayu_git import settings
from papayu_git.context.blocks import PRIORITY_HIGH, BlockKind, ContextBlock, note
from papayu_git.paths import is_protected
from papayu_git.secrets import mask

DEFAULT_LAST_N = 200
MAX_LAST_N = 5000
_CHUNK = 64 * 1024
_MAX_TAIL_BYTES = 4 * 1024 * 1024
FROM_FILE_SOURCE = "from-file"


def configured_sources(repo_root: Path) -> dict[str, str]:
    return settings.section_items("papayu.logs.", str(repo_root))


def tail_lines(path: Path, last_n: int) -> str:
    """The last ``last_n`` lines, reading backwards (log files can be huge)."""
    with path.open("rb") as f:
        f.seek(0, os.SEEK_END)
        end = f.tell()
        data = b""
        while end > 0 and data.count(b"\n") <= last_n and len(data) < _MAX_TAIL_BYTES:
            start = max(0, end - _CHUNK)
            f.seek(start)
            data = f.read(end - start) + data
            end = start
    return last_lines(data.decode("utf-8", "replace"), last_n)


def last_lines(text: str, last_n: int) -> str:
    lines = text.rstrip("\n").split("\n")
    return "\n".join(lines[-last_n:])


def logs_block(repo_root: Path, source: str, last_n: int, protected: Sequence[str]) -> ContextBlock:
    sources = configured_sources(repo_root)
    configured = sources.get(source.lower())
    if configured is None:
        names = ", ".join(sorted(sources)) or "none (git config papayu.logs.<source> PATH)"
        return note("logs", f"no log source {source!r}; configured sources: {names}")
    path = Path(os.path.expanduser(configured))
    path = path if path.is_absolute() else repo_root / path
    if is_protected(path.name, protected):
        return note("refused", f"log source {source!r} points at a protected file ({path.name}); not read")
    try:
        text = tail_lines(path, last_n)
    except OSError as exc:
        return note("logs", f"log source {source!r}: cannot read {configured}: {exc.strerror or exc}")
    return log_text_block(source, text, f"last {last_n} lines of {configured}")


def log_text_block(source: str, text: str, detail: str) -> ContextBlock:
    return ContextBlock(BlockKind.LOGS, source, mask(text), PRIORITY_HIGH, requested=True, detail=detail)
