"""Agent mode's provider layer: `ChatClient.chat_with_tools` against a scripted server (real HTTP
on 127.0.0.1), and the tool definitions of schemas/agent_tools.json."""

from __future__ import annotations

import json
from collections.abc import Iterator
from typing import Any

import jsonschema
import pytest
from llm_server import Reply, ScriptedLLM, ollama_tool_calls, tool_calls

from papayu_git import net
from papayu_git.errors import PapayuError
from papayu_git.llm.client import ChatClient, ToolCall, chat_url
from papayu_git.llm.config import LLMConfig, Provider
from papayu_git.llm.tools import agent_tools, tool_names

TOOLS = [
    {
        "type": "function",
        "function": {
            "name": "read_file",
            "description": "Read a file.",
            "parameters": {"type": "object", "properties": {"path": {"type": "string"}}, "required": ["path"]},
        },
    }
]
CONVERSATION: list[dict[str, Any]] = [
    {"role": "system", "content": "You fix bugs."},
    {"role": "user", "content": "tests fail"},
    {
        "role": "assistant",
        "content": "",
        "tool_calls": [
            {"id": "call_a", "type": "function", "function": {"name": "read_file", "arguments": '{"path": "calc.py"}'}},
            {"id": "call_b", "type": "function", "function": {"name": "get_env", "arguments": "{}"}},
        ],
    },
    {"role": "tool", "tool_call_id": "call_a", "content": "def add(a, b):\n    return a - b\n"},
    {"role": "tool", "tool_call_id": "call_b", "content": "Linux, Python 3.12"},
]


@pytest.fixture
def llm() -> Iterator[ScriptedLLM]:
    server = ScriptedLLM([])
    yield server
    server.close()


def client(llm: ScriptedLLM, provider: Provider = Provider.OPENAI_COMPATIBLE, **extra: Any) -> ChatClient:
    base = llm.root_url if provider is Provider.OLLAMA else llm.base_url
    return ChatClient(LLMConfig(provider, base, "test-model", backoff_sec=0.01, timeout_sec=20, **extra))


def test_several_calls_in_one_turn_come_back_in_order_with_raw_arguments(llm: ScriptedLLM) -> None:
    raw = '{"path": "calc.py",  "start_line": 1}'  # spacing kept: the agent parses, not the client
    llm.script = [tool_calls(("call_1", "read_file", raw), ("search_in_repo", {"query": "add("}), content="Looking.")]
    with client(llm) as c:
        turn = c.chat_with_tools(CONVERSATION, TOOLS, max_tokens=512)
    assert turn.tool_calls == (
        ToolCall("call_1", "read_file", raw),
        ToolCall("call_test_1", "search_in_repo", '{"query": "add("}'),
    )
    assert turn.content == "Looking." and turn.finish_reason == "tool_calls"
    assert turn.usage == {"prompt_tokens": 10, "completion_tokens": 5} and turn.model_sec > 0
    assert turn.assistant_message == {
        "role": "assistant",
        "content": "Looking.",
        "tool_calls": [
            {"id": "call_1", "type": "function", "function": {"name": "read_file", "arguments": raw}},
            {
                "id": "call_test_1",
                "type": "function",
                "function": {"name": "search_in_repo", "arguments": '{"query": "add("}'},
            },
        ],
    }


def test_the_request_carries_tools_tool_choice_and_the_tool_results(llm: ScriptedLLM) -> None:
    llm.script = [tool_calls(("read_file", {"path": "a"}))]
    with client(llm) as c:
        c.chat_with_tools(CONVERSATION, TOOLS, max_tokens=300)
    body = llm.requests[0]
    assert llm.paths == ["/v1/chat/completions"]
    assert llm.tools(0) == TOOLS and body["tool_choice"] == "auto"
    assert body["temperature"] == 0 and body["stream"] is False and body["max_tokens"] == 300
    assert "response_format" not in body
    assert body["messages"] == CONVERSATION  # OpenAI's own shape goes unchanged
    assert [m["tool_call_id"] for m in llm.tool_messages(0)] == ["call_a", "call_b"]


