"""The repository as papayu's everyday commands read it: where it is, its HEAD, branches, config
and objects, from git's own files and plumbing (docs/DESIGN.md, "Start-up and cost").

``open_repo`` returns a ``Repository`` for a work tree of the formats libgit2 and papayu both
know (SHA-1, no extension beyond worktreeConfig, not shared). It answers the part of
``pygit2.Repository``'s API that `apply`, `land` and the housekeeping every command does use
(paths, HEAD, references, config; objects through object_store.py), without importing pygit2
(~45 ms of each run). Anything else (``repo[oid]``, history walks, the check's index) opens the
repository through pygit2 on first use, once, and is answered by it.

Refs are read and written in refs.py.
"""

from __future__ import annotations

import os
import weakref
from pathlib import Path
from typing import TYPE_CHECKING, Any, NamedTuple, cast

from papayu_git import settings
from papayu_git.errors import PapayuError
from papayu_git.git import common_dir_of, git_dir_of, run_git, scrubbed_env
from papayu_git.object_store import CatFileStore
from papayu_git.refs import SYMBOLIC, read_raw_ref, resolve_ref

if TYPE_CHECKING:
    import pygit2

# Extensions (config `extensions.*`) with the values a Repository reads and writes correctly;
# a repository with any other goes to pygit2 (which refuses the ones libgit2 does not know).
_KNOWN_EXTENSIONS: dict[str, set[str] | None] = {"objectformat": {"sha1"}, "worktreeconfig": None, "noop": None}
_NOT_SHARED = frozenset({"", "false", "no", "off", "0", "umask"})  # core.sharedRepository, core.bare


class Reference(NamedTuple):
    """A ref as pygit2 shows it: ``target`` is an object id, or for a symbolic ref the name of
    the ref it points at."""

    name: str
    target: str
    symbolic: bool
    git_dir: Path

    def resolve(self) -> Reference:
        if not self.symbolic:
            return self
        oid = resolve_ref(self.git_dir, self.name)
        if oid is None:
            raise KeyError(self.target)
        return Reference(self.target, oid, False, self.git_dir)

    @property
    def shorthand(self) -> str:
        for prefix in ("refs/heads/", "refs/tags/", "refs/remotes/", "refs/"):
            if self.name.startswith(prefix):
                return self.name[len(prefix) :]
        return self.name


class References:
    """``repo.references``: lookups here; creating, deleting and listing through pygit2."""

    def __init__(self, repo: Repository) -> None:
        self._repo = repo

    def get(self, name: str) -> Reference | None:
        raw = read_raw_ref(self._repo.git_dir, name)
        if raw is None:
            return None
        symbolic = raw.startswith(SYMBOLIC)
        return Reference(name, raw[len(SYMBOLIC) :].strip() if symbolic else raw, symbolic, self._repo.git_dir)

    def __getitem__(self, name: str) -> Reference:
        found = self.get(name)
        if found is None:
            raise KeyError(name)
        return found

    def __contains__(self, name: str) -> bool:
        return self.get(name) is not None

    def __iter__(self) -> Any:
        return iter(self._repo.pygit2.references)

    def __getattr__(self, name: str) -> Any:
        if name.startswith("__"):
            raise AttributeError(name)
        return getattr(self._repo.pygit2.references, name)


class Config:
    """``repo.config``: values from the `git config --list` settings.py reads once per repository;
    anything else (typed getters, writes) through pygit2's."""

    def __init__(self, repo: Repository, workdir: str) -> None:
        self._repo, self._workdir = repo, workdir

    def get(self, key: str, default: str | None = None) -> str | None:
        value = settings.git_config_value(key, self._workdir)
        return default if value is None else value

    def __getitem__(self, key: str) -> str:
        value = settings.git_config_value(key, self._workdir)
        if value is None:
            raise KeyError(key)
        return value

    def __contains__(self, key: str) -> bool:
        return settings.git_config_value(key, self._workdir) is not None

    def __getattr__(self, name: str) -> Any:
        if name.startswith("__"):
            raise AttributeError(name)
        return getattr(self._repo.pygit2.config, name)


