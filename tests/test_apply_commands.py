"""apply's plan sources, review/land/drop/list/show/gc, proposed commands, golden v2 replays."""

from __future__ import annotations

import json
from pathlib import Path

import pytest
from helpers import GOLDEN_UPSTREAM, assert_error, checkout_pool, git, make_repo, object_ids, papayu, write_plan
from llm_server import ScriptedLLM, chat

from papayu_git import plans


def test_review_then_show_list_and_land(repo: Path, tmp_path: Path) -> None:
    plan = write_plan(tmp_path, [{"kind": "CREATE_FILE", "path": "r.py", "content": "reviewed\n"}], summary="add r.py")
    proc = papayu(
        "apply", str(plan), "--review", "--check", "test -f r.py", "--json", cwd=repo, env={"PAPAYU_LOG": "1"}
    )
    data = json.loads(proc.stdout)
    assert proc.returncode == 0 and data["state"] == "review"
    assert "PREVIEW_READY" in proc.stderr
    assert not (repo / "r.py").exists()
    plan_id = data["plan_id"]
    listing = json.loads(papayu("list", "--json", cwd=repo).stdout)["plans"]
    assert [(r["id"], r["state"], r["branch"]) for r in listing] == [(plan_id, "review", f"papayu/{plan_id}")]
    shown = papayu("show", plan_id[:10], cwd=repo)
    assert shown.returncode == 0 and "+reviewed" in shown.stdout and "add r.py" in shown.stdout
    assert "\x1b[" not in shown.stdout  # no colour when not a terminal
    coloured = papayu("show", plan_id, cwd=repo, env={"PAPAYU_COLOR": "always"})
    assert "\x1b[" in coloured.stdout
    landed = papayu("land", plan_id, "--json", cwd=repo, env={"PAPAYU_LOG": "1"})
    assert landed.returncode == 0, landed.stderr
    assert "APPLY_SUCCESS" in landed.stderr
    assert (repo / "r.py").read_text() == "reviewed\n"
    assert json.loads(papayu("list", "--json", cwd=repo).stdout)["plans"][0]["state"] == "landed"
    assert git(repo, "branch", "--list", "papayu/*") == ""


def test_drop_deletes_the_branch_and_land_of_moved_branch_is_refused(repo: Path, tmp_path: Path) -> None:
    for name in ("a", "b"):
        plan = write_plan(
            tmp_path, [{"kind": "CREATE_FILE", "path": f"{name}.txt", "content": "x\n"}], name=f"{name}.json"
        )
        assert papayu("apply", str(plan), "--review", "--no-check", cwd=repo).returncode == 0
    ids = sorted(p.stem for p in (repo / ".git/papayu/plans").glob("*.json"))
    assert papayu("drop", ids[0], cwd=repo).returncode == 0
    assert git(repo, "branch", "--list", f"papayu/{ids[0]}") == ""
    (repo / "c.txt").write_text("c\n")
    git(repo, "add", "c.txt")
    git(repo, "commit", "-q", "-m", "user moves main")
    proc = papayu("land", ids[1], "--force", "--json", cwd=repo)  # --force: applied with --no-check
    assert_error(proc, "ERR_BRANCH_MOVED", first=True)
    assert not (repo / "b.txt").exists()


def test_gc_deletes_old_generated_branches_but_keeps_recent_ones(repo: Path, tmp_path: Path) -> None:
    plan = write_plan(tmp_path, [{"kind": "CREATE_FILE", "path": "g.txt", "content": "g\n"}])
    assert papayu("apply", str(plan), "--review", "--check", "true", cwd=repo).returncode == 0
    assert papayu("gc", cwd=repo).returncode == 0  # default 14 days: the branch is kept
    assert git(repo, "branch", "--list", "papayu/*").strip()
    assert not checkout_pool(repo).exists()  # idle check checkouts always go, and their pool
    report = json.loads(papayu("gc", "--days", "0", "--json", cwd=repo).stdout)
    assert len(report["branches"]) == 1 and git(repo, "branch", "--list", "papayu/*") == ""


def test_stdin_response_and_stored_plan_id(repo: Path, tmp_path: Path) -> None:
    response = {"actions": [{"kind": "CREATE_FILE", "path": "s.txt", "content": "stdin\n"}], "summary": "stdin"}
    proc = papayu("apply", "-", "--no-check", cwd=repo, input=json.dumps(response))
    assert proc.returncode == 0, proc.stderr
    assert (repo / "s.txt").read_text() == "stdin\n"
    pdir = repo / ".git/papayu"
    stored = plans.StoredPlan(
        id="20260101-000000-abcdef",
        goal="add t",
        files={},
        response={"actions": [{"kind": "CREATE_FILE", "path": "t.txt", "content": "t\n"}], "summary": "add t"},
    )
    plans.save(pdir, stored)
    proc = papayu("apply", "20260101-000000", "--no-check", cwd=repo)
    assert proc.returncode == 0, proc.stderr
    assert (repo / "t.txt").exists()
    assert plans.load(pdir, stored.id).extra["apply"]["state"] == "landed"


