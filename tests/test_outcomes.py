"""Typed outcome states (outcomes.py, checked.VerdictState) keep the strings records have always
held, and traces.record is the one builder of a trace record (docs/DESIGN.md, "Traces")."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from papayu_git import __version__, plans, traces
from papayu_git.checked import VerdictState
from papayu_git.outcomes import CHECK_RAN, ApplyState, CheckState
from papayu_git.schemas import schema_hash
from papayu_git.transaction import ApplyResult, check_state

HISTORICAL = {
    ApplyState: [
        "landed",
        "rolled_back",
        "review",
        "no_changes",
        "refused",
        "dropped",
        "refused_branch_moved",
        "interrupted",
    ],
    CheckState: ["passed", "failed", "timeout", "skipped", "none_found", "interrupted", "not_run"],
    VerdictState: ["passed", "failed", "timed_out", "not_checked", "changed", "skipped"],
}


@pytest.mark.parametrize("enum", list(HISTORICAL), ids=lambda e: e.__name__)
def test_enum_values_are_the_historical_strings(enum: type) -> None:
    assert [m.value for m in enum] == HISTORICAL[enum]
    for member in enum:
        # what a record written before the enums holds compares equal, hashes alike, and is written back as it was
        assert member == member.value and member in {member.value} and enum(member.value) is member
        assert str(member) == f"{member}" == member.value
        assert json.dumps({"state": member}) == json.dumps({"state": member.value})


def test_check_ran_counts_only_checks_that_ran() -> None:
    assert {"passed", "failed", "timeout"} == CHECK_RAN


def _result(**changes: object) -> ApplyResult:
    base = ApplyResult("p", ApplyState.LANDED, "papayu/p", "c" * 40, "main", None, {})
    return base._replace(**changes)  # type: ignore[arg-type]


def test_check_state_of_an_outcome() -> None:
    assert check_state(_result(check={"passed": True})) is CheckState.PASSED
    assert check_state(_result(check={"passed": False, "timed_out": True})) is CheckState.TIMEOUT
    assert check_state(_result(check={"passed": False})) is CheckState.FAILED
    assert check_state(_result()) is CheckState.SKIPPED
    assert check_state(_result(state=ApplyState.REVIEW, error={"code": "ERR_NO_CHECK"})) is CheckState.NONE_FOUND


def test_apply_result_json_keeps_the_string() -> None:
    data = _result(state=ApplyState.ROLLED_BACK).to_dict()
    assert data["ok"] is False and json.loads(json.dumps(data))["state"] == "rolled_back"


def test_stored_plan_round_trip_compares_with_members(repo: Path) -> None:
    pdir = repo / ".git" / "papayu"
    plan = plans.StoredPlan(
        id=plans.new_id(),
        goal="g",
        mode="apply",
        protocol=2,
        base_commit="",
        branch="main",
        files={},
        response={"actions": []},
        trace_id="",
        created_at=traces.now_iso(),
        extra={"apply": {"state": ApplyState.REVIEW}},
    )
    path = plans.save(pdir, plan)
    assert json.loads(path.read_text())["extra"]["apply"]["state"] == "review"
    assert plans.load(pdir, plan.id).extra["apply"]["state"] == ApplyState.REVIEW


SECRET = "sk-proj-AAAABBBBCCCCDDDD1234567890"


def test_record_has_the_common_fields_and_is_masked(repo: Path) -> None:
    pdir = repo / ".git" / "papayu"
    plan = plans.StoredPlan(
        id=plans.new_id(),
        goal=f"fix it with {SECRET}",
        mode="plan",
        protocol=2,
        base_commit="",
        branch="main",
        files={},
        response={},
        trace_id="",
        created_at=traces.now_iso(),
    )
    rec = traces.record(
        "apply",
        plan,
        papayu_dir=pdir,
        protocol=2,
        error={"reason": SECRET},
        apply={"state": ApplyState.LANDED},
        raw_content=SECRET,
    )
    assert rec["trace_format"] == 1 and rec["created_at"].endswith("Z") and len(rec["trace_id"]) == 36
    assert (rec["command"], rec["plan_id"], rec["papayu_version"]) == ("apply", plan.id, __version__)
    assert rec["schema_version"] == 2 and rec["schema_hash"] == schema_hash("llm_response_v2")
    assert "raw_content" not in rec  # only with PAPAYU_TRACE_RAW=1
    assert SECRET not in json.dumps(rec) and rec["goal"].startswith("fix it with ")
    # the caller's fields win over the common ones; an explicit id is kept
    assert traces.record("plan", plan, trace_id="t-1", goal="other")["goal"] == "other"
    assert traces.record("plan", trace_id="t-1")["trace_id"] == "t-1"


def test_a_record_is_written_as_built_and_merges_into_the_round(repo: Path) -> None:
    pdir = repo / ".git" / "papayu"
    first = traces.record("apply", papayu_dir=pdir, request={"mode": "apply"})
    path = traces.write_trace(pdir, first["trace_id"], first)
    assert path is not None and json.loads(path.read_text()) == {
        **first,
        "config_snapshot": json.loads(path.read_text())["config_snapshot"],
    }
    second = traces.record("apply", papayu_dir=pdir, trace_id=first["trace_id"], check={"state": CheckState.PASSED})
    merged = json.loads(traces.write_trace(pdir, first["trace_id"], second).read_text())  # type: ignore[union-attr]
    assert merged["request"] == {"mode": "apply"} and merged["check"] == {"state": "passed"}
    assert merged["created_at"] == first["created_at"] and "updated_at" in merged
