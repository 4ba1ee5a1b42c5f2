"""The fast-forward that follows the change (landing.py): `git apply --index` of the commit's
whole-file diff plus a compare-and-swap, and every case it must hand to `git merge --ff-only`.

A landing through the fast path leaves the reflog entry `papayu: land <id>`; one through
`git merge` leaves `merge <sha>: Fast-forward`. Each refusal must keep the user's state.
"""

from __future__ import annotations

import os
import signal
import subprocess
import sys
import time
from pathlib import Path
from typing import Any

import pytest
from helpers import apply_json, git, json_codes, make_repo, papayu, patch_action, run_papayu_bg, snapshot, write_plan

DIFF = "--- a/a.txt\n+++ b/a.txt\n@@ -1,2 +1,2 @@\n one\n-two\n+TWO\n"


def _user_refs(snap: dict) -> list[str]:
    return [line for line in snap["refs"].splitlines() if not line.startswith("refs/heads/papayu/")]


def _last_reflog(repo: Path) -> str:
    return git(repo, "reflog", "-1", "--format=%gs", "main").strip()


@pytest.fixture
def repo(tmp_path: Path) -> Path:
    return make_repo(
        tmp_path / "repo", {"a.txt": "one\ntwo\n", "b.txt": "bee\n", "src/c.txt": "sea\n", ".gitignore": "*.log\n"}
    )


def _patch_plan(tmp_path: Path, name: str = "plan.json") -> Path:
    return write_plan(
        tmp_path,
        [
            patch_action("a.txt", b"one\ntwo\n", DIFF),
            {"kind": "CREATE_FILE", "path": "src/new/d.txt", "content": "d\n"},
            {"kind": "DELETE_FILE", "path": "src/c.txt"},
        ],
        name=name,
    )


def test_fast_path_lands_keeps_other_changes_and_sets_orig_head(repo: Path, tmp_path: Path) -> None:
    tip = git(repo, "rev-parse", "HEAD").strip()
    (repo / "b.txt").write_text("bee, edited\n")
    (repo / "staged.txt").write_text("staged\n")
    git(repo, "add", "staged.txt")
    (repo / "mine.txt").write_text("untracked\n")
    (repo / "debug.log").write_text("ignored\n")
    data = apply_json(repo, _patch_plan(tmp_path), "--no-check", "-y")
    assert data["_rc"] == 0 and data["landed_by"] == "fast-forward", data
    assert _last_reflog(repo) == f"papayu: land {data['plan_id']}"
    assert git(repo, "rev-parse", "HEAD").strip() == data["commit"]
    assert git(repo, "rev-parse", "ORIG_HEAD").strip() == tip
    assert (repo / "a.txt").read_text() == "one\nTWO\n" and (repo / "src/new/d.txt").read_text() == "d\n"
    assert not (repo / "src/c.txt").exists()
    assert git(repo, "status", "--porcelain", "--ignored").splitlines() == [
        " M b.txt",
        "A  staged.txt",
        "?? mine.txt",
        "!! debug.log",
    ]
    assert git(repo, "diff", "--cached", "--name-only", "HEAD").split() == ["staged.txt"]
    git(repo, "reset", "-q", "--keep", "ORIG_HEAD")  # the README's undo
    assert git(repo, "rev-parse", "HEAD").strip() == tip and (repo / "a.txt").read_text() == "one\ntwo\n"
    assert (repo / "b.txt").read_text() == "bee, edited\n" and (repo / "mine.txt").exists()


@pytest.mark.parametrize("setup", [("config", "core.autocrlf", "true"), ("attributes", "* text=auto eol=crlf")])
def test_line_ending_conversion_lands_clean(tmp_path: Path, setup: tuple[str, ...]) -> None:
    """git apply converts the working-tree file to git's form and back, as a checkout would."""
    repo = make_repo(tmp_path / "repo", {"a.txt": "one\ntwo\n"})
    if setup[0] == "config":
        git(repo, "config", setup[1], setup[2])
    else:
        (repo / ".gitattributes").write_text(setup[1] + "\n")
        git(repo, "add", ".gitattributes")
        git(repo, "commit", "-q", "-m", "attributes")
    (repo / "a.txt").unlink()
    git(repo, "checkout", "--", "a.txt")  # now CRLF in the working tree
    assert (repo / "a.txt").read_bytes() == b"one\r\ntwo\r\n"
    plan = write_plan(tmp_path, [patch_action("a.txt", b"one\ntwo\n", DIFF)])
    data = apply_json(repo, plan, "--no-check")
    assert data["_rc"] == 0 and _last_reflog(repo) == f"papayu: land {data['plan_id']}", data
    assert (repo / "a.txt").read_bytes() == b"one\r\nTWO\r\n"
    assert git(repo, "status", "--porcelain") == ""
    assert git(repo, "show", "HEAD:a.txt") == "one\nTWO\n"


