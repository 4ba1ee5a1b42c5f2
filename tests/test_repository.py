"""The repository without pygit2 (repository.py, object_store.py, objects.py): what `open_repo`
answers from git's files and plumbing must be what pygit2 answers, and the objects it writes must
be the ones pygit2 writes, byte for byte, and sound to `git fsck`."""

from __future__ import annotations

import subprocess
from pathlib import Path

import pygit2
import pytest
from helpers import git, make_repo

from papayu_git import settings
from papayu_git.errors import PapayuError
from papayu_git.object_store import MODE_FILE, Pygit2Store, read_tree, tree_body
from papayu_git.objects import (
    GitTree,
    TreeChanges,
    build_tree,
    changed_entries,
    create_commit,
    delete_branch,
    generated_branches,
    read_commit,
    set_branch,
    store_of,
)
from papayu_git.repository import Repository, open_repo

FILES = {
    "README.md": "# sample\n",
    "src/app.py": "print('app')\n",
    "src/lib/util.py": "def util():\n    return 1\n",
    "docs/a b.txt": "spaced\n",
}


def test_a_work_tree_opens_without_pygit2_and_answers_as_pygit2_does(tmp_path: Path) -> None:
    root = make_repo(tmp_path / "repo", FILES)
    git(root, "branch", "side")
    git(root, "pack-refs", "--all")  # main and side packed; then main moves: loose over packed
    (root / "README.md").write_text("# moved\n")
    git(root, "commit", "-qam", "moved")
    for start in (root, root / "src" / "lib"):
        repo, real = open_repo(start), pygit2.Repository(str(root))
        assert isinstance(repo, Repository)
        assert (repo.path, repo.workdir, repo.is_bare) == (real.path, real.workdir, real.is_bare)
        assert (repo.head_is_unborn, repo.head_is_detached) == (False, False)
        assert str(repo.head.target) == str(real.head.target) and repo.head.name == "refs/heads/main"
        assert repo.references["HEAD"].target == "refs/heads/main"
        for name in ("refs/heads/main", "refs/heads/side"):
            assert repo.references[name].resolve().target == str(real.references[name].resolve().target)
        assert repo.references.get("refs/heads/nothing") is None
        assert repo.references.get("refs/heads/../../config") is None  # never a path out of refs/
        assert repo.config["user.email"] == "test@example.com" and "core.hooksPath" not in repo.config
        assert str(repo[repo.head.target].tree.id) == str(real.head.peel(pygit2.Commit).tree.id)  # pygit2's


def test_detached_unborn_and_linked_worktrees_read_from_their_own_head(tmp_path: Path) -> None:
    root = make_repo(tmp_path / "repo", FILES)
    tip = git(root, "rev-parse", "HEAD").strip()
    git(root, "worktree", "add", "-q", "-b", "wt", str(tmp_path / "wt"))
    git(tmp_path / "wt", "checkout", "-q", "--detach")
    linked = open_repo(tmp_path / "wt")
    assert isinstance(linked, Repository)
    assert linked.path == pygit2.Repository(str(tmp_path / "wt")).path
    assert linked.head_is_detached and str(linked.head.target) == tip
    assert not open_repo(root).head_is_detached  # the main worktree's HEAD is its own
    git(root, "checkout", "-q", "--orphan", "fresh")
    unborn = open_repo(root)
    assert unborn.head_is_unborn and not unborn.head_is_detached
    with pytest.raises(KeyError):
        unborn.head  # noqa: B018  # pygit2 raises too


def test_what_git_plumbing_does_not_answer_is_opened_by_pygit2(tmp_path: Path) -> None:
    root = make_repo(tmp_path / "repo", FILES)
    git(tmp_path, "clone", "-q", "--bare", str(root), "bare.git")
    assert not isinstance(open_repo(tmp_path / "bare.git"), Repository)
    assert not isinstance(open_repo(root / ".git"), Repository)
    git(root, "config", "extensions.someday", "true")  # not a format Repository writes
    git(root, "config", "core.repositoryformatversion", "1")
    settings.forget_cached_config()
    with pytest.raises(pygit2.GitError):  # libgit2 refuses it, as it always did
        open_repo(root)


def changes() -> TreeChanges:
    return TreeChanges(
        writes={"src/app.py": b"print('new')\n", "new/deep/file.txt": b"new\n", "docs/a b.txt": b"spaced\n"},
        delete_files=frozenset({"src/lib/util.py"}),
        create_dirs=frozenset({"empty"}),
    )


def test_trees_and_commits_are_the_bytes_pygit2_writes_and_git_accepts(tmp_path: Path) -> None:
    root = make_repo(tmp_path / "repo", FILES)
    (root / "src/app.py").chmod(0o755)
    git(root, "commit", "-qam", "executable")
    repo, real = open_repo(root), pygit2.Repository(str(root))
    tip = git(root, "rev-parse", "HEAD").strip()
    ours = build_tree(GitTree.at(repo, tip), changes())
    theirs = build_tree(GitTree(real, real.head.peel(pygit2.Commit).tree), changes())
    assert ours == theirs
    listing = git(root, "ls-tree", "-r", ours)
    assert "100755 blob" in next(line for line in listing.splitlines() if line.endswith("src/app.py"))
    assert "empty/.gitkeep" in listing and "src/lib" not in listing  # an emptied directory is gone
    commit = create_commit(repo, ours, tip, "subject\n\nPapayu-Plan: x\n")
    shown = git(root, "cat-file", "commit", commit)
    assert shown.startswith(f"tree {ours}\nparent {tip}\nauthor Test Author <author@example.com> ")
    assert "\ncommitter Test Committer <committer@example.com> " in shown and shown.endswith(
        "\n\nsubject\n\nPapayu-Plan: x\n"
    )
    assert read_commit(repo, commit) == (ours, (tip,))
    assert git(root, "fsck", "--strict", "--no-dangling") == ""
    paths = [
        path
        for path, _old, _new in changed_entries(repo, GitTree.at(repo, tip).tree, GitTree.at(repo, commit).tree) or []
    ]
    assert paths == ["empty/.gitkeep", "new/deep/file.txt", "src/app.py", "src/lib/util.py"]


