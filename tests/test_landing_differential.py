"""Differential test of the fast-forward (landing.py) against `git merge --ff-only`.

Random user states (edits, staged changes, mode changes, untracked and ignored files in the
way, skip-worktree / assume-unchanged edits, deletions...) are built twice from one template:
in one copy papayu lands a commit (fast path, or git merge when the fast path declines), in the
other plain `git merge --ff-only` does. Both copies must end alike: landed or refused, and the
same HEAD, index entries and working tree (every file, untracked and ignored included). So the
fast path never lands what git merge would refuse, never loses what git merge keeps, and a
refusal by the fast path writes nothing.
"""

from __future__ import annotations

import os
import shutil
import subprocess
from pathlib import Path

import pytest
from helpers import worktree_files
from hypothesis import HealthCheck, example, given, settings
from hypothesis import strategies as st

from papayu_git.errors import PapayuError
from papayu_git.git import papayu_dir
from papayu_git.landing import Target, land
from papayu_git.repository import open_repo

ENV = {
    **os.environ,
    "GIT_CONFIG_NOSYSTEM": "1",
    "GIT_AUTHOR_NAME": "T",
    "GIT_AUTHOR_EMAIL": "t@e",
    "GIT_COMMITTER_NAME": "T",
    "GIT_COMMITTER_EMAIL": "t@e",
    "LC_ALL": "C",
}


def sh(cwd: Path, *args: str, check: bool = True) -> subprocess.CompletedProcess[str]:
    proc = subprocess.run(args, cwd=cwd, capture_output=True, text=True, env=ENV)
    if check and proc.returncode != 0:
        raise AssertionError(f"{args} failed: {proc.stderr}")
    return proc


@pytest.fixture(scope="module", params=["whole-file patch", "git diff", "edits only"])
def template(request: pytest.FixtureRequest, tmp_path_factory: pytest.TempPathFactory) -> tuple[Path, str, str]:
    """The plan's commit changes text files only, so landing writes its own patch (land_patch.py);
    or a binary file and symlinks too, so landing pipes git's diff of the trees; or it creates no
    file, so landing leaves staged changes to the work tree's stat data and never reads the index
    before `git apply` (landing._staged_shown_by_stat)."""
    root = tmp_path_factory.mktemp("template") / "repo"
    root.mkdir()
    sh(root, "git", "init", "-q", "-b", "main")
    files = {
        "a/one.txt": "one\n",
        "a/two.sh": "#!/bin/sh\necho two\n",
        "b/three.txt": "three\n",
        "b/keep.txt": "keep\n",
        "b/mode.txt": "mode\n",
        "b/empty.txt": "",
        "d/crlf.txt": "x\r\ny\r\n",
        "d/no-newline.txt": "no newline",
        ".gitignore": "*.log\n",
    }
    for name, text in files.items():
        (root / name).parent.mkdir(parents=True, exist_ok=True)
        (root / name).write_bytes(text.encode())
    (root / "a/two.sh").chmod(0o755)
    (root / "link").symlink_to("a/one.txt")
    (root / "b/bin.dat").write_bytes(bytes(range(256)) * 4)
    sh(root, "git", "add", "-A")
    sh(root, "git", "commit", "-q", "-m", "old")
    old = sh(root, "git", "rev-parse", "HEAD").stdout.strip()
    (root / "a/one.txt").write_text("one, new\n")
    (root / "a/two.sh").write_text("#!/bin/sh\necho two, new\n")
    (root / "b/three.txt").unlink()
    (root / "b/empty.txt").unlink()
    (root / "b/mode.txt").chmod(0o755)
    if request.param != "edits only":
        (root / "c").mkdir()
        (root / "c/new.txt").write_text("new\n")
        (root / "c/empty.txt").write_text("")
        (root / "a/added.log").write_text("force-added\n")
    (root / "d/crlf.txt").write_bytes(b"x\r\nz\r\n")
    (root / "d/no-newline.txt").write_bytes(b"still no newline\nat the end")
    if request.param == "git diff":
        (root / "b/bin.dat").write_bytes(bytes(range(255, -1, -1)) * 4)  # a binary patch
        (root / "link").unlink()
        (root / "link").symlink_to("b/keep.txt")  # a retargeted symlink
        (root / "c/new-link").symlink_to("../a/two.sh")
    sh(root, "git", "add", "-A")
    if request.param != "edits only":
        sh(root, "git", "add", "-f", "a/added.log")
    sh(root, "git", "commit", "-q", "-m", "new")
    new = sh(root, "git", "rev-parse", "HEAD").stdout.strip()
    sh(root, "git", "reset", "-q", "--hard", old)
    return root, old, new


