"""A model server that dies (docs/DESIGN.md, "A model server that dies").

The server here is a real process on 127.0.0.1 started the way papayu starts the embedded model
(`running_server` -> `python -m papayu_git.llm.local_runner` -> `llama_cpp.server`): a stand-in
`llama_cpp.server` put first on PYTHONPATH, which kills itself with a real signal where llama.cpp
would crash. tests/test_llm_local.py kills the real llama.cpp server mid-request.
"""

from __future__ import annotations

import json
import os
import signal
import socket
import subprocess
import sys
import time
from collections.abc import Iterator
from pathlib import Path

import pytest
from helpers import make_repo, papayu

pytest.importorskip("uvicorn", reason="papayu-git[local] is not installed")

# The stand-in. FAKE_LLAMA_MODE: "crash" = SIGSEGV while handling a chat request, "crash-at-start" =
# SIGILL while "loading the model" (what a llama.cpp built for another CPU does), "answer" = one token.
FAKE_SERVER = r"""
import argparse, json, os, signal, sys
from http.server import BaseHTTPRequestHandler, HTTPServer

parser = argparse.ArgumentParser()
parser.add_argument("--host", default="127.0.0.1")
parser.add_argument("--port", type=int, default=8000)
parser.add_argument("--n_ctx", type=int, default=2048)
args, _ = parser.parse_known_args()
mode = os.environ.get("FAKE_LLAMA_MODE", "crash")
print(f"llama_model_loader: loading model, n_ctx = {args.n_ctx}", flush=True)
if mode == "crash-at-start":
    print("ggml_cpu_init: using AVX-512 kernels", flush=True)
    os.kill(os.getpid(), signal.SIGILL)


class Handler(BaseHTTPRequestHandler):
    def log_message(self, *a):
        pass

    def _json(self, status, data):
        raw = json.dumps(data).encode()
        self.send_response(status)
        self.send_header("content-type", "application/json")
        self.send_header("content-length", str(len(raw)))
        self.end_headers()
        self.wfile.write(raw)

    def do_GET(self):
        if self.path == "/v1/models":
            self._json(200, {"object": "list", "data": [{"id": "fake-gemma"}]})
        else:
            self._json(404, {"detail": "Not Found"})

    def do_POST(self):
        body = json.loads(self.rfile.read(int(self.headers.get("content-length", "0"))) or b"{}")
        if self.path == "/extras/tokenize/count":
            return self._json(200, {"count": len(body["input"].encode()) // 4 + 1})
        if mode == "crash":
            print("ggml_compute_forward_mul_mat: segmentation fault in this request", flush=True)
            os.kill(os.getpid(), signal.SIGSEGV)
        choice = {"index": 0, "message": {"role": "assistant", "content": "OK"}, "finish_reason": "length"}
        self._json(200, {"choices": [choice], "usage": {"prompt_tokens": 9, "completion_tokens": 1}})


HTTPServer((args.host, args.port), Handler).serve_forever()
"""


@pytest.fixture
def fake_llama(tmp_path: Path) -> Iterator[dict[str, str]]:
    """The environment under which papayu's embedded server is the stand-in."""
    root = tmp_path / "fake-llama"
    (root / "llama_cpp" / "server").mkdir(parents=True)
    (root / "llama_cpp" / "__init__.py").write_text("")
    (root / "llama_cpp" / "server" / "__init__.py").write_text("")
    (root / "llama_cpp" / "server" / "__main__.py").write_text(FAKE_SERVER)
    gguf = tmp_path / "model.gguf"
    gguf.write_bytes(b"GGUF" + b"\0" * 60)
    yield {"PYTHONPATH": str(root), "PAPAYU_LOCAL_MODEL": str(gguf), "PAPAYU_LLM_BACKOFF_SEC": "0.01"}


def free_port() -> int:
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        return int(sock.getsockname()[1])


def first_error(proc: subprocess.CompletedProcess[str]) -> dict[str, str]:
    return json.loads(proc.stdout)["errors"][0]