def test_a_turn_can_continue_the_conversation_it_came_from(llm: ScriptedLLM) -> None:
    llm.script = [tool_calls(("read_file", {"path": "a"})), tool_calls(content="Done.", finish="stop")]
    with client(llm) as c:
        first = c.chat_with_tools(CONVERSATION[:2], TOOLS, max_tokens=300)
        conversation = [
            *CONVERSATION[:2],
            first.assistant_message,
            {"role": "tool", "tool_call_id": first.tool_calls[0].id, "content": "x = 1\n"},
        ]
        second = c.chat_with_tools(conversation, TOOLS, max_tokens=300)
    assert llm.requests[1]["messages"][2]["tool_calls"][0]["id"] == "call_test_0"
    assert second.tool_calls == () and second.content == "Done." and second.finish_reason == "stop"
    assert "tool_calls" not in second.assistant_message  # OpenAI refuses an empty list


def test_ollama_calls_get_ids_and_json_arguments_and_the_conversation_is_converted(llm: ScriptedLLM) -> None:
    llm.script = [
        ollama_tool_calls(("read_file", {"path": "calc.py", "end_line": 9}), ("get_env", {})),
        ollama_tool_calls(("run", {"command": "pytest -q"})),
    ]
    with client(llm, Provider.OLLAMA) as c:
        first = c.chat_with_tools(CONVERSATION, TOOLS, max_tokens=256)
        second = c.chat_with_tools(CONVERSATION, TOOLS, max_tokens=256)
    assert first.tool_calls == (
        ToolCall("call_1", "read_file", '{"path": "calc.py", "end_line": 9}'),
        ToolCall("call_2", "get_env", "{}"),
    )
    assert second.tool_calls == (ToolCall("call_3", "run", '{"command": "pytest -q"}'),)  # unique per client
    assert json.loads(first.tool_calls[0].arguments) == {"path": "calc.py", "end_line": 9}
    assert first.finish_reason == "stop" and first.usage == {"prompt_tokens": 10, "completion_tokens": 5}
    assert first.assistant_message["tool_calls"][1] == {
        "id": "call_2",
        "type": "function",
        "function": {"name": "get_env", "arguments": "{}"},
    }
    body = llm.requests[0]
    assert llm.paths[0] == "/api/chat" and chat_url(c.config).endswith("/api/chat")
    assert body["tools"] == TOOLS and "tool_choice" not in body and body["stream"] is False
    assert body["options"] == {"temperature": 0, "top_p": 1, "num_predict": 256}
    assert body["messages"][:2] == CONVERSATION[:2]
    assert body["messages"][2] == {
        "role": "assistant",
        "content": "",
        "tool_calls": [
            {"function": {"name": "read_file", "arguments": {"path": "calc.py"}}},
            {"function": {"name": "get_env", "arguments": {}}},
        ],
    }
    assert llm.tool_messages(0) == [
        {"role": "tool", "content": "def add(a, b):\n    return a - b\n", "tool_name": "read_file"},
        {"role": "tool", "content": "Linux, Python 3.12", "tool_name": "get_env"},
    ]


def test_ollama_keeps_its_own_ids_and_a_reply_without_calls_is_a_text_turn(llm: ScriptedLLM) -> None:
    llm.script = [ollama_tool_calls(("abc", "read_file", {"path": "a"})), ollama_tool_calls(content="")]
    with client(llm, Provider.OLLAMA) as c:
        assert c.chat_with_tools(CONVERSATION[:2], TOOLS, 64).tool_calls[0].id == "abc"
        empty = c.chat_with_tools(CONVERSATION[:2], TOOLS, 64)
    assert empty.content == "" and empty.tool_calls == ()
    assert empty.assistant_message == {"role": "assistant", "content": ""}


