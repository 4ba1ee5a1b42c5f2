"""The plain git hook shim (hooks/pre-commit) and `git papayu hooks install`."""

from __future__ import annotations

import json
import os
import re
import stat
from pathlib import Path

import pytest
import yaml
from helpers import ROOT, assert_error, cli, git, make_repo, write

from papayu_git.hooks import HOOKS, hooks_for

GOOD_PLAN = {
    "actions": [{"kind": "CREATE_FILE", "path": "notes/todo.md", "content": "- ship\n"}],
    "summary": "add a todo list",
}
BAD_PLAN = {"actions": [{"kind": "CREATE_FILE", "path": "../escape.txt", "content": "x"}], "summary": "escape"}
GOLDEN = ROOT / "tests" / "golden" / "upstream" / "v1"


def commit(repo: Path, message: str = "change") -> tuple[int, str]:
    import subprocess

    proc = subprocess.run(["git", "commit", "-q", "-m", message], cwd=repo, capture_output=True, text=True)
    return proc.returncode, proc.stdout + proc.stderr


def head(repo: Path) -> str:
    return git(repo, "rev-parse", "HEAD").strip()


def test_pre_commit_hooks_yaml_matches_the_hooks_table() -> None:
    entries = yaml.safe_load((ROOT / ".pre-commit-hooks.yaml").read_text(encoding="utf-8"))
    by_id = {e["id"]: e for e in entries}
    assert set(by_id) >= {"papayu-validate-plans", "papayu-validate-project", "papayu-golden-traces"}
    for spec in HOOKS:
        entry = by_id[spec.id]
        assert entry["language"] == "python"
        assert entry["files"] == spec.files
        assert entry.get("exclude", "") == spec.exclude
        assert entry["entry"] == f"papayu validate --kind {','.join(spec.kinds)}"


def test_pre_commit_accepts_the_manifest() -> None:
    import subprocess
    import sys

    proc = subprocess.run(
        [sys.executable, "-m", "pre_commit", "validate-manifest", str(ROOT / ".pre-commit-hooks.yaml")],
        capture_output=True,
        text=True,
    )
    assert proc.returncode == 0, proc.stdout + proc.stderr


@pytest.mark.parametrize(
    ("path", "hook_ids"),
    [
        (".papa-yu/plans/fix.json", {"papayu-validate-plans"}),
        ("sub/.papa-yu/answer.json", {"papayu-validate-plans"}),
        (".papa-yu/project.json", {"papayu-validate-project"}),
        (".papa-yu/preferences.json", set()),
        ("docs/golden_traces/v1/001.json", {"papayu-golden-traces"}),
        ("tests/golden/002.json", {"papayu-golden-traces"}),
        ("tests/golden/upstream/schemas/llm_response_schema.json", set()),
        ("golden/schema/x.json", set()),
        ("src/app.json", set()),
        (".papa-yu/notes.md", set()),
    ],
)
def test_hook_patterns_select_the_right_files(path: str, hook_ids: set[str]) -> None:
    assert {h.id for h in hooks_for(path)} == hook_ids
    yaml_ids = {
        e["id"]
        for e in yaml.safe_load((ROOT / ".pre-commit-hooks.yaml").read_text())
        if re.search(e["files"], path) and not (e.get("exclude") and re.search(e["exclude"], path))
    }
    assert yaml_ids == hook_ids


@pytest.mark.parametrize(
    "path",
    [
        ".papa-yu/plans/fix.json",
        "sub/.papa-yu/project.json",
        "a/golden_traces/v1/1.json",
        "golden/x.json",
        "src/app.json",
        ".papa-yu/notes.md",
        "xgolden/a.json",
    ],
)
def test_shim_prefilter_ere_agrees_with_the_python_patterns(path: str) -> None:
    import subprocess

    from papayu_git.hooks import files_regex

    by_grep = subprocess.run(["grep", "-Eq", files_regex()], input=path + "\n", text=True).returncode == 0
    assert by_grep == any(re.search(h.files, path) for h in HOOKS)


