"""The real embedded model (provider `local`): llama.cpp's server (xllamacpp) + Gemma 3 270M, one per session.

The model is tiny and often wrong; these tests assert that papayu turns whatever it says into
a clear outcome: a validated plan or a clear ERR after the repair; a landed commit or a clean
rollback with the user's state unchanged.
"""

from __future__ import annotations

import importlib.util
import json
import os
import re
import signal
import subprocess
import sys
import time
from collections.abc import Iterator
from pathlib import Path

import httpx
import pytest
import test_model_window as click_sized
from helpers import (
    git,
    make_repo,
    papayu,
    processes_with,
    run_papayu_bg,
    snapshot,
    trace_record,
    wait_for_marker,
    wait_gone,
)
from terminal import CTRL_C, Terminal

from papayu_git.llm import local, local_runner

pytestmark = [pytest.mark.local_llm, pytest.mark.xdist_group("local-model")]  # one model server, one worker

CALC = "def add(a, b):\n    return a - b\n"
TEST = "from calc import add\n\n\ndef test_add():\n    assert add(2, 3) == 5\n"
CHECK = 'python -c "import calc; assert calc.add(2, 3) == 5"'
GOAL = "fix the failing test tests/test_calc.py: add() must return a + b"
# A small answer budget keeps each call around a minute on 2 busy cores (docs/FEATURES.md: the local model).
MODEL_ENV = {"PAPAYU_LLM_MAX_TOKENS": "400", "PAPAYU_LLM_TIMEOUT_SEC": "900"}
CLEAR_ERRORS = {"ERR_LLM_INVALID_RESPONSE", "ERR_CONTEXT_ROUNDS_EXCEEDED", "ERR_LLM_TIMEOUT"}


INSTALLED = importlib.util.find_spec(local.SERVER_PACKAGE) is not None
needs_local = pytest.mark.skipif(not INSTALLED, reason="papayu-git[local] is not installed")


@pytest.fixture(scope="session")
def local_model_url() -> Iterator[str]:
    if not INSTALLED:
        pytest.skip("papayu-git[local] is not installed")
    spec = local.server_spec()
    with open(os.devnull, "wb") as devnull:
        proc, ready_fd = local.launch(spec, devnull.fileno())
    try:
        yield local.wait_until_ready(spec, proc, ready_fd, None, 300) + "/v1"
    finally:
        local.stop(proc)


@pytest.fixture
def sample(tmp_path: Path) -> Path:
    return make_repo(tmp_path / "sample", {"calc.py": CALC, "tests/test_calc.py": TEST})


def test_plan_on_the_local_model_is_valid_or_a_clear_error(sample: Path, local_model_url: str) -> None:
    proc = papayu(
        "plan", GOAL, "--json", cwd=sample, timeout=1500, env={"PAPAYU_LLM_BASE_URL": local_model_url, **MODEL_ENV}
    )
    out = json.loads(proc.stdout)
    if proc.returncode == 0:
        stored = sample / ".git" / "papayu" / "plans" / f"{out['plan_id']}.json"
        check = papayu("validate", str(stored), cwd=sample)
        assert check.returncode == 0, check.stdout
    else:
        assert proc.returncode == 1 and out["errors"][0]["code"] in CLEAR_ERRORS, proc.stderr


def test_fix_on_the_local_model_lands_or_rolls_back_cleanly(sample: Path, local_model_url: str) -> None:
    (sample / "NOTES.md").write_text("untracked notes of the user\n")
    before = snapshot(sample)
    head = git(sample, "rev-parse", "HEAD").strip()
    # Without the v1 fallback the APPLY round is at most 2 calls (the fallback has scripted tests).
    proc = papayu(
        "fix",
        GOAL,
        "-y",
        "--allow-test-edits",
        "--check",
        CHECK,
        cwd=sample,
        timeout=3600,
        env={"PAPAYU_LLM_BASE_URL": local_model_url, "PAPAYU_PROTOCOL_FALLBACK_TO_V1": "0", **MODEL_ENV},
    )
    assert proc.returncode in (0, 1), proc.stderr
    assert not git(sample, "branch", "--list", "papayu/*").strip()
    if proc.returncode == 0 and git(sample, "rev-parse", "HEAD").strip() != head:
        # Landed: the check passed on the new commit, and the user's untracked file survived.
        assert subprocess.run(CHECK, shell=True, cwd=sample).returncode == 0
        assert (sample / "NOTES.md").read_text() == "untracked notes of the user\n"
    else:
        assert snapshot(sample) == before, proc.stdout + proc.stderr


