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


@dataclass
class Reply:
    status: int = 200
    body: Any = None  # dict/list -> JSON, str -> raw text
    delay: float = 0.0
    headers: dict[str, str] | None = None


Script = Reply | Callable[[dict[str, Any]], Reply]


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


def shown_files(body: dict[str, Any]) -> dict[str, str]:
    """path -> sha256 of every FILE block papayu sent so far in this request."""
    text = "\n".join(m.get("content", "") for m in body.get("messages", []))
    return dict(FILE_HEADER.findall(text))


class ScriptedLLM:
    def __init__(self, script: list[Script]) -> None:
        self.script = list(script)
        self.requests: list[dict[str, Any]] = []
        self.paths: list[str] = []
        self.headers: list[dict[str, str]] = []
        owner = self

        class Handler(BaseHTTPRequestHandler):
            def log_message(self, *args: Any) -> None:
                pass

            def do_GET(self) -> None:
                self._send(Reply(200, {"object": "list", "data": [{"id": "discovered-model"}]}))

            def do_POST(self) -> None:
                length = int(self.headers.get("content-length", "0"))
                body = json.loads(self.rfile.read(length) or b"{}")
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