@pytest.mark.parametrize("hooks_path", [None, "my-hooks"])
def test_post_merge_hook_runs_like_after_git_merge(repo: Path, tmp_path: Path, hooks_path: str | None) -> None:
    """When the user opted in (papayu.land.runHooks; tests/test_land_hooks.py: off by default)."""
    git(repo, "config", "papayu.land.runHooks", "true")
    hook = repo / ".git/hooks/post-merge"
    if hooks_path:
        git(repo, "config", "core.hooksPath", hooks_path)
        hook = repo / hooks_path / "post-merge"
        hook.parent.mkdir()
    hook.write_text('#!/bin/sh\necho "squash=$1 head=$(git rev-parse HEAD)" > .git/post-merge-ran\n')
    hook.chmod(0o755)
    data = apply_json(repo, _patch_plan(tmp_path), "--no-check", "-y")
    assert data["_rc"] == 0, data
    assert (repo / ".git/post-merge-ran").read_text() == f"squash=0 head={data['commit']}\n"


@pytest.mark.parametrize("flag", ["--skip-worktree", "--assume-unchanged"])
def test_hidden_local_change_of_a_touched_file_is_refused(repo: Path, tmp_path: Path, flag: str) -> None:
    git(repo, "update-index", flag, "a.txt")
    (repo / "a.txt").write_text("one\nmy hidden local change\n")
    before = snapshot(repo)
    data = apply_json(repo, _patch_plan(tmp_path), "--no-check", "-y")
    assert data["_rc"] == 1 and json_codes(data) == ["ERR_DIRTY_WORKTREE"], data
    after = snapshot(repo)
    assert after["files"] == before["files"] and after["index"] == before["index"]
    assert _user_refs(after) == _user_refs(before)


def _edits_plan(tmp_path: Path) -> Path:
    """A plan that creates no file: its landing leaves staged changes to the stat data."""
    return write_plan(
        tmp_path, [patch_action("a.txt", b"one\ntwo\n", DIFF), {"kind": "DELETE_FILE", "path": "src/c.txt"}]
    )


@pytest.mark.parametrize("plan", [_patch_plan, _edits_plan])
def test_staged_mode_change_of_a_touched_file_is_refused_and_kept(repo: Path, tmp_path: Path, plan: Any) -> None:
    (repo / "a.txt").chmod(0o755)
    git(repo, "add", "a.txt")
    staged = git(repo, "ls-files", "-s", "a.txt")
    data = apply_json(repo, plan(tmp_path), "--no-check", "-y")
    assert data["_rc"] == 1 and json_codes(data) == ["ERR_DIRTY_WORKTREE"], data
    assert git(repo, "ls-files", "-s", "a.txt") == staged and staged.startswith("100755")
    assert (repo / "a.txt").read_text() == "one\ntwo\n" and os.access(repo / "a.txt", os.X_OK)
    assert (repo / "src/c.txt").exists() and not (repo / "src/new").exists()


@pytest.mark.parametrize("plan", [_patch_plan, _edits_plan])
def test_staged_edit_reverted_in_the_work_tree_is_refused_and_kept(repo: Path, tmp_path: Path, plan: Any) -> None:
    """The work tree holds the tip's bytes again, the index the staged ones (what `git merge`
    refuses): the stat data, or the content of a racily clean entry, give it away."""
    (repo / "a.txt").write_text("one\nstaged\n")
    git(repo, "add", "a.txt")
    (repo / "a.txt").write_text("one\ntwo\n")
    before = snapshot(repo)
    data = apply_json(repo, plan(tmp_path), "--no-check", "-y")
    assert data["_rc"] == 1 and json_codes(data) == ["ERR_DIRTY_WORKTREE"], data
    after = snapshot(repo)
    assert after["files"] == before["files"] and after["index"] == before["index"]
    assert git(repo, "diff", "--cached", "--name-only").split() == ["a.txt"]


@pytest.mark.parametrize(
    ("plan", "config", "index_read"),
    [(_edits_plan, None, False), (_patch_plan, None, True), (_edits_plan, ("core.fileMode", "false"), True)],
    ids=["edits only", "creates a file", "core.fileMode=false"],
)
def test_land_reads_the_index_first_only_where_stat_data_cannot_show_a_staged_change(
    repo: Path, tmp_path: Path, plan: Any, config: tuple[str, str] | None, index_read: bool
) -> None:
    if config:
        git(repo, "config", *config)
    trace = tmp_path / "git-trace"
    data = apply_json(repo, plan(tmp_path), "--no-check", "-y", env={"GIT_TRACE": str(trace)})
    assert data["_rc"] == 0 and data["landed_by"] == "fast-forward", data
    assert _last_reflog(repo) == f"papayu: land {data['plan_id']}"
    commands = trace.read_text()
    assert "apply --index" in commands
    assert ("diff-index --cached" in commands) is index_read
    assert git(repo, "status", "--porcelain").strip() == ""


