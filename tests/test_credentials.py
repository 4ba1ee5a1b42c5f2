"""Where a credential may go: which API key reaches which server, never over plain http to another
machine, and a forge token never follows a redirect off the API's origin."""

from __future__ import annotations

import json
import threading
from collections.abc import Iterator
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path
from typing import Any

import pytest
from helpers import make_repo, papayu
from llm_server import ScriptedLLM, chat

from papayu_git import forge, net
from papayu_git.errors import PapayuError
from papayu_git.llm.client import ChatClient
from papayu_git.llm.config import Provider, load_config

OPENAI_KEY = "sk-openaionly-0123456789abcdef"
PAPAYU_KEY = "sk-papayuonly-0123456789abcdef"
TOKEN = "ghp_credentialtest0123456789abcdefABCD"


@pytest.mark.parametrize(
    ("url", "safe"),
    [
        ("https://example.com/v1", True),
        ("http://127.0.0.1:8080/v1", True),
        ("http://127.5.6.7/v1", True),
        ("http://[::1]:11434", True),
        ("http://localhost:8000/v1", True),
        ("http://LOCALHOST./v1", True),
        ("http://10.0.0.5:8080/v1", False),
        ("http://example.com/v1", False),
        ("http://127.0.0.1.example.com/v1", False),
        ("ftp://127.0.0.1/", False),
        ("127.0.0.1:8080", False),
    ],
)
def test_which_transports_may_carry_a_key(url: str, safe: bool) -> None:
    assert net.may_carry_credentials(url) is safe


def _config(monkeypatch: pytest.MonkeyPatch, **env: str) -> Any:
    for name in (
        "OPENAI_API_KEY",
        "PAPAYU_LLM_API_KEY",
        "PAPAYU_LLM_PROVIDER",
        "PAPAYU_LLM_BASE_URL",
        "PAPAYU_LLM_MODEL",
    ):
        monkeypatch.delenv(name, raising=False)
    for name, value in env.items():
        monkeypatch.setenv(name, value)
    return load_config()


def test_openai_key_goes_only_to_openai(monkeypatch: pytest.MonkeyPatch) -> None:
    official = _config(monkeypatch, OPENAI_API_KEY=OPENAI_KEY, PAPAYU_LLM_PROVIDER="openai")
    assert official.base_url == "https://api.openai.com/v1" and official.api_key == OPENAI_KEY
    for url in ("https://llm.example.com/v1", "http://127.0.0.1:9/v1", "https://api.openai.com.evil.example/v1"):
        other = _config(monkeypatch, OPENAI_API_KEY=OPENAI_KEY, PAPAYU_LLM_BASE_URL=url, PAPAYU_LLM_MODEL="m")
        assert other.api_key == "", url
    own = _config(
        monkeypatch,
        OPENAI_API_KEY=OPENAI_KEY,
        PAPAYU_LLM_API_KEY=PAPAYU_KEY,
        PAPAYU_LLM_BASE_URL="https://llm.example.com/v1",
        PAPAYU_LLM_MODEL="m",
    )
    assert own.api_key == PAPAYU_KEY


def test_no_key_crosses_plain_http_to_another_machine(monkeypatch: pytest.MonkeyPatch) -> None:
    with pytest.raises(PapayuError) as err:
        _config(
            monkeypatch,
            PAPAYU_LLM_API_KEY=PAPAYU_KEY,
            PAPAYU_LLM_BASE_URL="http://10.0.0.5:8080/v1",
            PAPAYU_LLM_MODEL="m",
        )
    assert err.value.code == "ERR_LLM_INSECURE_KEY" and PAPAYU_KEY not in str(err.value)
    # Without a key, a plain-http server elsewhere is the user's business; on loopback a key is fine.
    assert _config(monkeypatch, PAPAYU_LLM_BASE_URL="http://10.0.0.5:8080/v1", PAPAYU_LLM_MODEL="m").api_key == ""
    local = _config(
        monkeypatch, PAPAYU_LLM_API_KEY=PAPAYU_KEY, PAPAYU_LLM_BASE_URL="http://localhost:8080/v1", PAPAYU_LLM_MODEL="m"
    )
    assert local.api_key == PAPAYU_KEY
    embedded = _config(monkeypatch, PAPAYU_LLM_API_KEY=PAPAYU_KEY)
    assert embedded.provider is Provider.LOCAL and embedded.api_key == ""


