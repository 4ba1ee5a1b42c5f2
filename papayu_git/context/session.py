"""ContextSession: one plan cycle of the context engine (docs/DESIGN.md, "Context"; docs/ARCHITECTURE.md contract)."""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import replace
from functools import partial
from pathlib import Path
from typing import Any

from papayu_git import output, settings
from papayu_git.context import env, logs, search
from papayu_git.context.autocontext import Planner, ReadSpec
from papayu_git.context.basetree import MODE_SYMLINK, BaseTree
from papayu_git.context.blocks import PRIORITY_TOP, BlockKind, ContextBlock
from papayu_git.context.cache import ContextCache
from papayu_git.context.diet import DietLimits, DietResult, TokenBudget, apply_diet, fit_tokens
from papayu_git.context.files import EXCERPT_RADIUS, entry_note, file_block, refusal_note, repo_relative
from papayu_git.context.heuristics import parse_error_text
from papayu_git.errors import PapayuError
from papayu_git.paths import configured_protected

MAX_ROUNDS = 2  # context_requests are fulfilled in at most 2 rounds: each costs a model call
FROM_FILE_TAIL_LINES = 200


class ContextSession:
    """Owns the cache of one plan cycle; every FILE block comes from the base commit's blobs."""

    def __init__(self, repo_root: Path, base_commit: str) -> None:
        self.tree = BaseTree(Path(repo_root), base_commit)
        self.repo_root = self.tree.repo_root
        self.base_commit = self.tree.base
        self.protected = configured_protected(str(self.repo_root))
        self.limits = DietLimits.from_settings(self.repo_root)
        self.cache = ContextCache()
        self.rounds = 0
        self.files_shown: dict[str, str] = {}
        self.context_stats: dict[str, int] = {}
        self.last_diet: DietResult | None = None

    @property
    def cache_stats(self) -> dict[str, float]:
        return self.cache.stats

    # --- base context -------------------------------------------------------------
    def env(self) -> ContextBlock:
        commits = settings.get_int("context_recent_commits", str(self.repo_root))
        return self.cache.get(("env",), lambda: env.env_block(self.tree, commits))

    def base_context(self, goal: str, log_text: str | None = None) -> list[ContextBlock]:
        hints = parse_error_text(goal, log_text)
        planner = Planner(self.tree, self.protected)
        planner.add_frames(hints.frames)
        planner.add_tests(hints)
        planner.add_goal_paths(hints.goal_paths)
        if hints.missing_module:
            planner.add_manifests()
        blocks = [self.env(), *planner.notes, *self.read(list(planner.specs.values()))]
        if log_text and log_text.strip():
            tail = logs.last_lines(log_text, FROM_FILE_TAIL_LINES)
            blocks.append(logs.log_text_block(logs.FROM_FILE_SOURCE, tail, f"last {FROM_FILE_TAIL_LINES} lines"))
        return blocks

    # --- reads ----------------------------------------------------------------------
    def read(self, specs: Sequence[ReadSpec]) -> list[ContextBlock]:
        """FILE blocks (or NOTEs) for already-validated repo paths; one batch of git calls."""
        keys = [("read", s.path, tuple(s.ranges)) for s in specs]
        todo = [s for s, key in zip(specs, keys, strict=True) if key not in self.cache]
        dirty: dict[str, str] = {}
        if todo:
            entries = self.tree.entries([s.path for s in todo])
            self.tree.blobs([e for e in entries.values() if e and e.type == "blob"])
            dirty = self.tree.dirty([s.path for s in todo])
        blocks = [
            self.cache.get(key, partial(self._read_one, spec, dirty)) for spec, key in zip(specs, keys, strict=True)
        ]
        return [_with_role(b, spec) for b, spec in zip(blocks, specs, strict=True)]

    def _read_one(self, spec: ReadSpec, dirty: dict[str, str]) -> ContextBlock:
        entry = self.tree.entries([spec.path])[spec.path]
        if entry is None or entry.type != "blob" or entry.mode == MODE_SYMLINK:
            return entry_note(self.tree, spec.path, entry)
        blob = self.tree.blobs([entry])[spec.path]
        return file_block(
            blob, ranges=spec.ranges, priority=spec.priority, requested=spec.requested, dirty=spec.path in dirty
        )

    # --- context_requests -------------------------------------------------------------
    def fulfil(self, requests: Sequence[dict[str, Any]]) -> list[ContextBlock]:
        self.rounds += 1
        if self.rounds > MAX_ROUNDS:
            raise PapayuError(
                "ERR_CONTEXT_ROUNDS_EXCEEDED", f"round {self.rounds} of context_requests (at most {MAX_ROUNDS})"
            )
        blocks: list[ContextBlock] = []
        reads: list[ReadSpec] = []
        for index, request in enumerate(requests):
            try:
                blocks += self._fulfil_one(request, reads)
            except PapayuError as exc:
                blocks.append(refusal_note(f"context_requests[{index}] {_describe(request)}", exc))
        blocks += self.read(reads)
        return list(dict.fromkeys(blocks))

    def _fulfil_one(self, request: Any, reads: list[ReadSpec]) -> list[ContextBlock]:
        kind = request.get("type") if isinstance(request, dict) else None
        if kind == "read_file":
            path = repo_relative(_required_str(request, "path"), self.repo_root, self.protected)
            reads.append(ReadSpec(path, _line_range(request), PRIORITY_TOP, requested=True))
            return []
        if kind == "search":
            query = search.SearchQuery(
                _required_str(request, "query"),
                _opt(request, "glob", str, ""),
                _opt(request, "case_sensitive", bool, True),
                _clamp(_opt(request, "max_results", int, search.DEFAULT_MAX_RESULTS), search.MAX_RESULTS_LIMIT),
            )
            return [self.cache.get(query.key(), lambda: search.search_block(self.tree, query, self.protected))]
        if kind == "logs":
            source = _required_str(request, "source")
            last_n = _clamp(_opt(request, "last_n", int, logs.DEFAULT_LAST_N), logs.MAX_LAST_N)
            return [
                self.cache.get(
                    ("logs", source, last_n), lambda: logs.logs_block(self.repo_root, source, last_n, self.protected)
                )
            ]
        if kind == "env":
            return [self.env()]
        raise PapayuError("ERR_CONTEXT_REQUEST_INVALID", f"unknown request type {kind!r}")

    # --- rendering ----------------------------------------------------------------------
    def render(self, blocks: Sequence[ContextBlock], budget: TokenBudget | None = None) -> str:
        """The context as the model reads it; ``budget``: also fit the model's window (the diet's rule 4)."""
        unique = _without_repeats(blocks)
        result = apply_diet(unique, self.limits) if budget is None else fit_tokens(unique, self.limits, budget)
        self.last_diet = result
        self.context_stats = result.stats
        if budget is not None:
            self.context_stats["context_tokens"] = budget.count(result.text)
        for block in result.blocks:
            if block.kind is BlockKind.FILE and block.sha256 and not block.binary:
                self.files_shown[block.path] = block.sha256
        stats = self.context_stats
        if stats["context_files_dropped_count"] or stats["context_truncated_files_count"]:
            output.event(
                "CONTEXT_DIET_APPLIED",
                files=stats["context_files_count"],
                dropped=stats["context_files_dropped_count"],
                truncated=stats["context_truncated_files_count"],
                total_chars=stats["context_total_chars"],
            )
        return result.text