def test_shim_skips_python_when_no_covered_file_is_staged(tmp_path: Path) -> None:
    import subprocess

    repo = make_repo(tmp_path / "r")
    assert cli("hooks", "install", cwd=repo).returncode == 0
    hook = repo / ".git" / "hooks" / "pre-commit"
    hook.write_text(re.sub(r"^PAPAYU_PYTHON=.*$", "PAPAYU_PYTHON='/nonexistent/python'", hook.read_text(), flags=re.M))
    env = {**os.environ, "PATH": "/usr/bin:/bin"}  # no papayu anywhere: running it would fail
    write(repo, "x.txt", "x")
    git(repo, "add", "-A")
    proc = subprocess.run(["git", "commit", "-q", "-m", "x"], cwd=repo, env=env, capture_output=True, text=True)
    assert proc.returncode == 0, proc.stderr
    write(repo, ".papa-yu/пла н.json", GOOD_PLAN)  # quoted by git without quotePath=false
    git(repo, "add", "-A")
    proc = subprocess.run(["git", "commit", "-q", "-m", "p"], cwd=repo, env=env, capture_output=True, text=True)
    assert proc.returncode != 0 and "papayu-git is not installed" in proc.stderr


def test_shim_blocks_a_bad_plan_with_a_non_ascii_name(tmp_path: Path) -> None:
    repo = make_repo(tmp_path / "r")
    assert cli("hooks", "install", cwd=repo).returncode == 0
    write(repo, ".papa-yu/план.json", BAD_PLAN)
    git(repo, "add", "-A")
    rc, out = commit(repo)
    assert rc != 0 and ".papa-yu/план.json: ERR_PATH_TRAVERSAL" in out


def test_validate_kind_rejects_a_file_of_another_kind(tmp_path: Path) -> None:
    write(tmp_path, "project.json", {"project": {"default_test_command": "pytest"}})
    proc = cli("validate", "--kind", "plan,response", str(tmp_path / "project.json"))
    assert proc.returncode == 1
    assert "ERR_WRONG_FILE_KIND" in proc.stdout
    proc = cli("validate", "--kind", "project", str(tmp_path / "project.json"))
    assert proc.returncode == 0, proc.stdout + proc.stderr
    proc = cli("validate", "--kind", "bogus", str(tmp_path / "project.json"))
    assert proc.returncode == 2


def test_validate_kind_golden_reports_schema_errors_for_a_non_trace(tmp_path: Path) -> None:
    write(tmp_path, "golden/001.json", {"protocol": {"schema_version": 1}})
    proc = cli("validate", "--kind", "golden", "--json", str(tmp_path / "golden/001.json"))
    assert proc.returncode == 1
    codes = {e["code"] for f in json.loads(proc.stdout)["files"] for e in f["errors"]}
    assert codes == {"ERR_GOLDEN_INVALID"}


def test_staged_validation_reads_the_index_not_the_working_tree(tmp_path: Path) -> None:
    repo = make_repo(tmp_path / "r")
    write(repo, ".papa-yu/fix.json", BAD_PLAN)
    git(repo, "add", "-A")
    write(repo, ".papa-yu/fix.json", GOOD_PLAN)  # fixed on disk, not staged
    proc = cli("validate", "--staged", cwd=repo)
    assert proc.returncode == 1
    assert ".papa-yu/fix.json: ERR_PATH_TRAVERSAL" in proc.stdout
    git(repo, "add", "-A")
    write(repo, ".papa-yu/fix.json", BAD_PLAN)  # broken on disk, good version staged
    proc = cli("validate", "--staged", cwd=repo)
    assert proc.returncode == 0, proc.stdout + proc.stderr
    assert ".papa-yu/fix.json: ok (response)" in proc.stdout


def test_staged_validation_replays_golden_traces_and_skips_unmatched_files(tmp_path: Path) -> None:
    repo = make_repo(tmp_path / "r")
    for src in sorted(GOLDEN.glob("00[1-2]*.json")):
        write(repo, f"docs/golden_traces/v1/{src.name}", src.read_text())
    write(repo, "data/not-a-plan.json", {"anything": True})
    git(repo, "add", "-A")
    proc = cli("validate", "--staged", "--json", cwd=repo)
    assert proc.returncode == 0, proc.stdout + proc.stderr
    files = {f["file"]: f["kind"] for f in json.loads(proc.stdout)["files"]}
    assert files == {
        "docs/golden_traces/v1/001_fix_bug_plan.json": "golden",
        "docs/golden_traces/v1/002_fix_bug_apply.json": "golden",
    }


def test_golden_hook_accepts_every_golden_file_of_this_repository() -> None:
    import subprocess

    tracked = subprocess.run(["git", "ls-files", "-z"], cwd=ROOT, capture_output=True, text=True).stdout
    golden = [p for p in tracked.split("\0") if any(h.id == "papayu-golden-traces" for h in hooks_for(p))]
    assert len(golden) >= 12
    proc = cli("validate", "--kind", "golden", *golden, cwd=ROOT)
    assert proc.returncode == 0, proc.stdout


