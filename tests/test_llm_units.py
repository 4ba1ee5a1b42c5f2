"""Pure parts of the LLM layer: goal routing, the behaviour contract, the wire schema, the model's window."""

from __future__ import annotations

import re
from pathlib import Path

import pytest

from papayu_git.llm import behaviour
from papayu_git.llm.goal import Intent, route_goal
from papayu_git.llm.wire_schema import drop_nulls, grammar_schema, wire_schema
from papayu_git.protocol import Mode
from papayu_git.validate import validate_response


@pytest.mark.parametrize(
    ("goal", "intent", "text"),
    [
        ("plan: add a README", Intent.PLAN, "add a README"),
        ("APPLY: create docs/index.md", Intent.APPLY, "create docs/index.md"),
        ("ok", Intent.CONFIRM, "ok"),
        ("ОК", Intent.CONFIRM, "ОК"),
        ("применяй!", Intent.CONFIRM, "применяй!"),
        ("да", Intent.CONFIRM, "да"),
        ("apply", Intent.CONFIRM, "apply"),
        ("исправь падающий тест", Intent.PLAN, "исправь падающий тест"),
        ("почини сборку", Intent.PLAN, "почини сборку"),
        ("создай README", Intent.APPLY, "создай README"),
        ("сгенерируй тесты", Intent.APPLY, "сгенерируй тесты"),
        ("generate a Makefile", Intent.APPLY, "generate a Makefile"),
        ("fix and create the test", Intent.PLAN, "fix and create the test"),  # both: plan first
        ("why is it slow", Intent.PLAN, "why is it slow"),
        ("okay, prefix words do not confirm", Intent.PLAN, "okay, prefix words do not confirm"),
    ],
)
def test_goal_routing_follows_seed_001(goal: str, intent: Intent, text: str) -> None:
    routed = route_goal(goal)
    assert (routed.intent, routed.text) == (intent, text)


def test_behaviour_acts_on_a_stack_trace_with_code_in_context() -> None:
    log = 'Traceback (most recent call last):\n  File "app.py", line 3, in <module>\nValueError: x'
    decision = behaviour.decide("it crashes", log, "FILE[app.py] (sha256=...):\n...")
    assert decision.act and "stack trace" in decision.reasons[0]


def test_behaviour_acts_on_a_named_file_or_an_unambiguous_request() -> None:
    assert behaviour.decide("speed up parse() in src/parser.py", None, "").act
    assert behaviour.decide("add a README", None, "").act


def test_behaviour_asks_when_runtime_logs_and_intent_are_missing() -> None:
    decision = behaviour.decide("it fails sometimes", None, "ENV:\nos: Linux")
    assert not decision.act
    assert set(decision.missing) == {"language/runtime", "logs or a stack trace", "intent (fix or explain)"}
    assert "at most 1 question" in decision.note(1)
    assert "allows no questions" in decision.note(0)


def _response(summary: str, actions: list[dict[str, str]] | None = None):  # type: ignore[no-untyped-def]
    return validate_response({"summary": summary, "actions": actions or []}, protocol=2, mode=Mode.PLAN)


def test_flags_claimed_runs_and_unread_files_but_not_shown_or_new_ones() -> None:
    flags = behaviour.flag_answer(
        _response("Tests passed after my change to lib/util.py; see calc.py"),
        {"calc.py": "0" * 64},
        "TASK: fix calc.py",
    )
    assert [f["kind"] for f in flags] == ["claims_ran", "unread_file"] and flags[1]["path"] == "lib/util.py"
    created = _response(
        "Create docs/guide.md; run pytest -q to verify",
        [{"kind": "CREATE_FILE", "path": "docs/guide.md", "content": "# Guide\n"}],
    )
    assert behaviour.flag_answer(created, {}, "") == []


def test_wire_schema_is_strict_compatible_everywhere() -> None:
    def walk(node: object) -> None:
        if isinstance(node, dict):
            if node.get("type") == "object":
                assert node["additionalProperties"] is False
                assert set(node["required"]) == set(node["properties"])
            assert not {"if", "then", "oneOf", "allOf", "$ref"} & node.keys()
            for value in node.values():
                walk(value)
        elif isinstance(node, list):
            for value in node:
                walk(value)

    for protocol in (1, 2):
        walk(wire_schema(protocol))
    assert "PATCH_FILE" not in str(wire_schema(1)) and "PATCH_FILE" in str(wire_schema(2))
    assert grammar_schema(2)["required"] == ["summary", "actions"]