@pytest.mark.parametrize(
    ("status", "body"),
    [
        (400, {"error": {"message": "tools are not supported by this model", "type": "invalid_request_error"}}),
        (400, {"error": "registry.ollama.ai/library/gemma3:270m does not support tools"}),
        (400, {"error": '"auto" tool choice requires --enable-auto-tool-choice and --tool-call-parser to be set'}),
        (422, {"detail": [{"type": "extra_forbidden", "loc": ["body", "tools"], "msg": "Extra inputs"}]}),
        (501, {"error": "not implemented"}),
    ],
)
def test_a_server_that_refuses_tools_is_err_llm_no_tools(llm: ScriptedLLM, status: int, body: Any) -> None:
    llm.script = [Reply(status, body)]
    with client(llm) as c, pytest.raises(PapayuError) as caught:
        c.chat_with_tools(CONVERSATION, TOOLS, 64)
    assert caught.value.code == "ERR_LLM_NO_TOOLS" and "git papayu fix" in caught.value.hint
    assert str(status) in caught.value.reason
    assert len(llm.requests) == 1  # a refusal is not retried (not even the 501)


@pytest.mark.parametrize(
    ("status", "body", "code"),
    [
        (
            400,
            {"error": {"message": "messages with role 'tool' must answer a message with 'tool_calls'"}},
            "ERR_LLM_HTTP",
        ),
        (400, {"error": {"message": "maximum context length is 8192 tokens (120 in the functions)"}}, "ERR_LLM_HTTP"),
        (404, {"error": "model 'test-model' not found"}, "ERR_LLM_HTTP"),
        (401, {"error": "bad key"}, "ERR_LLM_AUTH"),
    ],
)
def test_other_errors_keep_their_codes(llm: ScriptedLLM, status: int, body: Any, code: str) -> None:
    llm.script = [Reply(status, body)]
    with client(llm) as c, pytest.raises(PapayuError) as caught:
        c.chat_with_tools(CONVERSATION, TOOLS, 64)
    assert caught.value.code == code


def test_429_and_5xx_are_retried_through_the_shared_policy(llm: ScriptedLLM, monkeypatch: pytest.MonkeyPatch) -> None:
    waits: list[float] = []
    monkeypatch.setattr(net.time, "sleep", waits.append)
    llm.script = [
        Reply(429, {"error": "slow down"}, headers={"Retry-After": "7"}),
        Reply(503, {"error": "busy"}),
        tool_calls(("get_env", {})),
    ]
    with client(llm) as c:
        turn = c.chat_with_tools(CONVERSATION, TOOLS, 64)
    assert turn.tool_calls[0].name == "get_env" and len(llm.requests) == 3
    assert waits == [7.0, 0.02]  # the server's Retry-After, then the backoff (0.01 doubled)


