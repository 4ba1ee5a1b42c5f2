"""The context a plan cycle shows the model: papayu_git.context.ContextSession (issue 5).

Until the context package provides ContextSession, ``GoalOnlyContext`` stands in: no base
context beyond the goal, and read_file requests answered with FILE blocks of the base commit
(the FILE block format of SPEC §5, sha256 of the whole blob).
"""

from __future__ import annotations

import hashlib
from collections.abc import Sequence
from pathlib import Path
from typing import Any, Protocol

from papayu_git.errors import PapayuError
from papayu_git.git import run_git

MAX_ROUNDS = 2


class ContextLike(Protocol):
    files_shown: dict[str, str]
    context_stats: dict[str, int]
    cache_stats: dict[str, float]

    def base_context(self, goal: str, log_text: str | None = None) -> list[Any]: ...
    def fulfil(self, requests: Sequence[dict[str, Any]]) -> list[Any]: ...
    def render(self, blocks: Sequence[Any]) -> str: ...


class GoalOnlyContext:
    def __init__(self, repo_root: Path, base_commit: str) -> None:
        self.repo_root, self.base_commit = repo_root, base_commit
        self.files_shown: dict[str, str] = {}
        self.context_stats: dict[str, int] = {"context_files_count": 0}
        self.cache_stats: dict[str, float] = {}
        self.rounds = 0

    def base_context(self, goal: str, log_text: str | None = None) -> list[Any]:
        return [f"LOGS[--from-file]:\n{log_text}"] if log_text else []

    def fulfil(self, requests: Sequence[dict[str, Any]]) -> list[Any]:
        self.rounds += 1
        if self.rounds > MAX_ROUNDS:
            raise PapayuError("ERR_CONTEXT_ROUNDS_EXCEEDED", f"round {self.rounds} of context_requests")
        return [self._read(r["path"]) for r in requests if r.get("type") == "read_file" and r.get("path")]

    def _read(self, path: str) -> str:
        proc = run_git(["show", f"{self.base_commit}:{path}"], cwd=self.repo_root, check=False, text=False)
        if proc.returncode != 0:
            return f"FILE[{path}]: (not found at the base commit)"
        blob: bytes = proc.stdout
        sha = hashlib.sha256(blob).hexdigest()
        self.files_shown[path] = sha
        self.context_stats["context_files_count"] = len(self.files_shown)
        return f"FILE[{path}] (sha256={sha}):\n{blob.decode('utf-8', 'replace')}"

    def render(self, blocks: Sequence[Any]) -> str:
        return "\n\n".join(str(b) for b in blocks)


def open_context(repo_root: Path, base_commit: str) -> ContextLike:
    try:
        from papayu_git.context import ContextSession  # type: ignore[attr-defined]
    except ImportError:
        return GoalOnlyContext(repo_root, base_commit)
    return ContextSession(repo_root, base_commit)  # type: ignore[no-any-return]
