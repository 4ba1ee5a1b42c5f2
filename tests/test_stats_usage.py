"""`git papayu stats`: the tokens of every model call (plan rounds, repairs, the APPLY round, agent
turns) per provider and model, calls without usage as "usage unknown", and the cost estimate.

Real CLI in subprocesses against the scripted server, whose answers carry known token counts."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest
from helpers import assert_error, git, make_repo, papayu
from llm_server import Reply, ScriptedLLM, chat, plan_answer, shown_files, tool_calls

CALC = "def add(a, b):\n    return a - b\n"
FIX = "--- a/calc.py\n+++ b/calc.py\n@@ -1,2 +1,2 @@\n def add(a, b):\n-    return a - b\n+    return a + b\n"
GOAL = "fix add() in calc.py"


def counted(reply: Reply, prompt: int | None, completion: int | None) -> Reply:
    """``reply`` with the server's usage set to these counts (None: the server reports no usage)."""
    body = dict(reply.body)
    if prompt is None:
        body.pop("usage", None)
    else:
        body["usage"] = {"prompt_tokens": prompt, "completion_tokens": completion, "total_tokens": 0}
    return Reply(reply.status, body)


def ollama_counted(content: Any, prompt: int, completion: int) -> Reply:
    return Reply(
        200,
        {
            "model": "qwen2.5-coder",
            "message": {"role": "assistant", "content": json.dumps(content)},
            "done": True,
            "done_reason": "stop",
            "prompt_eval_count": prompt,
            "eval_count": completion,
        },
    )


def patch_answer(body: dict[str, Any]) -> Reply:
    base = shown_files(body)["calc.py"]
    action = {"kind": "PATCH_FILE", "path": "calc.py", "patch": FIX, "base_sha256": base}
    return counted(chat({"summary": "add() adds", "actions": [action]}), 400, 50)


def openai_env(llm: ScriptedLLM, model: str = "test-model") -> dict[str, str]:
    return llm.env(PAPAYU_LLM_PROVIDER="openai-compatible", PAPAYU_LLM_MODEL=model)


@pytest.fixture
def used(tmp_path: Path) -> Path:
    """A repository whose traces hold, with known counts:
    openai-compatible/test-model: a plan repaired once (100+7, 200+13), its APPLY round (400+50),
    a plan whose server reported no usage; ollama/qwen2.5-coder: a plan (1000+100);
    openai-compatible/agent-model: an agent run of two turns (50+5, then no usage)."""
    repo = make_repo(tmp_path / "used", {"calc.py": CALC})
    llm = ScriptedLLM([])
    try:
        llm.script = [counted(chat('{"summary": "oops", "actions": ['), 100, 7), counted(chat(plan_answer()), 200, 13)]
        planned = papayu("plan", GOAL, "--json", cwd=repo, env=openai_env(llm))
        assert planned.returncode == 0, planned.stderr
        llm.script = [patch_answer]
        plan_id = json.loads(planned.stdout)["plan_id"]
        applied = papayu("apply", plan_id, "--no-check", "--json", cwd=repo, env=openai_env(llm))
        assert applied.returncode == 0, applied.stderr
        llm.script = [counted(chat(plan_answer()), None, None)]
        assert papayu("plan", GOAL, cwd=repo, env=openai_env(llm)).returncode == 0
        llm.script = [ollama_counted(plan_answer(), 1000, 100)]
        env = {
            "PAPAYU_LLM_PROVIDER": "ollama",
            "PAPAYU_LLM_BASE_URL": llm.root_url,
            "PAPAYU_LLM_MODEL": "qwen2.5-coder",
        }
        assert papayu("plan", GOAL, cwd=repo, env=env).returncode == 0
        llm.script = [
            counted(tool_calls(("a", "list_files", {})), 50, 5),
            counted(tool_calls(("b", "read_file", {"path": "calc.py"})), None, None),
        ]
        agent = papayu("agent", GOAL, "--max-steps", "2", "--json", cwd=repo, env=openai_env(llm, "agent-model"))
        assert_error(agent, "ERR_AGENT_MAX_STEPS")
        assert len(llm.requests) == 7
    finally:
        llm.close()
    return repo


def usage(repo: Path, *args: str, env: dict[str, str] | None = None) -> dict[str, Any]:
    proc = papayu("stats", "--json", *args, cwd=repo, env=env)
    assert proc.returncode == 0, proc.stderr
    return json.loads(proc.stdout)["usage"]


