"""Golden traces: our own scenarios (tests/golden/v1, v2) replay; trace -> golden conversion."""

from __future__ import annotations

import json
from pathlib import Path

import pytest
from helpers import GOLDEN_UPSTREAM, ROOT, assert_error, cli

from papayu_git import golden, traces
from tests.golden.regenerate import run_scenario, run_scenario_cli
from tests.golden.scenarios import SCENARIOS

OURS = sorted((ROOT / "tests" / "golden").glob("v[12]/*.json"))
UPSTREAM = sorted(GOLDEN_UPSTREAM.glob("v[12]/*.json"))


def _rel(path: Path) -> str:
    return f"{path.parent.name}/{path.name}"


@pytest.mark.parametrize(
    "path", OURS + UPSTREAM, ids=[_rel(p) for p in OURS] + [f"upstream/{_rel(p)}" for p in UPSTREAM]
)
def test_golden_trace_replays(path: Path) -> None:
    trace = json.loads(path.read_text())
    assert golden.check_replay(trace, path) == []


def test_validate_cli_replays_every_golden_trace() -> None:
    proc = cli("validate", "--json", *map(str, OURS + UPSTREAM))
    report = json.loads(proc.stdout)
    assert proc.returncode == 0, [f for f in report["files"] if not f["ok"]]
    assert {f["kind"] for f in report["files"]} == {"golden"}


def test_every_upstream_scenario_is_recreated_with_the_same_outcome() -> None:
    ours = {_rel(p): p for p in OURS}
    assert len(UPSTREAM) == 12 and len(OURS) >= 12 and len(SCENARIOS) == len(OURS)
    for path in UPSTREAM:
        mine = json.loads(ours[_rel(path)].read_text())
        theirs = json.loads(path.read_text())
        assert golden.expected(mine) == golden.expected(theirs), _rel(path)
        assert mine["request"]["mode"] == theirs["request"]["mode"]
        assert mine["protocol"]["schema_version"] == theirs["protocol"]["schema_version"]


@pytest.mark.parametrize(
    "name",
    [
        "v1/002_fix_bug_apply",
        "v2/003_base_mismatch_block",
        "v2/004_patch_apply_failed_block",
        "v2/008_memory_patch_plan",
    ],
)
def test_regeneration_reproduces_the_committed_golden(name: str, tmp_path: Path) -> None:
    scenario = next(s for s in SCENARIOS if s.name == name)
    out = run_scenario_cli(scenario, tmp_path / "work", tmp_path / "out")
    fresh, committed = json.loads(out.read_text()), json.loads((ROOT / "tests" / "golden" / f"{name}.json").read_text())
    stale = (
        "golden traces are stale: run `.venv/bin/python tests/golden/regenerate.py`"
        " (docs/CONTRIBUTING.md: golden update policy)"
    )
    assert fresh["result"] == committed["result"], stale
    assert fresh["protocol"] == committed["protocol"], stale + " — the response schema changed"
    assert fresh["request"]["mode"] == committed["request"]["mode"]
    assert fresh["context"].get("plan_files") == committed["context"].get("plan_files")
    assert (fresh["result"]["validation_outcome"], fresh["result"]["error_code"]) == scenario.expect


def _write_apply_trace(repo: Path, **extra: object) -> str:
    trace_id = traces.new_trace_id()
    traces.write_trace(
        repo / ".git" / "papayu",
        trace_id,
        {
            "command": "apply",
            **traces.schema_fields(2),
            "request": {
                "mode": "apply",
                "provider": "openai",
                "model": "m",
                "input_chars": 10,
                "token_budget": 16384,
                "strict_json": True,
                "latency_ms": 12.5,
            },
            "context_stats": {"context_files_count": 1},
            "cache_stats": {"read_hits": 1, "hit_rate": 1.0},
            "plan_files": {"a.py": "a" * 64},
            "validated_json": {
                "actions": [{"kind": "CREATE_FILE", "path": ".env", "content": "X=1\n"}],
                "summary": "s",
            },
            "validation_outcome": "err",
            "error_code": "ERR_PROTECTED_PATH",
            **extra,
        },
    )
    return trace_id


def test_trace_golden_cli_writes_the_upstream_format(repo: Path) -> None:
    trace_id = _write_apply_trace(repo)
    out = repo / "out" / "g.json"
    proc = cli("trace", "golden", trace_id[:8], str(out), cwd=repo)
    assert proc.returncode == 0, proc.stderr
    data = json.loads(out.read_text())
    assert set(data) == {"protocol", "request", "context", "result"}
    assert data["request"] == {
        "mode": "apply",
        "input_chars": 10,
        "token_budget": 16384,
        "strict_json": True,
        "provider": "openai",
        "model": "m",
    }
    assert data["context"]["plan_files"] == {"a.py": "a" * 64}
    assert data["result"]["error_code"] == "ERR_PROTECTED_PATH" and data["result"]["validation_outcome"] == "err"
    assert cli("validate", str(out)).returncode == 0


def test_trace_golden_refuses_a_trace_that_does_not_replay(repo: Path) -> None:
    trace_id = _write_apply_trace(repo, validation_outcome="ok", error_code=None)
    proc = cli("trace", "golden", trace_id, cwd=repo)
    assert proc.returncode == 1 and "does not replay" in proc.stderr


def test_trace_golden_needs_a_model_round(repo: Path) -> None:
    trace_id = traces.new_trace_id()
    traces.write_trace(repo / ".git" / "papayu", trace_id, {"command": "apply", "check": {"state": "passed"}})
    proc = cli("trace", "golden", trace_id, "--json", cwd=repo)
    assert_error(proc, "ERR_GOLDEN_INVALID", first=True)


def test_trace_list_and_show(repo: Path) -> None:
    first, second = _write_apply_trace(repo), _write_apply_trace(repo, protocol_fallback_attempted=True)
    rows = json.loads(cli("trace", "list", "--json", cwd=repo).stdout)["traces"]
    assert [r["trace_id"] for r in rows] == [first, second]
    assert rows[1]["fallback"] is True and rows[0]["error_code"] == "ERR_PROTECTED_PATH"
    text = cli("trace", "list", "--last", "1", cwd=repo).stdout
    assert second in text and first not in text and "fallback" in text
    shown = json.loads(cli("trace", "show", first, "--json", cwd=repo).stdout)
    assert shown["trace_id"] == first and shown["config_snapshot"]["trace_enabled"] == "1"


@pytest.mark.parametrize("name", ["v1/005_update_without_base_block", "v2/004_patch_apply_failed_block"])
def test_validation_driver_gives_the_same_outcome_as_the_real_commands(name: str, tmp_path: Path) -> None:
    scenario = next(s for s in SCENARIOS if s.name == name)
    out = run_scenario(scenario, tmp_path / "work", tmp_path / "out")
    committed = json.loads((ROOT / "tests" / "golden" / f"{name}.json").read_text())
    assert json.loads(out.read_text())["result"] == committed["result"]
