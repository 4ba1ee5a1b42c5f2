"""The hooks of .pre-commit-hooks.yaml through the REAL pre-commit tool.

pre-commit builds a virtualenv for a `language: python` hook by pip-installing this
repository, so these tests are slow (one env build per session, one per try-repo);
PRE_COMMIT_HOME and pip's cache are shared across the session.
"""

from __future__ import annotations

import json
import os
import shutil
import subprocess
import sys
from pathlib import Path

import pytest
from helpers import GOLDEN_UPSTREAM, ROOT, git, make_repo, write
from tiers import PRECOMMIT, uses

pytestmark = [pytest.mark.slow, pytest.mark.xdist_group("pre-commit")]  # one worker shares the hook envs

PRE_COMMIT = [sys.executable, "-m", "pre_commit"]
BAD_PLAN = {"actions": [{"kind": "CREATE_FILE", "path": "../escape.txt", "content": "x"}], "summary": "escape"}
GOOD_PLAN = {
    "actions": [{"kind": "CREATE_FILE", "path": "notes/todo.md", "content": "- ship\n"}],
    "summary": "add a todo list",
}
ALL_HOOKS = ("papayu-validate-plans", "papayu-validate-project", "papayu-golden-traces")


@pytest.fixture(scope="session")
def hook_repo(tmp_path_factory: pytest.TempPathFactory) -> tuple[Path, str]:
    """A git repository holding the CURRENT checkout (uncommitted edits too) at one commit."""
    src = tmp_path_factory.mktemp("papayu-src")
    listed = subprocess.run(
        ["git", "ls-files", "-z", "-co", "--exclude-standard"], cwd=ROOT, capture_output=True, text=True, check=True
    ).stdout
    for rel in filter(None, listed.split("\0")):
        origin = ROOT / rel
        if origin.is_file() and not origin.is_symlink():
            (src / rel).parent.mkdir(parents=True, exist_ok=True)
            shutil.copy2(origin, src / rel)
    env = {
        **os.environ,
        "GIT_CONFIG_NOSYSTEM": "1",
        "GIT_AUTHOR_NAME": "t",
        "GIT_AUTHOR_EMAIL": "t@example.com",
        "GIT_COMMITTER_NAME": "t",
        "GIT_COMMITTER_EMAIL": "t@example.com",
    }
    for args in (["init", "-q", "-b", "main"], ["add", "-A"], ["commit", "-q", "-m", "snapshot"]):
        subprocess.run(["git", *args], cwd=src, env=env, check=True, capture_output=True)
    rev = subprocess.run(["git", "rev-parse", "HEAD"], cwd=src, capture_output=True, text=True).stdout.strip()
    return src, rev


@pytest.fixture(scope="session")
@uses(PRECOMMIT)
def precommit_cache(tmp_path_factory: pytest.TempPathFactory, pytestconfig: pytest.Config) -> dict[str, str]:
    """PRE_COMMIT_HOME per session; pip's download cache in pytest's cache dir (only a speed-up)."""
    base = tmp_path_factory.mktemp("pre-commit-cache")
    cache = getattr(pytestconfig, "cache", None)
    pip_cache = cache.mkdir("pip-for-pre-commit") if cache is not None else base / "pip"
    return {"PRE_COMMIT_HOME": str(base / "home"), "PIP_CACHE_DIR": str(pip_cache)}


def run(cmd: list[str], cwd: Path, cache: dict[str, str]) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        cmd,
        cwd=cwd,
        capture_output=True,
        text=True,
        timeout=900,
        env={**os.environ, **cache, "PRE_COMMIT_COLOR": "never"},
    )


def user_repo(path: Path, hook_repo: tuple[Path, str]) -> Path:
    src, rev = hook_repo
    hooks = "".join(f"  - id: {h}\n" for h in ALL_HOOKS)
    repo = make_repo(path, {".pre-commit-config.yaml": f"repos:\n- repo: {src}\n  rev: {rev}\n  hooks:\n{hooks}"})
    return repo