def test_a_429_that_never_ends_is_rate_limited(llm: ScriptedLLM, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(net.time, "sleep", lambda _: None)
    llm.script = [Reply(429, {"error": "slow down"}) for _ in range(3)]
    with client(llm, retries=2) as c, pytest.raises(PapayuError) as caught:
        c.chat_with_tools(CONVERSATION, TOOLS, 64)
    assert caught.value.code == "ERR_LLM_RATE_LIMITED" and len(llm.requests) == 3


def test_malformed_tool_calls_are_kept_for_the_agent_to_answer(llm: ScriptedLLM) -> None:
    llm.script = [
        tool_calls(
            {"id": "c1", "type": "function", "function": {"arguments": '{"path": "a"}'}},  # no name
            {"id": "c2", "type": "function", "function": {"name": "read_file", "arguments": {"path": "b"}}},
            {"id": "c3", "type": "function", "function": {"name": "run", "arguments": '{"command": "ls'}},
            {"type": "function", "function": {"name": 7}},  # no id, a number for a name, no arguments
            "not an object",
        )
    ]
    with client(llm) as c:
        turn = c.chat_with_tools(CONVERSATION, TOOLS, 64)
    assert turn.tool_calls == (
        ToolCall("c1", "", '{"path": "a"}'),
        ToolCall("c2", "read_file", '{"path": "b"}'),
        ToolCall("c3", "run", '{"command": "ls'),  # broken JSON stays as it came
        ToolCall("call_1", "", "{}"),
        ToolCall("call_2", "", '"not an object"'),
    )
    assert turn.content == ""


def test_ollama_gets_an_object_even_for_arguments_the_model_broke(llm: ScriptedLLM) -> None:
    llm.script = [ollama_tool_calls(content="ok")]
    broken = [
        {"role": "user", "content": "go"},
        {
            "role": "assistant",
            "content": "",
            "tool_calls": [{"id": "x", "function": {"name": "run", "arguments": "{"}}],
        },
        {"role": "tool", "tool_call_id": "x", "content": "ERR: arguments are not JSON"},
    ]
    with client(llm, Provider.OLLAMA) as c:
        assert c.chat_with_tools(broken, TOOLS, 64).content == "ok"
    assert llm.requests[0]["messages"][1]["tool_calls"] == [{"function": {"name": "run", "arguments": {}}}]
    assert llm.tool_messages(0) == [{"role": "tool", "content": "ERR: arguments are not JSON", "tool_name": "run"}]


def test_the_embedded_model_refuses_tools_before_any_request(llm: ScriptedLLM) -> None:
    with client(llm, Provider.LOCAL) as c, pytest.raises(PapayuError) as caught:
        c.chat_with_tools(CONVERSATION, TOOLS, 64)
    assert caught.value.code == "ERR_LLM_NO_TOOLS" and "ollama" in caught.value.hint
    assert "git papayu fix" in caught.value.hint and llm.requests == []


# --- the tool definitions ---------------------------------------------------------------

REQUIRED = {
    "list_files": [],
    "read_file": ["path"],
    "search_in_repo": ["query"],
    "get_env": [],
    "run": ["command"],
    "run_tests": [],
    "get_logs": [],
    "apply_patch": ["diff"],
}


def test_the_tool_file_has_the_eight_tools_with_their_required_fields() -> None:
    tools = agent_tools()
    assert tool_names() == list(REQUIRED)
    for tool in tools:
        assert tool["type"] == "function" and set(tool) == {"type", "function"}
        function = tool["function"]
        assert set(function) == {"name", "description", "parameters"} and len(function["description"]) > 20
        parameters = function["parameters"]
        jsonschema.Draft7Validator.check_schema(parameters)
        assert parameters["type"] == "object" and parameters["additionalProperties"] is False
        assert parameters.get("required", []) == REQUIRED[function["name"]]
        assert set(parameters.get("required", [])) <= set(parameters["properties"])
        assert all(p.get("description") for p in parameters["properties"].values())


@pytest.mark.parametrize(
    ("tool", "field", "low", "high", "default"),
    [
        ("list_files", "max_results", 1, 500, 200),
        ("read_file", "max_chars", 200, 200000, 40000),
        ("search_in_repo", "max_results", 1, 500, 50),
        ("run", "timeout_sec", 1, 600, 120),
        ("run_tests", "timeout_sec", 1, 1800, 600),
        ("get_logs", "last_n", 1, 5000, 200),
    ],
)
def test_bounded_fields(tool: str, field: str, low: int, high: int, default: int) -> None:
    spec = {t["function"]["name"]: t["function"]["parameters"] for t in agent_tools()}[tool]["properties"][field]
    assert (spec["type"], spec["minimum"], spec["maximum"], spec["default"]) == ("integer", low, high, default)


def test_arguments_are_checked_against_the_parameters() -> None:
    schemas = {t["function"]["name"]: jsonschema.Draft7Validator(t["function"]["parameters"]) for t in agent_tools()}
    assert schemas["read_file"].is_valid({"path": "a.py", "start_line": 3, "end_line": 9})
    assert not schemas["read_file"].is_valid({"start_line": 3})
    assert not schemas["run"].is_valid({"command": "ls", "shell": True})  # no unknown fields
    assert not schemas["search_in_repo"].is_valid({"query": "x", "max_results": 501})
    assert schemas["get_env"].is_valid({}) and not schemas["get_env"].is_valid({"x": 1})
    assert schemas["search_in_repo"].validate({"query": "x", "case_sensitive": False}) is None
    assert schemas["run_tests"].is_valid({})


def test_each_caller_gets_its_own_copy() -> None:
    agent_tools()[0]["function"]["name"] = "changed"
    assert agent_tools()[0]["function"]["name"] == "list_files"