def test_stored_plan_without_actions_needs_the_apply_round(repo: Path) -> None:
    """A plan-only answer gets its change from the model (APPLY round) before anything is
    applied; a scripted model that never answers with valid JSON ends in a clear ERR_LLM_*.
    (Not the embedded model: the round must not depend on a real model's speed or luck.)"""
    plans.save(
        repo / ".git/papayu",
        plans.StoredPlan(
            id="20260101-000000-aaaaaa", goal="fix", response={"summary": "plan only", "plan": [{"step": "x"}]}
        ),
    )
    server = ScriptedLLM([chat("I would change the code."), chat("still not JSON")])
    try:
        proc = papayu("apply", "20260101-000000-aaaaaa", "--json", cwd=repo, env=server.env())
    finally:
        server.close()
    assert [e["code"] for e in json.loads(proc.stdout)["errors"]] == ["ERR_LLM_INVALID_RESPONSE"], proc.stderr
    assert len(server.requests) == 2  # the APPLY round and its one repair
    assert git(repo, "branch", "--list", "papayu/*") == ""


def test_proposed_commands_are_shown_and_only_run_with_consent_in_the_sandbox(repo: Path, tmp_path: Path) -> None:
    outside = tmp_path / "outside"
    for i, flag in enumerate(((), ("--run-proposed",))):
        plan = write_plan(
            tmp_path,
            [{"kind": "CREATE_FILE", "path": f"c{i}.txt", "content": "c\n"}],
            name=f"c{i}.json",
            commands_to_run=[f"echo proposed-ran-$((40 + {i})); touch {outside}{i} || true"],
        )
        proc = papayu("apply", str(plan), "--check", "true", *flag, cwd=repo)
        assert proc.returncode == 0, proc.stderr
        assert f"echo proposed-ran-$((40 + {i}))" in proc.stderr
    logs = "".join(p.read_text() for p in (repo / ".git/papayu/checks").glob("*.log"))
    assert "proposed-ran-40" not in logs  # shown, not run
    assert "proposed-ran-41" in logs  # ran, after the check ...
    assert not (tmp_path / "outside1").exists()  # ... and sandboxed like the check


def test_check_command_resolution_order(repo: Path, tmp_path: Path) -> None:
    (repo / ".papa-yu").mkdir()
    (repo / ".papa-yu/project.json").write_text(json.dumps({"project": {"default_test_command": "test -f p1.txt"}}))
    git(repo, "add", "-A")
    git(repo, "commit", "-q", "-m", "project")
    plan = write_plan(tmp_path, [{"kind": "CREATE_FILE", "path": "p1.txt", "content": "1\n"}], name="1.json")
    data = json.loads(papayu("apply", str(plan), "--json", cwd=repo).stdout)
    assert data["check"]["source"] == ".papa-yu/project.json" and data["check"]["passed"]
    git(repo, "config", "papayu.project.defaultTestCommand", "exit 5")
    plan = write_plan(tmp_path, [{"kind": "CREATE_FILE", "path": "p0.txt", "content": "0\n"}], name="0.json")
    data = json.loads(papayu("apply", str(plan), "--json", cwd=repo).stdout)
    assert data["check"]["source"] == "git config papayu.project.defaultTestCommand"
    assert data["check"]["exit_code"] == 5 and data["state"] == "rolled_back"
    git(repo, "config", "papayu.check.command", "exit 4")
    plan = write_plan(tmp_path, [{"kind": "CREATE_FILE", "path": "p2.txt", "content": "2\n"}], name="2.json")
    data = json.loads(papayu("apply", str(plan), "--json", cwd=repo).stdout)
    assert data["check"]["source"] == "git config papayu.check.command" and data["check"]["exit_code"] == 4
    data = json.loads(papayu("apply", str(plan), "--json", "--check", "true", cwd=repo).stdout)
    assert data["check"]["source"] == "--check" and data["state"] == "landed"


def test_no_check_found_keeps_the_commit_for_review_and_names_the_ways_on(repo: Path, tmp_path: Path) -> None:
    head = git(repo, "rev-parse", "HEAD")
    plan = write_plan(tmp_path, [{"kind": "CREATE_FILE", "path": "w.txt", "content": "w\n"}])
    proc = papayu("apply", str(plan), "-y", "--json", cwd=repo)
    data = json.loads(proc.stdout)
    assert proc.returncode == 1 and data["state"] == "review" and data["error"]["code"] == "ERR_NO_CHECK"
    assert not data["ok"] and git(repo, "rev-parse", "HEAD") == head and not (repo / "w.txt").exists()
    kept = git(repo, "log", "-1", "--format=%B", f"papayu/{data['plan_id']}")
    assert "Papayu-Check: none found" in kept
    for way in (f"git papayu land {data['plan_id']}", "papayu.check.command", "--no-check"):
        assert way in proc.stderr
    trace = json.loads((repo / f".git/papayu/traces/{data['trace_id']}.json").read_text())
    assert trace["check"]["state"] == "none_found"
    # --no-check is the explicit opt-out: it lands, and the commit says so.
    plan = write_plan(tmp_path, [{"kind": "CREATE_FILE", "path": "n.txt", "content": "n\n"}], name="n.json")
    proc = papayu("apply", str(plan), "--no-check", cwd=repo)
    assert proc.returncode == 0, proc.stderr
    assert "Papayu-Check: none (--no-check)" in git(repo, "log", "-1", "--format=%B")


