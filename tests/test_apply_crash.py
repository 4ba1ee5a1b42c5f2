"""kill -9 at every stage, parallel applies, check timeout (docs/DESIGN.md, "The transaction and its
guarantees")."""

from __future__ import annotations

import json
import os
import signal
import time
from pathlib import Path

import pytest
from helpers import (
    checkout_pool,
    git,
    make_repo,
    papayu,
    run_papayu_bg,
    snapshot,
    user_view,
    wait_for_marker,
    wait_gone,
    worktree_paths,
    write_plan,
)

from papayu_git.stages import STAGES


def _assert_nothing_left(repo: Path) -> None:
    assert worktree_paths(repo) == [str(repo)]
    assert "locked" not in git(repo, "worktree", "list", "--porcelain")
    assert list((repo / ".git/papayu/locks").glob("*.lock")) == []
    assert list((repo / ".git/papayu/worktrees").glob("*")) == []
    assert list(checkout_pool(repo).glob("*.lock")) == []
    assert git(repo, "branch", "--list", "papayu/*") == ""
    assert list((repo / ".git").glob("**/*.lock")) == []


@pytest.mark.parametrize("stage", STAGES)
def test_kill_9_at_each_stage_leaves_user_state_and_recovers(tmp_path: Path, stage: str) -> None:
    repo = make_repo(tmp_path / "repo", {"README.md": "x\n", ".gitignore": "*.log\n"})
    (repo / "untracked.txt").write_text("mine\n")
    (repo / "debug.log").write_text("ignored\n")
    (repo / "README.md").write_text("x\nlocal edit\n")
    before = snapshot(repo)
    plan = write_plan(tmp_path, [{"kind": "CREATE_FILE", "path": "new.txt", "content": "n\n"}])
    proc = run_papayu_bg(["apply", str(plan), "--check", "true"], repo, {"PAPAYU_TEST_PAUSE_AT": stage})
    try:
        assert f"stage={stage}" in wait_for_marker(proc)
    finally:
        os.kill(proc.pid, signal.SIGKILL)
        proc.communicate()
    assert user_view(snapshot(repo)) == user_view(before)
    assert git(repo, "rev-parse", "HEAD") == before["refs"].split()[1] + "\n"

    again = write_plan(tmp_path, [{"kind": "CREATE_FILE", "path": "next.txt", "content": "next\n"}], name="2.json")
    proc2 = papayu("apply", str(again), "--check", "true", cwd=repo)
    assert proc2.returncode == 0, proc2.stderr
    assert (repo / "next.txt").read_text() == "next\n" and not (repo / "new.txt").exists()
    assert (repo / "README.md").read_text() == "x\nlocal edit\n"

    gc = papayu("gc", "--days", "0", cwd=repo)
    assert gc.returncode == 0, gc.stderr
    _assert_nothing_left(repo)


def test_gc_removes_a_worktree_left_initializing_by_a_killed_worktree_add(repo: Path, tmp_path: Path) -> None:
    slot = repo / ".git/papayu/worktrees/papayu-wt-0"
    git(repo, "worktree", "add", "-q", "--detach", str(slot), "HEAD")
    (repo / ".git/worktrees/papayu-wt-0/locked").write_text("initializing")
    (slot / "README.md").unlink()  # the checkout never finished
    plan = write_plan(tmp_path, [{"kind": "CREATE_FILE", "path": "a.py", "content": "a\n"}])
    proc = papayu("apply", str(plan), "--check", "test -f README.md && test -f a.py", cwd=repo)
    assert proc.returncode == 0, proc.stderr
    assert papayu("gc", cwd=repo).returncode == 0
    _assert_nothing_left(repo)


def _parallel(repo: Path, tmp_path: Path, *extra: str) -> list[dict]:
    plans = [
        write_plan(
            tmp_path,
            [{"kind": "CREATE_FILE", "path": f"f{i}.txt", "content": f"{i}\n"}],
            summary=f"add f{i}",
            name=f"p{i}.json",
        )
        for i in range(4)
    ]
    procs = [run_papayu_bg(["apply", str(p), "--json", "--check", "sleep 0.3", *extra], repo) for p in plans]
    results = []
    for proc in procs:
        out, _err = proc.communicate(timeout=180)
        data = json.loads(out)
        data["_rc"] = proc.returncode
        results.append(data)
    return results


def _landed_files(repo: Path) -> set[str]:
    return {n for n in git(repo, "ls-tree", "--name-only", "HEAD").split() if n.startswith("f")}


def test_four_parallel_applies_each_land_or_report_branch_moved(repo: Path, tmp_path: Path) -> None:
    base = git(repo, "rev-parse", "HEAD").strip()
    results = _parallel(repo, tmp_path)
    landed = {f"f{i}.txt" for i, r in enumerate(results) if r["_rc"] == 0}
    for r in results:
        assert (r["_rc"] == 0 and r["state"] == "landed") or [e["code"] for e in r.get("errors", [])] == [
            "ERR_BRANCH_MOVED"
        ], (r.get("state"), r.get("error"), r.get("errors"), (r.get("check") or {}).get("tail"))
    assert landed and _landed_files(repo) == landed  # never a lost update
    assert int(git(repo, "rev-list", "--count", f"{base}..HEAD")) == len(landed)
    assert git(repo, "status", "--porcelain") == ""


def test_four_parallel_applies_with_rebase_all_land(repo: Path, tmp_path: Path) -> None:
    results = _parallel(repo, tmp_path, "--rebase")
    assert [r["_rc"] for r in results] == [0, 0, 0, 0], [
        (r.get("state"), r.get("error"), r.get("errors"), (r.get("check") or {}).get("tail")) for r in results
    ]
    assert _landed_files(repo) == {"f0.txt", "f1.txt", "f2.txt", "f3.txt"}
    assert git(repo, "status", "--porcelain") == ""
    assert git(repo, "branch", "--list", "papayu/*") == ""


def test_check_timeout_rolls_back_and_kills_the_whole_group(repo: Path, tmp_path: Path) -> None:
    marker = f"30{os.getpid()}.25"  # a unique sleep length marks the check's processes
    check = f"sleep 3''{marker[1:]} & sleep 3''{marker[1:]}"  # quoted: papayu's own argv lacks the marker
    plan = write_plan(tmp_path, [{"kind": "CREATE_FILE", "path": "slow.txt", "content": "s\n"}])
    before = snapshot(repo)
    start = time.monotonic()
    proc = papayu("apply", str(plan), "--json", "--check", check, cwd=repo, env={"PAPAYU_CHECK_TIMEOUT_SEC": "2"})
    assert time.monotonic() - start < 60
    data = json.loads(proc.stdout)
    assert proc.returncode == 1 and data["error"]["code"] == "ERR_CHECK_TIMEOUT" and data["check"]["timed_out"]
    assert user_view(snapshot(repo)) == user_view(before)
    assert git(repo, "branch", "--list", "papayu/*") == ""
    assert wait_gone(marker) == []  # the background job too
    assert data["check"]["sandbox"] == "bwrap"
    assert list((repo / ".git").glob("**/*.lock")) == []
