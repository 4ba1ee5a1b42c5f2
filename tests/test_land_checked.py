"""`land` lands only what was checked: papayu/<id> must be the commit whose recorded check passed
(ERR_BRANCH_CHANGED_SINCE_CHECK, ERR_CHECK_NOT_PASSED, ERR_NOT_CHECKED otherwise, unless --force);
`land --when-green` counts the forge's green checks of exactly that commit as its check; `pr` pushes
no red or changed branch. Every refusal leaves the user's state as it was."""

from __future__ import annotations

import dataclasses
import json
import os
import subprocess
from pathlib import Path
from typing import Any

import pytest
from forge_server import BRANCH, PLAN_ID, ForgeServer, Kept, make_kept
from helpers import assert_error, git, papayu, snapshot, write_plan

from papayu_git import plans
from papayu_git.checked import verdict
from papayu_git.errors import ERROR_CODES
from papayu_git.plans import StoredPlan


def apply(repo: Path, tmp_path: Path, *args: str, content: str = "reviewed\n") -> dict[str, Any]:
    plan = write_plan(tmp_path, [{"kind": "CREATE_FILE", "path": "r.txt", "content": content}], summary="add r.txt")
    proc = papayu("apply", str(plan), "--json", *args, cwd=repo)
    data = json.loads(proc.stdout)
    assert (repo / ".git" / "papayu" / "plans" / f"{data['plan_id']}.json").exists(), proc.stderr
    return data


def land(repo: Path, plan_id: str, *args: str) -> tuple[subprocess.CompletedProcess[str], dict[str, Any]]:
    proc = papayu("land", plan_id, "--json", *args, cwd=repo)
    return proc, json.loads(proc.stdout)


def outcome(repo: Path, plan_id: str) -> dict[str, Any]:
    return plans.load(repo / ".git" / "papayu", plan_id).extra["apply"]


def branch_sha(repo: Path, plan_id: str) -> str:
    return git(repo, "rev-parse", "--verify", "-q", f"refs/heads/papayu/{plan_id}", check=False).strip()


def amend(repo: Path, plan_id: str, path: str, content: str) -> str:
    """What `git commit --amend` on papayu/<id> does: a new commit with the same parent, new content."""
    env = {**os.environ, "GIT_INDEX_FILE": str(repo / ".git" / "amend-index")}
    ref = f"refs/heads/papayu/{plan_id}"

    def run(*args: str, stdin: str | None = None) -> str:
        return subprocess.run(
            ["git", *args], cwd=repo, env=env, input=stdin, capture_output=True, text=True, check=True
        ).stdout.strip()

    blob = run("hash-object", "-w", "--stdin", stdin=content)
    run("read-tree", ref)
    run("update-index", "--add", "--cacheinfo", f"100644,{blob},{path}")
    tree = run("write-tree")
    (repo / ".git" / "amend-index").unlink()
    new = run("commit-tree", tree, "-p", f"{ref}^", "-m", "amended")
    run("update-ref", ref, new)
    return new


def refused(proc: subprocess.CompletedProcess[str], data: dict[str, Any], code: str) -> dict[str, str]:
    assert proc.returncode == 1, proc.stderr
    [error] = data["errors"]
    assert error["code"] == code
    return error


def test_a_review_branch_whose_check_passed_lands(repo: Path, tmp_path: Path) -> None:
    data = apply(repo, tmp_path, "--review", "--check", "test -f r.txt")
    assert data["state"] == "review" and data["check"]["passed"]
    proc, landed = land(repo, data["plan_id"])
    assert proc.returncode == 0 and landed["state"] == "landed", proc.stderr
    assert "warning" not in proc.stderr and landed["warnings"] == []
    assert (repo / "r.txt").read_text() == "reviewed\n"
    record = outcome(repo, data["plan_id"])
    assert (record["state"], record["forced"], record["check_state"]) == ("landed", False, "passed")
    assert "checked_commit" not in record