def hash_object(root: Path, data: bytes, *args: str) -> str:
    proc = subprocess.run(["git", "hash-object", "-w", "--stdin", *args], cwd=root, input=data, capture_output=True)
    return proc.stdout.decode().strip()


def test_an_unchanged_tree_keeps_its_id_and_odd_names_and_modes_survive(tmp_path: Path) -> None:
    root = make_repo(tmp_path / "repo", FILES)
    weird = "caf\udcc3.txt"  # not UTF-8: carried through as the bytes it is
    entry = b"100664 " + weird.encode("utf-8", "surrogateescape") + b"\0" + bytes.fromhex(hash_object(root, b"x\n"))
    odd_tree = hash_object(root, entry, "-t", "tree", "--literally")
    repo = open_repo(root)
    listing = read_tree(store_of(repo), odd_tree)
    assert listing[weird].filemode == MODE_FILE  # as libgit2 reads 100664
    theirs = read_tree(Pygit2Store(pygit2.Repository(str(root))), odd_tree)
    assert tree_body(listing.values()) == tree_body(theirs.values())
    base = GitTree.at(repo, git(root, "rev-parse", "HEAD").strip())
    same = TreeChanges(writes={"src/app.py": (root / "src/app.py").read_bytes()})
    assert build_tree(base, same) == base.tree.id


def test_generated_branches_are_written_as_git_writes_them_and_git_takes_over_the_odd_cases(tmp_path: Path) -> None:
    root = make_repo(tmp_path / "repo", FILES)
    repo = open_repo(root)
    tip = git(root, "rev-parse", "HEAD").strip()
    set_branch(repo, "p1", tip)
    assert generated_branches(repo) == {"p1": tip}
    assert git(root, "reflog", "show", "--format=%H %gs", "papayu/p1").split("\n")[0] == f"{tip} papayu: plan p1"
    git(root, "pack-refs", "--all")  # packed now: only git rewrites packed-refs
    assert delete_branch(repo, "p1") and not delete_branch(repo, "p1")
    assert git(root, "for-each-ref", "refs/heads/papayu/") == "" and not (root / ".git/refs/heads/papayu").exists()
    set_branch(repo, "p2", tip)
    (root / ".git/refs/heads/papayu/p2.lock").write_text("")  # another writer's, fresh
    with pytest.raises(PapayuError) as locked:
        delete_branch(repo, "p2")
    assert locked.value.code == "ERR_GIT_COMMAND" and generated_branches(repo) == {"p2": tip}
    (root / ".git/refs/heads/papayu/p2.lock").unlink()
    assert delete_branch(repo, "p2") and generated_branches(repo) == {}
    assert not (root / ".git/logs/refs/heads/papayu").exists()
    git(root, "branch", "papayu")  # a branch where papayu's directory would be: git's error
    with pytest.raises(PapayuError):
        set_branch(repo, "p3", tip)
    assert git(root, "fsck", "--strict", "--no-dangling") == ""


def test_a_generated_branch_is_deleted_without_an_identity(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    root = make_repo(tmp_path / "repo", FILES)
    repo = open_repo(root)
    set_branch(repo, "p1", git(root, "rev-parse", "HEAD").strip())
    for name in ("GIT_COMMITTER_NAME", "GIT_COMMITTER_EMAIL", "GIT_AUTHOR_NAME", "GIT_AUTHOR_EMAIL"):
        monkeypatch.delenv(name)
    (Path.home() / ".gitconfig").write_text("[init]\n\tdefaultBranch = main\n")
    settings.forget_cached_config()
    assert delete_branch(repo, "p1") and generated_branches(repo) == {}  # `drop` and `gc` need no user.name


def test_reading_ahead_along_a_plans_paths_asks_git_once_per_level(tmp_path: Path) -> None:
    root = make_repo(tmp_path / "repo", FILES)
    repo = open_repo(root)
    asked: list[int] = []
    store = store_of(repo)
    many = store.read_many
    store.read_many = lambda oids: (asked.append(len(oids)), many(oids))[1]  # type: ignore[method-assign]
    tip = git(root, "rev-parse", "HEAD").strip()
    base = GitTree.at(repo, tip, ["src/lib/util.py", "src/app.py", "nothing/here.txt", "README.md"])
    assert len(asked) <= 4  # root, src, src/lib, then the files
    store._pipes = lambda: pytest.fail("asked git again")  # type: ignore[attr-defined]
    assert base.read_blob("src/lib/util.py") == FILES["src/lib/util.py"].encode()
    assert base.read_blob("README.md") == FILES["README.md"].encode() and base.entry_kind("nothing/here.txt") is None
