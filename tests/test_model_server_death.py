"""A model server that dies (docs/DESIGN.md, "A model server that dies").

The server here is a real process on 127.0.0.1 started the way papayu starts the embedded model
(`running_server` -> `python -m papayu_git.llm.local_runner` -> `xllamacpp.Server`): a stand-in
`xllamacpp` put first on PYTHONPATH, which serves HTTP like llama.cpp's server and kills itself
with a real signal where llama.cpp would crash. tests/test_llm_local.py kills the real server
mid-request.
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
from helpers import make_repo, papayu, processes_with, wait_gone

from papayu_git.llm import local_runner

# The stand-in. FAKE_LLAMA_MODE: "crash" = SIGSEGV while handling a chat request, "crash-at-start" =
# SIGILL while "loading the model" (an instruction the CPU lacks), "slow-start" = a load that takes
# minutes, "answer" = one token.
# FAKE_LLAMA_SYSTEM_INFO: what get_system_info() says the build was compiled for.
FAKE_XLLAMACPP = r"""
import json, os, signal, threading, time
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from types import SimpleNamespace

mode = os.environ.get("FAKE_LLAMA_MODE", "crash")


def get_system_info():
    return os.environ.get("FAKE_LLAMA_SYSTEM_INFO", "CPU : SSE3 = 1 | OPENMP = 1 | ")