def test_an_amended_review_branch_is_refused_and_lands_with_force(repo: Path, tmp_path: Path) -> None:
    data = apply(repo, tmp_path, "--review", "--check", "test -f r.txt")
    plan_id, checked = data["plan_id"], data["commit"]
    amended = amend(repo, plan_id, "r.txt", "amended, never checked\n")
    before = snapshot(repo)
    proc, out = land(repo, plan_id)
    error = refused(proc, out, "ERR_BRANCH_CHANGED_SINCE_CHECK")
    assert amended[:12] in error["reason"] and checked[:12] in error["reason"]
    assert "--force" in error["hint"] and f"git papayu apply {plan_id}" in error["hint"]
    assert snapshot(repo) == before and branch_sha(repo, plan_id) == amended
    assert not (repo / "r.txt").exists()
    human = papayu("land", plan_id, cwd=repo)  # the same refusal without --json
    assert_error(human, "ERR_BRANCH_CHANGED_SINCE_CHECK")
    assert snapshot(repo) == before

    proc, landed = land(repo, plan_id, "--force")
    assert proc.returncode == 0 and landed["state"] == "landed", proc.stderr
    assert "warning: --force" in proc.stderr and "ERR_BRANCH_CHANGED_SINCE_CHECK" in proc.stderr
    assert landed["warnings"] and "ERR_BRANCH_CHANGED_SINCE_CHECK" in landed["warnings"][0]
    assert git(repo, "rev-parse", "main").strip() == amended
    assert (repo / "r.txt").read_text() == "amended, never checked\n"
    record = outcome(repo, plan_id)
    assert (record["forced"], record["check_state"], record["commit"], record["checked_commit"]) == (
        True,
        "changed",
        amended,
        checked,
    )


def test_a_kept_red_branch_is_refused_and_lands_with_force(repo: Path, tmp_path: Path) -> None:
    data = apply(repo, tmp_path, "--keep-failed", "--check", "exit 3")
    assert data["state"] == "rolled_back" and data["branch_kept"]
    plan_id = data["plan_id"]
    before = snapshot(repo)
    proc, out = land(repo, plan_id)
    error = refused(proc, out, "ERR_CHECK_NOT_PASSED")
    assert "`exit 3` FAILED, exit 3" in error["reason"] and "--force" in error["hint"]
    assert snapshot(repo) == before and branch_sha(repo, plan_id) == data["commit"]

    proc, landed = land(repo, plan_id, "--force")
    assert proc.returncode == 0 and landed["state"] == "landed", proc.stderr
    assert "warning: --force: landing" in proc.stderr and "ERR_CHECK_NOT_PASSED" in proc.stderr
    assert (repo / "r.txt").read_text() == "reviewed\n"
    record = outcome(repo, plan_id)
    assert (record["state"], record["forced"], record["check_state"]) == ("landed", True, "failed")
    assert record["check"]["exit_code"] == 3


def test_an_unchecked_branch_is_refused_with_the_ways_on(repo: Path, tmp_path: Path) -> None:
    data = apply(repo, tmp_path, "--review", "--no-check")
    plan_id = data["plan_id"]
    assert data["state"] == "review" and data["check"] is None
    before = snapshot(repo)
    proc, out = land(repo, plan_id)
    error = refused(proc, out, "ERR_NOT_CHECKED")
    for way in (
        f"git papayu show {plan_id}",
        f"git papayu land {plan_id} --force",
        "git config papayu.check.command CMD",
        "apply the plan again",
    ):
        assert way in error["hint"], way
    assert snapshot(repo) == before
    proc, landed = land(repo, plan_id, "--force")
    assert proc.returncode == 0 and landed["state"] == "landed", proc.stderr
    assert "ERR_NOT_CHECKED" in proc.stderr
    record = outcome(repo, plan_id)
    assert (record["forced"], record["check_state"]) == (True, "not_checked")


def test_a_branch_kept_because_no_check_was_found_is_unchecked(repo: Path, tmp_path: Path) -> None:
    data = apply(repo, tmp_path)  # no --check, nothing to detect
    plan_id = data["plan_id"]
    assert (data["state"], data["error"]["code"], data["check"]) == ("review", "ERR_NO_CHECK", None)
    before = snapshot(repo)
    proc, out = land(repo, plan_id)
    assert "no check command was found" in refused(proc, out, "ERR_NOT_CHECKED")["reason"]
    assert snapshot(repo) == before
    proc, landed = land(repo, plan_id, "--force")
    assert proc.returncode == 0 and landed["state"] == "landed", proc.stderr
    assert (repo / "r.txt").read_text() == "reviewed\n"