def _mutate(repo: Path, names: list[str]) -> None:
    def write(path: str, text: str) -> None:
        if (repo / path).is_dir() or (not (repo / path).parent.is_dir() and (repo / path).parent.exists()):
            return  # an earlier mutation put a directory / file there
        (repo / path).parent.mkdir(parents=True, exist_ok=True)
        (repo / path).write_text(text)

    for name in sorted(names, key=lambda n: n == "stale_index_lock"):  # git commands need the lock
        if name == "edit_touched":
            write("a/one.txt", "one, mine\n")
        elif name == "edit_untouched":
            write("b/keep.txt", "keep, mine\n")
        elif name == "stage_untouched":
            write("b/keep.txt", "keep, staged\n")
            sh(repo, "git", "add", "b/keep.txt")
        elif name == "stage_touched":
            write("a/two.sh", "staged\n")
            sh(repo, "git", "add", "--sparse", "a/two.sh", check=False)  # may be skip-worktree
        elif name == "staged_mode_touched" and (repo / "a/one.txt").exists():
            (repo / "a/one.txt").chmod(0o755)
            sh(repo, "git", "add", "a/one.txt")
        elif name == "unstaged_mode_touched":
            (repo / "b/mode.txt").chmod(0o700)
        elif name == "untracked_at_created" and not (repo / "c").is_file() and not (repo / "c").is_symlink():
            write("c/new.txt", "untracked, mine\n")
        elif name == "ignored_at_created":
            write("a/added.log", "ignored, mine\n")
        elif name == "untracked_in_new_dir" and not (repo / "c").is_file() and not (repo / "c").is_symlink():
            write("c/other.txt", "other, mine\n")
        elif name == "delete_touched" and not (repo / "b/three.txt").is_dir():
            (repo / "b/three.txt").unlink(missing_ok=True)
        elif name == "delete_modified_touched" and not (repo / "a/one.txt").is_dir():
            (repo / "a/one.txt").unlink(missing_ok=True)
        elif name in ("skip_worktree", "assume_unchanged"):
            flag = "--skip-worktree" if name == "skip_worktree" else "--assume-unchanged"
            sh(repo, "git", "update-index", flag, "a/two.sh", check=False)
            write("a/two.sh", "hidden edit\n")
        elif name == "intent_to_add_created" and not (repo / "c").is_file() and not (repo / "c").is_symlink():
            write("c/new.txt", "intent\n")
            sh(repo, "git", "add", "-N", "c/new.txt")
        elif name == "file_where_dir_needed" and not (repo / "c").exists():
            write("c", "a file where the plan needs a directory\n")
        elif name == "symlink_where_dir_needed" and not (repo / "c").exists():
            os.symlink("b", repo / "c")
        elif name == "staged_then_reverted":
            if (repo / "a/one.txt").is_file():
                write("a/one.txt", "staged\n")
                sh(repo, "git", "add", "a/one.txt")
                write("a/one.txt", "one\n")
        elif name == "dir_at_touched" and (repo / "a/one.txt").is_file():
            (repo / "a/one.txt").unlink()
            write("a/one.txt/inside.txt", "a directory where a tracked file was\n")
        elif name == "touch_touched" and (repo / "a/two.sh").is_file():
            os.utime(repo / "a/two.sh", (1, 1))  # same content, other stat data
        elif name == "edit_binary":
            (repo / "b/bin.dat").write_bytes(b"\0mine")
        elif name == "retarget_link" and (repo / "link").is_symlink():
            (repo / "link").unlink()
            (repo / "link").symlink_to("b/mode.txt")
        elif name == "stale_index_lock":
            write(".git/index.lock", "")
        elif name == "unstage_deletion":
            sh(repo, "git", "rm", "-q", "--cached", "b/three.txt", check=False)


def _state(repo: Path) -> dict[str, object]:
    return {
        "head": sh(repo, "git", "rev-parse", "HEAD").stdout,
        "index": sh(repo, "git", "ls-files", "-s", "-v").stdout,
        "files": worktree_files(repo),
    }


MUTATIONS = [
    "edit_touched",
    "edit_untouched",
    "stage_untouched",
    "stage_touched",
    "staged_mode_touched",
    "unstaged_mode_touched",
    "untracked_at_created",
    "ignored_at_created",
    "untracked_in_new_dir",
    "delete_touched",
    "delete_modified_touched",
    "skip_worktree",
    "assume_unchanged",
    "intent_to_add_created",
    "file_where_dir_needed",
    "symlink_where_dir_needed",
    "staged_then_reverted",
    "unstage_deletion",
    "dir_at_touched",
    "stale_index_lock",
    "edit_binary",
    "retarget_link",
    "touch_touched",
]


@settings(max_examples=60, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture])
@given(names=st.lists(st.sampled_from(MUTATIONS), max_size=4, unique=True))
@example(names=[])
@example(names=["edit_untouched", "stage_untouched", "untracked_in_new_dir"])
@example(names=["staged_mode_touched"])  # the work tree's executable bit shows it
@example(names=["staged_then_reverted"])  # same content as the tip: the stat data show it
@example(names=["stage_touched", "skip_worktree"])
@example(names=["assume_unchanged"])
def test_fast_path_ends_exactly_like_git_merge(
    template: tuple[Path, str, str], tmp_path: Path, names: list[str]
) -> None:
    root, old, new = template
    work = tmp_path / "-".join(names or ["clean"])
    shutil.rmtree(work, ignore_errors=True)  # hypothesis replays an example in the same tmp_path
    ours, theirs = work / "ours", work / "theirs"
    for copy in (ours, theirs):
        shutil.copytree(root, copy, symlinks=True)
        sh(copy, "git", "update-index", "-q", "--refresh")  # new inodes: as after a checkout
        _mutate(copy, names)
    repo = open_repo(ours)
    try:
        land(repo, papayu_dir(repo), Target("main", "refs/heads/main", old), new, "t")
        landed_ours = True
    except PapayuError as exc:
        assert exc.code in ("ERR_DIRTY_WORKTREE", "ERR_GIT_COMMAND"), exc.format()
        assert "could not be undone" not in exc.reason, exc.format()
        landed_ours = False
    merge = sh(theirs, "git", "merge", "--ff-only", "--no-overwrite-ignore", "--no-stat", "-q", new, check=False)
    assert landed_ours == (merge.returncode == 0), (names, merge.stderr)
    assert _state(ours) == _state(theirs), names
    if set(names) <= {"edit_untouched", "stage_untouched", "untracked_in_new_dir"}:
        # nothing in the way: this must have been the fast path, not git merge
        assert sh(ours, "git", "reflog", "-1", "--format=%gs").stdout.strip() == "papayu: land t"
    shutil.rmtree(work)
