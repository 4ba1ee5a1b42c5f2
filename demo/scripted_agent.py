"""A SCRIPTED stand-in for a tool-calling model, for the demo's agent step: not an LLM.

An OpenAI-compatible /v1/chat/completions on 127.0.0.1 that replays a fixed conversation, one
turn per request: look around, patch calc.py, run the tests, then a final message. It reads
nothing papayu sends back; the tool results papayu produced are kept in ``tool_results`` so the
demo can show them.
"""

from __future__ import annotations

import json
import threading
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from typing import Any

FIX = "--- a/calc.py\n+++ b/calc.py\n@@ -1,2 +1,2 @@\n def add(a, b):\n-    return a - b\n+    return a + b\n"
TURNS: list[Any] = [
    [("list_files", {}), ("read_file", {"path": "calc.py"})],
    [("apply_patch", {"diff": FIX})],
    [("run_tests", {})],
    "add() subtracted instead of adding; it adds now, and run_tests passed.",
]


def _completion(turn: Any, index: int) -> dict[str, Any]:
    if isinstance(turn, str):
        message: dict[str, Any] = {"role": "assistant", "content": turn}
        finish = "stop"
    else:
        calls = [
            {"id": f"call_{index}_{n}", "type": "function", "function": {"name": name, "arguments": json.dumps(args)}}
            for n, (name, args) in enumerate(turn)
        ]
        message, finish = {"role": "assistant", "content": "", "tool_calls": calls}, "tool_calls"
    return {
        "id": f"scripted-{index}",
        "object": "chat.completion",
        "model": "scripted-agent",
        "choices": [{"index": 0, "message": message, "finish_reason": finish}],
        "usage": {"prompt_tokens": 0, "completion_tokens": 0},
    }


class ScriptedAgentServer:
    def __init__(self) -> None:
        self.tool_results: list[str] = []
        owner, turns = self, list(TURNS)

        class Handler(BaseHTTPRequestHandler):
            def log_message(self, *args: Any) -> None:
                pass

            def do_POST(self) -> None:
                body = json.loads(self.rfile.read(int(self.headers.get("content-length", "0"))) or b"{}")
                owner.tool_results = [m["content"] for m in body.get("messages", []) if m.get("role") == "tool"]
                index = len(TURNS) - len(turns)
                reply = _completion(turns.pop(0), index) if turns else {"error": "script exhausted"}
                data = json.dumps(reply).encode()
                self.send_response(200 if "choices" in reply else 500)
                self.send_header("content-type", "application/json")
                self.send_header("content-length", str(len(data)))
                self.end_headers()
                self.wfile.write(data)

        self.server = ThreadingHTTPServer(("127.0.0.1", 0), Handler)
        threading.Thread(target=self.server.serve_forever, daemon=True).start()

    @property
    def base_url(self) -> str:
        return f"http://127.0.0.1:{self.server.server_address[1]}/v1"

    def close(self) -> None:
        self.server.shutdown()
        self.server.server_close()