def test_untracked_symlink_where_the_plan_needs_a_directory_is_never_written_through(
    repo: Path, tmp_path: Path
) -> None:
    outside = tmp_path / "outside"
    outside.mkdir()
    (repo / "src/new").symlink_to(outside)
    data = apply_json(repo, _patch_plan(tmp_path), "--no-check", "-y")
    assert data["_rc"] == 1 and json_codes(data) == ["ERR_DIRTY_WORKTREE"], data
    assert list(outside.iterdir()) == [] and (repo / "src/new").is_symlink()
    assert (repo / "a.txt").read_text() == "one\ntwo\n"


def test_untracked_file_where_the_plan_needs_a_directory_is_kept(repo: Path, tmp_path: Path) -> None:
    (repo / "src/new").write_text("precious\n")
    data = apply_json(repo, _patch_plan(tmp_path), "--no-check", "-y")
    assert data["_rc"] == 1 and json_codes(data) == ["ERR_DIRTY_WORKTREE"], data
    assert (repo / "src/new").read_text() == "precious\n" and (repo / "a.txt").read_text() == "one\ntwo\n"


def _conflicting_branch(repo: Path) -> None:
    git(repo, "checkout", "-q", "-b", "other")
    (repo / "b.txt").write_text("theirs\n")
    git(repo, "commit", "-q", "-am", "theirs")
    git(repo, "checkout", "-q", "main")
    (repo / "b.txt").write_text("ours\n")
    git(repo, "commit", "-q", "-am", "ours")


def test_merge_in_progress_is_refused_and_the_plan_kept(repo: Path, tmp_path: Path) -> None:
    _conflicting_branch(repo)
    git(repo, "merge", "-q", "other", check=False)  # conflict: MERGE_HEAD exists
    assert (repo / ".git/MERGE_HEAD").exists()
    before = snapshot(repo)
    data = apply_json(repo, _patch_plan(tmp_path), "--no-check", "-y")
    assert data["_rc"] == 1 and json_codes(data) == ["ERR_OPERATION_IN_PROGRESS"], data
    assert "a merge is in progress" in data["errors"][0]["reason"]
    assert snapshot(repo)["files"] == before["files"] and snapshot(repo)["index"] == before["index"]
    git(repo, "merge", "--abort")
    plan_id = git(repo, "branch", "--list", "papayu/*", "--format=%(refname:short)").strip()[len("papayu/") :]
    assert plan_id, "the checked commit is kept for `land ID`"
    proc = papayu("land", plan_id, "--force", cwd=repo)  # --force: applied with --no-check (ERR_NOT_CHECKED)
    assert proc.returncode == 0, proc.stderr
    assert (repo / "a.txt").read_text() == "one\nTWO\n"


def test_branch_being_rebased_is_refused(repo: Path, tmp_path: Path) -> None:
    _conflicting_branch(repo)
    git(repo, "rebase", "other", check=False)  # stops on the conflict, HEAD detached
    assert (repo / ".git/rebase-merge/head-name").read_text().strip() == "refs/heads/main"
    tip = git(repo, "rev-parse", "main")
    data = apply_json(repo, _patch_plan(tmp_path), "--no-check", "-y", "--onto", "main")
    assert data["_rc"] == 1 and json_codes(data) == ["ERR_OPERATION_IN_PROGRESS"], data
    assert "main is being rebased" in data["errors"][0]["reason"]
    assert git(repo, "rev-parse", "main") == tip


def _git_during_apply(tmp_path: Path, action: str) -> dict[str, str]:
    """An environment whose `git` runs ``action`` (shell) before each `git apply --index`: the
    landing's own step, in the middle of the fast path. (Not a filter driver: landing runs none.)"""
    shim = tmp_path / "shim"
    shim.mkdir(exist_ok=True)
    real = subprocess.run(["sh", "-c", "command -v git"], capture_output=True, text=True).stdout.strip()
    script = f'#!/bin/sh\ncase " $* " in *" apply --index "*) {action};; esac\nexec {real} "$@"\n'
    (shim / "git").write_text(script)
    (shim / "git").chmod(0o755)
    return {"PATH": f"{shim}{os.pathsep}{os.environ['PATH']}"}


