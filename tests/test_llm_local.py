"""The real embedded model (provider `local`): llama.cpp server + Gemma 3 270M, one per session.

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
import time
from collections.abc import Iterator
from pathlib import Path

import httpx
import pytest
import test_model_window as click_sized
from helpers import git, make_repo, papayu, processes_with, run_papayu_bg, snapshot, trace_record, wait_for_marker
from terminal import CTRL_C, Terminal

pytestmark = [pytest.mark.local_llm, pytest.mark.xdist_group("local-model")]  # one model server, one worker

CALC = "def add(a, b):\n    return a - b\n"
TEST = "from calc import add\n\n\ndef test_add():\n    assert add(2, 3) == 5\n"
CHECK = 'python -c "import calc; assert calc.add(2, 3) == 5"'
GOAL = "fix the failing test tests/test_calc.py: add() must return a + b"
# A small answer budget keeps each call around a minute on 2 busy cores (docs/FEATURES.md: the local model).
MODEL_ENV = {"PAPAYU_LLM_MAX_TOKENS": "400", "PAPAYU_LLM_TIMEOUT_SEC": "900"}
CLEAR_ERRORS = {"ERR_LLM_INVALID_RESPONSE", "ERR_CONTEXT_ROUNDS_EXCEEDED", "ERR_LLM_TIMEOUT"}


@pytest.fixture(scope="session")
def local_model_url() -> Iterator[str]:
    if importlib.util.find_spec("llama_cpp") is None:
        pytest.skip("papayu-git[local] is not installed")
    from papayu_git.llm import local

    spec = local.server_spec()
    proc = subprocess.Popen(
        spec.argv(watch_parent=True),
        stdin=subprocess.DEVNULL,
        stdout=subprocess.DEVNULL,
        stderr=subprocess.DEVNULL,
        env=local.server_env(),
        start_new_session=True,
    )
    try:
        local.wait_until_ready(spec, proc, Path("/nonexistent"), 300)
        yield spec.base_url
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


def test_local_server_command_serves_in_the_foreground_until_interrupted(tmp_path: Path) -> None:
    import os
    import signal
    import socket
    import sys
    import time

    import httpx

    if importlib.util.find_spec("llama_cpp") is None:
        pytest.skip("papayu-git[local] is not installed")
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


def test_doctor_starts_the_embedded_model_and_it_answers_one_token(sample: Path) -> None:
    if importlib.util.find_spec("llama_cpp") is None:
        pytest.skip("papayu-git[local] is not installed")
    proc = papayu("doctor", "--json", cwd=sample, timeout=600)
    model = {c["name"]: c for c in json.loads(proc.stdout)["checks"]}["local model"]
    assert model["status"] == "ok", model
    assert model["data"]["answered"] is True and model["data"]["context_window"] == 8192
    assert "answered one token" in model["detail"]


def test_the_real_server_killed_by_sigsegv_mid_request_is_err_llm_server_died(sample: Path) -> None:
    if importlib.util.find_spec("llama_cpp") is None:
        pytest.skip("papayu-git[local] is not installed")
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
    assert Path(error["path"]).is_file() and "GGML_NATIVE=OFF" in error["hint"]
    Path(error["path"]).unlink()


def test_a_click_sized_plan_fits_the_embedded_models_window_and_goes_through(
    tmp_path: Path, local_model_url: str
) -> None:
    files = {f"src/click/{m}.py": click_sized.module(m) for m in click_sized.MODULES}
    repo = make_repo(tmp_path / "click", {"README.md": "# click\n", **files})
    unfitted = json.loads(papayu("context", click_sized.GOAL, "--json", cwd=repo).stdout)["context"]
    root = local_model_url.removesuffix("/v1")
    before = httpx.post(f"{root}/extras/tokenize/count", json={"input": unfitted}, timeout=60).json()["count"]
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


def test_ctrl_c_while_the_local_model_answers_ends_papayu_and_its_server_within_a_second(sample: Path) -> None:
    """The embedded server is killed, not asked to drain: a SIGTERM'd uvicorn finishes the answer
    nobody waits for any more (that took 10 s, the old grace period)."""
    if importlib.util.find_spec("llama_cpp") is None:
        pytest.skip("papayu-git[local] is not installed")
    term = Terminal(["plan", GOAL], sample, {**MODEL_ENV, "PAPAYU_LLM_MAX_TOKENS": "4000"})
    term.expect("waiting for gemma", timeout=600)  # the terminal's spinner: the request is out
    time.sleep(1.0)  # the model is inside its answer
    typed = term.type(CTRL_C)
    code = term.wait(timeout=60)
    took = time.monotonic() - typed
    print(f"Ctrl-C to exit: {took:.3f} s")
    assert code == 130 and "interrupted" in term.text, term.text
    assert took < 1.0, f"papayu took {took:.2f} s to end after Ctrl-C"
    assert processes_with(f"--watch-pid {term.pid}") == []  # the server went with it
