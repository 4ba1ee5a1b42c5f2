"""Plan ids as people type them: a prefix, the hash part, `@` and `@~N`; ambiguous ids name the
candidates, unknown ones offer the closest (real CLI, real repository)."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

from helpers import git, make_repo, papayu, write_plan


def _three_plans(tmp_path: Path) -> tuple[Path, list[str]]:
    repo = make_repo(tmp_path / "repo")
    ids = []
    for i in range(3):
        plan = write_plan(tmp_path, [{"kind": "CREATE_FILE", "path": f"f{i}.txt", "content": "x\n"}], name=f"p{i}.json")
        data = json.loads(papayu("apply", str(plan), "--review", "--check", "true", "--json", cwd=repo).stdout)
        ids.append(data["plan_id"])
    return repo, sorted(ids)


def _shown(repo: Path, ref: str) -> str:
    proc = papayu("show", ref, cwd=repo)
    assert proc.returncode == 0, proc.stderr
    return proc.stdout.splitlines()[0]


def test_newest_hash_part_and_prefix_name_a_plan(tmp_path: Path) -> None:
    repo, ids = _three_plans(tmp_path)
    assert ids[-1] in _shown(repo, "@")
    assert ids[-2] in _shown(repo, "@~1") and ids[0] in _shown(repo, "@~2")
    for plan_id in ids:
        assert plan_id in _shown(repo, plan_id[16:])  # the whole hash part
        unique = next(
            plan_id[16 : 16 + n] for n in range(1, 7) if sum(i[16:].startswith(plan_id[16 : 16 + n]) for i in ids) == 1
        )
        assert plan_id in _shown(repo, unique)
    drop = papayu("drop", "@", cwd=repo)
    assert drop.returncode == 0 and ids[-1] in drop.stdout + drop.stderr


def test_ambiguous_names_candidates_and_unknown_offers_the_closest(tmp_path: Path) -> None:
    repo, ids = _three_plans(tmp_path)
    date = ids[0][:8]  # every plan shares it
    proc = papayu("show", date, cwd=repo)
    assert proc.returncode != 0 and "ERR_PLAN_NOT_FOUND" in proc.stderr and "ambiguous" in proc.stderr
    assert all(i in proc.stderr for i in ids)
    typo = ids[1][:-1] + ("0" if ids[1][-1] != "0" else "1")  # one character off
    proc = papayu("show", typo, cwd=repo)
    assert proc.returncode != 0 and "did you mean" in proc.stderr and ids[1] in proc.stderr
    proc = papayu("show", "@~9", cwd=repo)
    assert proc.returncode != 0 and "there are 3 stored plan(s)" in proc.stderr


def _applied(tmp_path: Path, *how: str) -> tuple[Path, dict[str, Any]]:
    """A repository and the --json result of applying one plan to it (``how``: -y or --review)."""
    repo = make_repo(tmp_path / "repo")
    plan = write_plan(tmp_path, [{"kind": "CREATE_FILE", "path": "new.txt", "content": "x\n"}])
    return repo, json.loads(papayu("apply", str(plan), *how, "--check", "true", "--json", cwd=repo).stdout)


def _listed_state(repo: Path, plan_id: str) -> str:
    lines = papayu("list", cwd=repo).stdout.splitlines()
    assert lines[0].split() == ["ID", "STATE", "CHECK", "TARGET", "TRACE", "SUMMARY"]
    row = next(line for line in lines if line.startswith(plan_id))
    return row[len(plan_id) :].strip().split("  ")[0]


def test_list_has_a_header_and_rechecks_landings_against_the_branch(tmp_path: Path) -> None:
    repo, data = _applied(tmp_path, "-y")
    assert data["state"] == "landed", data
    assert _listed_state(repo, data["plan_id"]) == "landed"
    git(repo, "revert", "--no-edit", "HEAD")
    assert _listed_state(repo, data["plan_id"]) == "landed (reverted)"
    git(repo, "reset", "-q", "--hard", "HEAD~2")
    assert _listed_state(repo, data["plan_id"]) == "landed (not on branch)"


def test_list_says_when_a_kept_branch_was_deleted_by_hand(tmp_path: Path) -> None:
    repo, data = _applied(tmp_path, "--review")
    assert data["state"] == "review", data
    assert f"papayu/{data['plan_id']}" in git(repo, "branch", "--list", "papayu/*")
    assert _listed_state(repo, data["plan_id"]) == "review"
    git(repo, "branch", "-D", f"papayu/{data['plan_id']}")
    assert _listed_state(repo, data["plan_id"]) == "review (branch deleted)"


def test_trace_list_has_a_header_and_landing_names_what_landed(tmp_path: Path) -> None:
    repo = make_repo(tmp_path / "repo")
    plan = write_plan(tmp_path, [{"kind": "CREATE_FILE", "path": "new.txt", "content": "x\n"}])
    proc = papayu("apply", str(plan), "-y", "--check", "true", cwd=repo)
    assert proc.returncode == 0, proc.stderr
    assert " new.txt | 1 +" in proc.stdout and "undo: git reset --keep ORIG_HEAD" in proc.stdout  # the diffstat
    lines = papayu("trace", "list", cwd=repo).stdout.splitlines()
    assert lines[0].split() == ["AT", "TRACE", "PLAN", "COMMAND", "PROTO", "OUTCOME", "NOTES"] and len(lines) == 2


def test_keep_failed_says_where_the_branch_is(tmp_path: Path) -> None:
    repo = make_repo(tmp_path / "repo")
    plan = write_plan(tmp_path, [{"kind": "CREATE_FILE", "path": "new.txt", "content": "x\n"}])
    data = json.loads(papayu("apply", str(plan), "-y", "--check", "false", "--keep-failed", "--json", cwd=repo).stdout)
    assert data["state"] == "rolled_back" and data["branch_kept"]
    assert (
        "--keep-failed" not in data["error"]["hint"] and f"git papayu show {data['plan_id']}" in data["error"]["hint"]
    )


def test_undo_takes_a_landing_back_only_while_nothing_came_after(tmp_path: Path) -> None:
    repo = make_repo(tmp_path / "repo")
    (repo / "mine.txt").write_text("uncommitted\n")  # kept by the undo, like git reset --keep
    before = git(repo, "rev-parse", "HEAD").strip()
    plan = write_plan(tmp_path, [{"kind": "CREATE_FILE", "path": "new.txt", "content": "x\n"}])
    data = json.loads(papayu("apply", str(plan), "-y", "--check", "true", "--json", cwd=repo).stdout)
    assert data["state"] == "landed"
    proc = papayu("undo", cwd=repo)  # the newest landing
    assert proc.returncode == 0, proc.stderr
    assert git(repo, "rev-parse", "HEAD").strip() == before and not (repo / "new.txt").exists()
    assert (repo / "mine.txt").read_text() == "uncommitted\n"
    again = papayu("undo", data["plan_id"], cwd=repo)
    assert again.returncode != 0 and "ERR_PLAN_NOT_LANDED" in again.stderr and "undone already" in again.stderr
    # Landed, then something came after: refused, naming the revert to run instead.
    data = json.loads(papayu("apply", str(plan), "-y", "--check", "true", "--json", cwd=repo).stdout)
    (repo / "later.txt").write_text("l\n")
    git(repo, "add", "later.txt")
    git(repo, "commit", "-qm", "later")
    refused = papayu("undo", data["plan_id"], cwd=repo)
    assert refused.returncode != 0 and "ERR_BRANCH_MOVED" in refused.stderr and "git revert" in refused.stderr
    assert (repo / "later.txt").exists() and (repo / "new.txt").exists()
