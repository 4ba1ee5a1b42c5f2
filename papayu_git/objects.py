"""The git object model of a plan: trees, blobs, commits (with papayu's trailers) and the
generated `papayu/<id>` branches (docs/DESIGN.md, "The transaction and its guarantees").

A plan's trees and commit are built here from git objects read and written through the
repository's object store (object_store.py: `git cat-file --batch` and loose objects, or pygit2's
object database), so that apply and land never import pygit2 (docs/DESIGN.md, "Start-up and
cost"). The result commit is built from the tip's tree, rewriting only the subtrees on the path of a
change (~3 ms for 10 files in 50k). The user's index and working tree are never read or written
here; refs are touched last, one at a time (refs.py, or `git update-ref`).
"""

from __future__ import annotations

import os
import time
from collections import defaultdict
from collections.abc import Sequence
from pathlib import Path
from typing import TYPE_CHECKING, Any, NamedTuple, Protocol

from papayu_git.errors import PapayuError
from papayu_git.git import NO_HOOKS, common_dir, run_git
from papayu_git.object_store import (
    MODE_EXEC,
    MODE_FILE,
    MODE_GITLINK,
    MODE_LINK,
    MODE_TREE,
    CommitInfo,
    ObjectStore,
    Pygit2Store,
    TreeEntry,
    commit_info,
    read_paths,
    read_tree,
    write_tree,
)
from papayu_git.plans import BRANCH_PREFIX
from papayu_git.refs import resolve_ref, write_loose_ref
from papayu_git.repository import Repository
from papayu_git.secrets import safe_text

if TYPE_CHECKING:
    import pygit2

    class HasId(Protocol):
        """A tree as callers hold it: a pygit2.Tree, or a TreeRef."""

        @property
        def id(self) -> Any: ...


_KINDS = {MODE_FILE: "file", MODE_EXEC: "file", MODE_LINK: "link", MODE_TREE: "dir", MODE_GITLINK: "submodule"}
GITKEEP = ".gitkeep"


class TreeRef(NamedTuple):
    """A tree known by its id (``GitTree.at(...).tree``)."""

    id: str


def store_of(repo: pygit2.Repository) -> ObjectStore:
    return repo.objects if isinstance(repo, Repository) else Pygit2Store(repo)


def read_commit(repo: pygit2.Repository, oid: str) -> CommitInfo:
    """The tree and parents of commit ``oid`` (an annotated tag is peeled)."""
    return commit_info(store_of(repo), oid)


class GitTree:
    """`validate.TreeView` over a git tree (a pygit2.Tree, or a TreeRef), plus blob access for
    base checks."""

    def __init__(self, repo: pygit2.Repository, tree: HasId) -> None:
        self.repo = repo
        self.tree: Any = tree  # as given: a caller's pygit2.Tree keeps its API for that caller
        self.store = store_of(repo)
        self._under: dict[str, list[str]] = {}  # validation and the touched paths both ask

    @classmethod
    def at(cls, repo: pygit2.Repository, commit: str, paths: Sequence[str] = ()) -> GitTree:
        """The tree of ``commit``; what lies along ``paths`` (a plan's) is read ahead."""
        tree = cls(repo, TreeRef(read_commit(repo, commit).tree))
        read_paths(tree.store, tree.tree.id, list(paths))
        return tree

    def listing(self, oid: str) -> dict[str, TreeEntry]:
        return read_tree(self.store, oid)

    def entry(self, path: str) -> TreeEntry | None:
        entries = self.listing(str(self.tree.id))
        *dirs, name = path.split("/")
        for part in dirs:
            found = entries.get(part)
            if found is None or found.filemode != MODE_TREE:
                return None
            entries = self.listing(found.id)
        return entries.get(name)

    def entry_kind(self, path: str) -> str | None:
        entry = self.entry(path)
        return None if entry is None else _KINDS.get(entry.filemode, "file")

    def mode(self, path: str) -> int | None:
        entry = self.entry(path)
        return None if entry is None else entry.filemode

    def read_blob(self, path: str) -> bytes | None:
        """Bytes of a regular file at ``path``; None when absent or not a regular file."""
        entry = self.entry(path)
        if entry is None or entry.filemode not in (MODE_FILE, MODE_EXEC):
            return None
        return self.store.read(entry.id)[1]

    def names_in(self, directory: str) -> list[str]:
        """Entry names of ``directory`` ("" is the root); [] when it is not a directory."""
        if directory == "":
            return list(self.listing(str(self.tree.id)))
        entry = self.entry(directory)
        return [] if entry is None or entry.filemode != MODE_TREE else list(self.listing(entry.id))

    def files_under(self, path: str) -> list[str]:
        """Every blob/link path below directory ``path`` (DELETE_DIR: its protected files, its
        touched files)."""
        if path not in self._under:
            self._under[path] = self._walk(path)
        return self._under[path]

    def _walk(self, path: str) -> list[str]:
        entry = self.entry(path)
        if entry is None or entry.filemode != MODE_TREE:
            return []
        out: list[str] = []
        stack: list[tuple[str, str]] = [(path, entry.id)]
        while stack:
            prefix, oid = stack.pop()
            for child in self.listing(oid).values():
                child_path = f"{prefix}/{child.name}"
                if child.filemode == MODE_TREE:
                    stack.append((child_path, child.id))
                else:
                    out.append(child_path)
        return sorted(out)


