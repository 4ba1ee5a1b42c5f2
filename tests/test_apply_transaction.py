"""The apply transaction through the real CLI: real repos, real worktrees, real check processes."""

from __future__ import annotations

import os
from pathlib import Path

import pytest
from helpers import (
    apply_json,
    assert_error,
    blob,
    checkout_pool,
    git,
    json_codes,
    make_repo,
    object_ids,
    papayu,
    patch_action,
    sha,
    snapshot,
    write_plan,
)


def test_create_file_lands_without_check(repo: Path, tmp_path: Path) -> None:
    before = git(repo, "rev-parse", "HEAD").strip()
    plan = write_plan(
        tmp_path, [{"kind": "CREATE_FILE", "path": "src/new.py", "content": "x = 1\n"}], summary="add src/new.py"
    )
    data = apply_json(repo, plan, "--no-check")
    assert data["_rc"] == 0, data
    assert data["state"] == "landed" and data["landed_by"] == "fast-forward"
    assert set(data["timings"]) >= {"validate", "build_commit", "land"}
    head = git(repo, "rev-parse", "HEAD").strip()
    assert git(repo, "rev-parse", "HEAD~1").strip() == before
    assert (repo / "src/new.py").read_text() == "x = 1\n"
    assert git(repo, "status", "--porcelain") == ""
    message = git(repo, "log", "-1", "--format=%B")
    assert message.startswith("add src/new.py\n")
    assert f"Papayu-Plan: {data['plan_id']}" in message and f"Papayu-Trace: {data['trace_id']}" in message
    assert git(repo, "log", "-1", "--format=%an <%ae>").strip() == "Test Author <author@example.com>"
    assert git(repo, "branch", "--list", "papayu/*") == ""
    assert head == data["commit"]


def test_green_check_lands_in_pooled_worktree(repo: Path, tmp_path: Path) -> None:
    plan = write_plan(tmp_path, [{"kind": "CREATE_FILE", "path": "ok.py", "content": "ok\n"}])
    data = apply_json(repo, plan, "--check", 'test -f ok.py && test -z "$PAPAYU_CHECK" && test -z "$GIT_DIR"')
    assert data["_rc"] == 0, data
    assert data["check"]["passed"] and data["check"]["source"] == "--check"
    assert (repo / "ok.py").read_text() == "ok\n"
    assert "check" in data["timings"]
    log = Path(data["check"]["log"])
    assert log.parent == repo / ".git/papayu/checks" and log.is_file()


def _dirty_user_state(repo: Path) -> None:
    (repo / ".gitignore").write_text("build/\n")
    git(repo, "add", ".gitignore")
    git(repo, "commit", "-q", "-m", "ignore build")
    (repo / "stashed.txt").write_text("stash me\n")
    git(repo, "add", "stashed.txt")
    git(repo, "stash", "-q")
    (repo / "README.md").write_text("# sample\nlocal edit\n")  # unstaged change
    (repo / "staged.txt").write_text("staged\n")
    git(repo, "add", "staged.txt")  # staged change
    (repo / "untracked.txt").write_text("untracked\n")
    (repo / "build").mkdir()
    (repo / "build" / "cache.bin").write_bytes(b"\x00\x01ignored")  # ignored file
    git(repo, "branch", "feature")


def test_red_check_rolls_back_with_user_state_byte_identical(repo: Path, tmp_path: Path) -> None:
    _dirty_user_state(repo)
    before = snapshot(repo)
    objects = object_ids(repo)
    plan = write_plan(tmp_path, [{"kind": "CREATE_FILE", "path": "src/bad.py", "content": "raise SystemExit(1)\n"}])
    data = apply_json(repo, plan, "--check", "echo the check fails loudly; exit 7")
    assert data["_rc"] == 1
    assert data["state"] == "rolled_back" and data["error"]["code"] == "ERR_CHECK_FAILED"
    assert data["check"]["exit_code"] == 7 and "the check fails loudly" in data["check"]["tail"]
    assert snapshot(repo) == before
    assert git(repo, "branch", "--list", "papayu/*") == ""
    # The commit was really built (and is now unreachable): the check ran against it.
    assert data["commit"] in object_ids(repo) - objects


def test_red_check_human_output_shows_tail_and_keep_failed_keeps_branch(repo: Path, tmp_path: Path) -> None:
    plan = write_plan(tmp_path, [{"kind": "CREATE_FILE", "path": "x.txt", "content": "x\n"}])
    proc = papayu(
        "apply", str(plan), "--check", "echo TAIL-LINE; false", "--keep-failed", cwd=repo, env={"PAPAYU_LOG": "1"}
    )
    assert proc.returncode == 1
    assert "APPLY_ROLLBACK" in proc.stderr and "reason=ERR_CHECK_FAILED" in proc.stderr
    assert "TAIL-LINE" in proc.stderr and "ERR_CHECK_FAILED" in proc.stderr
    assert "kept" in proc.stdout
    assert git(repo, "branch", "--list", "papayu/*").strip().startswith("papayu/")
    assert not (repo / "x.txt").exists()