def test_grammar_schema_ties_fields_to_the_action_kind() -> None:
    import jsonschema

    validator = jsonschema.Draft7Validator(grammar_schema(2, "response"))
    patch = {"kind": "PATCH_FILE", "path": "a.py", "patch": "@@ -1 +1 @@\n-a\n+b\n", "base_sha256": "0" * 64}
    assert not list(validator.iter_errors({"summary": "s", "actions": [patch]}))
    for bad in (
        {**patch, "content": "x"},
        {"kind": "UPDATE_FILE", "path": "a.py", "content": "x"},
        {"kind": "DELETE_FILE", "path": "a.py", "content": "x"},
    ):
        assert list(validator.iter_errors({"summary": "s", "actions": [bad]})), bad
    assert grammar_schema(2, "plan")["properties"]["actions"]["maxItems"] == 0
    apply = jsonschema.Draft7Validator(grammar_schema(2, "apply"))
    assert not list(apply.iter_errors({"summary": "s", "actions": [patch]}))
    assert not list(apply.iter_errors({"summary": "NO_CHANGES: fine as is", "actions": []}))
    assert list(apply.iter_errors({"summary": "done", "actions": []}))  # ERR_EMPTY_APPLY, made impossible


def test_null_fields_of_the_wire_format_validate_as_absent() -> None:
    wire = {
        "summary": "s",
        "questions": [],
        "context_requests": [],
        "plan": [],
        "risks": [],
        "commands_to_run": [],
        "memory_patch": {"user.ask_budget": None},
        "actions": [{"kind": "CREATE_FILE", "path": "a.txt", "content": "x\n", "patch": None, "base_sha256": None}],
    }
    response = validate_response(drop_nulls(wire), protocol=2, mode=Mode.APPLY)
    assert response.actions[0].patch is None and response.memory_patch == {}


# --- the shared HTTP retry policy (net.py) and the model's use of it ------------------------


def test_retry_after_reads_seconds_and_http_dates() -> None:
    from papayu_git.net import retry_after_sec

    now = 1_700_000_000.0  # Tue, 14 Nov 2023 22:13:20 GMT
    assert retry_after_sec("3", now) == 3.0 and retry_after_sec(" 1.5 ", now) == 1.5
    assert retry_after_sec("Tue, 14 Nov 2023 22:13:32 GMT", now) == 12.0
    assert retry_after_sec("Tue, 14 Nov 2023 22:00:00 GMT", now) == 0.0  # in the past: at once
    assert retry_after_sec("-4", now) == 0.0
    for unreadable in (None, "", "soon", "nan", "inf"):
        assert retry_after_sec(unreadable, now) is None


def test_retry_policy_backs_off_exponentially_and_caps_every_wait() -> None:
    from papayu_git.net import MAX_RETRY_AFTER_SEC, RetryPolicy, retryable_status

    policy = RetryPolicy(retries=6, backoff_sec=1.0)
    assert [policy.delay(attempt) for attempt in range(6)] == [1.0, 2.0, 4.0, 8.0, 16.0, MAX_RETRY_AFTER_SEC]
    assert policy.delay(0, "5") == 5.0 and policy.delay(3, "0") == 0.0  # Retry-After wins
    assert policy.delay(0, "3600") == MAX_RETRY_AFTER_SEC == 30.0
    assert policy.delay(0, "Wed, 21 Oct 2099 07:28:00 GMT") == MAX_RETRY_AFTER_SEC
    assert policy.delay(2, "later") == 4.0  # unreadable: backoff
    assert [s for s in (200, 400, 404, 408, 429, 500, 502, 503) if retryable_status(s)] == [429, 500, 502, 503]


