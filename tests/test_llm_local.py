"""The real embedded model (provider `local`): llama.cpp server + Gemma 3 270M, one per session.

The model is tiny and often wrong; these tests assert that papayu turns whatever it says into
a clear outcome: a validated plan or a clear ERR after the repair; a landed commit or a clean
rollback with the user's state unchanged.
"""

from __future__ import annotations

import importlib.util
import json
import subprocess
from collections.abc import Iterator
from pathlib import Path

import pytest
from helpers import git, make_repo, papayu, snapshot

pytestmark = pytest.mark.local_llm

CALC = "def add(a, b):\n    return a - b\n"
TEST = "from calc import add\n\n\ndef test_add():\n    assert add(2, 3) == 5\n"
CHECK = 'python -c "import calc; assert calc.add(2, 3) == 5"'
GOAL = "fix the failing test tests/test_calc.py: add() must return a + b"
# A small answer budget keeps each call around a minute on 2 busy cores (README: the local model).
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
