"""`git papayu stats` on a directory of generated traces with known answers."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest
from helpers import cli, papayu

from papayu_git import traces
from papayu_git.stats import p95

NON_UTF8, PATCH, FORBIDDEN = "ERR_NON_UTF8_FILE", "ERR_PATCH_APPLY_FAILED", "ERR_V2_UPDATE_EXISTING_FORBIDDEN"


def _apply(latency: int, check: str = "passed", fallback: str | None = None, repair: str | None = None) -> dict:
    data: dict[str, Any] = {
        "command": "apply",
        "request": {"mode": "apply", "latency_ms": latency},
        "validated_json": {"actions": []},
        "validation_outcome": "ok",
        "error_code": None,
        "protocol_default": 2,
        "protocol_attempts": [2],
        "protocol_repair_attempt": 1 if repair else 0,
        "protocol_fallback_attempted": bool(fallback),
        "check": {"state": check, "exit_code": 0 if check == "passed" else 1, "duration_sec": 0.5},
    }
    if repair:
        data["protocol_repair_reason"] = repair
    if fallback:
        data.update(protocol_fallback_reason=fallback, protocol_fallback_stage="apply", protocol_attempts=[2, 1])
    return data


def _write(papayu_dir: Path, items: list[dict]) -> None:
    for item in items:
        assert traces.write_trace(papayu_dir, traces.new_trace_id(), item) is not None


@pytest.fixture
def known_traces(repo: Path) -> Path:
    """20 old applies (outside the window, all fallbacks), 10 plans, then 100 applies."""
    papayu_dir = repo / ".git" / "papayu"
    _write(papayu_dir, [_apply(1, fallback=PATCH, repair=PATCH) for _ in range(20)])
    _write(papayu_dir, [{"command": "plan", "request": {"mode": "plan", "latency_ms": 99999}} for _ in range(10)])
    checks = ["passed"] * 80 + ["failed"] * 10 + ["timeout"] * 2 + ["skipped"] * 8
    kinds = (
        [dict(fallback=NON_UTF8)] * 3
        + [dict(fallback=PATCH, repair=PATCH)] * 2
        + [dict(fallback=FORBIDDEN, repair=FORBIDDEN)]
        + [dict(repair=PATCH)] * 4
        + [{}] * 90
    )
    _write(papayu_dir, [_apply((i + 1) * 10, checks[i], **kinds[i]) for i in range(100)])
    return traces.traces_dir(papayu_dir)


def test_stats_on_known_traces(known_traces: Path, repo: Path) -> None:
    proc = cli("stats", "--json", cwd=repo)
    assert proc.returncode == 0, proc.stderr
    stats = json.loads(proc.stdout)
    assert stats["traces"] == 130 and stats["apply_count"] == 100
    assert stats["fallback_count"] == 6 and stats["fallback_rate"] == 0.06
    assert stats["fallback_rate_excluding_non_utf8"] == round(3 / 97, 6)
    assert stats["fallback_reasons"] == {NON_UTF8: 3, PATCH: 2, FORBIDDEN: 1}
    assert (stats["repair_attempts"], stats["repair_successes"]) == (7, 4)
    assert stats["repair_success_rate"] == round(4 / 7, 6)
    assert (stats["check_runs"], stats["check_passed"]) == (92, 80)
    assert stats["latency_ms"] == {"count": 100, "mean": 505.0, "p95": 950.0}
    criteria = {c["name"]: c for c in stats["graduation"]["criteria"]}
    assert criteria["enough_applies"]["holds"] and not criteria["fallback_rate_excluding_non_utf8"]["holds"]
    assert criteria["patch_apply_failed_rate"]["value"] == 0.06
    assert criteria["patch_apply_failed_repaired_vs_fallback"]["value"] == {"repaired": 4, "fallback": 2}
    assert criteria["patch_apply_failed_repaired_vs_fallback"]["holds"]
    assert not criteria["v2_update_existing_forbidden_rate"]["holds"]  # 1% is not < 1%
    assert stats["graduation"]["ready"] is False


def test_stats_window_and_directory_option(known_traces: Path, tmp_path: Path) -> None:
    stats = json.loads(cli("stats", "--last", "10", "--json", "--traces", str(known_traces), cwd=tmp_path).stdout)
    assert stats["apply_count"] == 10 and stats["fallback_count"] == 0
    assert stats["latency_ms"]["mean"] == 955.0
    assert stats["graduation"]["criteria"][0] == {
        "name": "enough_applies",
        "value": 10,
        "threshold": ">= 100",
        "holds": False,
    }


def test_graduation_holds_when_only_non_utf8_falls_back(repo: Path) -> None:
    papayu_dir = repo / ".git" / "papayu"
    _write(papayu_dir, [_apply(100, fallback=NON_UTF8)] + [_apply(200) for _ in range(99)])
    proc = cli("stats", cwd=repo)
    assert proc.returncode == 0
    assert "  answers rewritten as whole files  1 of 100 (1.0%), 1 of them for a file that is not UTF-8" in proc.stdout
    assert (
        "whole-file fallback: the model's diffs applied reliably over the last 100 applies; you may turn the "
        "fallback off: git config papayu.protocol.fallbackToV1 false"
    ) in proc.stdout
    # the user's words, not the project's: no criteria checklist, no thresholds, no environment variable names
    for word in ("graduation", "v2", "needs", "not yet", "PAPAYU_", ">=", "  ok  ", "  no  "):
        assert word not in proc.stdout, word


@pytest.mark.parametrize(
    "applies, advice",
    [
        (
            [_apply(100) for _ in range(10)],
            "keep it on (the default). Whether the model's diffs can do without it shows after 100 applies here; "
            "90 to go",
        ),
        (
            [_apply(100, fallback=PATCH, repair=PATCH) for _ in range(3)] + [_apply(100) for _ in range(97)],
            "keep it on: 3.0% of the answers needed it (it could go below 1%)",
        ),
    ],
    ids=["too few applies", "too many fallbacks"],
)
def test_stats_says_what_to_do_about_the_fallback_and_why(repo: Path, applies: list[dict], advice: str) -> None:
    _write(repo / ".git" / "papayu", applies)
    proc = cli("stats", cwd=repo)
    assert proc.returncode == 0 and f"whole-file fallback: {advice}\n" in proc.stdout, proc.stdout
    assert "not yet" not in proc.stdout and "needs " not in proc.stdout and "PAPAYU_" not in proc.stdout


def test_stats_with_no_traces(repo: Path) -> None:
    stats = json.loads(cli("stats", "--json", cwd=repo).stdout)
    assert stats["apply_count"] == 0 and stats["fallback_rate"] is None and not stats["graduation"]["ready"]


def test_p95_nearest_rank() -> None:
    assert p95([]) is None
    assert p95([5.0]) == 5.0
    assert p95([float(v) for v in range(1, 21)]) == 19.0


def test_stats_counts_traces_of_real_applies(repo: Path, tmp_path: Path) -> None:
    """Real `apply FILE` runs (transaction traces: command=apply, check block) feed stats."""
    response = tmp_path / "response.json"
    for name, check in (("a.md", "true"), ("b.md", "false"), ("c.md", "true")):
        response.write_text(
            json.dumps({"actions": [{"kind": "CREATE_FILE", "path": name, "content": "x\n"}], "summary": f"add {name}"})
        )
        proc = papayu("apply", str(response), "--check", check, "-y", cwd=repo)
        assert proc.returncode == (0 if check == "true" else 1), proc.stderr
    stats = json.loads(cli("stats", "--json", cwd=repo).stdout)
    assert stats["apply_count"] == 3 and stats["fallback_count"] == 0
    assert (stats["check_runs"], stats["check_passed"]) == (3, 2)
    rows = json.loads(cli("trace", "list", "--json", cwd=repo).stdout)["traces"]
    assert [r["check"] for r in rows] == ["passed", "failed", "passed"]


def test_one_llm_apply_command_is_one_trace_with_round_and_outcome(repo: Path) -> None:
    """Real `plan` + `apply` against a scripted OpenAI-compatible server: the APPLY round and the
    transaction share one trace, so stats count one apply with its latency and check."""
    from tests.golden.regenerate import ScriptedModel

    plan = {"actions": [], "summary": "Plan: add NOTES.md."}
    apply = {"actions": [{"kind": "CREATE_FILE", "path": "NOTES.md", "content": "notes\n"}], "summary": "Add notes."}
    with ScriptedModel([lambda shown: plan, lambda shown: apply]) as model:
        env = {
            "PAPAYU_LLM_PROVIDER": "openai-compatible",
            "PAPAYU_LLM_BASE_URL": model.base_url,
            "PAPAYU_LLM_MODEL": "scripted",
        }
        planned = papayu("plan", "add a notes file", "--json", cwd=repo, env=env)
        assert planned.returncode == 0, planned.stderr
        plan_id = json.loads(planned.stdout)["plan_id"]
        applied = papayu("apply", plan_id, "--check", "true", "-y", cwd=repo, env=env)
        assert applied.returncode == 0, applied.stderr
    stats = json.loads(cli("stats", "--json", cwd=repo).stdout)
    assert stats["traces"] == 2 and stats["apply_count"] == 1 and stats["check_passed"] == 1
    assert stats["latency_ms"]["count"] == 2
    rows = json.loads(cli("trace", "list", "--json", cwd=repo).stdout)["traces"]
    assert [(r["command"], r["check"]) for r in rows] == [("plan", None), ("apply", "passed")]
