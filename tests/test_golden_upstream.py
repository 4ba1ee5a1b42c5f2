"""The 12 upstream golden traces replay through our validator with the recorded outcome.

v2/003 (ERR_BASE_MISMATCH) and v2/004 (ERR_PATCH_APPLY_FAILED) record validation_outcome "ok":
their codes come from the apply step, which the apply tests replay against a real tree.
"""

from __future__ import annotations

import copy
import json
from pathlib import Path

import pytest
from helpers import GOLDEN_UPSTREAM, ROOT

from papayu_git import golden

TRACES = sorted(GOLDEN_UPSTREAM.glob("v*/*.json"))
# An upstream checkout beside this repository, when there is one (tests/golden/upstream/ORIGIN.md).
UPSTREAM_DIR = ROOT.parent / "shared" / "compat" / "papayu-upstream" / "golden_traces"
EXPECTED = {
    "v1/004_protected_path_block.json": golden.Outcome("err", "ERR_PROTECTED_PATH"),
    "v1/005_update_without_base_block.json": golden.Outcome("err", "ERR_UPDATE_WITHOUT_BASE"),
}


def rel(path: Path) -> str:
    return path.relative_to(GOLDEN_UPSTREAM).as_posix()


def load(path: Path) -> dict:
    return json.loads(path.read_text(encoding="utf-8"))


def test_all_twelve_traces_are_present() -> None:
    assert [rel(p) for p in TRACES] == [
        "v1/001_fix_bug_plan.json",
        "v1/002_fix_bug_apply.json",
        "v1/003_generate_project_apply.json",
        "v1/004_protected_path_block.json",
        "v1/005_update_without_base_block.json",
        "v1/006_context_diet_applied.json",
        "v1/007_no_changes_apply.json",
        "v2/001_fix_bug_plan.json",
        "v2/002_fix_bug_apply_patch.json",
        "v2/003_base_mismatch_block.json",
        "v2/004_patch_apply_failed_block.json",
        "v2/005_no_changes_apply.json",
    ]


@pytest.mark.parametrize("path", TRACES, ids=rel)
def test_trace_replays_with_the_recorded_outcome(path: Path) -> None:
    trace = load(path)
    assert golden.check_replay(trace, path) == []
    got, _ = golden.replay(trace, path)
    assert got == EXPECTED.get(rel(path), golden.Outcome("ok", None))


def test_copies_are_verbatim() -> None:
    if not UPSTREAM_DIR.is_dir():
        pytest.skip("../shared/compat is not next to this checkout")
    for path in TRACES:
        assert path.read_bytes() == (UPSTREAM_DIR / rel(path)).read_bytes(), rel(path)


def test_apply_time_traces_are_marked_for_the_apply_step() -> None:
    codes = {
        rel(p): load(p)["result"]["error_code"]
        for p in TRACES
        if load(p)["result"]["validation_outcome"] == "ok" and load(p)["result"]["error_code"]
    }
    assert codes == {
        "v2/003_base_mismatch_block.json": "ERR_BASE_MISMATCH",
        "v2/004_patch_apply_failed_block.json": "ERR_PATCH_APPLY_FAILED",
    }
    assert set(codes.values()) <= golden.APPLY_TIME_CODES


def test_upstream_prose_error_maps_to_our_code() -> None:
    assert golden.expected_code("protected or non-text file: .env") == "ERR_PROTECTED_PATH"
    assert golden.expected_code("ERR_UPDATE_WITHOUT_BASE: UPDATE_FILE path 'x' not read") == "ERR_UPDATE_WITHOUT_BASE"
    assert golden.expected_code(None) is None


def test_a_changed_outcome_is_reported_as_mismatch() -> None:
    path = GOLDEN_UPSTREAM / "v1/002_fix_bug_apply.json"
    trace = load(path)
    trace["result"]["validated_json"]["actions"][0]["path"] = "../escape.rs"
    errors = golden.check_replay(trace, path)
    assert [e.code for e in errors] == ["ERR_GOLDEN_MISMATCH"]
    assert "ERR_PATH_TRAVERSAL" in errors[0].reason


def test_a_different_error_code_is_reported_as_mismatch() -> None:
    path = GOLDEN_UPSTREAM / "v1/004_protected_path_block.json"
    trace = load(path)
    trace["result"]["error_code"] = "ERR_PATH_TRAVERSAL: something else"
    assert [e.path for e in golden.check_replay(trace, path)] == ["result.error_code"]


def test_update_without_base_uses_files_read_in_plan() -> None:
    path = GOLDEN_UPSTREAM / "v1/005_update_without_base_block.json"
    trace = load(path)
    assert golden.read_files_for(trace, path) == {"src/main.rs": ""}  # from v1/001's read_file
    recorded = copy.deepcopy(trace)
    recorded["context"]["plan_files"] = {"src/secret.rs": "0" * 64}  # papayu-git's own traces record them
    assert golden.replay(recorded, path)[0] == golden.Outcome("ok", None)
