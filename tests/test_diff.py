"""`git papayu diff ID`: only the diff of a plan's commit (a reviewed branch or a landed commit),
`--stat`, `--json`, and plan ids resolved the way `show` resolves them."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest
from helpers import assert_error, cli, git, make_repo, papayu, patch_action, write_plan

CALC = "def add(a, b):\n    return a - b\n"
FIX = "--- a/calc.py\n+++ b/calc.py\n@@ -1,2 +1,2 @@\n def add(a, b):\n-    return a - b\n+    return a + b\n"
ACTIONS = [patch_action("calc.py", CALC.encode(), FIX), {"kind": "CREATE_FILE", "path": "notes.txt", "content": "n\n"}]


@pytest.fixture
def calc_repo(tmp_path: Path) -> Path:
    return make_repo(tmp_path / "repo", {"calc.py": CALC})


def applied(repo: Path, actions: list[dict[str, Any]], *args: str) -> dict[str, Any]:
    plan = write_plan(repo.parent, actions, "fix add and take notes", name="plan.json")
    proc = papayu("apply", str(plan), "--no-check", "--json", *args, cwd=repo)
    assert proc.returncode == 0, proc.stderr
    return dict(json.loads(proc.stdout))


def git_diff(repo: Path, *args: str) -> str:
    return git(repo, "diff", "--no-color", *args)


def test_prints_only_the_patch_of_a_reviewed_plan(calc_repo: Path) -> None:
    plan_id = applied(calc_repo, ACTIONS, "--review")["plan_id"]
    proc = cli("diff", plan_id, cwd=calc_repo)
    assert proc.returncode == 0, proc.stderr
    assert proc.stdout == git_diff(calc_repo, "main", f"papayu/{plan_id}")
    assert "+    return a + b" in proc.stdout and "fix add" not in proc.stdout and "changed" not in proc.stdout


def test_stat_prints_only_the_diffstat(calc_repo: Path) -> None:
    plan_id = applied(calc_repo, ACTIONS, "--review")["plan_id"]
    proc = cli("diff", plan_id, "--stat", cwd=calc_repo)
    assert proc.returncode == 0, proc.stderr
    assert proc.stdout == git_diff(calc_repo, "--stat", "main", f"papayu/{plan_id}")
    assert proc.stdout.splitlines()[-1] == " 2 files changed, 2 insertions(+), 1 deletion(-)"


def test_json_names_the_commit_its_parent_and_the_files(calc_repo: Path) -> None:
    plan_id = applied(calc_repo, ACTIONS, "--review")["plan_id"]
    data = json.loads(cli("diff", plan_id, "--json", cwd=calc_repo).stdout)
    assert data["commit"] == git(calc_repo, "rev-parse", f"papayu/{plan_id}").strip()
    assert data["parent"] == git(calc_repo, "rev-parse", "main").strip()
    assert data["files"] == [
        {"path": "calc.py", "added": 1, "deleted": 1},
        {"path": "notes.txt", "added": 1, "deleted": 0},
    ]
    assert data["diff"] == git_diff(calc_repo, "main", f"papayu/{plan_id}")
    stat = json.loads(cli("diff", plan_id, "--stat", "--json", cwd=calc_repo).stdout)
    assert "diff" not in stat and stat["files"] == data["files"]


def test_a_landed_plan_shows_its_commit_against_its_parent(calc_repo: Path) -> None:
    out = applied(calc_repo, ACTIONS)
    assert out["state"] == "landed" and not git(calc_repo, "branch", "--list", "papayu/*").strip()
    git(calc_repo, "commit", "-q", "--allow-empty", "-m", "later work")
    data = json.loads(cli("diff", out["plan_id"], "--json", cwd=calc_repo).stdout)
    assert data["commit"] == git(calc_repo, "rev-parse", "main~1").strip()
    assert data["diff"] == git_diff(calc_repo, "main~2", "main~1")


def test_renames_and_binary_files_in_json(calc_repo: Path) -> None:
    (calc_repo / "old.txt").write_text("".join(f"line {i}\n" for i in range(20)))
    (calc_repo / "logo.bin").write_bytes(b"\x00\x01")
    git(calc_repo, "add", "-A")
    git(calc_repo, "commit", "-q", "-m", "more files")
    content = (calc_repo / "old.txt").read_text()
    actions = [
        {"kind": "DELETE_FILE", "path": "old.txt"},
        {"kind": "CREATE_FILE", "path": "new.txt", "content": content},
    ]
    plan_id = applied(calc_repo, actions, "--review", "-y")["plan_id"]
    files = json.loads(cli("diff", plan_id, "--json", cwd=calc_repo).stdout)["files"]
    assert files == [{"path": "new.txt", "old_path": "old.txt", "added": 0, "deleted": 0}]


def test_ids_resolve_as_show_resolves_them(calc_repo: Path) -> None:
    plan_id = applied(calc_repo, ACTIONS, "--review")["plan_id"]
    expected = git_diff(calc_repo, "main", f"papayu/{plan_id}")
    for typed in ("@", plan_id[16:20], f"papayu/{plan_id}"):
        assert cli("diff", typed, cwd=calc_repo).stdout == expected, typed
    typo = plan_id[:-1] + ("0" if plan_id[-1] != "0" else "1")
    proc = papayu("diff", typo, cwd=calc_repo)
    assert_error(proc, "ERR_PLAN_NOT_FOUND")
    assert f"did you mean {plan_id}" in proc.stderr and proc.stdout == ""


def test_a_plan_without_a_commit_has_no_diff(calc_repo: Path) -> None:
    """A plan refused before it was committed (v2 forbids UPDATE_FILE of an existing file)."""
    plan = write_plan(calc_repo.parent, [{"kind": "UPDATE_FILE", "path": "calc.py", "content": "x\n"}])
    refused = json.loads(papayu("apply", str(plan), "--no-check", "--json", cwd=calc_repo).stdout)
    assert refused["errors"][0]["code"] == "ERR_V2_UPDATE_EXISTING_FORBIDDEN"
    proc = papayu("diff", "@", cwd=calc_repo)
    assert proc.returncode == 0 and proc.stdout == "" and "has no commit yet" in proc.stderr
    data = json.loads(papayu("diff", "@", "--json", cwd=calc_repo).stdout)
    assert (data["commit"], data["parent"], data["files"], data["diff"]) == (None, None, [], "")


def test_coloured_when_asked_and_control_characters_escaped(calc_repo: Path) -> None:
    actions = [{"kind": "CREATE_FILE", "path": "esc.txt", "content": "bell \x1b[2J here\n"}]
    plan_id = applied(calc_repo, actions, "--review")["plan_id"]
    proc = papayu("diff", plan_id, cwd=calc_repo, env={"PAPAYU_COLOR": "always"})
    assert proc.returncode == 0, proc.stderr
    assert "\x1b[32m+bell \\033[2J here\x1b[0m" in proc.stdout and "\x1b[2J" not in proc.stdout
    assert "\x1b[" not in papayu("diff", plan_id, cwd=calc_repo, env={"NO_COLOR": "1"}).stdout.replace("\\033[", "")
