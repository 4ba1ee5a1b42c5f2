"""The context diet (docs/DESIGN.md, "Context"): limits, truncation, drop order, priority-0 floor;
fitting a token budget (docs/DESIGN.md, "The model's window")."""

from __future__ import annotations

import re

import pytest
from hypothesis import given
from hypothesis import settings as hsettings
from hypothesis import strategies as st

from papayu_git.context.blocks import BlockKind, ContextBlock, render_blocks
from papayu_git.context.diet import (
    TOP_PRIORITY_MIN_CHARS,
    DietLimits,
    TokenBudget,
    apply_diet,
    fit_tokens,
    truncate_middle,
)

SHA = "a" * 64


def file_block(name: str, size: int, *, priority: int = 1, requested: bool = False) -> ContextBlock:
    body = "".join(f"{name} line {i:06d}\n" for i in range(size // 20 + 1))[:size]
    return ContextBlock(BlockKind.FILE, name, body, priority, path=name, sha256=SHA, requested=requested)


def removed_count(text: str) -> int:
    match = re.search(r"\.\.\.\[TRUNCATED (\d+) chars\]\.\.\.", text)
    assert match, text[:200]
    return int(match.group(1))


@pytest.mark.parametrize("size", [1, 100, 19999, 20000])
def test_body_at_or_under_the_file_limit_is_untouched(size: int) -> None:
    text = "x" * size
    assert truncate_middle(text, 20000) == text


@pytest.mark.parametrize("size", [20001, 25000, 1_000_000])
def test_body_over_the_file_limit_is_cut_head_and_tail_with_an_exact_marker(size: int) -> None:
    text = "".join(f"{i:09d}\n" for i in range(size // 10 + 1))[:size]
    out = truncate_middle(text, 20000)
    assert len(out) <= 20000
    head, _, tail = out.partition("...[TRUNCATED")
    tail = tail.split("]...", 1)[1].lstrip("\n")
    assert text.startswith(head) and text.endswith(tail)
    assert removed_count(out) == len(text) - len(head) - len(tail)
    assert 0.55 < len(head) / (len(head) + len(tail)) < 0.65  # 60/40 (line aligned)


def test_exactly_max_files_blocks_are_all_kept_and_one_more_drops_one() -> None:
    limits = DietLimits(max_files=8, max_file_chars=20000, max_total_chars=120000)
    blocks = [file_block(f"f{i}.py", 100) for i in range(8)]
    assert apply_diet(blocks, limits).stats["context_files_dropped_count"] == 0
    result = apply_diet([*blocks, file_block("extra.py", 100)], limits)
    assert result.stats["context_files_count"] == 8
    assert [b.path for b in result.dropped] == ["extra.py"]  # same priority: the last added goes


def test_total_exactly_at_the_limit_is_untouched_and_one_char_over_is_cut() -> None:
    blocks = [file_block("a.py", 3000), file_block("b.py", 3000)]
    total = len(render_blocks(blocks))
    exact = apply_diet(blocks, DietLimits(8, 20000, total))
    assert exact.text == render_blocks(blocks) and exact.stats["context_truncated_files_count"] == 0
    over = apply_diet(blocks, DietLimits(8, 20000, total - 1))
    assert len(over.text) <= total - 1
    assert over.stats["context_truncated_files_count"] == 1 and over.stats["context_files_dropped_count"] == 0


def test_one_huge_file_keeps_its_full_sha_and_fits_the_file_limit() -> None:
    result = apply_diet([file_block("big.py", 1_000_000, priority=0)], DietLimits())
    (block,) = result.blocks
    assert block.truncated and len(block.text) <= 20000
    assert result.text.startswith(f"FILE[big.py] (sha256={SHA}):\n")
    assert result.stats == {
        "context_files_count": 1,
        "context_files_dropped_count": 0,
        "context_total_chars": len(result.text),
        "context_logs_chars": 0,
        "context_truncated_files_count": 1,
    }


def test_fifty_small_files_keep_the_requested_and_most_important_ones() -> None:
    blocks = [file_block(f"low{i}.py", 200, priority=3) for i in range(20)]
    blocks += [file_block(f"req{i}.py", 200, priority=0, requested=True) for i in range(5)]
    blocks += [file_block(f"mid{i}.py", 200, priority=1) for i in range(25)]
    result = apply_diet(blocks, DietLimits())
    kept = {b.path for b in result.blocks}
    assert len(kept) == 8 and result.stats["context_files_dropped_count"] == 42
    assert {f"req{i}.py" for i in range(5)} <= kept
    assert {"mid0.py", "mid1.py", "mid2.py"} <= kept  # earlier blocks outrank later ones
    assert not any(p.startswith("low") for p in kept)


def test_drop_order_is_search_then_logs_then_low_priority_then_requested_files() -> None:
    blocks = [
        file_block("requested.py", 9000, priority=1, requested=True),
        file_block("low.py", 9000, priority=3),
        ContextBlock(BlockKind.LOGS, "runtime", "l" * 9000, requested=True),
        ContextBlock(BlockKind.SEARCH, "needle", "s" * 9000, requested=True),
    ]
    total = len(render_blocks(blocks))
    order = []
    for k in (1, 2, 3):  # each step needs room for one more 9000-char body
        result = apply_diet(blocks, DietLimits(8, 20000, total - k * 9000 - 100))
        order.append(sorted(b.title for b in result.dropped))
        assert len(result.text) <= total - k * 9000 - 100
    assert order == [["needle"], ["needle", "runtime"], ["low.py", "needle", "runtime"]]
    assert [b.title for b in result.blocks] == ["requested.py"] and result.blocks[0].truncated


def test_priority_zero_files_keep_at_least_4k_even_over_the_total() -> None:
    blocks = [file_block("top.py", 15000, priority=0), file_block("other.py", 15000, priority=1)]
    result = apply_diet(blocks, DietLimits(8, 20000, 2000))
    (top,) = result.blocks
    assert top.path == "top.py" and TOP_PRIORITY_MIN_CHARS - 100 <= len(top.text) <= TOP_PRIORITY_MIN_CHARS
    assert [b.path for b in result.dropped] == ["other.py"]


def test_notes_are_never_counted_or_dropped() -> None:
    notes = [ContextBlock(BlockKind.NOTE, "refused", f"note {i}") for i in range(12)]
    result = apply_diet([*notes, file_block("a.py", 100)], DietLimits(max_files=1))
    assert len(result.blocks) == 13 and result.stats["context_files_count"] == 1


def test_logs_chars_count_only_kept_log_bodies() -> None:
    blocks = [ContextBlock(BlockKind.LOGS, "runtime", "x" * 5000), file_block("a.py", 100)]
    assert apply_diet(blocks, DietLimits()).stats["context_logs_chars"] == 5000


@hsettings(max_examples=150, deadline=None)
@given(st.text(alphabet="ab\n", max_size=3000), st.integers(min_value=60, max_value=3000))
def test_truncation_never_exceeds_the_limit_and_keeps_a_true_prefix_and_suffix(text: str, limit: int) -> None:
    out = truncate_middle(text, limit)
    assert len(out) <= limit
    if len(text) <= limit:
        assert out == text
    else:
        head, _, rest = out.partition("...[TRUNCATED ")
        tail = rest.split(" chars]...", 1)[1]
        tail = tail[1:] if tail.startswith("\n") else tail
        head = head[:-1] if head.endswith("\n") and not text.startswith(head) else head
        assert text.startswith(head) and text.endswith(tail)
        assert removed_count(out) == len(text) - len(head) - len(tail)


@hsettings(max_examples=100, deadline=None)
@given(
    st.lists(
        st.tuples(st.sampled_from(list(BlockKind)), st.integers(0, 3), st.booleans(), st.integers(0, 30000)),
        max_size=14,
    ),
    st.integers(1, 10),
    st.integers(500, 30000),
    st.integers(5000, 150000),
)
def test_the_diet_holds_its_limits(
    specs: list[tuple[BlockKind, int, bool, int]], max_files: int, max_file_chars: int, max_total: int
) -> None:
    blocks = [
        ContextBlock(kind, f"b{i}", "x" * size, priority, path=f"b{i}", sha256=SHA, requested=req)
        for i, (kind, priority, req, size) in enumerate(specs)
    ]
    result = apply_diet(blocks, DietLimits(max_files, max_file_chars, max_total))
    counted = [b for b in result.blocks if b.kind is not BlockKind.NOTE]
    assert len(counted) <= max_files
    assert all(len(b.text) <= max_file_chars for b in counted)
    assert len(result.blocks) + len(result.dropped) == len(blocks)
    if len(result.text) > max_total:  # only the 4k floor of priority-0 files may overflow
        assert all(b.kind is BlockKind.FILE and b.priority == 0 for b in counted)  # notes are never cut
        assert all(len(b.text) <= TOP_PRIORITY_MIN_CHARS for b in counted)


def words(text: str) -> int:
    """A tokenizer for the tests: a word or a punctuation mark is a token."""
    return len(re.findall(r"\w+|[^\w\s]", text))


def test_a_token_budget_drops_by_the_diet_order_until_the_text_fits() -> None:
    blocks = [
        file_block("requested.py", 9000, priority=1, requested=True),
        file_block("low.py", 9000, priority=3),
        ContextBlock(BlockKind.LOGS, "runtime", "log line\n" * 900, requested=True),
        ContextBlock(BlockKind.SEARCH, "needle", "match here\n" * 900, requested=True),
    ]
    whole = apply_diet(blocks, DietLimits())
    assert words(whole.text) > 4000
    result = fit_tokens(blocks, DietLimits(), TokenBudget(1500, words))
    assert words(result.text) <= 1500
    assert [b.title for b in result.dropped][:2] == ["needle", "runtime"]  # search, then logs, first
    assert "requested.py" in [b.title for b in result.blocks]  # requested files go last


def test_a_token_budget_that_fits_changes_nothing() -> None:
    blocks = [file_block("a.py", 3000), file_block("b.py", 3000)]
    assert fit_tokens(blocks, DietLimits(), TokenBudget(10**6, words)) == apply_diet(blocks, DietLimits())


def test_a_token_budget_keeps_the_priority_zero_floor_and_stays_over_when_only_the_floor_is_left() -> None:
    blocks = [file_block("top.py", 15000, priority=0), file_block("other.py", 15000, priority=1)]
    result = fit_tokens(blocks, DietLimits(), TokenBudget(10, words))
    (top,) = result.blocks
    assert top.path == "top.py" and len(top.text) >= TOP_PRIORITY_MIN_CHARS - 100
    assert words(result.text) > 10  # over the budget: the caller reports it (ERR_LLM_CONTEXT_WINDOW)
