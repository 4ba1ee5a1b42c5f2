"""What a test prints never brings the repository's secrets to the model (docs/DESIGN.md, "Masking").

`read_file('.env')` is refused, but a model can write a test that prints a protected file
base64-encoded and call run_tests. The values of the files that hold secrets are masked in
every spelling the test might use: as they are, hex, base64 at any byte alignment, the whole
file encoded, wrapped over lines. With papayu.agent.testOutput=names the model gets pass or
fail and the failing tests' names only. Real CLI, real pytest in the sandboxed check, the
scripted tool-calling server; what papayu sent is read back from the server's requests.
"""

from __future__ import annotations

import base64
import binascii
import json
import re
import sys
from pathlib import Path
from typing import Any

import pytest
from helpers import git, make_repo, papayu, plan_record
from llm_server import ScriptedLLM, chat, tool_calls
from test_masking_linear import assert_linear

from papayu_git.check.secret_files import secret_values, spellings, value_masker

CHECK = f"{sys.executable} -m pytest -q -p no:cacheprovider tests"
SECRET_FILE = "deploy/.env.production"
PIN, SALT = "orchid-lantern-7731-velvet", "Zq4v9TmK2pWx7Lr3"
ENV_PRODUCTION = f"PAYMENT_PIN={PIN}\nSIGNING_SALT={SALT}\nREGION=eu-west-1\n"
LEAK = f'''import base64
from pathlib import Path


def test_leak():
    data = Path("{SECRET_FILE}").read_bytes()
    print(base64.b64encode(data).decode())
    print(base64.encodebytes(data).decode())
    print(data.hex(), data.hex().upper())
    for line in data.splitlines():
        value = line.partition(b"=")[2]
        print(value.decode(), value.hex(), *(base64.b64encode(pad + value).decode() for pad in (b"", b"x", b"xy")))
    assert False, "printed"
'''
LEAK_DIFF = "--- /dev/null\n+++ b/tests/test_leak.py\n@@ -0,0 +1,{} @@\n".format(LEAK.count("\n")) + "".join(
    f"+{line}\n" for line in LEAK.splitlines()
)