def test_the_model_client_retries_through_the_shared_policy(monkeypatch: pytest.MonkeyPatch) -> None:
    from llm_server import Reply, ScriptedLLM, chat

    from papayu_git import net
    from papayu_git.llm.client import ChatClient
    from papayu_git.llm.config import load_config

    waits: list[float] = []
    monkeypatch.setattr(net.time, "sleep", waits.append)
    llm = ScriptedLLM(
        [Reply(429, {"error": "slow down"}, headers={"Retry-After": "9"}), Reply(503, {"error": "busy"}), chat("done")]
    )
    try:
        for name, value in {**llm.env(), "PAPAYU_LLM_PROVIDER": "openai", "PAPAYU_LLM_RETRIES": "3"}.items():
            monkeypatch.setenv(name, value)
        monkeypatch.delenv("PAPAYU_LLM_API_KEY", raising=False)
        with ChatClient(load_config()) as client:
            reply = client.complete([{"role": "user", "content": "hi"}], None, input_chars=2)
    finally:
        llm.close()
    assert reply.text == "done" and len(llm.requests) == 3
    assert waits == [9.0, 0.02]  # Retry-After, then PAPAYU_LLM_BACKOFF_SEC=0.01 doubled


@pytest.mark.parametrize(
    ("body", "numbers"),
    [
        (  # llama-cpp-python, vLLM and OpenAI say it in words
            "This model's maximum context length is 8192 tokens. However, you requested 16247 tokens "
            "(15847 in the messages, 400 in the completion).",
            (16247, 8192),
        ),
        (  # llama-server says it in fields
            '{"error": {"code": 400, "message": "the request exceeds the available context size, try increasing '
            'it", "type": "exceed_context_size_error", "n_prompt_tokens": 25881, "n_ctx": 8192}}',
            (25881, 8192),
        ),
        ('{"error": "model qwen not found"}', None),
        ("Invalid 'messages': the context of the conversation is malformed", None),
    ],
)
def test_a_servers_too_long_refusal_is_read_with_its_numbers(body: str, numbers: tuple[int, int] | None) -> None:
    from papayu_git.llm.window import server_rejection

    assert server_rejection(body) == numbers


def test_the_token_estimate_over_counts_code_and_text() -> None:
    from papayu_git.llm.window import estimate_tokens

    code = Path(__file__).read_text(encoding="utf-8")
    words = len(re.findall(r"\w+|[^\w\s]", code))  # no tokenizer splits code coarser than words and marks
    assert estimate_tokens(code) >= 0.9 * words
    assert estimate_tokens("ё" * 300) == 200 and estimate_tokens("") == 0  # bytes, not characters


@pytest.mark.parametrize(
    ("base_url", "root"),
    [
        ("http://127.0.0.1:8080/v1", "http://127.0.0.1:8080"),
        ("http://h:8080/v1/chat/completions", "http://h:8080"),
        ("http://127.0.0.1:11434/api/chat", "http://127.0.0.1:11434"),
        ("http://127.0.0.1:11434", "http://127.0.0.1:11434"),
    ],
)
def test_the_window_is_asked_at_the_servers_root(base_url: str, root: str) -> None:
    from papayu_git.llm.config import LLMConfig, Provider
    from papayu_git.llm.window import server_root

    assert server_root(LLMConfig(Provider.OPENAI_COMPATIBLE, base_url, "m")) == root


def test_the_embedded_model_is_waited_for_longer_than_a_server_unless_a_timeout_is_set(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    from papayu_git.llm.config import LOCAL_TIMEOUT_SEC, SERVER_TIMEOUT_SEC, load_config

    assert load_config().timeout_sec == LOCAL_TIMEOUT_SEC == 900  # nothing configured: the embedded model
    monkeypatch.setenv("PAPAYU_LLM_BASE_URL", "http://127.0.0.1:9/v1")
    assert load_config().timeout_sec == SERVER_TIMEOUT_SEC == 90
    for provider, url in (("local", ""), ("openai-compatible", "http://127.0.0.1:9/v1")):
        monkeypatch.setenv("PAPAYU_LLM_PROVIDER", provider)
        monkeypatch.setenv("PAPAYU_LLM_BASE_URL", url)
        monkeypatch.setenv("PAPAYU_LLM_TIMEOUT_SEC", "42")
        assert load_config().timeout_sec == 42
        monkeypatch.delenv("PAPAYU_LLM_TIMEOUT_SEC")
