"""The model's window (docs/DESIGN.md, "The model's window") against scripted servers that say
their window the way llama.cpp (`/props`, `/tokenize`) and Ollama (`/api/show`) do, and refuse
a prompt over it the way llama.cpp does. Real CLI, real repositories, real HTTP on 127.0.0.1.

The repository is click-sized: the goal names eight big modules, so the unfitted plan request
is several times an 8,192-token window (pallets/click's was 25,881 tokens).
"""

from __future__ import annotations

import json
import re
from pathlib import Path
from typing import Any

import pytest
from helpers import make_repo, papayu, trace_record
from llm_server import Reply, ScriptedLLM, chat, ollama, plan_answer

N_CTX = 8192
MODULES = ["core", "parser", "decorators", "types", "termui", "utils", "formatting", "shell_completion"]
GOAL = "make option parsing consistent across " + ", ".join(f"src/click/{m}.py" for m in MODULES)
_TOKEN = re.compile(r"\w+|[^\w\s]")


def tokens(text: str) -> int:
    """The scripted server's tokenizer: words and punctuation marks (about 4 characters a token on code)."""
    return len(_TOKEN.findall(text))


def prompt_tokens(body: dict[str, Any]) -> int:
    return sum(tokens(m.get("content") or "") + 5 for m in body["messages"])


def module(name: str, functions: int = 300) -> str:
    body = "".join(
        f"def {name}_option_{i}(ctx, param, value):\n"
        f'    """Convert the value of option {i} for {name}."""\n'
        f"    if value is None:\n        return param.default\n    return str(value).strip()\n\n\n"
        for i in range(functions)
    )
    return f'"""click.{name}"""\n\n\n{body}'


def llama_cpp_chat(seen: list[tuple[int, int]], answer: Any) -> Any:
    """A chat endpoint that refuses a prompt over the window like llama-server, else answers."""

    def reply(body: dict[str, Any]) -> Reply:
        used = prompt_tokens(body)
        seen.append((used, int(body["max_tokens"])))
        if used >= N_CTX:
            error = {
                "code": 400,
                "message": "the request exceeds the available context size, try increasing it",
                "type": "exceed_context_size_error",
                "n_prompt_tokens": used,
                "n_ctx": N_CTX,
            }
            return Reply(400, {"error": error})
        return chat(answer)

    return reply


def llama_cpp_server(llm: ScriptedLLM, *, says_window: bool = True) -> None:
    if says_window:
        llm.extras["/props"] = Reply(200, {"default_generation_settings": {"n_ctx": N_CTX}, "total_slots": 1})
    llm.extras["/tokenize"] = lambda body: Reply(200, {"tokens": list(range(tokens(body["content"])))})


@pytest.fixture(scope="module")
def click_repo(tmp_path_factory: pytest.TempPathFactory) -> Path:
    files = {f"src/click/{m}.py": module(m) for m in MODULES}
    return make_repo(tmp_path_factory.mktemp("click") / "click", {"README.md": "# click\n", **files})


def plan(repo: Path, llm: ScriptedLLM, **env: str) -> tuple[Any, dict[str, Any]]:
    proc = papayu("-v", "plan", GOAL, "--json", cwd=repo, env=llm.env(**env))
    return proc, json.loads(proc.stdout)


def test_a_server_that_refuses_the_unfitted_request_is_err_llm_context_window_naming_both_numbers(
    click_repo: Path, llm: ScriptedLLM
) -> None:
    seen: list[tuple[int, int]] = []
    llama_cpp_server(llm, says_window=False)  # a server that refuses, but does not say its window
    llm.script = [llama_cpp_chat(seen, plan_answer())]
    proc, out = plan(click_repo, llm)
    assert proc.returncode == 1
    error = out["errors"][0]
    assert error["code"] == "ERR_LLM_CONTEXT_WINDOW", out
    assert f"refused a request of {seen[0][0]} tokens: its window is {N_CTX} tokens" in error["reason"]
    assert f"PAPAYU_LLM_CONTEXT_TOKENS={N_CTX}" in error["hint"]
    assert seen[0][0] > 3 * N_CTX  # what the diet sends without knowing the window