@needs_local
def test_the_embedded_server_takes_every_grammar_schema_papayu_sends(local_model_url: str) -> None:
    """Each bounded schema (docs/DESIGN.md, "Providers": the ladder's `json_object` rung) compiles
    in the server's grammar engine: a schema it cannot compile is a 400, never an answer."""
    from papayu_git.llm.wire_schema import grammar_schema

    for protocol in (1, 2):
        for shape in ("response", "plan", "apply"):
            response_format = {"type": "json_object", "schema": grammar_schema(protocol, shape)}
            body = {"messages": [{"role": "user", "content": "Answer."}], "max_tokens": 8, "temperature": 0}
            answer = httpx.post(
                f"{local_model_url}/chat/completions", json={**body, "response_format": response_format}, timeout=300
            )
            assert answer.status_code == 200, (protocol, shape, answer.text[:500])
            assert answer.json()["choices"][0]["message"]["content"].lstrip().startswith("{"), answer.text[:500]
    broken = {"type": "json_object", "schema": {"type": "object", "properties": {"a": {"type": "nonsense"}}}}
    refused = httpx.post(
        f"{local_model_url}/chat/completions",
        json={"messages": [{"role": "user", "content": "Answer."}], "max_tokens": 1, "response_format": broken},
        timeout=300,
    )
    assert refused.status_code == 400, refused.text[:500]  # the assertion above can fail


@needs_local
def test_local_server_command_serves_in_the_foreground_until_interrupted(tmp_path: Path) -> None:
    import os
    import signal
    import socket
    import sys
    import time

    import httpx

    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        port = sock.getsockname()[1]
    proc = subprocess.Popen(
        [sys.executable, "-m", "papayu_git", "local-server", "--port", str(port)],
        cwd=tmp_path,
        stdout=subprocess.PIPE,
        stderr=subprocess.DEVNULL,
        text=True,
        start_new_session=True,
    )
    try:
        assert f"http://127.0.0.1:{port}/v1" in (proc.stdout.readline() if proc.stdout else "")
        deadline, answered = time.monotonic() + 300, False
        while time.monotonic() < deadline and not answered and proc.poll() is None:
            try:
                answered = httpx.get(f"http://127.0.0.1:{port}/v1/models", timeout=2).status_code == 200
            except httpx.TransportError:
                time.sleep(0.5)
        assert answered
    finally:
        os.killpg(proc.pid, signal.SIGINT)
        assert proc.wait(timeout=60) in (0, -signal.SIGINT, 130)


@needs_local
def test_doctor_starts_the_embedded_model_and_it_answers_one_token(sample: Path) -> None:
    proc = papayu("doctor", "--json", cwd=sample, timeout=600)
    model = {c["name"]: c for c in json.loads(proc.stdout)["checks"]}["local model"]
    assert model["status"] == "ok", model
    assert model["data"]["answered"] is True and model["data"]["context_window"] == 8192
    assert "answered one token" in model["detail"]


@needs_local
def test_the_real_server_killed_by_sigsegv_mid_request_is_err_llm_server_died(sample: Path) -> None:
    proc = run_papayu_bg(["-v", "plan", GOAL, "--json"], sample, env=MODEL_ENV)
    try:
        ready = wait_for_marker(proc, "LOCAL_SERVER_READY", timeout=300)
        pid = int(re.search(r"pid=(\d+)", ready).group(1))  # type: ignore[union-attr]
        wait_for_marker(proc, "LLM_REQUEST_SENT", timeout=300)
        os.kill(pid, signal.SIGSEGV)  # the model is reading the prompt or writing the answer
        out, _ = proc.communicate(timeout=300)
    finally:
        if proc.poll() is None:
            proc.kill()
    assert proc.returncode == 1
    error = json.loads(out)["errors"][0]
    assert error["code"] == "ERR_LLM_SERVER_DIED", error
    assert f"(pid {pid}) was killed by SIGSEGV (signal 11)" in error["reason"]
    assert Path(error["path"]).is_file() and "llama.cpp crashed" in error["hint"]
    Path(error["path"]).unlink()