def test_a_branch_without_a_plan_record_is_unchecked(repo: Path, tmp_path: Path) -> None:
    data = apply(repo, tmp_path, "--review", "--check", "true")
    plan_id = data["plan_id"]
    (repo / ".git" / "papayu" / "plans" / f"{plan_id}.json").unlink()
    before = snapshot(repo)
    proc, out = land(repo, plan_id)
    assert "no plan record" in refused(proc, out, "ERR_NOT_CHECKED")["reason"]
    assert snapshot(repo) == before and not (repo / "r.txt").exists()


def _plan(check: dict[str, Any] | None, commit: str = "c" * 40) -> StoredPlan:
    return StoredPlan(id=PLAN_ID, goal="g", extra={"apply": {"state": "review", "commit": commit, "check": check}})


@pytest.mark.parametrize(
    ("plan", "unchecked_ok", "state", "code"),
    [
        (_plan({"command": "t", "passed": True, "exit_code": 0}), False, "passed", None),
        (_plan({"command": "t", "passed": False, "exit_code": 1}), True, "failed", "ERR_CHECK_NOT_PASSED"),
        (
            _plan({"command": "t", "passed": False, "exit_code": None, "timed_out": True}),
            False,
            "timed_out",
            "ERR_CHECK_NOT_PASSED",
        ),
        (
            _plan({"command": "t", "passed": True, "exit_code": 0}, commit="d" * 40),
            True,
            "changed",
            "ERR_BRANCH_CHANGED_SINCE_CHECK",
        ),
        (_plan(None), False, "not_checked", "ERR_NOT_CHECKED"),
        (_plan(None), True, "not_checked", None),  # the forge's CI is the check
        (None, False, "not_checked", "ERR_NOT_CHECKED"),
        (dataclasses.replace(_plan(None), extra={}), False, "not_checked", "ERR_NOT_CHECKED"),
    ],
)
def test_verdict(plan: StoredPlan | None, unchecked_ok: bool, state: str, code: str | None) -> None:
    found = verdict(PLAN_ID, plan, "c" * 40, unchecked_ok=unchecked_ok)
    assert found.state == state
    assert (found.problem.code if found.problem else None) == code
    if code:
        assert code in ERROR_CODES and PLAN_ID in found.problem.hint and "--force" in found.problem.hint


# --- pr and land --when-green -------------------------------------------------------------


def set_check(kept: Kept, **check: Any) -> None:
    pdir = kept.repo / ".git" / "papayu"
    plan = plans.load(pdir, PLAN_ID)
    apply_record = plan.extra["apply"]
    new_check = None if check.get("none") else {**apply_record["check"], **check}
    plans.save(pdir, dataclasses.replace(plan, extra={**plan.extra, "apply": {**apply_record, "check": new_check}}))


def remote_sha(kept: Kept) -> str:
    return git(kept.bare, "rev-parse", "--verify", "-q", f"refs/heads/{BRANCH}", check=False).strip()


def test_pr_refuses_a_red_branch_unless_forced(tmp_path: Path) -> None:
    kept = make_kept(tmp_path)
    set_check(kept, passed=False, exit_code=1)
    with ForgeServer() as server:
        server.route("POST", "/repos/acme/widget/pulls", (201, {"number": 3, "html_url": "https://g/3"}))
        env = {"PAPAYU_FORGE_API_URL": server.url, "GH_TOKEN": "t0ken-value"}
        proc = papayu("pr", PLAN_ID, "--forge", "github", "--json", cwd=kept.repo, env=env)
        refused(proc, json.loads(proc.stdout), "ERR_CHECK_NOT_PASSED")
        assert server.requests == [] and remote_sha(kept) == ""
        proc = papayu("pr", PLAN_ID, "--forge", "github", "--force", cwd=kept.repo, env=env)
        assert proc.returncode == 0, proc.stderr
        assert "warning: --force: pushing" in proc.stderr and "ERR_CHECK_NOT_PASSED" in proc.stderr
        assert remote_sha(kept) == kept.sha and "FAILED" in server.requests[0].body["body"]
    assert plans.load(kept.repo / ".git" / "papayu", PLAN_ID).extra["pr"]["forced"] is True