def test_a_llama_cpp_window_from_props_fits_the_click_sized_request_and_the_plan_goes_through(
    click_repo: Path, llm: ScriptedLLM
) -> None:
    seen: list[tuple[int, int]] = []
    llama_cpp_server(llm)
    llm.script = [llama_cpp_chat(seen, plan_answer())]
    proc, out = plan(click_repo, llm)
    assert proc.returncode == 0, proc.stderr
    [(prompt, answer)] = seen
    assert prompt + answer <= N_CTX and answer >= N_CTX // 4  # the answer keeps its quarter
    assert prompt > N_CTX // 3  # fitted, not starved: half of what the request leaves free
    trace = trace_record(click_repo, out["trace_id"])
    assert trace["request"]["context_window"] == N_CTX
    assert trace["request"]["context_window_source"] == "llama.cpp /props"
    stats = trace["context_stats"]
    assert stats["context_files_dropped_count"] + stats["context_truncated_files_count"] > 0
    # Counted by the server's tokenizer: the first message's context takes at most half of what is free.
    assert 0 < stats["context_tokens"] <= (N_CTX - N_CTX // 4) // 2
    assert "window_tokens=8192" in proc.stderr and f"token_budget={answer}" in proc.stderr


def test_the_context_tokens_setting_fits_a_server_that_does_not_say_by_estimate(
    click_repo: Path, llm: ScriptedLLM
) -> None:
    seen: list[tuple[int, int]] = []
    llm.script = [llama_cpp_chat(seen, plan_answer())]  # no /props, no /tokenize: estimated
    proc, out = plan(click_repo, llm, PAPAYU_LLM_CONTEXT_TOKENS=str(N_CTX))
    assert proc.returncode == 0, proc.stderr
    [(prompt, answer)] = seen
    assert prompt + answer <= N_CTX
    trace = trace_record(click_repo, out["trace_id"])
    assert trace["request"]["context_window_source"] == "papayu.llm.contextTokens"


def test_a_context_round_is_fitted_to_what_the_conversation_left(click_repo: Path, llm: ScriptedLLM) -> None:
    seen: list[tuple[int, int]] = []
    llama_cpp_server(llm)
    ask = {**plan_answer(), "context_requests": [{"type": "read_file", "path": "src/click/core.py"}]}
    llm.script = [llama_cpp_chat(seen, ask), llama_cpp_chat(seen, plan_answer())]
    proc, _ = plan(click_repo, llm)
    assert proc.returncode == 0, proc.stderr
    assert len(seen) == 2 and all(prompt + answer <= N_CTX for prompt, answer in seen), seen
    assert seen[1][0] > seen[0][0]  # the round added context, within the window
    assert "FILE[src/click/core.py]" in llm.last_user(1)


def test_a_window_too_small_for_the_minimum_request_is_refused_before_sending(
    click_repo: Path, llm: ScriptedLLM
) -> None:
    llama_cpp_server(llm)
    llm.extras["/props"] = Reply(200, {"default_generation_settings": {"n_ctx": 1024}})
    llm.script = [chat(plan_answer())]
    proc, out = plan(click_repo, llm)
    assert proc.returncode == 1
    error = out["errors"][0]
    assert error["code"] == "ERR_LLM_CONTEXT_WINDOW" and error["hint"]
    found = re.search(
        r"needs (\d+) tokens \((\d+) prompt, (\d+) for the answer\).* window is 1024 tokens", error["reason"]
    )
    assert found, error["reason"]
    assert int(found.group(1)) > 1024 and int(found.group(3)) == 1024 // 4
    assert llm.requests == []  # nothing was sent that the server would have refused


@pytest.mark.parametrize(
    ("show", "num_ctx"),
    [
        ({"parameters": 'num_ctx                        4096\nstop "<end_of_turn>"'}, 4096),
        ({"parameters": "", "model_info": {"gemma3.context_length": 131072}}, 32768),
    ],
)
def test_ollama_runs_with_the_window_papayu_fits_to(
    click_repo: Path, llm: ScriptedLLM, show: dict[str, Any], num_ctx: int
) -> None:
    llm.extras["/api/show"] = Reply(200, show)
    llm.script = [ollama(plan_answer())]
    env = {"PAPAYU_LLM_PROVIDER": "ollama", "PAPAYU_LLM_BASE_URL": llm.root_url, "PAPAYU_LLM_MODEL": "gemma3"}
    proc = papayu("plan", GOAL, "--json", cwd=click_repo, env=env)
    assert proc.returncode == 0, proc.stderr
    body = llm.requests[0]
    assert body["options"]["num_ctx"] == num_ctx
    estimated = sum(len((m["content"] or "").encode()) // 3 + 8 for m in body["messages"])
    assert estimated + body["options"]["num_predict"] <= num_ctx


def test_a_repair_that_no_longer_fits_the_window_is_refused_before_sending(click_repo: Path, llm: ScriptedLLM) -> None:
    seen: list[tuple[int, int]] = []
    llama_cpp_server(llm)
    rambling = "the model talks on and on " * 1200  # no JSON: papayu asks for a repair
    llm.script = [llama_cpp_chat(seen, rambling), llama_cpp_chat(seen, plan_answer())]
    proc, out = plan(click_repo, llm)
    assert proc.returncode == 1
    error = out["errors"][0]
    assert error["code"] == "ERR_LLM_CONTEXT_WINDOW", error
    assert "as the conversation stands" in error["reason"] and f"window is {N_CTX} tokens" in error["reason"]
    assert len(seen) == 1  # the repair was never sent to be refused