def test_base_mismatch_refused_before_any_object_is_written(repo: Path, tmp_path: Path) -> None:
    diff = "--- a/README.md\n+++ b/README.md\n@@ -1 +1 @@\n-# sample\n+# changed\n"
    plan = write_plan(
        tmp_path, [{"kind": "PATCH_FILE", "path": "README.md", "patch": diff, "base_sha256": sha("something else\n")}]
    )
    objects, before = object_ids(repo), snapshot(repo)
    data = apply_json(repo, plan, "--no-check")
    assert data["_rc"] == 1 and json_codes(data) == ["ERR_BASE_MISMATCH"]
    assert object_ids(repo) == objects and snapshot(repo) == before


def test_plan_stays_valid_after_unrelated_commits(repo: Path, tmp_path: Path) -> None:
    old = (repo / "README.md").read_bytes()
    diff = "--- a/README.md\n+++ b/README.md\n@@ -1 +1 @@\n-# sample\n+# patched\n"
    plan = write_plan(tmp_path, [patch_action("README.md", old, diff)])
    (repo / "other.txt").write_text("unrelated\n")
    git(repo, "add", "other.txt")
    git(repo, "commit", "-q", "-m", "unrelated")
    (repo / "README.md").write_text("# sample\nuncommitted but untouched by git merge? no: same file\n")
    git(repo, "checkout", "README.md")  # the working tree may differ; bases are blobs at the tip
    data = apply_json(repo, plan, "--no-check")
    assert data["_rc"] == 0, data
    assert (repo / "README.md").read_text() == "# patched\n"
    assert (repo / "other.txt").exists()


@pytest.mark.parametrize(
    "action, code",
    [
        ({"kind": "CREATE_FILE", "path": "README.md", "content": "x\n"}, "ERR_CREATE_EXISTS"),
        ({"kind": "DELETE_FILE", "path": "missing.txt"}, "ERR_DELETE_MISSING"),
        ({"kind": "DELETE_DIR", "path": "nodir"}, "ERR_DELETE_MISSING"),
    ],
)
def test_actions_against_the_tip_tree_are_refused(repo: Path, tmp_path: Path, action: dict, code: str) -> None:
    plan = write_plan(tmp_path, [action])
    data = apply_json(repo, plan, "--no-check", "-y")
    assert data["_rc"] == 1 and json_codes(data) == [code]


def test_empty_create_dir_gets_gitkeep_and_delete_dir_is_recursive(tmp_path: Path) -> None:
    repo = make_repo(
        tmp_path / "r", {"README.md": "x\n", "old/a.txt": "a\n", "old/deep/b.txt": "b\n", "keep/c.txt": "c\n"}
    )
    plan = write_plan(
        tmp_path,
        [
            {"kind": "CREATE_DIR", "path": "empty/dir"},
            {"kind": "CREATE_DIR", "path": "keep"},
            {"kind": "DELETE_DIR", "path": "old"},
        ],
    )
    data = apply_json(repo, plan, "--no-check")
    assert data["_rc"] == 1 and json_codes(data) == ["ERR_DELETE_NOT_CONFIRMED"]
    assert (repo / "old/deep/b.txt").exists()
    data = apply_json(repo, plan, "--no-check", "-y")
    assert data["_rc"] == 0, data
    tree = git(repo, "ls-tree", "-r", "--name-only", "HEAD").split()
    assert tree == ["README.md", "empty/dir/.gitkeep", "keep/c.txt"]
    assert not (repo / "old").exists()


def test_mode_bits_and_symlinks_of_untouched_files_are_preserved(tmp_path: Path) -> None:
    repo = make_repo(
        tmp_path / "r", {"run.sh": "#!/bin/sh\necho run\n", "tool.sh": "#!/bin/sh\necho old\n", "lib/x.txt": "x\n"}
    )
    for name in ("run.sh", "tool.sh"):
        os.chmod(repo / name, 0o755)
    os.symlink("lib/x.txt", repo / "link")
    git(repo, "add", "-A")
    git(repo, "commit", "-q", "-m", "modes")
    diff = "--- a/tool.sh\n+++ b/tool.sh\n@@ -1,2 +1,2 @@\n #!/bin/sh\n-echo old\n+echo new\n"
    plan = write_plan(
        tmp_path,
        [
            patch_action("tool.sh", b"#!/bin/sh\necho old\n", diff),
            {"kind": "CREATE_FILE", "path": "lib/y.txt", "content": "y\n"},
        ],
    )
    data = apply_json(repo, plan, "--no-check")
    assert data["_rc"] == 0, data
    listing = git(repo, "ls-tree", "-r", "HEAD")
    modes = {line.split("\t")[1]: line.split()[0] for line in listing.splitlines()}
    assert (
        modes
        == {
            "run.sh": "100755",
            "tool.sh": "100755",
            "link": "120000",
            "lib/x.txt": "100644",
            "lib/y.txt": "100644",
            "README.md": "100644",
        }
        or modes.get("tool.sh") == "100755"
    )
    assert modes["run.sh"] == "100755" and modes["tool.sh"] == "100755" and modes["link"] == "120000"
    assert os.readlink(repo / "link") == "lib/x.txt"
    assert (repo / "tool.sh").read_text() == "#!/bin/sh\necho new\n"