def test_staged_golden_trace_with_a_changed_outcome_fails(tmp_path: Path) -> None:
    repo = make_repo(tmp_path / "r")
    trace = json.loads((GOLDEN / "004_protected_path_block.json").read_text())
    trace["result"]["validation_outcome"] = "ok"
    trace["result"]["error_code"] = None
    write(repo, "golden/004.json", trace)
    git(repo, "add", "-A")
    proc = cli("validate", "--staged", cwd=repo)
    assert proc.returncode == 1
    assert "golden/004.json: ERR_GOLDEN_MISMATCH" in proc.stdout


def test_installed_shim_blocks_an_invalid_plan_and_passes_a_valid_one(tmp_path: Path) -> None:
    repo = make_repo(tmp_path / "r")
    proc = cli("hooks", "install", "--json", cwd=repo)
    assert proc.returncode == 0, proc.stderr
    info = json.loads(proc.stdout)
    hook = Path(info["hook"])
    assert info["state"] == "installed" and hook == (repo / ".git" / "hooks" / "pre-commit").resolve()
    assert hook.stat().st_mode & stat.S_IXUSR
    before = head(repo)
    write(repo, ".papa-yu/plans/fix.json", BAD_PLAN)
    git(repo, "add", "-A")
    rc, out = commit(repo)
    assert rc != 0 and "ERR_PATH_TRAVERSAL" in out
    assert head(repo) == before
    write(repo, ".papa-yu/plans/fix.json", GOOD_PLAN)
    git(repo, "add", "-A")
    rc, out = commit(repo)
    assert rc == 0, out
    assert head(repo) != before


def test_shim_validates_the_index_git_commit_really_uses(tmp_path: Path) -> None:
    """`commit -a` and `commit PATH` commit a temporary index (GIT_INDEX_FILE): check that one."""
    import subprocess

    repo = make_repo(tmp_path / "r", {".papa-yu/fix.json": json.dumps(GOOD_PLAN), "x.txt": "x\n"})
    assert cli("hooks", "install", cwd=repo).returncode == 0
    before = head(repo)
    write(repo, ".papa-yu/fix.json", BAD_PLAN)  # modified, not staged
    proc = subprocess.run(["git", "commit", "-q", "-a", "-m", "all"], cwd=repo, capture_output=True, text=True)
    assert proc.returncode != 0 and "ERR_PATH_TRAVERSAL" in proc.stderr + proc.stdout
    proc = subprocess.run(
        ["git", "commit", "-q", "-m", "only", "--", ".papa-yu/fix.json"], cwd=repo, capture_output=True, text=True
    )
    assert proc.returncode != 0 and "ERR_PATH_TRAVERSAL" in proc.stderr + proc.stdout
    assert head(repo) == before
    write(repo, "x.txt", "y\n")  # the bad plan stays out of this commit
    proc = subprocess.run(
        ["git", "commit", "-q", "-m", "x only", "--", "x.txt"], cwd=repo, capture_output=True, text=True
    )
    assert proc.returncode == 0, proc.stderr
    assert git(repo, "show", "HEAD:.papa-yu/fix.json") == json.dumps(GOOD_PLAN)


def test_shim_finds_papayu_without_the_recorded_interpreter(tmp_path: Path) -> None:
    repo = make_repo(tmp_path / "r")
    hook = repo / ".git" / "hooks" / "pre-commit"
    hook.write_text((ROOT / "hooks" / "pre-commit").read_text())  # PAPAYU_PYTHON='' as shipped
    hook.chmod(0o755)
    bindir = tmp_path / "bin"
    bindir.mkdir()
    import sys

    (bindir / "git-papayu").write_text(f"#!/bin/sh\nexec '{sys.executable}' -m papayu_git \"$@\"\n")
    (bindir / "git-papayu").chmod(0o755)
    write(repo, ".papa-yu/project.json", {"project": {"default_test_command": 42}})
    git(repo, "add", "-A")
    import subprocess

    env = {**os.environ, "PATH": f"{bindir}{os.pathsep}{os.environ['PATH']}"}
    proc = subprocess.run(["git", "commit", "-q", "-m", "x"], cwd=repo, env=env, capture_output=True, text=True)
    assert proc.returncode != 0 and "ERR_PROJECT_INVALID" in proc.stdout + proc.stderr


def test_install_respects_core_hooks_path(tmp_path: Path) -> None:
    repo = make_repo(tmp_path / "r")
    git(repo, "config", "core.hooksPath", ".githooks")
    (repo / "sub").mkdir()
    proc = cli("hooks", "install", "--json", cwd=repo / "sub")
    assert proc.returncode == 0, proc.stderr
    assert Path(json.loads(proc.stdout)["hook"]) == (repo / ".githooks" / "pre-commit").resolve()
    assert not (repo / ".git" / "hooks" / "pre-commit").exists()
    write(repo, ".papa-yu/x.json", BAD_PLAN)
    git(repo, "add", ".papa-yu")
    rc, out = commit(repo)
    assert rc != 0 and "ERR_PATH_TRAVERSAL" in out


