"""Errors that name the right cause, said before anything is paid for or waited on, through the
real CLI: a model server that is not running (ERR_LLM_CONNECT naming its URL, not a model name to
set), an embedded model that is not there, OpenAI without a key (said before any connection: a
recording proxy sees none), a detached HEAD (refused before the model is asked; --onto still works).
With no model that can answer, `plan` and `fix` say so before they gather context or start anything."""

from __future__ import annotations

import json
import socket
import threading
import time
from collections.abc import Iterator
from pathlib import Path

import pytest
from helpers import assert_error, git, papayu, wait_gone
from llm_server import ScriptedLLM, chat, plan_answer

GOAL = "fix the failing test tests/test_calc.py"


def dead_url() -> str:
    """A loopback port nothing listens on (bound, then closed)."""
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        return f"http://127.0.0.1:{sock.getsockname()[1]}/v1"


@pytest.mark.parametrize("model", ["", "some-model"])
def test_a_base_url_on_a_dead_port_is_a_connection_error_naming_the_url(repo: Path, model: str) -> None:
    url = dead_url()
    env = {"PAPAYU_LLM_BASE_URL": url, "PAPAYU_LLM_BACKOFF_SEC": "0.01"}
    proc = papayu("plan", GOAL, "--json", cwd=repo, env={**env, **({"PAPAYU_LLM_MODEL": model} if model else {})})
    assert_error(proc, "ERR_LLM_CONNECT", first=True)
    error = json.loads(proc.stdout)["errors"][0]
    assert url in error["reason"] and "PAPAYU_LLM_MODEL" not in error["reason"] + error["hint"]


class RecordingProxy:
    """A TCP listener standing in for an HTTPS proxy: it only counts who connects."""

    def __init__(self) -> None:
        self.sock = socket.create_server(("127.0.0.1", 0))
        self.connections = 0
        self.thread = threading.Thread(target=self._accept, daemon=True)
        self.thread.start()

    def _accept(self) -> None:
        while True:
            try:
                conn, _ = self.sock.accept()
            except OSError:
                return
            self.connections += 1
            conn.close()

    @property
    def url(self) -> str:
        return f"http://127.0.0.1:{self.sock.getsockname()[1]}"


@pytest.fixture
def proxy() -> Iterator[RecordingProxy]:
    recording = RecordingProxy()
    yield recording
    recording.sock.close()


def test_openai_without_a_key_says_so_before_any_connection(repo: Path, proxy: RecordingProxy) -> None:
    env = {"PAPAYU_LLM_PROVIDER": "openai", "HTTPS_PROXY": proxy.url, "HTTP_PROXY": proxy.url, "ALL_PROXY": proxy.url}
    env_without_keys = {"OPENAI_API_KEY": "", "PAPAYU_LLM_API_KEY": ""}
    proc = papayu("plan", GOAL, "--json", cwd=repo, env={**env, **env_without_keys})
    assert_error(proc, "ERR_LLM_CONFIG", first=True)
    error = json.loads(proc.stdout)["errors"][0]
    assert "needs an API key" in error["reason"] and "OPENAI_API_KEY" in error["hint"]
    assert proxy.connections == 0
    # The same setup with a key does go out (through the proxy): the check above could see a request.
    keyed = papayu(
        "plan", GOAL, "--json", cwd=repo, env={**env, "OPENAI_API_KEY": "sk-test", "PAPAYU_LLM_RETRIES": "0"}
    )
    assert keyed.returncode == 1 and proxy.connections >= 1, keyed.stdout


def test_a_detached_head_is_refused_before_the_model_is_asked(repo: Path, llm: ScriptedLLM) -> None:
    git(repo, "checkout", "-q", "--detach")
    proc = papayu("fix", GOAL, "-y", "--json", cwd=repo, env=llm.env())
    assert_error(proc, "ERR_DETACHED_HEAD", first=True)
    assert "nothing was sent to the model" in json.loads(proc.stdout)["errors"][0]["reason"]
    assert llm.requests == []
    # --onto names where it lands: the model is asked.
    llm.script = [chat(plan_answer("NO_CHANGES: nothing to fix", plan=[]))]
    onto = papayu("fix", GOAL, "-y", "--onto", "main", "--json", cwd=repo, env=llm.env())
    assert onto.returncode == 0 and len(llm.requests) == 1, onto.stdout + onto.stderr


NO_MODEL = {
    "dead server": ({"PAPAYU_LLM_BASE_URL": "DEAD"}, "ERR_LLM_CONNECT", "PAPAYU_LLM_BASE_URL"),
    "embedded model file missing": (
        {"PAPAYU_LOCAL_MODEL": "/nonexistent/model.gguf"},
        "ERR_LLM_LOCAL_UNAVAILABLE",
        "PAPAYU_LOCAL_MODEL",
    ),
    "proxy down": (
        {"PAPAYU_LLM_PROVIDER": "openai", "OPENAI_API_KEY": "sk-test", "HTTPS_PROXY": "DEAD"},
        "ERR_LLM_CONNECT",
        "PAPAYU_LLM_BASE_URL",
    ),
}


@pytest.mark.parametrize("command", [["plan"], ["fix", "-y"]])
@pytest.mark.parametrize("situation", sorted(NO_MODEL))
def test_with_no_model_that_can_answer_plan_and_fix_say_what_to_configure_before_anything_runs(
    repo: Path, command: list[str], situation: str
) -> None:
    settings, code, named = NO_MODEL[situation]
    git(repo, "config", "papayu.check.command", "python -c pass")  # a check a checkout would be prepared for
    env = {k: dead_url().removesuffix("/v1") if v == "DEAD" else v for k, v in settings.items()}
    started = time.monotonic()
    proc = papayu("-v", command[0], GOAL, *command[1:], "--json", cwd=repo, env=env)
    took = time.monotonic() - started
    assert_error(proc, code, first=True)
    error = json.loads(proc.stdout)["errors"][0]
    assert named in error["hint"], error
    # Decided before the context was gathered, a checkout prepared, a model started or a check run.
    events = [line.split()[0] for line in proc.stderr.splitlines() if line[:1].isupper() and "=" in line]
    assert events == [], proc.stderr
    assert wait_gone(f"papayu_git.prewarm {repo}", timeout=120) == []  # had one started, it would be done now
    assert not (repo / ".git/papayu/checkouts").exists() and not (repo / ".git/papayu/traces").exists()
    assert took < 20, f"{took:.1f} s"
