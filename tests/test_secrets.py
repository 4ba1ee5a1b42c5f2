"""No secret survives into a trace, a log line (PAPAYU_LOG) or an error message."""

from __future__ import annotations

import json
from pathlib import Path

import pytest
from helpers import papayu

from papayu_git import traces
from papayu_git.secrets import mask

# Realistic shapes (fake values). (name, text as it appears, the part that must not survive)
ENV_SECRETS = {"ACME_API_KEY": "q8Zr-Lm2x-77Tt", "DEPLOY_TOKEN": "dpl_4f9c2a7be1"}
SECRETS: list[tuple[str, str, str]] = [
    ("openai legacy", "OPENAI_KEY sk-4eC39HqLyjWDarjtT1zdp7dc4eC39HqLyjWDarjtT1zdp7dc", "4eC39HqLyjWDarjtT1zdp7dc"),
    ("openai project", "key sk-proj-Ab3dEf6hIj9kLm2nOp5qRs8tUv1wXy4z_Ab3dEf6hIj9kLm-2nOp", "Ab3dEf6hIj9kLm2nOp5q"),
    ("anthropic", "sk-ant-api03-Zx9Yw8Vu7Ts6Rq5Po4Nm3Lk2Jh1Gf0Ed-AbCdEfGh", "Zx9Yw8Vu7Ts6Rq5Po4Nm3"),
    ("bearer header", "Authorization: Bearer tok9f8e7d6c5b4a3f2e1d0c", "tok9f8e7d6c5b4a3f2e1d0c"),
    ("bearer curl", 'curl -H "authorization: bearer Xy7Qp2Lm9Rt4Vb6Nz1Kc" https://api', "Xy7Qp2Lm9Rt4Vb6Nz1Kc"),
    ("github ghp", "GH ghp_R4nd0mT0k3nV4lu3Abcdefghij1234567890", "R4nd0mT0k3nV4lu3Abcdefghij"),
    ("github gho", "gho_16C7e42F292c6912E7710c838347Ae178B4a", "16C7e42F292c6912E7710c838347Ae"),
    ("github ghs", "ghs_abcDEF123ghiJKL456mnoPQR789stuVWX012", "abcDEF123ghiJKL456mnoPQR"),
    ("github ghu", "ghu_ZZZyyyXXXwww111222333444555666777aa", "ZZZyyyXXXwww111222333444"),
    ("github ghr", "ghr_1B4a2e77838347a7E420ce178F2E7c6912E1", "1B4a2e77838347a7E420ce17"),
    (
        "github pat",
        "github_pat_11ABCDEFG0abcdefghijklmn_OPQRSTUVWXYZ0123456789abcdefghijklmnopqrstuvwx",
        "11ABCDEFG0abcdefghijklmn_OPQRSTUVWXYZ",
    ),
    ("gitlab", "GITLAB glpat-xB7vK2mQ9pL4rT6wY1zN", "xB7vK2mQ9pL4rT6wY1zN"),
    ("slack bot", "xoxb-123456789012-1234567890123-AbCdEfGhIjKlMnOpQrStUvWx", "AbCdEfGhIjKlMnOpQrStUvWx"),
    ("slack user", "xoxp-2222222222-3333333333-4444444444-abcdef0123456789", "4444444444-abcdef0123456789"),
    ("aws key id", "aws_access_key_id = AKIAIOSFODNN7EXAMPLE", "AKIAIOSFODNN7EXAMPLE"),
    (
        "aws secret",
        "aws_secret_access_key = wJalrXUtnFEMI/K7MDENG/bPxRfiCYEXAMPLEKEY",
        "wJalrXUtnFEMI/K7MDENG/bPxRfiCYEXAMPLEKEY",
    ),
    (
        "rsa private key",
        "-----BEGIN RSA PRIVATE KEY-----\nMIIEpAIBAAKCAQEA7bq98s0Fake0Key0Body0Line0One\n"
        "q0Fake0Key0Body0Line0Two0abcdefghij\n-----END RSA PRIVATE KEY-----",
        "MIIEpAIBAAKCAQEA7bq98s0Fake0Key0Body",
    ),
    (
        "openssh private key",
        "-----BEGIN OPENSSH PRIVATE KEY-----\nb3BlbnNzaC1rZXktdjEAAAAABG5vbmUAAAAEbm9uZQ\n"
        "-----END OPENSSH PRIVATE KEY-----",
        "b3BlbnNzaC1rZXktdjEAAAAABG5vbmUAAAAEbm9uZQ",
    ),
    ("url password", "git clone https://deploy:Sup3rS3cretPw@git.example.com/team/repo.git", "Sup3rS3cretPw"),
    ("db url password", "DATABASE_URL=postgres://app:pg_p4ssw0rd_x@db:5432/app", "pg_p4ssw0rd_x"),
    ("api_key assignment", "config: api_key=live_abcdef1234567890", "live_abcdef1234567890"),
    ("json password", '{"user": "bob", "password": "correct horse battery staple"}', "horse battery"),
    ("stripe", "STRIPE sk_live_4eC39HqLyjWDarjtT1zdp7dc", "4eC39HqLyjWDarjtT1zdp7dc"),
    ("google", "maps AIzaSyD-9tSrke72PouQMnMX-a7eZSW0jkFMBWY", "SyD-9tSrke72PouQMnMX-a7eZSW0jkFMBWY"),
    (
        "jwt",
        "cookie eyJhbGciOiJIUzI1NiJ9.eyJzdWIiOiIxMjM0NTY3ODkwIn0.dozjgNryP4J3jVmNHl0w5N_XgL0n3I9PlFUP0THsR8U",
        "dozjgNryP4J3jVmNHl0w5N_XgL0n3I9PlFUP0THsR8U",
    ),
    ("huggingface", "hf_AbCdEfGhIjKlMnOpQrStUvWxYz0123456789", "AbCdEfGhIjKlMnOpQrStUvWxYz"),
    ("npm", "//registry.npmjs.org/:_authToken=npm_AbCdEfGhIjKlMnOpQrStUvWxYz0123456789", "AbCdEfGhIjKlMnOpQrSt"),
    ("yaml client secret", "client_secret: 8Jd7Ks9Lq2Mw4Nz6", "8Jd7Ks9Lq2Mw4Nz6"),
    ("shell password", "export DATABASE_PASSWORD=hunter2hunter2", "hunter2hunter2"),
    ("env api key value", f"using key {ENV_SECRETS['ACME_API_KEY']} for acme", ENV_SECRETS["ACME_API_KEY"]),
    ("env token value", f"deploying with {ENV_SECRETS['DEPLOY_TOKEN']}", ENV_SECRETS["DEPLOY_TOKEN"]),
]
BLOB = "\n".join(text for _, text, _ in SECRETS)


