"""Landing and pushing run no hook the plan could have written (docs/DESIGN.md, "Landing").

Real git hooks: a husky-style setup (core.hooksPath=.husky/_, whose wrappers run `.husky/<hook>`
when it exists) and a tracked `.githooks/` under core.hooksPath=.githooks. Every hook writes a
marker file outside the repository; the markers say what ran.
"""

from __future__ import annotations

import os
from pathlib import Path

import pytest
from helpers import apply_json, git, make_repo, papayu, write_plan

# husky 9's `.husky/_/h`, shortened: run `.husky/<name of this hook>` when the file exists.
WRAPPER = '#!/bin/sh\nn=$(basename "$0")\ns=$(dirname "$(dirname "$0")")/$n\n[ -f "$s" ] || exit 0\nexec sh -e "$s"\n'


def hook_writing(marker: Path) -> str:
    return f"#!/bin/sh\necho ran >> '{marker}'\n"


def husky_repo(tmp_path: Path, files: dict[str, str] | None = None) -> Path:
    """husky as `npx husky` leaves it: `.husky/_/` ignored and not committed, wrappers for the
    hooks this file tests, core.hooksPath pointing at them."""
    repo = make_repo(tmp_path / "repo", {"README.md": "# sample\n", **(files or {})})
    wrappers = repo / ".husky" / "_"
    wrappers.mkdir(parents=True)
    (wrappers / ".gitignore").write_text("*\n")
    for hook in ("post-merge", "pre-push", "reference-transaction", "post-index-change", "pre-auto-gc"):
        (wrappers / hook).write_text(WRAPPER)
        (wrappers / hook).chmod(0o755)
    git(repo, "config", "core.hooksPath", ".husky/_")
    return repo


def create(path: str, content: str) -> dict[str, str]:
    return {"kind": "CREATE_FILE", "path": path, "content": content}


def land(repo: Path, tmp_path: Path, actions: list[dict[str, str]], *args: str) -> dict[str, object]:
    plan = write_plan(tmp_path, actions, summary="a plan")
    data = apply_json(repo, plan, "-y", "--no-check", *args)
    assert data["state"] == "landed", data
    return data


# The fast path lands with `git apply --index`; a .gitattributes change goes through `git merge --ff-only`.
PATHS = pytest.mark.parametrize("extra", [[], [create(".gitattributes", "*.txt text\n")]], ids=["fast", "merge"])


@PATHS
def test_a_plan_creating_a_husky_hook_does_not_run_it(tmp_path: Path, extra: list[dict[str, str]]) -> None:
    repo = husky_repo(tmp_path)
    marker = tmp_path / "pwned"
    planted = [create(".husky/post-merge", hook_writing(marker)), create(".husky/pre-auto-gc", hook_writing(marker))]
    data = land(repo, tmp_path, [*planted, *extra])
    assert (repo / ".husky" / "post-merge").is_file()  # landed...
    assert not marker.exists()  # ...and never ran
    assert "post-merge hook skipped: papayu.land.runHooks is off" in str(data["_stderr"])


@PATHS
def test_run_hooks_runs_the_users_own_post_merge(tmp_path: Path, extra: list[dict[str, str]]) -> None:
    marker = tmp_path / "users-hook"
    repo = husky_repo(tmp_path, {".husky/post-merge": hook_writing(marker)})
    git(repo, "config", "papayu.land.runHooks", "true")
    data = land(repo, tmp_path, [create("src/app.txt", "app\n"), *extra])
    assert marker.read_text() == "ran\n"
    assert "hook skipped" not in str(data["_stderr"])


@PATHS
def test_run_hooks_skips_hooks_when_the_plan_touches_a_hook_file(tmp_path: Path, extra: list[dict[str, str]]) -> None:
    marker = tmp_path / "users-hook"
    planted = tmp_path / "pwned"
    repo = husky_repo(tmp_path, {".husky/post-merge": hook_writing(marker)})
    git(repo, "config", "papayu.land.runHooks", "true")
    changed = {"kind": "UPDATE_FILE", "path": ".husky/post-merge", "content": hook_writing(planted)}
    data = land(repo, tmp_path, [changed, *extra], "--protocol", "1")
    assert (repo / ".husky" / "post-merge").read_text() == hook_writing(planted)
    assert not marker.exists() and not planted.exists()
    stderr = str(data["_stderr"])
    assert "post-merge hook skipped: the plan changes .husky/post-merge, which a hook may run or read" in stderr