class TreeChanges(NamedTuple):
    """What the result tree differs in: writes (path -> bytes), file and dir deletions, dirs to keep."""

    writes: dict[str, bytes]
    delete_files: frozenset[str] = frozenset()
    delete_dirs: frozenset[str] = frozenset()
    create_dirs: frozenset[str] = frozenset()


class _Edit:
    """Changes below one directory, grouped by the next path segment."""

    def __init__(self) -> None:
        self.leaves: dict[str, TreeEntry | None] = {}  # name -> new entry | None = remove
        self.children: dict[str, _Edit] = defaultdict(_Edit)
        self.keep = False  # CREATE_DIR: gets .gitkeep if it ends up empty

    def at(self, parts: list[str]) -> _Edit:
        node = self
        for part in parts:
            node = node.children[part]
        return node


def _edit_tree(store: ObjectStore, changes: TreeChanges, modes: dict[str, int]) -> _Edit:
    root = _Edit()
    for path, data in changes.writes.items():
        *dirs, name = path.split("/")
        root.at(dirs).leaves[name] = TreeEntry(name, store.write("blob", data), modes.get(path, MODE_FILE))
    for path in (*changes.delete_files, *changes.delete_dirs):
        *dirs, name = path.split("/")
        root.at(dirs).leaves[name] = None
    for path in changes.create_dirs:
        root.at(path.split("/")).keep = True
    return root


def _write_tree(base: GitTree, oid: str | None, edit: _Edit, *, is_root: bool) -> str | None:
    """The id of tree ``oid`` (None: a new directory) with ``edit`` made; None when it ends up
    empty and may not stay (git cannot store an empty directory: it disappears)."""
    before = base.listing(oid) if oid is not None else {}
    entries = dict(before)
    for name, leaf in edit.leaves.items():
        if leaf is None:
            entries.pop(name, None)
        else:
            entries[name] = leaf
    for name, child in edit.children.items():
        existing = entries.get(name)
        sub = _write_tree(
            base, existing.id if existing and existing.filemode == MODE_TREE else None, child, is_root=False
        )
        if sub is None:
            entries.pop(name, None)
        else:
            entries[name] = TreeEntry(name, sub, MODE_TREE)
    if not entries and not is_root:
        if not edit.keep:
            return None
        entries[GITKEEP] = TreeEntry(GITKEEP, base.store.write("blob", b""), MODE_FILE)
    if oid is not None and entries == before:
        return oid
    return write_tree(base.store, entries.values())


def build_tree(base: GitTree, changes: TreeChanges) -> str:
    """Write the result tree; only subtrees on the path of a change are rewritten.

    Mode bits of rewritten files are kept (an executable stays executable); untouched
    entries, symlinks included, are carried over by id.
    """
    modes = {p: m for p in changes.writes if (m := base.mode(p)) in (MODE_FILE, MODE_EXEC)}
    tree = _write_tree(base, str(base.tree.id), _edit_tree(base.store, changes, modes), is_root=True)
    assert tree is not None  # the root is written even when empty
    return tree


Change = tuple[str, TreeEntry | None, TreeEntry | None]  # path, before, after (None: absent)


def changed_entries(repo: pygit2.Repository, old: HasId, new: HasId) -> list[Change] | None:
    """The files that differ between two trees, each with its entry before and after, by path;
    only subtrees whose ids differ are read (~0.3 ms for 10 files in 50k, where a diff reads far
    more). None when a submodule is involved or a path turns from file into directory or back."""
    store = store_of(repo)
    out: list[Change] = []
    stack: list[tuple[str, str | None, str | None]] = [("", str(old.id), str(new.id))]
    while stack:
        prefix, a, b = stack.pop()
        left = read_tree(store, a) if a is not None else {}
        right = read_tree(store, b) if b is not None else {}
        for name in left.keys() | right.keys():
            x, y = left.get(name), right.get(name)
            if x == y:
                continue
            modes = {e.filemode for e in (x, y) if e is not None}
            if MODE_GITLINK in modes or (MODE_TREE in modes and len(modes) > 1):
                return None
            if MODE_TREE in modes:
                stack.append((f"{prefix}{name}/", x.id if x else None, y.id if y else None))
            else:
                out.append((prefix + name, x, y))
    return sorted(out, key=lambda change: change[0])


def changed_paths(repo: pygit2.Repository, old: HasId, new: HasId) -> list[str] | None:
    """Paths of the files that differ between two trees (see changed_entries)."""
    changes = changed_entries(repo, old, new)
    return None if changes is None else [path for path, _before, _after in changes]


