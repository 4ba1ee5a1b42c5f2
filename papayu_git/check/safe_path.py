"""Whether the check's Python keeps the working directory off sys.path (PYTHONSAFEPATH=1).

`python -m pytest` puts the working directory first on sys.path, so a plan that adds a top-level
`pytest/`, `pluggy/` or `argparse.py` replaces what runs its tests. With PYTHONSAFEPATH (Python
3.11's `-P`) it does not; but a flat layout (the project's own package at the root, imported from
there) then cannot find its code, or worse finds an installed old copy. So `auto` decides on the
tip's tree: on unless the tip has an importable module at its root or at a Python subproject's
(docs/DESIGN.md, "The check's trust boundary"). Decided on the tip, never on the plan's tree: a
plan cannot turn it off by adding a module.
"""

from __future__ import annotations

import os
from pathlib import Path
from typing import Protocol

from papayu_git import settings
from papayu_git.errors import PapayuError

MODES = ("auto", "true", "false")
# A directory holding one of these is a Python project the check may `cd` into.
PYTHON_MANIFESTS = ("pyproject.toml", "setup.py", "setup.cfg")
# Subprojects are looked for this deep (the root is 0), in this many directories at most.
SUBPROJECT_DEPTH = 2
MAX_DIRS = 256
# Top-level files their tools load by path (or by putting their directory on sys.path
# themselves), never by an import through the working directory.
TOOLING_MODULES = frozenset(
    {"setup", "conftest", "noxfile", "toxfile", "fabfile", "tasks", "dodo", "pavement", "hatch_build"}
)
# Packages that hold no code of the project's (a test runner finds a `tests` package itself).
TOOLING_PACKAGES = frozenset(
    {"tests", "test", "testing", "docs", "doc", "examples", "example", "benchmarks", "bench", "scripts", "tools", "ci"}
)


class Tree(Protocol):
    def entry_kind(self, path: str) -> str | None: ...
    def names_in(self, directory: str) -> list[str]: ...


def resolve(repo_root: Path, tip: Tree) -> bool:
    """`papayu.check.pythonSafePath` for a check resolved on ``tip``."""
    mode = settings.get("check_python_safe_path", str(repo_root)).strip().lower() or "auto"
    if mode not in MODES:
        raise PapayuError(
            "ERR_CONFIG_INVALID",
            f"papayu.check.pythonSafePath is {mode!r}",
            path="papayu.check.pythonSafePath",
            hint="Use auto, true or false.",
        )
    return mode == "true" or (mode == "auto" and not flat_modules(tip))


def flat_modules(tree: Tree) -> list[str]:
    """The project's own modules importable from the working directory: `NAME.py` files and
    `NAME/__init__.py` packages at the root and in every Python subproject (project_dirs),
    tooling aside. Namespace packages (a directory without `__init__.py`) do not count: every
    `docs/` would be one."""
    found = []
    for directory in project_dirs(tree):
        for name in tree.names_in(directory):
            path = _join(directory, name)
            stem, dot, ext = name.rpartition(".")
            if dot and ext == "py" and _own(stem, TOOLING_MODULES) and tree.entry_kind(path) in ("file", "link"):
                found.append(path)
            elif _own(name, TOOLING_PACKAGES) and tree.entry_kind(f"{path}/__init__.py") in ("file", "link"):
                found.append(f"{path}/")
    return found


def project_dirs(tree: Tree) -> list[str]:
    """The root ("") and the directories down to SUBPROJECT_DEPTH that hold a Python manifest,
    never under the root's examples/, docs/, tests/, scripts/ and the like (TOOLING_PACKAGES): a
    src-layout project with example projects beside it (click's examples/*/pyproject.toml) is not
    a flat layout."""
    found, level = [""], [""]
    for _ in range(SUBPROJECT_DEPTH):
        deeper = []
        for parent in level:
            for name in tree.names_in(parent):
                path = _join(parent, name)
                if name.startswith(".") or name == "node_modules" or tree.entry_kind(path) != "dir":
                    continue
                if not parent and name in TOOLING_PACKAGES:  # examples/demo/pyproject.toml is not the check's
                    continue
                deeper.append(path)
                if any(tree.entry_kind(f"{path}/{m}") for m in PYTHON_MANIFESTS):
                    found.append(path)
        level = deeper[:MAX_DIRS]
    return found


def importable_in_project(repo_root: Path, module: str) -> str | None:
    """Where the user's work tree has top-level ``module`` (a `.py` file or a directory, tooling
    included) at its root or a Python subproject's, relative; None when it has not."""
    tree = WorkTree(repo_root)
    for directory in project_dirs(tree):
        for candidate, kinds in ((f"{module}.py", ("file", "link")), (module, ("dir",))):
            path = _join(directory, candidate)
            if tree.entry_kind(path) in kinds:
                return path
    return None


class WorkTree:
    """The Tree protocol over a directory of the file system (the user's work tree)."""

    def __init__(self, root: Path) -> None:
        self.root = root

    def entry_kind(self, path: str) -> str | None:
        full = self.root / path
        if full.is_symlink():
            return "link"
        return "dir" if full.is_dir() else "file" if full.exists() else None

    def names_in(self, directory: str) -> list[str]:
        try:
            return sorted(os.listdir(self.root / directory))
        except OSError:
            return []


def _own(name: str, tooling: frozenset[str]) -> bool:
    return name.isidentifier() and not name.startswith("__") and name not in tooling


def _join(directory: str, name: str) -> str:
    return f"{directory}/{name}" if directory else name