def test_the_embedded_server_killed_by_sigsegv_mid_request_is_err_llm_server_died(
    repo: Path, fake_llama: dict[str, str]
) -> None:
    started = time.monotonic()
    proc = papayu("plan", "add a README section", "--json", cwd=repo, env=fake_llama)
    assert proc.returncode == 1, proc.stderr
    error = first_error(proc)
    assert error["code"] == "ERR_LLM_SERVER_DIED", error
    assert "was killed by SIGSEGV (signal 11)" in error["reason"]
    log = Path(error["path"])
    assert log.is_file() and "segmentation fault in this request" in log.read_text()
    assert "segmentation fault in this request" in error["reason"]  # the log's last words
    assert "GGML_NATIVE=OFF" in error["hint"] and "PAPAYU_LLM_CONTEXT_TOKENS (now 8192)" in error["hint"]
    assert time.monotonic() - started < 60  # reported at once, not after retries against a corpse
    log.unlink()


def test_an_embedded_server_killed_by_sigill_while_loading_says_to_rebuild_llama_cpp(
    repo: Path, fake_llama: dict[str, str]
) -> None:
    proc = papayu(
        "plan", "add a README section", "--json", cwd=repo, env={**fake_llama, "FAKE_LLAMA_MODE": "crash-at-start"}
    )
    error = first_error(proc)
    assert proc.returncode == 1 and error["code"] == "ERR_LLM_SERVER_DIED", error
    assert "SIGILL" in error["reason"] and "AVX-512" in error["reason"]
    assert error["hint"].startswith("llama.cpp was built for instructions this CPU lacks")
    Path(error["path"]).unlink()


def test_doctor_fails_the_embedded_model_that_dies_on_its_first_token(repo: Path, fake_llama: dict[str, str]) -> None:
    proc = papayu("doctor", "--json", cwd=repo, env=fake_llama)
    assert proc.returncode == 1
    report = json.loads(proc.stdout)
    model = {c["name"]: c for c in report["checks"]}["local model"]
    assert model["status"] == "fail" and model["code"] == "ERR_LLM_SERVER_DIED", model
    assert "SIGSEGV" in model["detail"] and model["hint"]
    assert model["data"]["answered"] is False
    Path(model["data"]["error"]["path"]).unlink()


def test_doctor_ok_means_the_embedded_model_answered_one_token(repo: Path, fake_llama: dict[str, str]) -> None:
    proc = papayu("doctor", "--json", cwd=repo, env={**fake_llama, "FAKE_LLAMA_MODE": "answer"})
    model = {c["name"]: c for c in json.loads(proc.stdout)["checks"]}["local model"]
    assert model["status"] == "ok", model
    assert model["data"]["answered"] is True and model["data"]["context_window"] == 8192
    assert "answered one token" in model["detail"]


def test_a_configured_server_that_dies_mid_request_is_err_llm_server_died_not_connect(
    tmp_path: Path, fake_llama: dict[str, str]
) -> None:
    repo = make_repo(tmp_path / "repo")
    port = free_port()
    server = subprocess.Popen(
        [sys.executable, "-m", "llama_cpp.server", "--port", str(port)],
        env={**os.environ, **fake_llama},
        stdout=subprocess.DEVNULL,
        stderr=subprocess.DEVNULL,
    )
    try:
        deadline = time.monotonic() + 30
        while time.monotonic() < deadline:
            try:
                socket.create_connection(("127.0.0.1", port), timeout=1).close()
                break
            except OSError:
                time.sleep(0.1)
        env = {"PAPAYU_LLM_BASE_URL": f"http://127.0.0.1:{port}/v1", "PAPAYU_LLM_MODEL": "fake-gemma", **fake_llama}
        proc = papayu("plan", "add a README section", "--json", cwd=repo, env=env)
        assert server.wait(timeout=30) == -signal.SIGSEGV
    finally:
        if server.poll() is None:
            server.kill()
    error = first_error(proc)
    assert error["code"] == "ERR_LLM_SERVER_DIED", error
    assert "closed the connection in the middle of an answer" in error["reason"]
    assert "now refuses connections" in error["reason"] and "log" in error["hint"]


def test_local_server_command_reports_a_server_that_died_by_a_signal(
    tmp_path: Path, fake_llama: dict[str, str]
) -> None:
    env = {**fake_llama, "FAKE_LLAMA_MODE": "crash-at-start"}
    proc = papayu("local-server", "--port", str(free_port()), cwd=tmp_path, env=env)
    assert proc.returncode == 1
    assert "ERR_LLM_SERVER_DIED" in proc.stderr and "SIGILL" in proc.stderr and "its output is above" in proc.stderr
