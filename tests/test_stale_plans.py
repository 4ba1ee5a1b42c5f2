"""Stale plans land by a 3-way merge (docs/DESIGN.md, "The transaction and its guarantees"):
real repositories, the real CLI; the user commits after the plan was written."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest
from helpers import (
    GOLDEN_UPSTREAM,
    apply_json,
    assert_error,
    git,
    json_codes,
    make_repo,
    object_ids,
    papayu,
    patch_action,
    plan_record,
    sha,
    snapshot,
    trace_record,
    write_plan,
)

from papayu_git import golden, plans, stale
from papayu_git.errors import PapayuError

LINES = [f"line {n}\n" for n in range(1, 11)]
ORIGINAL = "".join(LINES)
# The plan changes line 8 of the version it saw.
DIFF = "--- a/app.txt\n+++ b/app.txt\n@@ -7,3 +7,3 @@\n line 7\n-line 8\n+line 8 (plan)\n line 9\n"


def _repo(tmp_path: Path) -> tuple[Path, str]:
    repo = make_repo(tmp_path / "r", {"app.txt": ORIGINAL, "README.md": "x\n"})
    return repo, git(repo, "rev-parse", "HEAD").strip()


def _commit(repo: Path, text: str, message: str = "user edit", path: str = "app.txt") -> str:
    (repo / path).write_text(text)
    git(repo, "commit", "-q", "-am", message)
    return git(repo, "rev-parse", "HEAD").strip()


def _user_edit(line: int, text: str) -> str:
    lines = list(LINES)
    lines[line - 1] = text
    return "".join(lines)


def _stored(repo: Path, **fields: Any) -> str:
    plan = plans.StoredPlan(id="20260101-000000-00000a", mode="apply", **fields)
    plans.save(repo / ".git" / "papayu", plan)
    return plan.id


def test_clean_merge_lands_both_changes_and_says_rebased(tmp_path: Path) -> None:
    repo, planned_at = _repo(tmp_path)
    plan = write_plan(tmp_path, [patch_action("app.txt", ORIGINAL.encode(), DIFF)], summary="plan line 8")
    _commit(repo, _user_edit(2, "line 2 (user)\n"))
    _commit(repo, "".join(_user_edit(2, "line 2 (user)\n")) + "line 11 (user)\n", "second user edit")
    data = apply_json(repo, plan, "--no-check")
    assert data["_rc"] == 0, data
    assert data["state"] == "landed"
    text = (repo / "app.txt").read_text()
    assert "line 2 (user)\n" in text and "line 8 (plan)\n" in text and text.endswith("line 11 (user)\n")
    assert git(repo, "status", "--porcelain") == ""
    # `apply FILE` records the current HEAD as the plan's base: the base is found in the history.
    base_blob = git(repo, "rev-parse", f"{planned_at}:app.txt").strip()
    expected = [{"path": "app.txt", "base_blob": base_blob, "base_commit": planned_at}]
    assert data["rebased_from"] == expected
    assert f"rebased from {planned_at[:12]}" in data["_stderr"]
    assert f"Papayu-Rebased-From: app.txt {planned_at[:12]}" in git(repo, "log", "-1", "--format=%B")
    assert trace_record(repo, data["trace_id"])["rebased_from"] == expected
    assert plan_record(repo, data["plan_id"])["extra"]["apply"]["rebased_from"] == expected
    assert git(repo, "branch", "--list", "papayu/*") == ""


def test_recorded_base_commit_is_used_without_history(tmp_path: Path) -> None:
    repo, planned_at = _repo(tmp_path)
    response = {"actions": [patch_action("app.txt", ORIGINAL.encode(), DIFF)], "summary": "plan line 8"}
    plan_id = _stored(repo, base_commit=planned_at, response=response)
    _commit(repo, _user_edit(1, "line 1 (user)\n"))
    env = {"PAPAYU_STALE_SEARCH_DEPTH": "0"}  # no history: only the plan's recorded base commit
    proc = papayu("apply", plan_id, "--no-check", "--json", cwd=repo, env=env)
    assert proc.returncode == 0, proc.stdout + proc.stderr
    assert json.loads(proc.stdout)["rebased_from"][0]["base_commit"] == planned_at
    assert (repo / "app.txt").read_text() == _user_edit(1, "line 1 (user)\n").replace("line 8\n", "line 8 (plan)\n")


def test_conflict_is_refused_naming_the_tip_lines(tmp_path: Path) -> None:
    repo, _ = _repo(tmp_path)
    plan = write_plan(tmp_path, [patch_action("app.txt", ORIGINAL.encode(), DIFF)])
    _commit(repo, "line 0 (user)\n" + _user_edit(8, "line 8 (user)\n"))
    before, objects = snapshot(repo), object_ids(repo)
    data = apply_json(repo, plan, "--no-check")
    assert data["_rc"] == 1 and json_codes(data) == ["ERR_BASE_MISMATCH"]
    error = data["errors"][0]
    assert error["path"] == "app.txt"
    assert "line 9 at the tip" in error["reason"], error  # line 8 of the base, one line lower at the tip
    assert snapshot(repo) == before and object_ids(repo) == objects
    assert git(repo, "branch", "--list", "papayu/*") == ""


def test_base_found_nowhere_is_refused_as_before(tmp_path: Path) -> None:
    repo, _ = _repo(tmp_path)
    never = _user_edit(5, "line 5 (never committed)\n").encode()
    plan = write_plan(tmp_path, [patch_action("app.txt", never, DIFF)])
    before = snapshot(repo)
    proc = papayu("apply", str(plan), "--no-check", "--json", cwd=repo)
    assert_error(proc, "ERR_BASE_MISMATCH", first=True)
    assert f"the plan expects {sha(never)}" in json.loads(proc.stdout)["errors"][0]["reason"]
    assert snapshot(repo) == before


def test_history_depth_bounds_the_search(tmp_path: Path) -> None:
    repo, _ = _repo(tmp_path)
    plan = write_plan(tmp_path, [patch_action("app.txt", ORIGINAL.encode(), DIFF)])
    _commit(repo, _user_edit(1, "line 1 (user)\n"))
    for n in range(3):
        _commit(repo, f"readme {n}\n", f"readme {n}", path="README.md")
    # 3 README commits and the user's edit: 4 commits back from the tip miss the plan's version.
    data = apply_json(repo, plan, "--no-check", env={"PAPAYU_STALE_SEARCH_DEPTH": "4"})
    assert json_codes(data) == ["ERR_BASE_MISMATCH"]
    data = apply_json(repo, plan, "--no-check", env={"PAPAYU_STALE_SEARCH_DEPTH": "5"})
    assert data["_rc"] == 0 and data["state"] == "landed", data


def test_file_deleted_at_the_tip_is_refused(tmp_path: Path) -> None:
    repo, _ = _repo(tmp_path)
    plan = write_plan(tmp_path, [patch_action("app.txt", ORIGINAL.encode(), DIFF)])
    git(repo, "rm", "-q", "app.txt")
    git(repo, "commit", "-q", "-m", "user deletes app.txt")
    before, objects = snapshot(repo), object_ids(repo)
    proc = papayu("apply", str(plan), "--no-check", "--json", cwd=repo)
    assert_error(proc, "ERR_PATCH_MISSING_FILE", first=True)
    assert snapshot(repo) == before and object_ids(repo) == objects


@pytest.mark.parametrize("modified", [True, False])
def test_delete_of_a_file_changed_since_the_plan_is_refused(tmp_path: Path, modified: bool) -> None:
    repo, planned_at = _repo(tmp_path)
    response = {"actions": [{"kind": "DELETE_FILE", "path": "app.txt"}], "summary": "drop app.txt"}
    plan_id = _stored(repo, base_commit=planned_at, files={"app.txt": sha(ORIGINAL)}, response=response)
    if modified:
        _commit(repo, _user_edit(3, "line 3 (user)\n"))
    else:
        _commit(repo, "y\n", path="README.md")
    before = snapshot(repo)
    proc = papayu("apply", plan_id, "--no-check", "--json", "--yes", cwd=repo)
    if modified:
        assert_error(proc, "ERR_BASE_MISMATCH", first=True)
        error = json.loads(proc.stdout)["errors"][0]
        assert error["path"] == "app.txt" and "deleting it would drop those changes" in error["reason"]
        assert snapshot(repo) == before
    else:
        assert proc.returncode == 0, proc.stdout
        assert not (repo / "app.txt").exists()


def test_update_file_with_a_known_base_merges(tmp_path: Path) -> None:
    repo, planned_at = _repo(tmp_path)
    new = ORIGINAL.replace("line 9\n", "line 9 (plan)\n")
    response = {"actions": [{"kind": "UPDATE_FILE", "path": "app.txt", "content": new}], "summary": "line 9"}
    plan_id = _stored(repo, protocol=1, base_commit=planned_at, files={"app.txt": sha(ORIGINAL)}, response=response)
    _commit(repo, _user_edit(1, "line 1 (user)\n"))
    proc = papayu("apply", plan_id, "--no-check", "--json", cwd=repo)
    assert proc.returncode == 0, proc.stdout + proc.stderr
    assert (repo / "app.txt").read_text() == _user_edit(1, "line 1 (user)\n").replace("line 9\n", "line 9 (plan)\n")
    assert "Papayu-Rebased-From: app.txt" in git(repo, "log", "-1", "--format=%B")


def test_rebase_stale_false_keeps_the_old_refusals(tmp_path: Path) -> None:
    repo, planned_at = _repo(tmp_path)
    plan = write_plan(tmp_path, [patch_action("app.txt", ORIGINAL.encode(), DIFF)])
    _commit(repo, _user_edit(1, "line 1 (user)\n"))
    git(repo, "config", "papayu.stale.rebase", "false")
    before = snapshot(repo)
    data = apply_json(repo, plan, "--no-check")
    assert json_codes(data) == ["ERR_BASE_MISMATCH"]
    assert "the file at the branch tip has sha256" in data["errors"][0]["reason"]
    assert snapshot(repo) == before
    # ... and a DELETE_FILE is not compared with the version the plan saw, as before.
    response = {"actions": [{"kind": "DELETE_FILE", "path": "app.txt"}], "summary": "drop"}
    plan_id = _stored(repo, base_commit=planned_at, files={"app.txt": sha(ORIGINAL)}, response=response)
    proc = papayu("apply", plan_id, "--no-check", "--json", "--yes", cwd=repo)
    assert proc.returncode == 0, proc.stdout
    assert not (repo / "app.txt").exists()


def test_rebase_merges_when_the_branch_moves_during_the_check(tmp_path: Path) -> None:
    repo, _ = _repo(tmp_path)
    git(repo, "branch", "feature")
    plan = write_plan(tmp_path, [patch_action("app.txt", ORIGINAL.encode(), DIFF)])
    git(repo, "checkout", "-q", "-b", "elsewhere", "feature")
    moved = _commit(repo, _user_edit(2, "line 2 (someone else)\n"), "concurrent push")
    git(repo, "checkout", "-q", "main")
    git(repo, "branch", "-q", "-D", "elsewhere")
    # The check moves `feature` (as a concurrent push would) while papayu is checking; unsandboxed,
    # since a sandboxed check cannot write the user's repository, which is the point of it.
    data = apply_json(
        repo,
        plan,
        "--onto",
        "feature",
        "--check",
        f"git -C {repo} update-ref refs/heads/feature {moved}",
        "--rebase",
        env={"PAPAYU_CHECK_SANDBOX": "off"},
    )
    assert data["_rc"] == 0 and data["state"] == "landed", data
    assert "re-applying the plan there (--rebase)" in data["_stderr"]
    assert git(repo, "rev-parse", "feature~1").strip() == moved
    text = git(repo, "show", "feature:app.txt")
    assert "line 2 (someone else)\n" in text and "line 8 (plan)\n" in text
    assert [r["path"] for r in data["rebased_from"]] == ["app.txt"]
    assert "Papayu-Rebased-From: app.txt" in git(repo, "log", "-1", "--format=%B", "feature")
    assert (repo / "app.txt").read_text() == ORIGINAL  # main, checked out, untouched


def test_golden_base_mismatch_traces_keep_their_outcome() -> None:
    """Golden replay validates only; the apply step's codes (ERR_BASE_MISMATCH) stay as recorded."""
    root = GOLDEN_UPSTREAM.parent
    traced = [p for p in sorted(root.rglob("*.json")) if "ERR_BASE_MISMATCH" in p.read_text()]
    assert len(traced) >= 2
    for path in traced:
        trace = json.loads(path.read_text())
        if golden.is_golden(trace):
            assert golden.expected(trace) == golden.Outcome("ok", "ERR_BASE_MISMATCH")
            assert golden.check_replay(trace, path) == []


def test_merge_keeps_crlf_and_names_adjacent_conflicts() -> None:
    base = b"a\r\nb\r\nc\r\nd\r\ne\r\n"
    tip = b"A\r\nb\r\nc\r\nd\r\ne\r\n"
    edited = b"a\r\nb\r\nc\r\nD\r\ne\r\n"
    assert stale.merge3(base, tip, edited, path="f") == b"A\r\nb\r\nc\r\nD\r\ne\r\n"
    with pytest.raises(PapayuError) as info:
        stale.merge3(base, b"a\r\nb\r\nC\r\nd\r\ne\r\n", edited, path="f")  # adjacent: git conflicts too
    assert info.value.code == "ERR_BASE_MISMATCH" and "line 3 at the tip" in info.value.reason
    assert stale.conflict_ranges(b"1\n2\n3\n4\n", b"1\nX\nY\n3\n4\n", b"1\n2\nZ\n4\n") == [(2, 3)]
