"""Hostile plans are rejected before any git object is written."""

from __future__ import annotations

import json
import os
from pathlib import Path

import pytest
from helpers import git, make_repo, object_ids, papayu, snapshot, write_plan


@pytest.fixture
def hostile_repo(tmp_path: Path) -> Path:
    outside = tmp_path / "outside"
    outside.mkdir()
    (outside / "victim.txt").write_text("do not touch\n")
    repo = make_repo(tmp_path / "repo", {"README.md": "x\n", "src/app.py": "print(1)\n"})
    os.symlink(str(outside), repo / "escape")
    os.symlink("src/app.py", repo / "app-link")
    sub = make_repo(tmp_path / "subsrc", {"lib.txt": "lib\n"})
    git(repo, "-c", "protocol.file.allow=always", "submodule", "add", "-q", str(sub), "vendor/lib")
    git(repo, "add", "-A")
    git(repo, "commit", "-q", "-m", "links and a submodule")
    return repo


ATTACKS = [
    ({"kind": "CREATE_FILE", "path": "escape/victim.txt", "content": "owned\n"}, "ERR_PATH_THROUGH_SYMLINK"),
    ({"kind": "CREATE_FILE", "path": "escape/new.txt", "content": "owned\n"}, "ERR_PATH_THROUGH_SYMLINK"),
    ({"kind": "UPDATE_FILE", "path": "app-link", "content": "owned\n"}, "ERR_PATH_THROUGH_SYMLINK"),
    ({"kind": "CREATE_FILE", "path": "vendor/lib/lib2.txt", "content": "x\n"}, "ERR_PATH_IN_SUBMODULE"),
    ({"kind": "DELETE_DIR", "path": "vendor/lib"}, "ERR_PATH_IN_SUBMODULE"),
    ({"kind": "CREATE_FILE", "path": ".git/hooks/post-merge", "content": "#!/bin/sh\n"}, "ERR_PATH_GIT_DIR"),
    ({"kind": "CREATE_FILE", "path": "src/.GIT/config", "content": "x\n"}, "ERR_PATH_GIT_DIR"),
    ({"kind": "CREATE_FILE", "path": "GIT~1/config", "content": "x\n"}, "ERR_PATH_GIT_DIR"),
    ({"kind": "CREATE_FILE", "path": ".git./config", "content": "x\n"}, "ERR_PATH_GIT_DIR"),
    ({"kind": "CREATE_FILE", "path": "vendor/lib/.git", "content": "gitdir: /tmp\n"}, "ERR_PATH_GIT_DIR"),
    ({"kind": "CREATE_FILE", "path": ".env", "content": "TOKEN=x\n"}, "ERR_PROTECTED_PATH"),
    ({"kind": "CREATE_FILE", "path": "deploy/secrets/prod.txt", "content": "x\n"}, "ERR_PROTECTED_PATH"),
    ({"kind": "CREATE_FILE", "path": "../outside/victim.txt", "content": "x\n"}, "ERR_PATH_TRAVERSAL"),
    ({"kind": "CREATE_FILE", "path": "/etc/passwd", "content": "x\n"}, "ERR_PATH_ABSOLUTE"),
]


@pytest.mark.parametrize("action, code", ATTACKS, ids=[a["path"] for a, _ in ATTACKS])
def test_attack_is_rejected_before_any_object_is_written(
    hostile_repo: Path, tmp_path: Path, action: dict, code: str
) -> None:
    before, objects = snapshot(hostile_repo), object_ids(hostile_repo)
    plan = write_plan(tmp_path, [action, {"kind": "CREATE_FILE", "path": "innocent.txt", "content": "i\n"}])
    proc = papayu("apply", str(plan), "--no-check", "-y", "--protocol", "1", "--json", cwd=hostile_repo)
    assert proc.returncode == 1, proc.stdout + proc.stderr
    codes = [e["code"] for e in json.loads(proc.stdout)["errors"]]
    assert code in codes
    assert object_ids(hostile_repo) == objects
    assert snapshot(hostile_repo) == before
    assert (tmp_path / "outside" / "victim.txt").read_text() == "do not touch\n"


def test_file_created_by_the_plan_cannot_be_written_through(hostile_repo: Path, tmp_path: Path) -> None:
    # A plan cannot create a symlink (CREATE_FILE writes a regular blob), and a path it creates
    # as a file cannot then be used as a directory to reach elsewhere.
    objects = object_ids(hostile_repo)
    plan = write_plan(
        tmp_path,
        [
            {"kind": "CREATE_FILE", "path": "trap", "content": "../outside"},
            {"kind": "CREATE_FILE", "path": "trap/victim.txt", "content": "owned\n"},
        ],
    )
    proc = papayu("apply", str(plan), "--no-check", "--json", cwd=hostile_repo)
    assert proc.returncode == 1
    assert [e["code"] for e in json.loads(proc.stdout)["errors"]] == ["ERR_PATH_COLLISION"]
    assert object_ids(hostile_repo) == objects


def test_created_file_is_a_regular_blob_never_a_link(tmp_path: Path) -> None:
    repo = make_repo(tmp_path / "r")
    plan = write_plan(tmp_path, [{"kind": "CREATE_FILE", "path": "looks-like-link", "content": "/etc/passwd"}])
    proc = papayu("apply", str(plan), "--no-check", cwd=repo)
    assert proc.returncode == 0, proc.stderr
    mode = git(repo, "ls-tree", "HEAD", "looks-like-link").split()[0]
    assert mode == "100644" and not (repo / "looks-like-link").is_symlink()