def test_crlf_file_keeps_crlf_and_missing_final_newline_is_kept(tmp_path: Path) -> None:
    crlf = b"line one\r\nline two\r\nline three\r\n"
    bare = b"alpha\nbeta\ngamma"
    repo = make_repo(tmp_path / "r", {"win.txt": crlf, "bare.txt": bare})
    d1 = "--- a/win.txt\n+++ b/win.txt\n@@ -1,3 +1,3 @@\n line one\n-line two\n+line 2\n line three\n"
    d2 = "--- a/bare.txt\n+++ b/bare.txt\n@@ -1,3 +1,3 @@\n alpha\n-beta\n+BETA\n gamma\n\\ No newline at end of file\n"
    plan = write_plan(tmp_path, [patch_action("win.txt", crlf, d1), patch_action("bare.txt", bare, d2)])
    data = apply_json(repo, plan, "--no-check")
    assert data["_rc"] == 0, data
    assert blob(repo, "HEAD:win.txt") == b"line one\r\nline 2\r\nline three\r\n"
    assert blob(repo, "HEAD:bare.txt") == b"alpha\nBETA\ngamma"


def test_detached_head_is_refused_unless_onto(repo: Path, tmp_path: Path) -> None:
    git(repo, "checkout", "-q", "--detach")
    plan = write_plan(tmp_path, [{"kind": "CREATE_FILE", "path": "n.txt", "content": "n\n"}])
    data = apply_json(repo, plan, "--no-check")
    assert json_codes(data) == ["ERR_DETACHED_HEAD"]
    data = apply_json(repo, plan, "--no-check", "--onto", "main")
    assert data["_rc"] == 0 and data["landed_by"] == "update-ref"
    assert git(repo, "show", "main:n.txt") == "n\n"
    assert not (repo / "n.txt").exists()  # the detached checkout is not touched


def test_branch_checked_out_elsewhere_is_fast_forwarded_there(repo: Path, tmp_path: Path) -> None:
    git(repo, "branch", "side")
    other = tmp_path / "side-wt"
    git(repo, "worktree", "add", "-q", str(other), "side")
    plan = write_plan(tmp_path, [{"kind": "CREATE_FILE", "path": "s.txt", "content": "s\n"}])
    data = apply_json(repo, plan, "--no-check", "--onto", "side")
    assert data["_rc"] == 0 and data["landed_by"] == "fast-forward"
    assert (other / "s.txt").read_text() == "s\n" and git(other, "status", "--porcelain") == ""
    assert not (repo / "s.txt").exists()
    # the fast path (tests/test_landing.py) found the linked worktree's git dir
    assert git(other, "reflog", "-1", "--format=%gs", "side").strip() == f"papayu: land {data['plan_id']}"
    assert git(other, "rev-parse", "ORIG_HEAD") == git(repo, "rev-parse", "side~1")


def test_dirty_touched_file_refuses_landing_and_keeps_everything(repo: Path, tmp_path: Path) -> None:
    old = (repo / "README.md").read_bytes()
    (repo / "notes.txt").write_text("mine\n")
    git(repo, "add", "notes.txt")
    git(repo, "commit", "-q", "-m", "notes")
    (repo / "README.md").write_text("# sample\nmy uncommitted work\n")
    (repo / "notes.txt").write_text("mine, edited\n")
    diff = "--- a/README.md\n+++ b/README.md\n@@ -1 +1 @@\n-# sample\n+# patched\n"
    plan = write_plan(tmp_path, [patch_action("README.md", old, diff)])
    before = snapshot(repo)
    data = apply_json(repo, plan, "--no-check")
    assert data["_rc"] == 1 and json_codes(data) == ["ERR_DIRTY_WORKTREE"]
    assert "README.md" in data["errors"][0]["reason"]
    assert snapshot(repo)["files"] == before["files"] and snapshot(repo)["refs"].count("papayu/") == 1
    # Stash the conflicting file only: landing keeps the other uncommitted change.
    git(repo, "stash", "push", "-q", "--", "README.md")
    plan_id = next(p.stem for p in (repo / ".git/papayu/plans").glob("*.json"))
    proc = papayu("land", plan_id, "--force", cwd=repo)  # --force: applied with --no-check (ERR_NOT_CHECKED)
    assert proc.returncode == 0, proc.stderr
    assert (repo / "README.md").read_text() == "# patched\n"
    assert (repo / "notes.txt").read_text() == "mine, edited\n"
    assert git(repo, "branch", "--list", "papayu/*") == ""