def test_a_click_sized_plan_fits_the_embedded_models_window_and_goes_through(
    tmp_path: Path, local_model_url: str
) -> None:
    files = {f"src/click/{m}.py": click_sized.module(m) for m in click_sized.MODULES}
    repo = make_repo(tmp_path / "click", {"README.md": "# click\n", **files})
    unfitted = json.loads(papayu("context", click_sized.GOAL, "--json", cwd=repo).stdout)["context"]
    root = local_model_url.removesuffix("/v1")
    before = len(httpx.post(f"{root}/tokenize", json={"content": unfitted}, timeout=60).json()["tokens"])
    assert before > 3 * 8192  # the context alone, as the diet cut it without knowing the window
    # No provider configured: papayu starts the embedded model (n_ctx 8192) and fits the request to it.
    proc = papayu("-v", "plan", click_sized.GOAL, "--json", cwd=repo, timeout=1500, env=MODEL_ENV)
    sent = [dict(re.findall(r"(\w+)=(\S+)", line)) for line in proc.stderr.splitlines() if "LLM_REQUEST_SENT" in line]
    assert sent and all(s["window_tokens"] == "8192" for s in sent), proc.stderr
    assert all(int(s["prompt_tokens"]) + int(s["token_budget"]) <= 8192 for s in sent), sent
    assert "LLM_RESPONSE_OK" in proc.stderr  # the model answered: the request went through
    out = json.loads(proc.stdout)
    if proc.returncode == 0:
        usage = trace_record(repo, out["trace_id"])["request"]["usage"][0]
        assert usage["prompt_tokens"] <= int(sent[0]["prompt_tokens"])  # papayu counts on the safe side
    else:
        assert proc.returncode == 1 and out["errors"][0]["code"] in CLEAR_ERRORS, proc.stderr


@needs_local
def test_ctrl_c_while_the_local_model_answers_ends_papayu_and_its_server_at_once(sample: Path) -> None:
    """The embedded server is killed, not asked to drain: nobody waits for its answer any more."""
    term = Terminal(["plan", GOAL], sample, {**MODEL_ENV, "PAPAYU_LLM_MAX_TOKENS": "4000"})
    term.expect("waiting for gemma", timeout=600)  # the terminal's spinner: the request is out
    time.sleep(1.0)  # the model is inside its answer
    typed = term.type(CTRL_C)
    code = term.wait(timeout=60)
    took = time.monotonic() - typed
    print(f"Ctrl-C to exit: {took:.3f} s")
    assert code == 130 and "interrupted" in term.text, term.text
    # Well under a second on an idle machine; the bound only tells a kill from a drain (the answer
    # of 4,000 tokens takes minutes), so a busy machine does not fail it.
    assert took < 5.0, f"papayu took {took:.2f} s to end after Ctrl-C"
    assert wait_gone(f"--watch-pid {term.pid}", timeout=5.0) == []  # the server (and its watcher) went with it


@needs_local
def test_papayu_killed_while_the_local_model_answers_takes_the_server_with_it(sample: Path) -> None:
    proc = run_papayu_bg(["-v", "plan", GOAL], sample, env=MODEL_ENV)
    marker = f"--watch-pid {proc.pid}"
    try:
        ready = wait_for_marker(proc, "LOCAL_SERVER_READY", timeout=300)
        server = int(re.search(r"pid=(\d+)", ready).group(1))  # type: ignore[union-attr]
        wait_for_marker(proc, "LLM_REQUEST_SENT", timeout=300)
        assert server in processes_with(marker)
        proc.kill()  # kill -9: papayu's own clean-up never runs; not collected yet, papayu is a zombie
        assert wait_gone(marker, timeout=5.0) == []
    finally:
        proc.kill()
        proc.wait(timeout=60)


@needs_local
@pytest.mark.parametrize("dropped", ["avx2", "fma"])
def test_the_real_wheel_on_a_cpu_without_what_it_was_built_for_refuses_to_load(tmp_path: Path, dropped: str) -> None:
    """xllamacpp's x86-64 wheel is compiled for AVX2/FMA/F16C (docs/FEATURES.md, "The local model"):
    on a CPU whose flags lack one, the runner says which and exits before llama.cpp loads anything.
    The CPU here is described by a copy of its /proc/cpuinfo with one flag taken out."""
    flags = local_runner.cpu_flags()
    if flags is None or dropped not in flags:
        pytest.skip(f"this CPU has no {dropped} to take out")
    cpuinfo = tmp_path / "cpuinfo"
    cpuinfo.write_text(f"processor\t: 0\nflags\t\t: {' '.join(sorted(flags - {dropped}))}\n")
    model = tmp_path / "not-loaded.gguf"
    model.write_bytes(b"GGUF")
    runner = [sys.executable, "-m", "papayu_git.llm.local_runner", "--cpuinfo", str(cpuinfo), "--model", str(model)]
    proc = subprocess.run(
        [*runner, "--alias", "x", "--port", "0", "--n-ctx", "512", "--threads", "1"],
        capture_output=True,
        text=True,
        timeout=120,
    )
    assert proc.returncode == local_runner.CPU_LACKS_EXIT, proc.stdout + proc.stderr
    assert re.search(rf"this CPU lacks .*\b{dropped.upper()}\b", proc.stdout), proc.stdout
    assert "loading model" not in proc.stdout + proc.stderr
