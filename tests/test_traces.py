"""traces.py: trace files under .git/papayu/traces, PAPAYU_TRACE_ENABLED / PAPAYU_TRACE_RAW, snapshot."""

from __future__ import annotations

import json
from pathlib import Path

import pytest
from helpers import git, papayu_dir

from papayu_git import settings, traces
from papayu_git.errors import PapayuError
from papayu_git.schemas import schema_hash


def test_write_trace_records_layout_and_schema_hash(repo: Path) -> None:
    trace_id = traces.new_trace_id()
    data = {
        "command": "plan",
        **traces.schema_fields(2),
        "validated_json": {"actions": []},
        "validation_outcome": "ok",
        "error_code": None,
    }
    path = traces.write_trace(papayu_dir(repo), trace_id, data)
    assert path == papayu_dir(repo) / "traces" / f"{trace_id}.json"
    record = json.loads(path.read_text())
    assert record["trace_id"] == trace_id and record["trace_format"] == 1
    assert record["schema_hash"] == schema_hash("llm_response_v2") and record["schema_version"] == 2
    assert record["created_at"].endswith("Z")
    assert record["config_snapshot"]["protocol_version"] == "2"
    assert traces.load_trace(papayu_dir(repo), trace_id[:8])["command"] == "plan"


def test_trace_off_writes_nothing(repo: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("PAPAYU_TRACE_ENABLED", "0")
    assert traces.write_trace(papayu_dir(repo), traces.new_trace_id(), {"command": "plan"}) is None
    assert not (papayu_dir(repo) / "traces").exists()


def test_trace_off_through_git_config(repo: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    git(repo, "config", "papayu.trace.enabled", "false")
    settings._git_config.cache_clear()
    monkeypatch.chdir(repo)
    assert traces.write_trace(papayu_dir(repo), traces.new_trace_id(), {"command": "plan"}) is None


def test_raw_content_only_with_trace_raw_and_masked(repo: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    raw = 'here {"actions": []} Authorization: Bearer abcdef0123456789xyz sk-proj-AAAABBBBCCCCDDDD1234'
    trace_id = traces.new_trace_id()
    record = json.loads(traces.write_trace(papayu_dir(repo), trace_id, {"raw_content": raw}).read_text())
    assert "raw_content" not in record
    monkeypatch.setenv("PAPAYU_TRACE_RAW", "1")
    record = json.loads(traces.write_trace(papayu_dir(repo), trace_id, {"raw_content": raw}).read_text())
    assert record["raw_content"].startswith('here {"actions": []}')
    assert "abcdef0123456789xyz" not in record["raw_content"] and "AAAABBBB" not in record["raw_content"]


def test_config_snapshot_never_holds_api_keys(repo: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("PAPAYU_LLM_API_KEY", "very-secret-key-value-123")
    monkeypatch.setenv("PAPAYU_LLM_BASE_URL", "https://bob:hunter2pass@llm.example.com/v1")
    snapshot = traces.config_snapshot(str(repo))
    text = json.dumps(snapshot)
    assert "very-secret-key-value-123" not in text and "hunter2pass" not in text
    assert "llm.example.com" in snapshot["llm_base_url"]


def test_load_traces_sorted_oldest_first(repo: Path) -> None:
    ids = [traces.new_trace_id() for _ in range(3)]
    for trace_id in ids:
        traces.write_trace(papayu_dir(repo), trace_id, {"command": "apply"})
    loaded = traces.load_traces(traces.traces_dir(papayu_dir(repo)))
    assert [t["trace_id"] for t in loaded] == ids


def test_unknown_or_unsafe_trace_id_is_an_error(repo: Path) -> None:
    for bad in ("nope", "../x"):
        with pytest.raises(PapayuError) as info:
            traces.load_trace(papayu_dir(repo), bad)
        assert info.value.code == "ERR_TRACE_NOT_FOUND"


def test_second_write_merges_into_the_same_trace(repo: Path) -> None:
    trace_id = traces.new_trace_id()
    first = json.loads(
        traces.write_trace(
            papayu_dir(repo),
            trace_id,
            {"command": "apply", "request": {"mode": "apply", "latency_ms": 5}, "protocol_repair_attempt": 1},
        ).read_text()
    )
    merged = json.loads(
        traces.write_trace(papayu_dir(repo), trace_id, {"command": "apply", "check": {"state": "passed"}}).read_text()
    )
    assert merged["request"] == {"mode": "apply", "latency_ms": 5} and merged["protocol_repair_attempt"] == 1
    assert merged["check"] == {"state": "passed"} and merged["created_at"] == first["created_at"]
    assert "updated_at" in merged


def test_event_format_is_stable_and_greppable() -> None:
    from papayu_git.output import format_event

    line = format_event(
        "LLM_REQUEST_SENT",
        {
            "model": "gpt-4o-mini",
            "token_budget": 4096,
            "strict": True,
            "reason": 'has "quotes" and spaces',
            "empty": "",
            "kv": "a=b",
            "files": ["a.py", "b.py"],
        },
    )
    assert line == (
        "LLM_REQUEST_SENT model=gpt-4o-mini token_budget=4096 strict=true "
        'reason="has \\"quotes\\" and spaces" empty="" kv="a=b" files="[\\"a.py\\", \\"b.py\\"]"'
    )


def test_events_only_with_papayu_log_and_masked(repo: Path, tmp_path: Path) -> None:
    from helpers import papayu

    response = tmp_path / "r.json"
    response.write_text(
        json.dumps({"actions": [{"kind": "CREATE_FILE", "path": "n.md", "content": "x\n"}], "summary": "notes"})
    )
    quiet = papayu("apply", str(response), "--check", "true", "-y", cwd=repo)
    assert quiet.returncode == 0 and "APPLY_SUCCESS" not in quiet.stderr
    response.write_text(
        json.dumps({"actions": [{"kind": "CREATE_FILE", "path": "m.md", "content": "x\n"}], "summary": "notes"})
    )
    loud = papayu("apply", str(response), "--check", "true", "-y", cwd=repo, env={"PAPAYU_LOG": "1"})
    lines = [line for line in loud.stderr.splitlines() if line.startswith("APPLY_SUCCESS ")]
    assert len(lines) == 1 and " plan_id=" in lines[0] and " branch=main" in lines[0]