def test_check_checkout_is_reused_and_pristine(repo: Path, tmp_path: Path) -> None:
    (repo / ".gitignore").write_text("cache/\n")
    git(repo, "add", ".gitignore")
    git(repo, "commit", "-q", "-m", "ignore")
    check = "mkdir -p cache && echo $(( $(cat cache/n 2>/dev/null || echo 0) + 1 )) > cache/n && cat cache/n"
    runs = []
    for i in range(3):
        plan = write_plan(tmp_path, [{"kind": "CREATE_FILE", "path": f"f{i}.txt", "content": "x\n"}], name=f"p{i}.json")
        data = apply_json(repo, plan, "--check", check)
        assert data["_rc"] == 0, data
        runs.append(data["check"]["tail"].splitlines()[-1])
    assert runs == ["1", "1", "1"]  # nothing a check left survives
    assert len([p for p in checkout_pool(repo).iterdir() if p.is_dir()]) == 1


def test_v1_update_file_is_checked_against_the_sha256_recorded_in_plan(repo: Path, tmp_path: Path) -> None:
    from papayu_git import plans

    pdir = repo / ".git/papayu"
    shown = sha((repo / "README.md").read_bytes())
    response = {
        "actions": [{"kind": "UPDATE_FILE", "path": "README.md", "content": "# rewritten\n"}],
        "summary": "rewrite",
    }
    plans.save(
        pdir,
        plans.StoredPlan(
            id="20260101-000000-000001", protocol=1, mode="apply", files={"README.md": shown}, response=response
        ),
    )
    (repo / "README.md").write_text("# sample\nchanged after planning\n")
    git(repo, "commit", "-q", "-am", "README moved on")
    proc = papayu("apply", "20260101-000000-000001", "--no-check", "--json", cwd=repo)
    assert_error(proc, "ERR_BASE_MISMATCH", first=True)
    git(repo, "reset", "-q", "--hard", "HEAD~1")
    proc = papayu("apply", "20260101-000000-000001", "--no-check", "--json", cwd=repo)
    assert proc.returncode == 0, proc.stdout
    assert (repo / "README.md").read_text() == "# rewritten\n"


def test_rebase_refuses_when_the_new_tip_changed_a_base(repo: Path, tmp_path: Path) -> None:
    old = (repo / "README.md").read_bytes()
    diff = "--- a/README.md\n+++ b/README.md\n@@ -1 +1 @@\n-# sample\n+# patched\n"
    plan = write_plan(tmp_path, [patch_action("README.md", old, diff)])
    git(repo, "checkout", "-q", "-b", "other")
    (repo / "README.md").write_text("# sample\nchanged by someone else\n")
    git(repo, "commit", "-q", "-am", "other change")
    moved = git(repo, "rev-parse", "HEAD").strip()
    git(repo, "checkout", "-q", "main")
    # The check moves main (as a concurrent push would) while papayu is checking.
    # (Unsandboxed: a sandboxed check cannot write the user's repository, which is the point of it.)
    data = apply_json(
        repo,
        plan,
        "--check",
        f"git -C {repo} update-ref refs/heads/main {moved}",
        "--rebase",
        env={"PAPAYU_CHECK_SANDBOX": "off"},
    )
    assert data["_rc"] == 1 and json_codes(data) == ["ERR_BASE_MISMATCH"]
    assert git(repo, "rev-parse", "main").strip() == moved
    assert git(repo, "branch", "--list", "papayu/*") == ""


@pytest.mark.parametrize("ignored", [False, True])
def test_untracked_or_ignored_file_at_a_created_path_is_never_overwritten(
    repo: Path, tmp_path: Path, ignored: bool
) -> None:
    if ignored:
        (repo / ".gitignore").write_text("local.cfg\n")
        git(repo, "add", ".gitignore")
        git(repo, "commit", "-q", "-m", "ignore")
    (repo / "local.cfg").write_text("precious local settings\n")
    plan = write_plan(tmp_path, [{"kind": "CREATE_FILE", "path": "local.cfg", "content": "from the plan\n"}])
    data = apply_json(repo, plan, "--no-check")
    assert data["_rc"] == 1 and json_codes(data) == ["ERR_DIRTY_WORKTREE"]
    assert "local.cfg" in data["errors"][0]["reason"]
    assert (repo / "local.cfg").read_text() == "precious local settings\n"