def _assert_clean(text: str, where: str) -> None:
    leaked = [name for name, _, secret in SECRETS if secret in text]
    assert not leaked, f"{where} leaks: {leaked}"


@pytest.fixture(autouse=True)
def secret_env(monkeypatch: pytest.MonkeyPatch) -> None:
    for name, value in ENV_SECRETS.items():
        monkeypatch.setenv(name, value)


@pytest.mark.parametrize(("name", "text", "secret"), SECRETS, ids=[s[0] for s in SECRETS])
def test_mask_removes_each_shape(name: str, text: str, secret: str) -> None:
    assert secret in text
    masked = mask(text)
    assert secret not in masked and "***" in masked


def test_mask_keeps_ordinary_text_readable() -> None:
    text = (
        "LLM_REQUEST_SENT token_budget=4096 max_tokens=16384 input_chars=1200 path=src/secrets_util.py "
        'summary="fix the token parser" hit_rate=0.5 sha=e3b0c44298fc1c149afbf4c8996fb924'
    )
    assert mask(text) == text


def test_no_secret_in_a_trace_even_with_raw_output(repo: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("PAPAYU_TRACE_RAW", "1")
    monkeypatch.setenv("PAPAYU_LLM_BASE_URL", "https://proxy:Sup3rS3cretPw@llm.example.com/v1")
    data = {
        "command": "plan",
        "raw_content": BLOB,
        "goal": BLOB,
        "error": {"reason": BLOB},
        "validated_json": {
            "summary": BLOB,
            "actions": [{"kind": "CREATE_FILE", "path": "a", "content": BLOB}],
            "memory_patch": {BLOB[:80]: "x"},
        },
        "check": {"state": "failed", "output_tail": [BLOB]},
    }
    path = traces.write_trace(repo / ".git" / "papayu", traces.new_trace_id(), data)
    text = path.read_text()
    _assert_clean(text, "trace")
    _assert_clean(json.dumps(json.loads(text), ensure_ascii=False), "trace (decoded)")
    assert json.loads(text)["config_snapshot"]["llm_base_url"] == "https://proxy:***@llm.example.com/v1"


def test_no_secret_in_log_lines_or_error_of_a_real_command(repo: Path) -> None:
    proc = papayu("-v", "memory", "set", "project.ci_notes", BLOB, cwd=repo)
    assert proc.returncode == 1
    assert "MEMORY_SET_REJECTED code=ERR_MEMORY_SECRET key=project.ci_notes value=" in proc.stderr
    assert "ERR_MEMORY_SECRET" in proc.stderr and not (repo / ".papa-yu").exists()
    _assert_clean(proc.stderr + proc.stdout, "memory set output")


def test_no_secret_in_error_messages_text_and_json(repo: Path) -> None:
    for args in (("trace", "show", BLOB), ("trace", "show", BLOB, "--json")):
        proc = papayu(*args, cwd=repo, env={"PAPAYU_LOG": "1"})
        assert proc.returncode == 1 and "ERR_TRACE_NOT_FOUND" in proc.stdout + proc.stderr
        _assert_clean(proc.stderr + proc.stdout, " ".join(args[:2]))


def test_memory_patch_with_a_secret_is_not_stored(repo: Path) -> None:
    from papayu_git.memory import apply_memory_patch, project_path

    applied = apply_memory_patch(
        repo,
        {"project.ci_notes": "token: ghp_R4nd0mT0k3nV4lu3Abcdefghij1234567890", "project.package_manager": "uv"},
        "remember this",
        False,
    )
    assert applied == ["project.package_manager"]
    assert "ghp_" not in project_path(repo).read_text()


def test_no_secret_in_traces_or_events_of_a_real_plan(repo: Path) -> None:
    """`plan` against a scripted OpenAI-compatible server, with secrets in the goal, in the
    model's answer and in the API key; PAPAYU_LOG=1 and PAPAYU_TRACE_RAW=1."""
    from tests.golden.regenerate import ScriptedModel

    answer = {"actions": [], "summary": "Plan. Found these in the logs:\n" + BLOB}
    with ScriptedModel([lambda shown: answer]) as model:
        env = {
            "PAPAYU_LLM_PROVIDER": "openai-compatible",
            "PAPAYU_LLM_BASE_URL": model.base_url,
            "PAPAYU_LLM_MODEL": "scripted",
            "PAPAYU_LLM_API_KEY": "sk-live-Zz9Yy8Xx7Ww6Vv5Uu4",
            "PAPAYU_LOG": "1",
            "PAPAYU_TRACE_RAW": "1",
        }
        proc = papayu("plan", "why does login fail? " + SECRETS[0][1], cwd=repo, env=env)
        assert proc.returncode == 0, proc.stderr
        sent = json.dumps(model.requests)
    assert "LLM_REQUEST_SENT" in proc.stderr
    _assert_clean(proc.stderr, "plan events")
    assert "Zz9Yy8Xx7Ww6Vv5Uu4" not in proc.stderr
    trace_files = list((repo / ".git" / "papayu" / "traces").glob("*.json"))
    assert trace_files and "Authorization" not in sent  # no key: the server got no auth header text
    for path in trace_files:
        text = path.read_text()
        assert "raw_content" in text
        _assert_clean(text, path.name)
        assert "Zz9Yy8Xx7Ww6Vv5Uu4" not in text