def _without_repeats(blocks: Sequence[ContextBlock]) -> list[ContextBlock]:
    """A block shown twice is sent once; an excerpt of a file that is also shown whole is left out
    (the whole-file block inherits its priority)."""
    unique = list(dict.fromkeys(blocks))
    whole = {b.path: b for b in unique if b.kind is BlockKind.FILE and not b.detail}
    top: dict[str, int] = {}
    for block in unique:
        if block.kind is BlockKind.FILE and block.path in whole:
            top[block.path] = min(top.get(block.path, block.priority), block.priority)
    kept = []
    for block in unique:
        if block.kind is BlockKind.FILE and block.path in whole:
            if block is not whole[block.path]:
                continue
            block = replace(block, priority=min(block.priority, top[block.path]))
        kept.append(block)
    return kept


def _with_role(block: ContextBlock, spec: ReadSpec) -> ContextBlock:
    """A cached block keeps its content; priority/requested follow the current request."""
    if block.kind is not BlockKind.FILE or (block.priority, block.requested) == (spec.priority, spec.requested):
        return block
    return replace(block, priority=min(block.priority, spec.priority), requested=block.requested or spec.requested)


def _describe(request: Any) -> str:
    if not isinstance(request, dict):
        return repr(request)[:80]
    subject = request.get("path") or request.get("query") or request.get("source") or ""
    return f"{request.get('type')} {str(subject)[:80]}".strip()


def _required_str(request: dict[str, Any], key: str) -> str:
    value = request.get(key)
    if not isinstance(value, str) or not value.strip():
        raise PapayuError("ERR_CONTEXT_REQUEST_INVALID", f"{request.get('type')} needs a non-empty string {key!r}")
    return value


def _opt(request: dict[str, Any], key: str, kind: type, default: Any) -> Any:
    value = request.get(key)
    if value is None:
        return default
    if not isinstance(value, kind) or (kind is int and isinstance(value, bool)):
        raise PapayuError("ERR_CONTEXT_REQUEST_INVALID", f"{key!r} must be {kind.__name__}")
    return value


def _clamp(value: int, upper: int) -> int:
    return max(1, min(value, upper))


def _line_range(request: dict[str, Any]) -> list[tuple[int, int]]:
    start, end = _opt(request, "start_line", int, None), _opt(request, "end_line", int, None)
    if start is None and end is None:
        return []
    start = max(1, start or 1)
    end = end if end is not None else start + 2 * EXCERPT_RADIUS
    if end < start:
        raise PapayuError("ERR_CONTEXT_REQUEST_INVALID", f"end_line {end} is before start_line {start}")
    return [(start, end)]
