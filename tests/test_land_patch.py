"""The patch a fast-forward applies (land_patch.py): `git apply --index` turns the tip's files into
the plan's exactly, refuses a file that differs from the tip's in any way (stricter than a diff
with context), and whatever git alone can write as a patch is left to git's own diff."""

from __future__ import annotations

import subprocess
from pathlib import Path

from helpers import git, make_repo

from papayu_git.land_patch import whole_file_patch
from papayu_git.objects import GitTree, changed_entries, store_of
from papayu_git.repository import open_repo

OLD = {
    "edit.txt": b"one\ntwo\nthree\n",
    "crlf.txt": b"a\r\nb\r\n",
    "lone-cr.txt": b"a\rb\n",
    "no-newline.txt": b"last line",
    "gains-newline.txt": b"was open",
    "loses-newline.txt": b"was closed\n",
    "emptied.txt": b"gone soon\n",
    "filled.txt": b"",
    "deleted.txt": b"bye\n",
    "deleted-empty.txt": b"",
    "mode.sh": b"#!/bin/sh\n",
    "sub/dir/deep.txt": b"deep\n",
}
NEW = {
    **OLD,
    "edit.txt": b"one\n2\nthree\nfour\n",
    "crlf.txt": b"a\r\nB\r\n",
    "lone-cr.txt": b"a\rB\n",
    "no-newline.txt": b"new last line",
    "gains-newline.txt": b"was open\n",
    "loses-newline.txt": b"was closed",
    "emptied.txt": b"",
    "filled.txt": b"full\n",
    "created.txt": b"hello\n",
    "created-empty.txt": b"",
    "sub/dir/deep.txt": b"deeper\n",
    "sub/new/dir/file.txt": b"new dir\n",
}
del NEW["deleted.txt"], NEW["deleted-empty.txt"]


def commit_files(repo: Path, files: dict[str, bytes], executable: tuple[str, ...] = ()) -> str:
    git(repo, "rm", "-rq", "--cached", "--ignore-unmatch", ".")
    for path in repo.iterdir():
        if path.name != ".git":
            subprocess.run(["rm", "-rf", str(path)], check=True)
    for name, data in files.items():
        (repo / name).parent.mkdir(parents=True, exist_ok=True)
        (repo / name).write_bytes(data)
        (repo / name).chmod(0o755 if name in executable else 0o644)
    git(repo, "add", "-A")
    git(repo, "commit", "-qm", "files")
    return git(repo, "rev-parse", "HEAD").strip()


def patch_between(repo: Path, old: str, new: str) -> bytes | None:
    handle = open_repo(repo)
    changes = changed_entries(handle, GitTree.at(handle, old).tree, GitTree.at(handle, new).tree)
    assert changes is not None
    return whole_file_patch(store_of(handle), changes)


def apply_index(repo: Path, patch: bytes) -> subprocess.CompletedProcess[bytes]:
    return subprocess.run(
        ["git", "apply", "--index", "--whitespace=nowarn"], cwd=repo, input=patch, capture_output=True
    )


def test_the_patch_turns_the_tips_files_into_the_plans_exactly(tmp_path: Path) -> None:
    repo = make_repo(tmp_path / "repo")
    old = commit_files(repo, OLD)
    new = commit_files(repo, NEW, executable=("mode.sh",))
    git(repo, "reset", "-q", "--hard", old)
    patch = patch_between(repo, old, new)
    assert patch is not None
    proc = apply_index(repo, patch)
    assert proc.returncode == 0, proc.stderr
    assert git(repo, "write-tree").strip() == git(repo, "rev-parse", f"{new}^{{tree}}").strip()
    assert git(repo, "diff", "--name-only") == ""  # the work tree is the index
    for name, data in NEW.items():
        assert (repo / name).read_bytes() == data, name
    assert not (repo / "deleted.txt").exists() and (repo / "mode.sh").stat().st_mode & 0o111


def test_a_file_that_differs_from_the_tips_in_any_way_is_refused(tmp_path: Path) -> None:
    repo = make_repo(tmp_path / "repo")
    old = commit_files(repo, OLD)
    new = commit_files(repo, NEW)
    git(repo, "reset", "-q", "--hard", old)
    patch = patch_between(repo, old, new)
    assert patch is not None
    # A line added after the last one, staged: a diff with context would still apply.
    (repo / "edit.txt").write_bytes(OLD["edit.txt"] + b"mine\n")
    git(repo, "add", "edit.txt")
    proc = apply_index(repo, patch)
    assert proc.returncode != 0 and b"edit.txt" in proc.stderr
    assert (repo / "edit.txt").read_bytes() == OLD["edit.txt"] + b"mine\n"
    assert git(repo, "diff", "--cached", "--name-only") == "edit.txt\n"  # nothing else written


def test_binary_files_symlinks_and_quoted_paths_are_left_to_git(tmp_path: Path) -> None:
    repo = make_repo(tmp_path / "repo")
    for extra in ({"data.bin": b"\0\1\2"}, {"with space.txt": b"x\n"}, {'quote".txt': b"x\n"}):
        old = commit_files(repo, OLD)
        new = commit_files(repo, {**OLD, **extra})
        assert patch_between(repo, old, new) is None, extra
    old = commit_files(repo, OLD)
    (repo / "link").symlink_to("edit.txt")
    git(repo, "add", "link")
    git(repo, "commit", "-qm", "link")
    assert patch_between(repo, old, git(repo, "rev-parse", "HEAD").strip()) is None