def test_plan_does_not_hand_the_openai_key_to_another_server(tmp_path: Path) -> None:
    repo = make_repo(tmp_path / "repo")
    llm = ScriptedLLM([chat({"actions": [], "summary": "nothing to do", "context_requests": []})])
    try:
        proc = papayu("plan", "look around", "--json", cwd=repo, env=llm.env(OPENAI_API_KEY=OPENAI_KEY))
        assert llm.headers, proc.stderr
        assert "authorization" not in llm.headers[0]
        assert OPENAI_KEY not in json.dumps(llm.headers)
    finally:
        llm.close()


def test_plan_refuses_a_key_over_plain_http(tmp_path: Path) -> None:
    repo = make_repo(tmp_path / "repo")
    proc = papayu(
        "plan",
        "look around",
        cwd=repo,
        env={"PAPAYU_LLM_API_KEY": PAPAYU_KEY, "PAPAYU_LLM_BASE_URL": "http://192.0.2.1:9/v1", "PAPAYU_LLM_MODEL": "m"},
    )
    assert proc.returncode not in (0, 3), proc.stderr
    assert "ERR_LLM_INSECURE_KEY" in proc.stderr and PAPAYU_KEY not in proc.stdout + proc.stderr


class _Recorder:
    """Two loopback servers, different origins: the first redirects every request to the second."""

    def __init__(self) -> None:
        self.seen: list[dict[str, str]] = []
        owner = self

        class Target(BaseHTTPRequestHandler):
            def log_message(self, *args: Any) -> None:
                pass

            def do_GET(self) -> None:
                owner.seen.append({k.lower(): v for k, v in self.headers.items()})
                body = b'{"ok": true}'
                self.send_response(200)
                self.send_header("content-type", "application/json")
                self.send_header("content-length", str(len(body)))
                self.end_headers()
                self.wfile.write(body)

        self.target = ThreadingHTTPServer(("127.0.0.1", 0), Target)
        # "localhost" and "127.0.0.1" are different origins to an HTTP client.
        elsewhere = f"http://localhost:{self.target.server_address[1]}"

        class Redirect(BaseHTTPRequestHandler):
            def log_message(self, *args: Any) -> None:
                pass

            def do_GET(self) -> None:
                owner.seen.append({k.lower(): v for k, v in self.headers.items()})
                self.send_response(301)
                self.send_header("location", elsewhere + self.path)
                self.send_header("content-length", "0")
                self.end_headers()

        self.redirect = ThreadingHTTPServer(("127.0.0.1", 0), Redirect)
        for server in (self.target, self.redirect):
            threading.Thread(target=server.serve_forever, daemon=True).start()

    @property
    def url(self) -> str:
        return f"http://127.0.0.1:{self.redirect.server_address[1]}"

    def close(self) -> None:
        for server in (self.target, self.redirect):
            server.shutdown()
            server.server_close()


@pytest.fixture
def recorder() -> Iterator[_Recorder]:
    rec = _Recorder()
    yield rec
    rec.close()


@pytest.mark.parametrize("kind", [forge.ForgeKind.GITHUB, forge.ForgeKind.GITLAB, forge.ForgeKind.GITEA])
def test_forge_token_does_not_follow_a_redirect_off_origin(recorder: _Recorder, kind: forge.ForgeKind) -> None:
    hub = forge.Forge(kind, forge.RemoteRepo("127.0.0.1", "acme/widget"), recorder.url, recorder.url, TOKEN)
    with forge.client(hub) as http:
        assert http.get("/repos/acme/widget").json() == {"ok": True}
    first, second = recorder.seen
    assert TOKEN in json.dumps(first)  # the API's own origin gets it
    assert TOKEN not in json.dumps(second)  # the redirect target does not


def test_forge_token_never_crosses_plain_http() -> None:
    hub = forge.Forge(
        forge.ForgeKind.GITHUB,
        forge.RemoteRepo("git.example.com", "acme/widget"),
        "http://git.example.com/api/v3",
        "http://git.example.com",
        TOKEN,
    )
    with pytest.raises(PapayuError) as err:
        forge.client(hub)
    assert err.value.code == "ERR_FORGE_INSECURE_TOKEN"


def test_model_key_does_not_follow_a_redirect_off_origin(recorder: _Recorder, monkeypatch: pytest.MonkeyPatch) -> None:
    config = _config(
        monkeypatch, PAPAYU_LLM_API_KEY=PAPAYU_KEY, PAPAYU_LLM_BASE_URL=recorder.url + "/v1", PAPAYU_LLM_MODEL="m"
    )
    with ChatClient(config) as client:
        response = client._http.get(recorder.url + "/v1/models", follow_redirects=True)
    assert response.status_code == 200
    first, second = recorder.seen
    assert first["authorization"] == f"Bearer {PAPAYU_KEY}" and "authorization" not in second