def signature(repo: pygit2.Repository, role: str) -> str:
    """`Name <email> <seconds> <+hhmm>` as libgit2 writes it for now: GIT_<ROLE>_NAME/EMAIL env
    first, then user.name/user.email."""
    name = (os.environ.get(f"GIT_{role}_NAME") or _config(repo.config, "user.name") or "").strip()
    email = (os.environ.get(f"GIT_{role}_EMAIL") or _config(repo.config, "user.email") or "").strip()
    if not name or not email:
        raise PapayuError(
            "ERR_GIT_COMMAND",
            "git has no identity for the commit (user.name / user.email)",
            hint="Run: git config --global user.name 'You'; git config --global user.email you@x",
        )
    if any(c in name + email for c in "<>\n\0"):
        raise PapayuError(
            "ERR_GIT_COMMAND",
            f"git's identity for the commit has characters a commit cannot hold: {safe_text(name)} <{safe_text(email)}>",
            hint="Fix user.name / user.email (or GIT_AUTHOR_NAME, GIT_COMMITTER_EMAIL, ...)",
        )
    now = int(time.time())
    offset = time.localtime(now).tm_gmtoff // 60
    sign = "-" if offset < 0 else "+"
    return f"{name} <{email}> {now} {sign}{abs(offset) // 60:02d}{abs(offset) % 60:02d}"


def _config(config: Any, key: str) -> str | None:
    try:
        return str(config[key])
    except KeyError:
        return None


def commit_message(summary: str, plan_id: str, trace_id: str, trailers: Sequence[tuple[str, str]] = ()) -> str:
    """``summary`` plus papayu's trailers (plan, trace, then e.g. the check and its source),
    masked and with control characters escaped: `git log` prints them as they are, `pr` pushes them."""
    subject = safe_text(summary.strip(), multiline=True) or f"papayu plan {plan_id}"
    lines = [("Papayu-Plan", plan_id), ("Papayu-Trace", trace_id or plan_id), *trailers]
    body = "".join(f"{key}: {safe_text(' '.join(str(value).split()))}\n" for key, value in lines)
    return f"{subject}\n\n{body}"


def create_commit(repo: pygit2.Repository, tree_id: Any, parent: Any, message: str) -> str:
    """Write the commit object only; no ref moves (refs are touched last, by CAS)."""
    body = (
        f"tree {tree_id}\nparent {parent}\n"
        f"author {signature(repo, 'AUTHOR')}\ncommitter {signature(repo, 'COMMITTER')}\n\n{message}"
    )
    return store_of(repo).write("commit", body.encode())


def commit_of(repo: pygit2.Repository, oid: str) -> pygit2.Commit:
    import pygit2

    return repo[oid].peel(pygit2.Commit)


def branch_name(plan_id: str) -> str:
    """The generated branch of a plan, `papayu/<id>` (the one spelling of it, messages included)."""
    return BRANCH_PREFIX + plan_id


def branch_ref(plan_id: str) -> str:
    return f"refs/heads/{branch_name(plan_id)}"


def set_branch(repo: pygit2.Repository, plan_id: str, commit: str) -> None:
    _move_branch(repo, plan_id, commit)


def delete_branch(repo: pygit2.Repository, plan_id: str) -> bool:
    ref = branch_ref(plan_id)
    _clear_ref_lock(repo, ref)
    if resolve_ref(Path(repo.path), ref) is None:
        return False
    _move_branch(repo, plan_id, None)
    return True


def _move_branch(repo: pygit2.Repository, plan_id: str, commit: str | None) -> None:
    """``papayu/<plan_id>`` to ``commit`` (None: deleted): its loose file written here when that
    is all there is to it (refs.py), else by `git update-ref`, hooks off as pygit2 had them."""
    ref, message = branch_ref(plan_id), f"papayu: plan {plan_id}"
    ident = signature(repo, "COMMITTER") if commit is not None else ""  # a deletion logs nothing
    if isinstance(repo, Repository) and write_loose_ref(repo.git_dir, ref, commit, ident, message):
        return
    change = [ref, commit] if commit is not None else ["-d", ref]
    run_git([*NO_HOOKS, "update-ref", "-m", message, *change], cwd=repo.path)


def _clear_ref_lock(repo: pygit2.Repository, ref: str) -> None:
    """A killed ref update leaves `<ref>.lock`, which blocks every later update of that ref.
    Only called for refs we own (papayu/*) or under our land lock, whose owner is dead."""
    lock = Path(common_dir(repo)) / f"{ref}.lock"
    if lock.exists() and time.time() - lock.stat().st_mtime > 2.0:
        lock.unlink(missing_ok=True)


def generated_branches(repo: pygit2.Repository) -> dict[str, str]:
    """plan id -> commit of every `papayu/<id>` branch."""
    prefix = branch_ref("")
    out = run_git(["for-each-ref", "--format=%(refname)%00%(objectname)", prefix], cwd=repo.path).stdout
    return {name[len(prefix) :]: oid for name, _, oid in (line.partition("\0") for line in out.splitlines()) if oid}