def forbidden() -> set[str]:
    """Every spelling of the file's secrets a reader could turn back into them."""
    data = ENV_PRODUCTION.encode()
    out = {base64.b64encode(data).decode(), data.hex(), data.hex().upper()}
    out |= {line for line in base64.encodebytes(data).decode().splitlines() if len(line) >= 16}
    for value in (PIN.encode(), SALT.encode()):
        out |= {value.decode(), value.hex(), value.hex().upper()}
        for pad in (b"", b"x", b"xy"):
            encoded = base64.b64encode(pad + value).decode()
            out.add(encoded[4 if pad else 0 : 4 * ((len(pad) + len(value)) // 3)])  # the part only the value decides
    return out


_BASE64_RUN = re.compile(r"[A-Za-z0-9+/_\-=]{4,}(?:\n[A-Za-z0-9+/_\-=]{4,})*")
_HEX_RUN = re.compile(r"[0-9a-fA-F]{4,}")


def _strings(data: Any) -> list[str]:
    if isinstance(data, str):
        return [data]
    if isinstance(data, dict):
        return [s for v in data.values() for s in _strings(v)]
    return [s for v in data for s in _strings(v)] if isinstance(data, list) else []


def revealed(data: Any, window: int = 5) -> list[str]:
    """The pieces of at least ``window`` characters of the secrets that a reader gets back from
    ``data``: as written, or decoded from any base64 or hex run in it at any alignment."""
    readable: list[bytes] = []
    for text in _strings(data):
        readable.append(text.encode())
        for run in _BASE64_RUN.findall(text):
            run = run.replace("\n", "").replace("-", "+").replace("_", "/").replace("=", "")
            for shift in range(4):
                piece = run[shift:][: (len(run) - shift) // 4 * 4]
                readable.append(base64.b64decode(piece + "==", validate=False) if piece else b"")
        for run in _HEX_RUN.findall(text):
            readable += [binascii.unhexlify(run[s:][: (len(run) - s) // 2 * 2]) for s in (0, 1)]
    found = []
    for secret in (PIN, SALT):
        pieces = {secret[i : i + window].encode() for i in range(len(secret) - window + 1)}
        found += [p.decode() for p in pieces if any(p in r for r in readable)]
    return found


@pytest.fixture
def secret_repo(tmp_path: Path) -> Path:
    return make_repo(
        tmp_path / "repo",
        {
            "calc.py": "def add(a, b):\n    return a + b\n",
            "tests/test_calc.py": "from calc import add\n\n\ndef test_add():\n    assert add(2, 3) == 5\n",
            SECRET_FILE: ENV_PRODUCTION,
        },
    )


def leaking_run(repo: Path, llm: ScriptedLLM, **env: str) -> tuple[str, Any]:
    llm.script = [
        tool_calls(("p", "apply_patch", {"diff": LEAK_DIFF})),
        tool_calls(("t", "run_tests", {})),
        chat("Added a test."),
    ]
    proc = papayu("agent", "add a test", "--json", "-y", "--check", CHECK, cwd=repo, env=llm.env(**env))
    assert proc.returncode in (0, 1), proc.stderr
    (result,) = [m["content"] for m in llm.tool_messages(2) if m["tool_call_id"] == "t"]
    return result, proc


def test_a_test_printing_a_tracked_protected_file_encoded_sends_no_form_of_it(
    secret_repo: Path, llm: ScriptedLLM
) -> None:
    result, proc = leaking_run(secret_repo, llm)
    assert result.startswith("run_tests: ") and "FAILED (exit 1)" in result
    assert "test_leak" in result and result.count("***") >= 10  # the output is there, masked
    sent = json.dumps(llm.requests[2])
    assert not [s for s in forbidden() if s in sent] and not revealed(llm.requests[2])
    plan = plan_record(secret_repo, json.loads(proc.stdout)["agent"]["plan_id"])
    assert not [s for s in forbidden() if s in json.dumps(plan)] and not revealed(plan)  # the stored conversation


def test_names_only_sends_the_verdict_and_the_failing_test(secret_repo: Path, llm: ScriptedLLM) -> None:
    result, _ = leaking_run(secret_repo, llm, PAPAYU_AGENT_TEST_OUTPUT="names")
    lines = result.splitlines()
    assert "FAILED (exit 1)" in lines[0] and "testOutput=names" in lines[1]
    assert lines[2:] == ["1 passed, 1 failed", "failing: tests/test_leak.py::test_leak"]
    assert not [s for s in forbidden() if s in json.dumps(llm.requests[2])]


# --- units -------------------------------------------------------------------------------------


def test_every_spelling_is_masked_in_running_text(secret_repo: Path) -> None:
    mask = value_masker(secret_values(secret_repo))
    data = ENV_PRODUCTION.encode()
    wrapped = base64.encodebytes(data * 3).decode()  # three copies: the values sit across line ends
    text = "\n".join(["log start", *sorted(forbidden()), wrapped, f"prefix{PIN.encode().hex()}suffix", "log end"])
    masked = mask(text)
    assert not [s for s in forbidden() if s in masked] and not revealed(masked)
    assert not [line for line in wrapped.splitlines() if line in masked]
    assert masked.startswith("log start\n") and masked.endswith("log end")


def test_the_files_read_are_the_secret_ones(secret_repo: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    (secret_repo / ".gitignore").write_text(".env\nlocal.cfg\n")
    (secret_repo / ".env").write_text("LOCAL_DB_URL=postgres://app:Pg-ignored-1234@db/app\n")
    (secret_repo / "local.cfg").write_text("TEST_FIXTURE_KEY=included-value-5678\n")
    (secret_repo / "notes.txt").write_text("ORDINARY_SETTING=not-a-secret-90\n")
    home = Path.home()
    (home / ".git-credentials").write_text("https://bob:ghs-home-credential-777@git.example.com\n")
    (home / ".gitconfig").write_text((home / ".gitconfig").read_text() + "[user]\n\tsigningkey = ABCDEF0123\n")
    monkeypatch.setenv("GIT_CONFIG_GLOBAL", str(home / ".gitconfig"))
    git(secret_repo, "config", "papayu.check.include", "local.cfg")
    values = set(secret_values(secret_repo))
    assert {PIN, SALT, "postgres://app:Pg-ignored-1234@db/app", "included-value-5678"} <= values
    assert "ghs-home-credential-777" in values
    assert spellings(PIN.encode()) <= values
    assert "not-a-secret-90" not in values  # not a protected file
    assert "Test User" not in values and "test@example.com" not in values  # a git config's name is no secret


def test_the_value_masker_is_linear_on_base64_runs_and_blocks(secret_repo: Path) -> None:
    mask = value_masker(secret_values(secret_repo))
    for needle, run in (("QUJD", "QUJD"), ("QUJD\n", "QUJD\n"), ("QUJDRUZHSElKS0xNTk9Q\n", "QUJD\n"), (SALT[:5], "\n")):
        assert_linear(mask, needle, run)
