"""Masking only where it should (docs/DESIGN.md, "Masking"): error codes and protected paths
print as they are, a key word anywhere in a key's name marks a secret, and the provider's API
key is masked only when it can be a secret, never in a plan's files."""

from __future__ import annotations

import json
from pathlib import Path

import pytest
from helpers import git, make_repo, papayu, stored_plans, write_plan
from llm_server import ScriptedLLM, chat, plan_answer

from papayu_git.errors import PapayuError, repair_text
from papayu_git.secrets import api_key_secret, mask, scrub_api_key

CREDENTIAL_PATHS = [".aws/credentials", ".git-credentials", "credentials.json", "deploy/.env", "config/secrets/db.yml"]


@pytest.mark.parametrize("path", CREDENTIAL_PATHS)
def test_error_codes_and_protected_paths_are_never_masked(path: str) -> None:
    error = PapayuError("ERR_PROTECTED_PATH", "protected path (secrets, keys, .env)", path=path, hint="Leave it.")
    for text in (error.format(), repair_text([error]), f"code=ERR_PROTECTED_PATH path={path}", f"secret: {path}"):
        assert mask(text) == text


def test_validate_prints_codes_and_credential_paths_as_they_are(tmp_path: Path) -> None:
    actions = [{"kind": "CREATE_FILE", "path": p, "content": "x"} for p in CREDENTIAL_PATHS[:3]]
    plan = write_plan(tmp_path, actions)
    proc = papayu("validate", str(plan), cwd=tmp_path)
    assert proc.returncode == 1
    for path in CREDENTIAL_PATHS[:3]:
        assert f"ERR_PROTECTED_PATH: {path}: protected path" in proc.stdout
    assert "***" not in proc.stdout


@pytest.mark.parametrize(
    ("text", "masked"),
    [
        ("DB_HOST_PASSWORD_PLAIN=hunter2hunter2", "DB_HOST_PASSWORD_PLAIN=***"),
        ("export SMTP_PASS_PRIMARY=Mail-Pw-99", "export SMTP_PASS_PRIMARY=***"),
        ("authTokenValue: 0f9e8d7c6b5a", "authTokenValue: ***"),
        ("spring.datasource.password=abc123x", "spring.datasource.password=***"),
        ("SharedAccessKeyName=RootManage", "SharedAccessKeyName=***"),
        ("token_budget=4096&password=hunter22", "token_budget=4096&password=***"),
        ("max_tokens=4096 pass_rate=0.95 token_count: 1234", "max_tokens=4096 pass_rate=0.95 token_count: 1234"),
    ],
)
def test_a_key_word_anywhere_in_the_name_marks_a_secret(text: str, masked: str) -> None:
    assert mask(text) == masked


@pytest.mark.parametrize(
    "key", ["x", "EMPTY", "ollama", "sk-no-key-required", "xxxxxxxxxxxxxxxxxxxx", "0123456789abcde"]
)
def test_short_or_placeholder_keys_are_not_secrets(key: str) -> None:
    assert not api_key_secret(key)
    plan = {"summary": f"exact {key} EMPTY", "actions": [{"kind": "CREATE_FILE", "path": "a", "content": "exact"}]}
    assert scrub_api_key(plan, key) == plan


def test_a_real_key_is_masked_outside_the_plans_files_only() -> None:
    key = "q7Lm2Xp9Rt4Vb6Nz1Kc8"
    plan = {
        "summary": f"uses {key}",
        "actions": [{"kind": "CREATE_FILE", "path": "cfg.py", "content": f"KEY = '{key}'\n"}],
        "context": f"FILE[cfg.py]\n{key}",
    }
    scrubbed = scrub_api_key(plan, key)
    assert scrubbed["summary"] == "uses ***"
    assert scrubbed["actions"] == plan["actions"] and scrubbed["context"] == plan["context"]


EXACT = "def exact(a, b):\n    return a == b\n"


@pytest.mark.parametrize("key", ["x", "EMPTY"])
def test_a_placeholder_key_leaves_the_landed_file_and_the_message_alone(
    tmp_path: Path, llm: ScriptedLLM, key: str
) -> None:
    """A local server's key "x" once turned `exact` into `e***act` in the landed file."""
    repo = make_repo(tmp_path / "repo", {"calc.py": "def add(a, b):\n    return a + b\n"})
    action = {"kind": "CREATE_FILE", "path": "exact.py", "content": EXACT}
    llm.script = [chat(plan_answer("exact() is missing")), chat({"summary": "exact() compares", "actions": [action]})]
    env = llm.env(PAPAYU_LLM_API_KEY=key)
    proc = papayu("fix", "add exact() to calc", "-y", "--no-check", "--json", cwd=repo, env=env)
    assert proc.returncode == 0, proc.stderr
    assert json.loads(proc.stdout)["apply"]["state"] == "landed"
    assert (repo / "exact.py").read_text() == EXACT
    assert git(repo, "log", "-1", "--format=%s").startswith("exact() compares")
    stored = json.dumps(stored_plans(repo))
    assert "e***act" not in stored and "def exact(a, b)" in stored
