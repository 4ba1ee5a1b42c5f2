"""The context diet (docs/DESIGN.md, "Context").

1. Every block body longer than MAX_FILE_CHARS is cut head+tail 60/40 with
   `...[TRUNCATED N chars]...` (cut at line boundaries when one is near).
2. At most MAX_FILES FILE/SEARCH/LOGS/ENV blocks (NOTE blocks are not counted: refusals must reach
   the model).
3. The rendered context must fit MAX_TOTAL_CHARS: blocks are shrunk or dropped in the drop order
   search → logs → low-priority files → requested files (→ ENV); priority-0 FILE blocks are never
   dropped for size and keep at least 4000 characters — that floor wins over the total.
4. Under a token budget (the model's window, docs/DESIGN.md, "The model's window") the total of
   rule 3 is lowered until the text fits the budget as the model's tokenizer counts it: the same
   drop order, the same floor.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass, replace
from pathlib import Path

from papayu_git import settings
from papayu_git.context.blocks import PRIORITY_TOP, BlockKind, ContextBlock, render_blocks

TOP_PRIORITY_MIN_CHARS = 4000
MIN_USEFUL_CHARS = 1000  # below this a shrunk block is dropped instead (not worth its header)
HEAD_SHARE = 0.6
_LINE_ALIGN_WINDOW = 200
_FIT_ATTEMPTS = 4  # a tokenizer's chars per token vary along a text: one rescale rarely lands
_FIT_SLACK = 0.95

_DROP_RANK = {BlockKind.SEARCH: 0, BlockKind.LOGS: 1, BlockKind.FILE: 2, BlockKind.ENV: 4}


@dataclass(frozen=True)
class DietLimits:
    max_files: int = 8
    max_file_chars: int = 20000
    max_total_chars: int = 120000

    @classmethod
    def from_settings(cls, cwd: Path | None = None) -> DietLimits:
        where = str(cwd) if cwd else None
        return cls(
            settings.get_int("context_max_files", where),
            settings.get_int("context_max_file_chars", where),
            settings.get_int("context_max_total_chars", where),
        )


@dataclass(frozen=True)
class TokenBudget:
    """At most ``tokens`` tokens of context, as ``count`` counts them."""

    tokens: int
    count: Callable[[str], int]


@dataclass(frozen=True)
class DietResult:
    blocks: list[ContextBlock]
    dropped: list[ContextBlock]
    text: str

    @property
    def stats(self) -> dict[str, int]:
        """context_stats with the upstream keys, so traces stay comparable with its golden traces."""
        counted = [b for b in self.blocks if b.kind is not BlockKind.NOTE]
        return {
            "context_files_count": len(counted),
            "context_files_dropped_count": len(self.dropped),
            "context_total_chars": len(self.text),
            "context_logs_chars": sum(len(b.text) for b in self.blocks if b.kind is BlockKind.LOGS),
            "context_truncated_files_count": sum(1 for b in counted if b.truncated),
        }


def truncate_middle(text: str, limit: int) -> str:
    """Head 60 % + marker + tail 40 %; the result is never longer than ``limit``."""
    if len(text) <= limit:
        return text
    marker_len = len(f"\n...[TRUNCATED {len(text)} chars]...\n")  # widest marker: result stays <= limit
    keep = max(limit - marker_len, 0)
    head_n = int(keep * HEAD_SHARE)
    head, tail = text[:head_n], text[len(text) - (keep - head_n) :] if keep > head_n else ""
    cut = head.rfind("\n")
    if cut >= 0 and cut >= head_n - _LINE_ALIGN_WINDOW:
        head = head[: cut + 1]
    cut = tail.find("\n")
    if 0 <= cut < _LINE_ALIGN_WINDOW:
        tail = tail[cut + 1 :]
    removed = len(text) - len(head) - len(tail)
    lead = "" if head.endswith("\n") or not head else "\n"
    trail = "\n" if tail else ""
    result = f"{head}{lead}...[TRUNCATED {removed} chars]...{trail}{tail}"
    return result if len(result) <= limit else result[:limit]


def _drop_key(item: tuple[int, ContextBlock]) -> tuple[int, int, int]:
    index, block = item
    rank = _DROP_RANK[block.kind] + (1 if block.kind is BlockKind.FILE and block.requested else 0)
    return (rank, -block.priority, -index)


def _is_protected_top(block: ContextBlock) -> bool:
    return block.kind is BlockKind.FILE and block.priority == PRIORITY_TOP


class _Diet:
    def __init__(self, blocks: list[ContextBlock], limits: DietLimits) -> None:
        self.limits = limits
        self.original = dict(enumerate(blocks))
        self.kept: dict[int, ContextBlock] = {}
        for i, block in self.original.items():
            body = truncate_middle(block.text, limits.max_file_chars)
            self.kept[i] = block.with_text(body, truncated=body != block.text)
        self.dropped: list[ContextBlock] = []

    def text(self) -> str:
        return render_blocks([self.kept[i] for i in sorted(self.kept)])

    def drop(self, index: int) -> None:
        self.dropped.append(self.original[index])
        del self.kept[index]

    def enforce_count(self) -> None:
        counted = [(i, b) for i, b in self.kept.items() if b.kind is not BlockKind.NOTE]
        for index, _ in sorted(counted, key=_drop_key)[: max(len(counted) - self.limits.max_files, 0)]:
            self.drop(index)

    def enforce_total(self) -> str:
        text = self.text()
        candidates = sorted(((i, b) for i, b in self.kept.items() if b.kind is not BlockKind.NOTE), key=_drop_key)
        candidates.sort(key=lambda item: _is_protected_top(item[1]))  # stable: top files last
        for index, block in candidates:
            overflow = len(text) - self.limits.max_total_chars
            if overflow <= 0:
                break
            target = len(block.text) - overflow
            if _is_protected_top(block):
                target = max(target, TOP_PRIORITY_MIN_CHARS)
                if target < len(block.text):
                    self._shrink(index, target)
            elif target >= MIN_USEFUL_CHARS:
                self._shrink(index, target)
            else:
                self.drop(index)
            text = self.text()
        return text

    def _shrink(self, index: int, target: int) -> None:
        body = truncate_middle(self.original[index].text, target)
        self.kept[index] = self.original[index].with_text(body, truncated=True)


def apply_diet(blocks: list[ContextBlock], limits: DietLimits) -> DietResult:
    diet = _Diet(list(blocks), limits)
    diet.enforce_count()
    text = diet.enforce_total()
    return DietResult([diet.kept[i] for i in sorted(diet.kept)], diet.dropped, text)


def fit_tokens(blocks: list[ContextBlock], limits: DietLimits, budget: TokenBudget) -> DietResult:
    """The diet with its total lowered until the text takes at most ``budget.tokens``; the result
    stays over the budget only when nothing but the floor of rule 3 is left to cut."""
    result = apply_diet(blocks, limits)
    used = budget.count(result.text)
    for _ in range(_FIT_ATTEMPTS):
        if used <= budget.tokens:
            break
        chars = max(int(len(result.text) * budget.tokens / used * _FIT_SLACK), 0)
        smaller = apply_diet(blocks, replace(limits, max_total_chars=min(chars, limits.max_total_chars)))
        if len(smaller.text) >= len(result.text):
            break
        result, used = smaller, budget.count(smaller.text)
    return result
