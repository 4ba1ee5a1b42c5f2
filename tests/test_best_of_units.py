"""Best of N's pure and small parts: the ranking and its sentences, goal-named tests, who is asked
how (papayu.candidates.models entries, temperatures, approaches, the key rules per entry), run ids. The
whole run is tested through the CLI in test_best_of*.py."""

from __future__ import annotations

from pathlib import Path

import pytest
from helpers import git

from papayu_git.bestof import runs
from papayu_git.bestof.ranking import Score, goal_named, order, tied_at_top, why_lost
from papayu_git.bestof.sampling import LENSES, endpoint, samples, temperature
from papayu_git.errors import PapayuError
from papayu_git.llm.config import OPENAI_BASE_URL, Provider


def score(
    index: int, green: bool = True, fixed: int = 1, goal: int = 1, flaky: int = 0, files: int = 1, lines: int = 2
) -> Score:
    return Score(index, green, goal, fixed, flaky, files, lines)


def test_the_gate_comes_before_everything_else() -> None:
    red_but_better = score(1, green=False, fixed=5, goal=5, lines=1)
    green = score(2, lines=400, files=9)
    assert [s.index for s in order([red_but_better, green])] == [2, 1]


def test_then_tests_fixed_goal_named_first_then_flaky_then_size() -> None:
    ordered = order(
        [
            score(1, fixed=3, goal=0),
            score(2, fixed=1, goal=1, lines=50),
            score(3, fixed=1, goal=1, flaky=1, lines=2),
            score(4, fixed=1, goal=1, files=2, lines=2),
            score(5, fixed=1, goal=1, files=1, lines=4),
        ]
    )
    assert [s.index for s in ordered] == [5, 2, 4, 3, 1]
    winner = ordered[0]
    assert why_lost(score(1, fixed=3, goal=0), winner).startswith(
        "fixes 3 tests (0 named by the goal), #5 fixes 1 test"
    )
    assert why_lost(score(3, flaky=1), score(5, lines=4)) == "flaky signal: 1 test flaky, #5 0"
    assert why_lost(score(2, lines=50), winner) == "larger change: 1 file, 50 lines, #5 1 file, 4 lines"
    assert why_lost(score(7, lines=4), winner) == ""  # a tie


def test_a_tie_is_only_among_green_candidates() -> None:
    assert [s.index for s in tied_at_top(order([score(2), score(1), score(3, lines=9)]))] == [1, 2]
    assert tied_at_top(order([score(1, green=False), score(2, green=False)])) == []


def test_goal_named_tests_by_id_file_or_name() -> None:
    tests = ["tests/test_calc.py::test_add", "tests/test_io.py::TestRead::test_read[utf-8]", "pkg > parses a date"]
    assert goal_named("fix the failing test tests/test_calc.py", tests) == [tests[0]]
    assert goal_named("test_read fails on utf-8", tests) == [tests[1]]
    assert goal_named("add is wrong", tests) == []  # `add` alone names no test


def test_a_candidates_entry_is_provider_model_and_an_optional_base_url(monkeypatch: pytest.MonkeyPatch) -> None:
    label, config, error = endpoint("openai-compatible/Qwen/Qwen2.5-Coder-32B@http://127.0.0.1:8000/v1")
    assert error is None and config is not None and label == "openai-compatible/Qwen/Qwen2.5-Coder-32B"
    assert (config.provider, config.model, config.base_url) == (
        Provider.OPENAI_COMPATIBLE,
        "Qwen/Qwen2.5-Coder-32B",
        "http://127.0.0.1:8000/v1",
    )
    assert endpoint("ollama/qwen2.5-coder:7b")[1].model == "qwen2.5-coder:7b"  # type: ignore[union-attr]
    for bad in ("gpt-4o", "/model", "nosuch/model"):
        _label, config, error = endpoint(bad)
        assert config is None and isinstance(error, PapayuError) and error.code == "ERR_LLM_CONFIG", bad


def test_a_key_goes_where_the_rules_for_one_model_send_it(monkeypatch: pytest.MonkeyPatch) -> None:
    """The list may come from the repository's config: OPENAI_API_KEY goes to OpenAI's API only,
    and no key crosses plain http to another machine."""
    monkeypatch.setenv("OPENAI_API_KEY", "sk-" + "x" * 40)
    assert endpoint("openai/gpt-4o-mini")[1].api_key.startswith("sk-")  # type: ignore[union-attr]
    assert endpoint("openai/gpt-4o-mini")[1].base_url == OPENAI_BASE_URL  # type: ignore[union-attr]
    assert endpoint("openai-compatible/m@https://evil.example/v1")[1].api_key == ""  # type: ignore[union-attr]
    monkeypatch.setenv("PAPAYU_LLM_API_KEY", "k" * 40)
    _label, config, error = endpoint("openai-compatible/m@http://203.0.113.9/v1")
    assert config is None and error is not None and error.code == "ERR_LLM_INSECURE_KEY"


def test_one_model_is_sampled_warmer_with_an_approach_each(repo: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("PAPAYU_LLM_BASE_URL", "http://127.0.0.1:9/v1")
    monkeypatch.setenv("PAPAYU_LLM_MODEL", "m")
    four = samples(repo, 4)
    assert [s.temperature for s in four] == [0.0, 0.3, 0.5, 0.7]
    assert [s.lens for s in four] == list(LENSES) and four[0].lens == ""  # the first is what `fix` asks
    assert temperature(20) == 1.2


def test_every_configured_model_is_asked_each_first_at_temperature_0(repo: Path) -> None:
    git(repo, "config", "papayu.candidates.models", "openai-compatible/a@http://127.0.0.1:9/v1, ollama/b")
    one = samples(repo, 1)  # fewer than the models: each is still asked
    assert [(s.label, s.temperature) for s in one] == [("openai-compatible/a", 0.0), ("ollama/b", 0.0)]
    three = samples(repo, 3)
    assert [(s.label, s.temperature) for s in three][2] == ("openai-compatible/a", 0.3)


def test_run_ids_never_look_like_plan_ids_and_resolve_like_them(repo: Path) -> None:
    pdir = repo / ".git" / "papayu"
    first, second = "best-20260101-120000-a1b2c3", "best-20260102-120000-ffee00"
    for run_id in (first, second):
        runs.save(pdir, {"id": run_id, "candidates": []})
    assert runs.is_id(first) and not runs.is_id("20260101-120000-a1b2c3")
    assert runs.resolve(pdir, first) == (first, None)
    assert runs.resolve(pdir, "best-a1b2:3") == (first, 3)
    assert runs.resolve(pdir, f"papayu/{second}/2") == (second, 2)
    assert runs.resolve(pdir, "best-@") == (second, None)
    assert runs.parse_key(f"{first}/12") == (first, 12) and runs.parse_key("20260101-120000-a1b2c3") is None
    for bad in ("best-", "best-2026010", "best-zz", "best-a1b2:x"):
        with pytest.raises(PapayuError) as info:
            runs.resolve(pdir, bad)
        assert info.value.code == "ERR_RUN_NOT_FOUND", bad