def test_every_call_is_counted_per_provider_and_model_and_priced(used: Path) -> None:
    got = usage(used)
    assert [(r["provider"], r["model"], r["calls"], r["usage_unknown"], r["prompt_tokens"], r["completion_tokens"])
            for r in got["by_model"]] == [
        ("ollama", "qwen2.5-coder", 1, 0, 1000, 100),
        ("openai-compatible", "agent-model", 2, 1, 50, 5),
        ("openai-compatible", "test-model", 4, 1, 700, 70),
    ]  # fmt: skip
    assert [(r["provider"], r["calls"], r["usage_unknown"], r["prompt_tokens"], r["completion_tokens"])
            for r in got["by_provider"]] == [
        ("ollama", 1, 0, 1000, 100),
        ("openai-compatible", 6, 2, 750, 75),
    ]  # fmt: skip
    assert (got["calls"], got["usage_unknown"], got["prompt_tokens"], got["completion_tokens"]) == (7, 2, 1750, 175)
    assert got["cost_usd"] is None and got["priced_providers"] == []
    assert all(r["cost_usd"] is None and r["price"] is None for r in got["by_model"])

    git(used, "config", "papayu.llm.providerPrice.ollama", "0.5,1.5")  # wins over PAPAYU_LLM_PRICE
    got = usage(used, env={"PAPAYU_LLM_PRICE": "2.50, 10"})
    # (prompt tokens * prompt price + completion tokens * completion price) / 1e6
    assert {(r["provider"], r["model"]): r["cost_usd"] for r in got["by_model"]} == {
        ("ollama", "qwen2.5-coder"): (1000 * 0.5 + 100 * 1.5) / 1e6,
        ("openai-compatible", "agent-model"): (50 * 2.5 + 5 * 10) / 1e6,
        ("openai-compatible", "test-model"): (700 * 2.5 + 70 * 10) / 1e6,
    }
    assert {r["provider"]: r["cost_usd"] for r in got["by_provider"]} == {
        "ollama": 0.00065,
        "openai-compatible": 0.002625,
    }
    assert got["cost_usd"] == 0.003275 and got["priced_providers"] == ["ollama", "openai-compatible"]
    assert got["by_provider"][0]["price"] == {"prompt": 0.5, "completion": 1.5}


def test_the_report_is_an_aligned_table_with_the_cost_or_how_to_get_it(used: Path) -> None:
    def report(env: dict[str, str] | None = None) -> list[str]:
        proc = papayu("stats", cwd=used, env=env)
        assert proc.returncode == 0, proc.stderr
        lines = proc.stdout.splitlines()
        return lines[lines.index("model usage (7 calls in all traces):") + 1 :]

    assert report() == [
        "  PROVIDER           MODEL          CALLS  USAGE UNKNOWN  PROMPT TOKENS  COMPLETION TOKENS",
        "  ollama             qwen2.5-coder      1              0           1000                100",
        "  openai-compatible  agent-model        2              1             50                  5",
        "  openai-compatible  test-model         4              1            700                 70",
        "  total                                 7              2           1750                175",
        "cost: set papayu.llm.price to estimate",
    ]
    priced = report({"PAPAYU_LLM_PRICE": "2.5,10"})
    assert priced[0].endswith("  COMPLETION TOKENS  COST (USD)")
    assert priced[1].endswith(" 1000                100     $0.0035")
    assert (
        priced[2]
        == "  openai-compatible  agent-model        2              1             50                  5   $0.000175"
    )
    assert priced[4].endswith(" 175   $0.006125")  # 0.0035 + 0.000175 + 0.00245
    assert priced[5] == "cost: ~$0.006125 estimated; 2 call(s) with usage unknown are not in it"

    git(used, "config", "papayu.llm.providerPrice.openai-compatible", "1,2")
    assert report()[-1] == (
        "cost: ~$0.0009 for openai-compatible; 2 call(s) with usage unknown are not in it; "
        "set papayu.llm.providerPrice.ollama to estimate ollama"
    )


@pytest.mark.parametrize("value", ["abc", "1", "1,2,3", "-1,2", "nan,1", "1,inf", "1;2"])
def test_a_bad_price_is_a_config_error_naming_the_setting(repo: Path, value: str) -> None:
    proc = papayu("stats", cwd=repo, env={"PAPAYU_LLM_PRICE": value})
    assert_error(proc, "ERR_CONFIG_INVALID")
    assert f"PAPAYU_LLM_PRICE is {value!r}, not PROMPT,COMPLETION" in proc.stderr
    assert "USD per million tokens" in proc.stderr