def test_pre_commit_run_all_files_fails_on_invalid_files_with_our_codes(
    tmp_path: Path, hook_repo: tuple[Path, str], precommit_cache: dict[str, str]
) -> None:
    repo = user_repo(tmp_path / "user", hook_repo)
    write(repo, ".papa-yu/plans/escape.json", BAD_PLAN)
    write(repo, ".papa-yu/project.json", {"project": {"default_test_command": 7}})
    shutil.copy(GOLDEN_UPSTREAM / "v2" / "003_base_mismatch_block.json", repo / ".papa-yu" / "trace.json")
    git(repo, "add", "-A")
    proc = run([*PRE_COMMIT, "run", "--all-files"], repo, precommit_cache)
    out = proc.stdout + proc.stderr
    assert proc.returncode == 1, out
    assert ".papa-yu/plans/escape.json: ERR_PATH_TRAVERSAL" in out
    assert ".papa-yu/project.json: ERR_PROJECT_INVALID" in out
    assert ".papa-yu/trace.json: ERR_WRONG_FILE_KIND" in out  # a golden trace is not a plan
    write(repo, ".papa-yu/plans/escape.json", GOOD_PLAN)
    write(repo, ".papa-yu/project.json", {"project": {"default_test_command": "pytest -q"}})
    (repo / ".papa-yu" / "trace.json").unlink()
    git(repo, "add", "-A")
    proc = run([*PRE_COMMIT, "run", "--all-files"], repo, precommit_cache)
    assert proc.returncode == 0, proc.stdout + proc.stderr
    assert proc.stdout.count("Passed") == 2 and "papayu golden traces" in proc.stdout  # no golden file: Skipped


def test_git_commit_through_pre_commit_is_blocked_by_an_invalid_plan(
    tmp_path: Path, hook_repo: tuple[Path, str], precommit_cache: dict[str, str]
) -> None:
    repo = user_repo(tmp_path / "user", hook_repo)
    proc = run([*PRE_COMMIT, "install"], repo, precommit_cache)
    assert proc.returncode == 0, proc.stderr
    before = git(repo, "rev-parse", "HEAD").strip()
    write(repo, ".papa-yu/fix.json", BAD_PLAN)
    git(repo, "add", "-A")
    proc = run(["git", "commit", "-m", "add plan"], repo, precommit_cache)
    assert proc.returncode != 0
    assert "ERR_PATH_TRAVERSAL" in proc.stdout + proc.stderr
    assert git(repo, "rev-parse", "HEAD").strip() == before
    write(repo, ".papa-yu/fix.json", GOOD_PLAN)
    git(repo, "add", "-A")
    proc = run(["git", "commit", "-m", "add plan"], repo, precommit_cache)
    assert proc.returncode == 0, proc.stdout + proc.stderr
    assert git(repo, "show", "HEAD:.papa-yu/fix.json") == json.dumps(GOOD_PLAN)


def test_pre_commit_try_repo_replays_golden_traces(
    tmp_path: Path, hook_repo: tuple[Path, str], precommit_cache: dict[str, str]
) -> None:
    src, rev = hook_repo
    repo = make_repo(tmp_path / "user")
    shutil.copytree(GOLDEN_UPSTREAM / "v2", repo / "golden")
    tampered = json.loads((repo / "golden" / "001_fix_bug_plan.json").read_text())
    tampered["result"].update(validation_outcome="err", error_code="ERR_SCHEMA")
    write(repo, "golden/001_fix_bug_plan.json", tampered)
    git(repo, "add", "-A")
    # try-repo builds its own environment (a temp store): one run shows both outcomes
    proc = run(
        [*PRE_COMMIT, "try-repo", str(src), "papayu-golden-traces", "--ref", rev, "--all-files"], repo, precommit_cache
    )
    assert proc.returncode == 1, proc.stdout + proc.stderr
    assert "golden/001_fix_bug_plan.json: ERR_GOLDEN_MISMATCH" in proc.stdout
    assert "golden/003_base_mismatch_block.json: ok (golden)" in proc.stdout