class CommonParams:
    def __init__(self):
        self.model = SimpleNamespace(path="")
        self.cpuparams, self.cpuparams_batch = SimpleNamespace(n_threads=1), SimpleNamespace(n_threads=1)
        self.hostnames, self.port, self.n_ctx = ["127.0.0.1"], 8080, 4096


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
        if self.path == "/health":
            self._json(200, {"status": "ok"})
        elif self.path == "/v1/models":
            self._json(200, {"object": "list", "data": [{"id": "fake-gemma"}]})
        else:
            self._json(404, {"error": {"code": 404, "message": "File Not Found"}})

    def do_POST(self):
        body = json.loads(self.rfile.read(int(self.headers.get("content-length", "0"))) or b"{}")
        if self.path == "/tokenize":
            return self._json(200, {"tokens": list(range(len(body["content"].encode()) // 4 + 1))})
        if mode == "crash":
            print("ggml_compute_forward_mul_mat: segmentation fault in this request", flush=True)
            # In the thread that serves the request, as llama.cpp's fault would be: a signal to the
            # process may land in another thread while this one still writes an answer.
            signal.pthread_kill(threading.get_ident(), signal.SIGSEGV)
        choice = {"index": 0, "message": {"role": "assistant", "content": "OK"}, "finish_reason": "length"}
        self._json(200, {"choices": [choice], "usage": {"prompt_tokens": 9, "completion_tokens": 1}})


class Server:
    def __init__(self, params):
        print(f"load_model: loading model '{params.model.path}', n_ctx = {params.n_ctx}", flush=True)
        if mode == "crash-at-start":
            print("ggml_cpu_init: using AVX-512 kernels", flush=True)
            signal.pthread_kill(threading.get_ident(), signal.SIGILL)
        if mode == "slow-start":
            time.sleep(300)
        httpd = ThreadingHTTPServer((params.hostnames[0], params.port), Handler)
        threading.Thread(target=httpd.serve_forever, daemon=True).start()
        self.listening_address = f"http://{params.hostnames[0]}:{httpd.server_address[1]}"
"""


@pytest.fixture
def fake_llama(tmp_path: Path) -> Iterator[dict[str, str]]:
    """The environment under which papayu's embedded server is the stand-in."""
    root = tmp_path / "fake-llama"
    (root / "xllamacpp").mkdir(parents=True)
    (root / "xllamacpp" / "__init__.py").write_text(FAKE_XLLAMACPP)
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
    assert "llama.cpp crashed" in error["hint"] and "PAPAYU_LLM_CONTEXT_TOKENS (now 8192)" in error["hint"]
    assert time.monotonic() - started < 60  # reported at once, not after retries against a corpse
    log.unlink()


def test_an_embedded_server_killed_by_sigill_while_loading_names_the_cpu_and_what_to_do(
    repo: Path, fake_llama: dict[str, str]
) -> None:
    proc = papayu(
        "plan", "add a README section", "--json", cwd=repo, env={**fake_llama, "FAKE_LLAMA_MODE": "crash-at-start"}
    )
    error = first_error(proc)
    assert proc.returncode == 1 and error["code"] == "ERR_LLM_SERVER_DIED", error
    assert "SIGILL" in error["reason"] and "AVX-512" in error["reason"]
    assert error["hint"].startswith("llama.cpp ran an instruction this CPU lacks")
    assert "README: Providers" in error["hint"] and "--no-binary xllamacpp" in error["hint"]
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
    runner = [sys.executable, "-m", "papayu_git.llm.local_runner", "--model", fake_llama["PAPAYU_LOCAL_MODEL"]]
    server = subprocess.Popen(
        [*runner, "--alias", "fake-gemma", "--port", str(port), "--n-ctx", "4096", "--threads", "1"],
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


def _lacking_here() -> list[str]:
    """Instruction sets papayu knows by name that this machine's CPU does not have."""
    flags = local_runner.cpu_flags()
    if flags is None:
        pytest.skip("the kernel lists no CPU flags here (/proc/cpuinfo)")
    return [name for name, flag in local_runner._CPU_FLAGS.items() if flag not in flags]


@pytest.mark.parametrize("pick", [0, -1])  # the first and the last such set papayu knows: x86 or ARM names
def test_a_build_for_instructions_this_cpu_lacks_is_refused_before_loading_not_a_sigill_later(
    repo: Path, fake_llama: dict[str, str], pick: int
) -> None:
    missing = _lacking_here()[pick]
    info = f"CPU : SSE3 = 1 | {missing} = 1 | OPENMP = 1 | REPACK = 1 | "
    env = {**fake_llama, "FAKE_LLAMA_MODE": "answer", "FAKE_LLAMA_SYSTEM_INFO": info}
    started = time.monotonic()
    proc = papayu("plan", "add a README section", "--json", cwd=repo, env=env)
    error = first_error(proc)
    assert proc.returncode == 1 and error["code"] == "ERR_LLM_LOCAL_UNAVAILABLE", error
    assert f"cannot run on this CPU: papayu: this CPU lacks {missing}," in error["reason"]
    assert "OPENMP" not in error["reason"] and "REPACK" not in error["reason"]  # build options, not instructions
    assert "README: Providers" in error["hint"] and "--no-binary xllamacpp" in error["hint"]
    log = Path(error["path"]).read_text()
    assert "loading model" not in log  # refused before llama.cpp loaded anything
    assert time.monotonic() - started < 60
    Path(error["path"]).unlink()


def test_papayu_killed_while_its_model_loads_takes_the_server_with_it(repo: Path, fake_llama: dict[str, str]) -> None:
    """A kill -9 of papayu ends the embedded server even while it loads (the real load holds
    Python's GIL for seconds: no thread of the server's process could notice)."""
    env = {**os.environ, **fake_llama, "FAKE_LLAMA_MODE": "slow-start", "PAPAYU_LOG": "1"}
    proc = subprocess.Popen(
        [sys.executable, "-m", "papayu_git", "plan", "add a README section"],
        cwd=repo,
        env=env,
        stdout=subprocess.DEVNULL,
        stderr=subprocess.PIPE,
        text=True,
    )
    marker = f"--watch-pid {proc.pid}"
    try:
        assert proc.stderr is not None
        while "LOCAL_SERVER_START" not in (line := proc.stderr.readline()):
            assert line, "papayu ended before it started the model"
        deadline = time.monotonic() + 30
        while not processes_with(marker) and time.monotonic() < deadline:
            time.sleep(0.05)
        assert processes_with(marker), "the server did not start"
        time.sleep(1.0)  # inside the stand-in's load
        proc.kill()
        # Not collected yet: a parent that never waits leaves papayu a zombie, which still "exists".
        assert wait_gone(marker, timeout=5.0) == []
    finally:
        proc.kill()
        proc.wait(timeout=30)