def test_a_bad_provider_price_is_refused_even_when_unused(repo: Path) -> None:
    git(repo, "config", "papayu.llm.providerPrice.openia", "0.15")
    proc = papayu("stats", "--json", cwd=repo)
    assert_error(proc, "ERR_CONFIG_INVALID", first=True)
    error = json.loads(proc.stdout)["errors"][0]
    assert error["path"] == "papayu.llm.providerPrice.openia" and "per million tokens" in error["hint"]


def test_traces_without_usage_count_their_calls_as_unknown(repo: Path) -> None:
    """A trace written before usage was recorded (calls only) and an older agent trace (one sum)."""
    from papayu_git import traces

    pdir = repo / ".git" / "papayu"
    old = {"command": "plan", "request": {"mode": "plan", "provider": "openai", "model": "m", "calls": 3}}
    agent = {
        "command": "agent",
        "request": {"mode": "agent", "provider": "openai", "model": "m", "calls": 4, "usage": {"prompt_tokens": 40}},
    }
    summed = {
        "command": "agent",
        "request": {
            "mode": "agent",
            "provider": "openai",
            "model": "m",
            "calls": 2,
            "usage": {"prompt_tokens": 9, "completion_tokens": 1},
        },
    }
    for data in (old, agent, summed):
        assert traces.write_trace(pdir, traces.new_trace_id(), data) is not None
    got = usage(repo)
    assert (got["calls"], got["usage_unknown"], got["prompt_tokens"], got["completion_tokens"]) == (9, 7, 9, 1)


def test_no_model_calls(repo: Path) -> None:
    proc = papayu("stats", cwd=repo, env={"PAPAYU_LLM_PRICE": "1,1"})
    assert proc.returncode == 0 and "model usage: no model calls in these traces" in proc.stdout
    assert usage(repo)["by_model"] == []


def test_a_replan_with_online_research_counts_each_call_once(repo: Path, llm: ScriptedLLM) -> None:
    """The failed plan's trace has its two calls and the research's summary call (under
    online_research), the re-plan's trace its one, and the same research block, not counted again."""
    from test_research import Web, online_env, summary

    web = Web()
    web.page("/a", "Calc notes")
    web.page("/b", "Calc changelog")
    try:
        llm.script = [
            counted(chat("not json"), 10, 1),
            counted(chat("still not json"), 20, 2),
            counted(summary(web), 300, 30),
            counted(chat(plan_answer()), 40, 4),
        ]
        env = online_env(web, llm, PAPAYU_ONLINE_AUTO_USE_AS_CONTEXT="1")
        proc = papayu("plan", GOAL, "--json", cwd=repo, env=env)
        assert proc.returncode == 0, proc.stderr
    finally:
        web.close()
    got = usage(repo)
    assert (got["calls"], got["usage_unknown"], got["prompt_tokens"], got["completion_tokens"]) == (4, 0, 370, 37)


def test_the_research_command_traces_its_summary_calls_for_stats(repo: Path, llm: ScriptedLLM) -> None:
    from test_research import Web, online_env, summary

    web = Web()
    web.page("/a", "Calc notes")
    try:
        llm.script = [counted(chat("not json"), 300, 30), counted(summary(web), 500, 60)]  # a repair, then the answer
        proc = papayu("research", "calc add", "--json", cwd=repo, env=online_env(web, llm))
        assert proc.returncode == 0, proc.stderr
        research_id = json.loads(proc.stdout)["id"]
        # A summary that stays invalid is traced too: its calls were made (and paid for).
        llm.script = [counted(chat("not json"), 7, 1), counted(chat("nor this"), 7, 1)]
        failed = papayu("research", "calc sub", "--json", cwd=repo, env=online_env(web, llm))
        assert failed.returncode != 0 and "ERR_RESEARCH_INVALID" in failed.stdout
    finally:
        web.close()
    got = usage(repo)
    assert (got["calls"], got["usage_unknown"], got["prompt_tokens"], got["completion_tokens"]) == (4, 0, 814, 92)
    listed = papayu("trace", "list", "--json", cwd=repo)
    assert listed.returncode == 0, listed.stderr
    records = [r for r in json.loads(listed.stdout)["traces"] if r.get("command") == "research"]
    assert [(r["validation"], r["outcome"], r["error_code"]) for r in records] == [
        ("ok", "ok", None),
        ("error", "failed", "ERR_RESEARCH_INVALID"),
    ]
    shown = papayu("trace", "show", records[0]["trace_id"], "--json", cwd=repo)
    assert shown.returncode == 0, shown.stderr
    assert json.loads(shown.stdout)["online_research"]["id"] == research_id, shown.stdout