def test_a_tracked_githooks_directory_runs_nothing_the_plan_changed(tmp_path: Path) -> None:
    """core.hooksPath=.githooks with tracked, executable hooks: the plan rewrites them (their mode
    is kept), and neither post-merge nor reference-transaction (run by update-ref) runs."""
    users, planted = tmp_path / "users-hook", tmp_path / "pwned"
    repo = make_repo(tmp_path / "repo")
    hooks = repo / ".githooks"
    hooks.mkdir()
    for hook in ("post-merge", "reference-transaction", "post-index-change"):
        (hooks / hook).write_text(hook_writing(users))
        (hooks / hook).chmod(0o755)
    git(repo, "add", ".githooks")
    git(repo, "commit", "-qm", "hooks")
    git(repo, "config", "core.hooksPath", ".githooks")
    rewrite = [
        {"kind": "UPDATE_FILE", "path": f".githooks/{hook}", "content": hook_writing(planted)}
        for hook in ("post-merge", "reference-transaction", "post-index-change")
    ]
    for run_hooks in ("false", "true"):
        git(repo, "config", "papayu.land.runHooks", run_hooks)
        data = land(repo, tmp_path, rewrite, "--protocol", "1")
        assert not users.exists() and not planted.exists(), run_hooks
        assert "post-merge hook skipped" in str(data["_stderr"])
        assert os.access(hooks / "post-merge", os.X_OK)
        rewrite = [{**a, "content": a["content"] + "# again\n"} for a in rewrite]


def test_hooks_of_a_branch_checked_out_nowhere_stay_off(tmp_path: Path) -> None:
    """`--onto` a branch checked out nowhere moves it with update-ref: no reference-transaction
    (core.hooksPath absolute: update-ref runs in the git directory)."""
    marker = tmp_path / "pwned"
    repo = husky_repo(tmp_path, {".husky/reference-transaction": hook_writing(marker)})
    git(repo, "config", "core.hooksPath", str(repo / ".husky" / "_"))
    git(repo, "-c", "core.hooksPath=/dev/null", "branch", "side")
    land(repo, tmp_path, [create("side.txt", "side\n")], "--onto", "side")
    assert git(repo, "show", "side:side.txt") == "side\n"
    assert not marker.exists()


@pytest.mark.parametrize("package", [{"simple-git-hooks": {"post-merge": "x"}}, {"scripts": {"postinstall": "x"}}])
def test_package_json_hook_keys_count_as_hook_files(tmp_path: Path, package: dict[str, object]) -> None:
    import json

    marker = tmp_path / "users-hook"
    repo = husky_repo(tmp_path, {".husky/post-merge": hook_writing(marker), "package.json": '{"name": "x"}\n'})
    git(repo, "config", "papayu.land.runHooks", "true")
    content = json.dumps({"name": "x", **package}) + "\n"
    data = land(
        repo, tmp_path, [{"kind": "UPDATE_FILE", "path": "package.json", "content": content}], "--protocol", "1"
    )
    assert not marker.exists()
    assert "the plan changes package.json" in str(data["_stderr"])
    other = json.dumps({"name": "y", **package}) + "\n"  # the hook keys as they are: hooks run
    land(repo, tmp_path, [{"kind": "UPDATE_FILE", "path": "package.json", "content": other}], "--protocol", "1")
    assert marker.read_text() == "ran\n"


def test_pr_pushes_without_the_plans_pre_push_hook(tmp_path: Path) -> None:
    """The user checked papayu/<id> out to read it: its `.husky/pre-push` is in the work tree now."""
    marker = tmp_path / "pwned"
    repo = husky_repo(tmp_path)
    bare = tmp_path / "forge" / "widget.git"
    git(tmp_path, "init", "-q", "--bare", str(bare))
    git(repo, "remote", "add", "origin", "https://github.com/acme/widget.git")
    git(repo, "remote", "set-url", "--push", "origin", bare.as_uri())
    plan = write_plan(tmp_path, [create(".husky/pre-push", hook_writing(marker))], summary="a plan")
    kept = apply_json(repo, plan, "-y", "--no-check", "--review")
    git(repo, "-c", "core.hooksPath=/dev/null", "checkout", "-q", str(kept["branch"]))
    proc = papayu("pr", str(kept["plan_id"]), cwd=repo)
    assert proc.returncode == 0, proc.stderr
    assert git(bare, "rev-parse", str(kept["branch"])).strip() == kept["commit"]
    assert not marker.exists()
    assert "pre-push hook skipped: papayu.land.runHooks is off" in proc.stderr