def test_detected_pytest_check_rolls_back_a_breaking_plan(tmp_path: Path) -> None:
    repo = make_repo(
        tmp_path / "r",
        {
            "calc.py": "def add(a, b):\n    return a + b\n",
            "tests/test_calc.py": "from calc import add\n\ndef test_add():\n    assert add(2, 2) == 4\n",
            "pyproject.toml": "[tool.pytest.ini_options]\npythonpath = ['.']\n",
        },
    )
    diff = "--- a/calc.py\n+++ b/calc.py\n@@ -1,2 +1,2 @@\n def add(a, b):\n-    return a + b\n+    return a - b\n"
    plan = write_plan(
        tmp_path,
        [
            {
                "kind": "PATCH_FILE",
                "path": "calc.py",
                "patch": diff,
                "base_sha256": __import__("hashlib").sha256(b"def add(a, b):\n    return a + b\n").hexdigest(),
            }
        ],
    )
    data = json.loads(papayu("apply", str(plan), "--json", cwd=repo).stdout)
    assert data["check"]["source"] == "detected" and "pytest" in data["check"]["command"]
    assert data["state"] == "rolled_back" and "1 failed" in data["check"]["tail"]
    assert (repo / "calc.py").read_text() == "def add(a, b):\n    return a + b\n"


@pytest.mark.parametrize(
    "name, content",
    [
        ("003_base_mismatch_block.json", b'fn main() {\n    println!("old");\n}\n'),
        ("004_patch_apply_failed_block.json", b""),  # base_sha256 in the trace is sha256 of an empty file
    ],
)
def test_upstream_v2_golden_replays_through_a_real_apply(tmp_path: Path, name: str, content: bytes) -> None:
    trace = json.loads((GOLDEN_UPSTREAM / "v2" / name).read_text(encoding="utf-8"))
    repo = make_repo(tmp_path / "r", {"src/main.rs": content, "README.md": "x\n"})
    response = tmp_path / "response.json"
    response.write_text(json.dumps(trace["result"]["validated_json"]), encoding="utf-8")
    objects = object_ids(repo)
    proc = papayu(
        "apply", str(response), "--no-check", "--json", "--protocol", str(trace["protocol"]["schema_version"]), cwd=repo
    )
    assert proc.returncode == 1
    assert json.loads(proc.stdout)["errors"][0]["code"] == trace["result"]["error_code"]
    assert object_ids(repo) == objects


@pytest.mark.parametrize("answer, landed", [("y", True), ("n", False)])
def test_deletion_asks_on_a_terminal(tmp_path: Path, answer: str, landed: bool) -> None:
    import os
    import pty
    import subprocess
    import sys

    repo = make_repo(tmp_path / "r", {"README.md": "x\n", "old.txt": "old\n"})
    plan = write_plan(tmp_path, [{"kind": "DELETE_FILE", "path": "old.txt"}])
    master, slave = pty.openpty()
    proc = subprocess.Popen(
        [sys.executable, "-m", "papayu_git", "apply", str(plan), "--no-check", "--json"],
        cwd=repo,
        stdin=slave,
        stdout=subprocess.PIPE,
        stderr=slave,
        text=True,
    )
    os.close(slave)
    import select
    import time

    prompt, deadline = b"", time.monotonic() + 60
    while b"Continue?" not in prompt:
        assert time.monotonic() < deadline, prompt
        if select.select([master], [], [], 1.0)[0]:
            prompt += os.read(master, 1024)
    assert b"old.txt" in prompt
    os.write(master, f"{answer}\n".encode())
    out, _ = proc.communicate(timeout=60)
    os.close(master)
    assert (proc.returncode == 0) is landed
    assert (repo / "old.txt").exists() is not landed
    if not landed:
        assert json.loads(out)["errors"][0]["code"] == "ERR_DELETE_NOT_CONFIRMED"


def test_a_plan_id_cannot_name_a_file_outside_the_plans_directory(repo: Path, tmp_path: Path) -> None:
    outside = repo / ".git" / "papayu" / "evil.json"
    outside.parent.mkdir(parents=True, exist_ok=True)
    outside.write_text(json.dumps({"papayu_plan": 1, "id": "evil"}))
    (outside.parent / "plans").mkdir(exist_ok=True)
    for name in ("../evil", "..", "*", "e*"):
        proc = papayu("apply", name, "--no-check", cwd=repo)
        assert_error(proc, "ERR_PLAN_NOT_FOUND")


def test_fix_takes_every_option_of_apply() -> None:
    import click

    from papayu_git.commands import apply as apply_command
    from papayu_git.commands import fix as fix_command

    def options(cmd: click.Command) -> set[str]:
        return {opt for p in cmd.params if isinstance(p, click.Option) for opt in p.opts}

    assert options(apply_command.command) <= options(fix_command.command)
