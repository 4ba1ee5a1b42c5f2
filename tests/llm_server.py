"""A scripted OpenAI-compatible (and Ollama /api/chat) server for the LLM tests.

Real HTTP on 127.0.0.1:0 in a thread (stdlib http.server). Each POST takes the next scripted
reply; every request body is recorded so tests can assert what papayu sent.
"""

from __future__ import annotations

import json
import re
import threading
import time
from collections.abc import Callable
from dataclasses import dataclass
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from typing import Any

FILE_HEADER = re.compile(r"FILE\[([^\]]+)\] \(sha256=([0-9a-f]{64})\)")
EXTRA_POSTS = ("/api/show", "/tokenize", "/extras/tokenize/count")


@dataclass
class Reply:
    status: int = 200
    body: Any = None  # dict/list -> JSON, str -> raw text
    delay: float = 0.0
    headers: dict[str, str] | None = None


Script = Reply | Callable[[dict[str, Any]], Reply]


def plan_answer(summary: str = "add() subtracts instead of adding", **extra: Any) -> dict[str, Any]:
    """A PLAN-round answer without actions for the calc fixtures; ``extra`` replaces fields."""
    return {
        "summary": summary,
        "actions": [],
        "plan": [{"step": "Fix add", "details": "return a + b"}],
        "questions": [],
        "context_requests": [],
        "risks": [],
        "commands_to_run": [],
        "memory_patch": {},
        **extra,
    }


def chat(content: Any, finish: str = "stop") -> Reply:
    """An OpenAI chat completion whose message content is ``content`` (JSON-encoded unless a str)."""
    text = content if isinstance(content, str) else json.dumps(content)
    return Reply(
        200,
        {
            "id": "x",
            "object": "chat.completion",
            "model": "test-model",
            "choices": [{"index": 0, "message": {"role": "assistant", "content": text}, "finish_reason": finish}],
            "usage": {"prompt_tokens": 10, "completion_tokens": 5},
        },
    )


def ollama(content: Any) -> Reply:
    text = content if isinstance(content, str) else json.dumps(content)
    return Reply(
        200,
        {
            "model": "test-model",
            "message": {"role": "assistant", "content": text},
            "done": True,
            "done_reason": "stop",
            "prompt_eval_count": 10,
            "eval_count": 5,
        },
    )


# A scripted tool call: (name, arguments) or (id, name, arguments); arguments are a dict (sent as
# JSON text, or as an object to Ollama) or a str sent as it is. Anything else (a dict, a str) is
# sent verbatim as the tool_calls entry, to script malformed ones.
Call = tuple[str, Any] | tuple[str, str, Any] | dict[str, Any] | str


def _call_parts(call: Call) -> tuple[str | None, str, Any]:
    if not isinstance(call, tuple):
        raise TypeError("a verbatim call has no parts")
    if len(call) == 3:
        return call[0], call[1], call[2]
    return None, call[0], call[1]


def tool_calls(*calls: Call, content: str = "", finish: str = "tool_calls") -> Reply:
    """An OpenAI chat completion whose message calls ``calls`` (ids "call_test_<i>" unless given)."""
    entries = []
    for index, call in enumerate(calls):
        if not isinstance(call, tuple):
            entries.append(call)
            continue
        call_id, name, arguments = _call_parts(call)
        text = arguments if isinstance(arguments, str) else json.dumps(arguments)
        entries.append(
            {"id": call_id or f"call_test_{index}", "type": "function", "function": {"name": name, "arguments": text}}
        )
    message: dict[str, Any] = {"role": "assistant", "content": content or None}
    if entries:
        message["tool_calls"] = entries
    return Reply(
        200,
        {
            "id": "x",
            "object": "chat.completion",
            "model": "test-model",
            "choices": [{"index": 0, "message": message, "finish_reason": finish}],
            "usage": {"prompt_tokens": 10, "completion_tokens": 5},
        },
    )


def ollama_tool_calls(*calls: Call, content: str = "") -> Reply:
    """An Ollama /api/chat answer calling ``calls``: arguments as an object, no ids (unless given)."""
    entries = []
    for call in calls:
        if not isinstance(call, tuple):
            entries.append(call)
            continue
        call_id, name, arguments = _call_parts(call)
        entry: dict[str, Any] = {"function": {"name": name, "arguments": arguments}}
        if call_id:
            entry["id"] = call_id
        entries.append(entry)
    return Reply(
        200,
        {
            "model": "test-model",
            "message": {"role": "assistant", "content": content, "tool_calls": entries},
            "done": True,
            "done_reason": "stop",
            "prompt_eval_count": 10,
            "eval_count": 5,
        },
    )