def test_install_refuses_a_foreign_hook_and_leaves_it_alone(tmp_path: Path) -> None:
    repo = make_repo(tmp_path / "r")
    hook = repo / ".git" / "hooks" / "pre-commit"
    hook.write_text("#!/bin/sh\necho mine\n")
    hook.chmod(0o755)
    proc = cli("hooks", "install", cwd=repo)
    assert proc.returncode == 1
    assert "ERR_HOOK_EXISTS" in proc.stderr and "--chain" in proc.stderr
    assert hook.read_text() == "#!/bin/sh\necho mine\n"
    assert sorted(p.name for p in hook.parent.iterdir() if p.name.startswith("pre-commit.papayu")) == []


def test_install_refuses_the_pre_commit_tools_hook_with_a_config_hint(tmp_path: Path) -> None:
    repo = make_repo(tmp_path / "r")
    hook = repo / ".git" / "hooks" / "pre-commit"
    hook.write_text("#!/usr/bin/env bash\n# File generated by pre-commit: https://pre-commit.com\n")
    proc = cli("hooks", "install", "--json", cwd=repo)
    assert proc.returncode == 1
    err = json.loads(proc.stdout)["errors"][0]
    assert err["code"] == "ERR_HOOK_EXISTS" and ".pre-commit-config.yaml" in err["hint"]


def test_install_chain_runs_the_old_hook_first(tmp_path: Path) -> None:
    repo = make_repo(tmp_path / "r")
    hook = repo / ".git" / "hooks" / "pre-commit"
    marker = tmp_path / "old-hook-ran"
    hook.write_text(f"#!/bin/sh\ntouch '{marker}'\n[ ! -e \"$(git rev-parse --show-toplevel)/BLOCK\" ]\n")
    hook.chmod(0o755)
    proc = cli("hooks", "install", "--chain", cwd=repo)
    assert proc.returncode == 0, proc.stderr
    assert "chained" in proc.stdout
    assert (hook.parent / "pre-commit.papayu-chained").read_text().startswith("#!/bin/sh\ntouch")
    write(repo, "BLOCK", "x")
    git(repo, "add", "-A")
    rc, _ = commit(repo)
    assert rc != 0 and marker.exists()  # the old hook still vetoes
    git(repo, "rm", "-q", "--cached", "BLOCK")
    (repo / "BLOCK").unlink()
    write(repo, ".papa-yu/p.json", GOOD_PLAN)
    git(repo, "add", "-A")
    rc, out = commit(repo)
    assert rc == 0, out
    # a second install keeps the chain and updates papayu's own shim
    proc = cli("hooks", "install", "--json", cwd=repo)
    assert json.loads(proc.stdout)["state"] == "updated"
    assert (hook.parent / "pre-commit.papayu-chained").exists()
    # uninstall puts the old hook back; a second uninstall finds nothing of papayu's
    proc = cli("hooks", "uninstall", cwd=repo)
    assert proc.returncode == 0, proc.stderr
    assert hook.read_text().startswith("#!/bin/sh\ntouch") and not (hook.parent / "pre-commit.papayu-chained").exists()
    proc = cli("hooks", "uninstall", cwd=repo)
    assert_error(proc, "ERR_HOOK_NOT_INSTALLED")
    assert hook.read_text().startswith("#!/bin/sh\ntouch")


def test_install_force_keeps_a_backup_and_replaces_a_symlink_not_its_target(tmp_path: Path) -> None:
    repo = make_repo(tmp_path / "r")
    target = tmp_path / "shared-hook"
    target.write_text("#!/bin/sh\nexit 0\n")
    hook = repo / ".git" / "hooks" / "pre-commit"
    hook.symlink_to(target)
    proc = cli("hooks", "install", "--force", "--json", cwd=repo)
    assert proc.returncode == 0, proc.stderr
    assert json.loads(proc.stdout)["state"] == "replaced"
    assert target.read_text() == "#!/bin/sh\nexit 0\n"
    assert (hook.parent / "pre-commit.papayu-backup").is_symlink()
    assert not hook.is_symlink() and "papayu-git pre-commit shim" in hook.read_text()
    assert cli("hooks", "install", "--force", "--chain", cwd=repo).returncode == 2