def test_pr_refuses_a_changed_branch_but_pushes_an_unchecked_one(tmp_path: Path) -> None:
    kept = make_kept(tmp_path)
    amended = amend(kept.repo, PLAN_ID, "src/calc.py", "x = 2\n")
    proc = papayu("pr", PLAN_ID, "--forge", "github", "--json", cwd=kept.repo)
    refused(proc, json.loads(proc.stdout), "ERR_BRANCH_CHANGED_SINCE_CHECK")
    assert remote_sha(kept) == ""
    set_check(kept, none=True)  # unchecked locally: the forge's CI checks the PR
    proc = papayu("pr", PLAN_ID, "--forge", "github", cwd=kept.repo)  # no token: push only
    assert proc.returncode == 0, proc.stderr
    assert "warning" not in proc.stderr and remote_sha(kept) == amended


def green(server: ForgeServer, sha: str) -> None:
    """An unprotected main (nothing required: every reported check decides) and one green status."""
    server.route("GET", "/repos/acme/widget/branches/main", (200, {"name": "main", "protected": False}))
    server.route(
        "GET",
        f"/repos/acme/widget/commits/{sha}/status",
        (200, {"state": "success", "total_count": 1, "statuses": [{"state": "success", "context": "ci"}]}),
    )
    server.route("GET", f"/repos/acme/widget/commits/{sha}/check-runs", (200, {"total_count": 0, "check_runs": []}))


def land_when_green(kept: Kept, server: ForgeServer, *extra: str) -> subprocess.CompletedProcess[str]:
    return papayu(
        "land",
        PLAN_ID,
        "--when-green",
        "--interval",
        "0.05",
        "--timeout",
        "20",
        "--forge",
        "github",
        *extra,
        cwd=kept.repo,
        env={"PAPAYU_FORGE_API_URL": server.url, "GH_TOKEN": "t0ken-value"},
    )


def test_when_green_refuses_a_branch_changed_since_its_check_before_polling(tmp_path: Path) -> None:
    kept = make_kept(tmp_path)
    amended = amend(kept.repo, PLAN_ID, "src/calc.py", "x = 2\n")
    git(kept.repo, "push", "-q", "origin", f"{BRANCH}:{BRANCH}")
    before = snapshot(kept.repo)
    with ForgeServer() as server:
        green(server, amended)
        proc = land_when_green(kept, server, "--json")
        refused(proc, json.loads(proc.stdout), "ERR_BRANCH_CHANGED_SINCE_CHECK")
        assert server.requests == [] and snapshot(kept.repo) == before  # nothing polled, nothing moved
        proc = land_when_green(kept, server, "--force")
    assert proc.returncode == 0, proc.stderr
    assert "ERR_BRANCH_CHANGED_SINCE_CHECK" in proc.stderr
    assert git(kept.repo, "rev-parse", "main").strip() == amended
    record = outcome(kept.repo, PLAN_ID)
    assert (record["forced"], record["check_state"], record["forge_checked"]) == (True, "changed", True)


def test_when_green_refuses_a_locally_red_branch(tmp_path: Path) -> None:
    kept = make_kept(tmp_path)
    set_check(kept, passed=False, exit_code=1)
    git(kept.repo, "push", "-q", "origin", f"{BRANCH}:{BRANCH}")
    with ForgeServer() as server:
        green(server, kept.sha)
        proc = land_when_green(kept, server)
    assert_error(proc, "ERR_CHECK_NOT_PASSED")
    assert server.requests == [] and git(kept.repo, "rev-parse", "main").strip() == kept.base


def test_when_green_lands_a_locally_unchecked_branch(tmp_path: Path) -> None:
    kept = make_kept(tmp_path)
    set_check(kept, none=True)
    git(kept.repo, "push", "-q", "origin", f"{BRANCH}:{BRANCH}")
    assert papayu("land", PLAN_ID, "--json", cwd=kept.repo).returncode == 1  # without the forge: unchecked
    with ForgeServer() as server:
        green(server, kept.sha)
        proc = land_when_green(kept, server)
    assert proc.returncode == 0, proc.stderr
    assert "warning" not in proc.stderr and git(kept.repo, "rev-parse", "main").strip() == kept.sha
    record = outcome(kept.repo, PLAN_ID)
    assert (record["forced"], record["check_state"], record["forge_checked"]) == (False, "not_checked", True)