def test_branch_moved_during_the_fast_path_is_put_back(repo: Path, tmp_path: Path) -> None:
    """Someone moves the branch while git apply runs: the compare-and-swap fails, the apply is
    reversed, ERR_BRANCH_MOVED."""
    git(repo, "commit", "-q", "--allow-empty", "-m", "someone else's commit")
    moved = git(repo, "rev-parse", "HEAD").strip()
    git(repo, "reset", "-q", "--hard", "HEAD~1")
    env = _git_during_apply(tmp_path, f"git update-ref refs/heads/main {moved}")
    (repo / "b.txt").write_text("bee, edited\n")
    before = snapshot(repo)
    data = apply_json(repo, _patch_plan(tmp_path), "--no-check", "-y", env=env)
    assert data["_rc"] == 1 and json_codes(data) == ["ERR_BRANCH_MOVED"], data
    assert git(repo, "rev-parse", "main").strip() == moved
    assert snapshot(repo)["files"] == before["files"]
    assert git(repo, "status", "--porcelain") == " M b.txt\n"  # the moved-to commit has the same tree


def _slow_apply(tmp_path: Path) -> tuple[Path, dict[str, str]]:
    """A `git apply --index` that first touches the returned marker and takes 2 s: the landing's
    step is then running."""
    marker = tmp_path / "applying"
    return marker, _git_during_apply(tmp_path, f"touch {marker}; sleep 2")


def _wait_until_landing(proc: subprocess.Popen[str], marker: Path) -> None:
    deadline = time.monotonic() + 60
    while not marker.exists():
        assert proc.poll() is None and time.monotonic() < deadline, proc.communicate()
        time.sleep(0.02)


def test_kill_9_while_the_fast_path_runs_still_lands_completely(repo: Path, tmp_path: Path) -> None:
    """The apply and the CAS run as one child (like `git merge` did): killing papayu while git
    writes the files must end with the branch moved and index/working tree matching it."""
    marker, env = _slow_apply(tmp_path)
    (repo / "b.txt").write_text("bee, edited\n")
    proc = run_papayu_bg(["apply", str(_patch_plan(tmp_path)), "--no-check", "-y"], repo, env)
    _wait_until_landing(proc, marker)
    os.kill(proc.pid, signal.SIGKILL)
    proc.communicate()
    deadline = time.monotonic() + 30
    while (repo / ".git/index.lock").exists() or "papayu: land" not in _last_reflog(repo):
        assert time.monotonic() < deadline, git(repo, "status")
        time.sleep(0.1)
    assert git(repo, "status", "--porcelain") == " M b.txt\n"
    assert (repo / "a.txt").read_text() == "one\nTWO\n" and (repo / "src/new/d.txt").read_text() == "d\n"
    again = write_plan(tmp_path, [{"kind": "CREATE_FILE", "path": "next.txt", "content": "n\n"}], name="2.json")
    assert apply_json(repo, again, "--no-check")["_rc"] == 0


def test_ctrl_c_while_landing_completes_the_landing(repo: Path, tmp_path: Path) -> None:
    """Ctrl-C on a terminal signals the whole foreground process group: the landing step runs
    in its own session and papayu waits for it, so the branch and the files move together."""
    marker, env = _slow_apply(tmp_path)
    proc = subprocess.Popen(
        [sys.executable, "-m", "papayu_git", "apply", str(_patch_plan(tmp_path)), "--no-check", "-y"],
        cwd=repo,
        env={**os.environ, **env},
        text=True,
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        start_new_session=True,
    )  # a group of its own, like a shell job
    _wait_until_landing(proc, marker)
    os.killpg(proc.pid, signal.SIGINT)
    out, err = proc.communicate(timeout=60)
    assert proc.returncode == 0, err
    assert "that step was completed first" in err and "landed plan" in out
    assert "undo: git reset --keep ORIG_HEAD" in out
    assert _last_reflog(repo).startswith("papayu: land ")
    assert git(repo, "status", "--porcelain") == "" and (repo / "a.txt").read_text() == "one\nTWO\n"


def test_git_dir_of_reads_dot_git_dirs_and_files_and_linked_worktrees_point_back(tmp_path: Path) -> None:
    from papayu_git.git import git_dir_of, linked_worktree_dir

    repo = make_repo(tmp_path / "repo", {"README.md": "# r\n"})
    assert git_dir_of(repo) == repo / ".git"
    linked = tmp_path / "linked"
    git(repo, "worktree", "add", "-q", "-b", "side", str(linked))
    admin = git_dir_of(linked)
    assert admin is not None and admin.resolve() == (repo / ".git" / "worktrees" / "linked").resolve()
    assert linked_worktree_dir(admin) is not None and linked_worktree_dir(admin).resolve() == linked.resolve()
    (tmp_path / "rel").mkdir()
    (tmp_path / "rel" / ".git").write_text("gitdir: ../repo/.git\n")
    assert git_dir_of(tmp_path / "rel") == tmp_path / "rel" / "../repo/.git"
    assert git_dir_of(tmp_path) is None and linked_worktree_dir(tmp_path) is None
