"""Context engine (docs/DESIGN.md, "Context"): base context, error heuristics, context_requests, cache, diet.

Use one ContextSession per plan cycle:

    session = ContextSession(repo_root, base_commit)
    blocks = session.base_context(goal, log_text)        # ENV + error heuristics (+ the log tail)
    text = session.render(blocks)                         # the diet; records files_shown, context_stats
    ... model answers with context_requests ...
    text = session.render(blocks + session.fulfil(requests))   # at most 2 rounds
"""

from __future__ import annotations

from pathlib import Path

from papayu_git.context.blocks import BlockKind, ContextBlock
from papayu_git.context.diet import DietLimits, truncate_middle
from papayu_git.context.session import ContextSession
from papayu_git.errors import PapayuError

__all__ = ["BlockKind", "ContextBlock", "ContextSession", "DietLimits", "gather", "read_log_file", "truncate_middle"]

MAX_LOG_FILE_BYTES = 2 * 1024 * 1024


def read_log_file(path: str) -> str:
    """`--from-file LOG` text: '-' is stdin; only the last 2 MiB of a huge log are kept."""
    import sys

    if path == "-":
        return sys.stdin.read()[-MAX_LOG_FILE_BYTES:]
    try:
        with open(path, "rb") as f:
            f.seek(0, 2)
            f.seek(max(0, f.tell() - MAX_LOG_FILE_BYTES))
            return f.read().decode("utf-8", "replace")
    except OSError as exc:
        raise PapayuError("ERR_FILE_NOT_FOUND", f"cannot read {path}: {exc.strerror or exc}", path=path) from exc


def gather(
    repo_root: Path, goal: str, log_text: str | None = None, base_commit: str = "HEAD"
) -> tuple[ContextSession, list[ContextBlock]]:
    """The `plan --from-file` entry: a new session and its base context for goal + log text."""
    session = ContextSession(repo_root, base_commit)
    return session, session.base_context(goal, log_text)