def shown_files(body: dict[str, Any]) -> dict[str, str]:
    """path -> sha256 of every FILE block papayu sent so far in this request."""
    text = "\n".join(m.get("content") or "" for m in body.get("messages", []))
    return dict(FILE_HEADER.findall(text))


class ScriptedLLM:
    def __init__(self, script: list[Script]) -> None:
        self.script = list(script)
        # Answers about the server by path (GET /props, POST /api/show, /tokenize): the model's
        # window (papayu_git/llm/window.py); unset: /props lists the models, the POSTs are 404.
        self.extras: dict[str, Script] = {}
        self.requests: list[dict[str, Any]] = []
        self.paths: list[str] = []
        self.headers: list[dict[str, str]] = []
        owner = self

        class Handler(BaseHTTPRequestHandler):
            def log_message(self, *args: Any) -> None:
                pass

            def do_GET(self) -> None:
                models = Reply(200, {"object": "list", "data": [{"id": "discovered-model"}]})
                extra = owner.extras.get(self.path, models)
                self._send(extra({}) if callable(extra) else extra)

            def do_POST(self) -> None:
                length = int(self.headers.get("content-length", "0"))
                body = json.loads(self.rfile.read(length) or b"{}")
                if self.path in EXTRA_POSTS:  # asked about the server, not a chat turn: not scripted
                    extra = owner.extras.get(self.path, Reply(404, {"error": "not scripted"}))
                    self._send(extra(body) if callable(extra) else extra)
                    return
                with threading.Lock():
                    owner.requests.append(body)
                    owner.paths.append(self.path)
                    owner.headers.append({k.lower(): v for k, v in self.headers.items()})
                    item = owner.script.pop(0) if owner.script else Reply(500, {"error": "script exhausted"})
                reply = item(body) if callable(item) else item
                if reply.delay:
                    time.sleep(reply.delay)
                self._send(reply)

            def _send(self, reply: Reply) -> None:
                data = reply.body if isinstance(reply.body, str) else json.dumps(reply.body)
                raw = data.encode()
                try:
                    self.send_response(reply.status)
                    self.send_header("content-type", "application/json")
                    self.send_header("content-length", str(len(raw)))
                    for k, v in (reply.headers or {}).items():
                        self.send_header(k, v)
                    self.end_headers()
                    self.wfile.write(raw)
                except (BrokenPipeError, ConnectionResetError):
                    pass

        self.server = ThreadingHTTPServer(("127.0.0.1", 0), Handler)
        self.thread = threading.Thread(target=self.server.serve_forever, daemon=True)
        self.thread.start()

    @property
    def base_url(self) -> str:
        return f"http://127.0.0.1:{self.server.server_address[1]}/v1"

    @property
    def root_url(self) -> str:
        return f"http://127.0.0.1:{self.server.server_address[1]}"

    def env(self, **extra: str) -> dict[str, str]:
        return {
            "PAPAYU_LLM_BASE_URL": self.base_url,
            "PAPAYU_LLM_MODEL": "test-model",
            "PAPAYU_LLM_BACKOFF_SEC": "0.01",
            "PAPAYU_LLM_TIMEOUT_SEC": "20",
            **extra,
        }

    def close(self) -> None:
        self.server.shutdown()
        self.server.server_close()

    def last_user(self, index: int) -> str:
        return [m for m in self.requests[index]["messages"] if m["role"] == "user"][-1]["content"]

    def system(self, index: int) -> str:
        return self.requests[index]["messages"][0]["content"]

    def tools(self, index: int) -> list[dict[str, Any]]:
        """The tool definitions papayu sent with request ``index`` ([] when none)."""
        return list(self.requests[index].get("tools") or [])

    def tool_names(self, index: int) -> list[str]:
        return [tool["function"]["name"] for tool in self.tools(index)]

    def tool_messages(self, index: int) -> list[dict[str, Any]]:
        """The tool results (role "tool") in the conversation of request ``index``."""
        return [m for m in self.requests[index]["messages"] if m.get("role") == "tool"]