class Repository:
    """A work tree's repository (see the module's docstring); ``path`` and ``workdir`` end with a
    slash, as pygit2's do."""

    def __init__(self, git_dir: Path, workdir: Path) -> None:
        self.git_dir = git_dir
        self.path = f"{git_dir}/"
        self.workdir: str | None = f"{workdir}/"
        self.is_bare = False
        self.objects = CatFileStore(git_dir, common_dir_of(git_dir) / "objects", scrubbed_env())
        self.references = References(self)
        self.config = Config(self, str(workdir))
        self._pygit2: pygit2.Repository | None = None
        weakref.finalize(self, self.objects.close)

    @property
    def head_is_detached(self) -> bool:
        return not self._head_file().startswith(SYMBOLIC)

    @property
    def head_is_unborn(self) -> bool:
        return resolve_ref(self.git_dir, "HEAD") is None

    @property
    def head(self) -> Reference:
        """HEAD resolved (the branch's ref, or HEAD when detached); KeyError when unborn."""
        return self.references["HEAD"].resolve()

    @property
    def pygit2(self) -> pygit2.Repository:
        """The same repository opened through pygit2, for what this class does not answer."""
        if self._pygit2 is None:
            import pygit2  # only the commands that walk history, diff or build the check's trees

            self._pygit2 = pygit2.Repository(self.path)
        return self._pygit2

    def __getitem__(self, key: Any) -> Any:
        return self.pygit2[key]

    def __contains__(self, key: Any) -> bool:
        return key in self.pygit2

    def __getattr__(self, name: str) -> Any:
        if name.startswith("__") or name == "_pygit2":
            raise AttributeError(name)
        return getattr(self.pygit2, name)

    def _head_file(self) -> str:
        return read_raw_ref(self.git_dir, "HEAD") or ""


def discover(start: str) -> Repository | None:
    """The Repository of the work tree around ``start``; None where pygit2 must open it (a bare
    repository, a git directory, a format this module does not know) or git finds none."""
    key = os.path.abspath(start)
    paths = _discovered.get(key) or _found_plainly(key) or _found_by_git(start)
    if paths is None or not _plain_format(str(paths[1])):
        return None
    # Each command opens its repository more than once (its own start, then the work tree).
    _discovered[key] = _discovered[str(paths[1])] = paths
    return Repository(*paths)


_discovered: dict[str, tuple[Path, Path]] = {}


def open_repo(start: str | os.PathLike[str] | None = None) -> pygit2.Repository:
    """The repository around ``start``: a ``Repository``, which answers pygit2's API as
    papayu uses it without importing pygit2, wherever git plumbing serves (a work tree of a known
    format); else pygit2's own."""
    found = discover(str(start or os.getcwd()))
    if found is not None:
        return cast("pygit2.Repository", found)
    import pygit2

    path = pygit2.discover_repository(str(start or os.getcwd()))
    if path is None:
        raise PapayuError("ERR_NOT_A_GIT_REPO", f"{Path(start or os.getcwd()).resolve()} is not in a git repository")
    return pygit2.Repository(path)


def _found_plainly(start: str) -> tuple[Path, Path] | None:
    """(git directory, work tree) when the usual layout answers without a git process: the
    nearest `.git` directory or gitfile above ``start``, both ours, on the same file system, no
    ceiling set. Anything else is git's to decide (``_found_by_git``)."""
    if "GIT_CEILING_DIRECTORIES" in os.environ:
        return None
    here = Path(os.path.realpath(start))
    try:
        device = os.stat(here).st_dev
    except OSError:
        return None
    for top in (here, *here.parents):
        dotgit = top / ".git"
        try:
            info = os.stat(top)
            if info.st_dev != device or info.st_uid != os.geteuid() or (top / "HEAD").is_file():
                return None  # another file system, another owner (safe.directory), or a git directory
            if not os.path.lexists(dotgit):
                continue
        except OSError:
            return None
        git_dir = git_dir_of(top)
        try:
            if git_dir is None or not (git_dir / "HEAD").is_file() or os.stat(git_dir).st_uid != os.geteuid():
                return None
        except OSError:
            return None
        return (Path(os.path.realpath(git_dir)), top)
    return None


def _found_by_git(start: str) -> tuple[Path, Path] | None:
    try:
        proc = run_git(["rev-parse", "--path-format=absolute", "--git-dir", "--show-toplevel"], cwd=start, check=False)
    except OSError:  # no such directory: pygit2 says so as it always did
        return None
    lines = proc.stdout.splitlines()
    return (Path(lines[0]), Path(lines[1])) if proc.returncode == 0 and len(lines) == 2 else None


def _plain_format(workdir: str) -> bool:
    """A format this module reads and writes as git would, in the usual layout (no work tree
    set elsewhere, not bare, not shared). git reads no config of a repository it cannot handle:
    then there is no core.repositoryformatversion either."""
    if settings.git_config_value("core.repositoryFormatVersion", workdir) not in ("0", "1"):
        return False
    for key, value in settings.git_config_items("extensions.", workdir).items():
        allowed = _KNOWN_EXTENSIONS.get(key, set())
        if allowed is not None and value.lower() not in allowed:
            return False
    shared, bare, elsewhere = (
        settings.git_config_value(key, workdir) for key in ("core.sharedRepository", "core.bare", "core.worktree")
    )
    return (shared or "").lower() in _NOT_SHARED and (bare or "").lower() in _NOT_SHARED and elsewhere is None
