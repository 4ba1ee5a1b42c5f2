"""The project installed as a copy into its own environments (docs/DESIGN.md, "The check's
environment": a copy of the project in its environment).

tox builds the project and installs the result into each of its environments; `pip install .`
and nox's `session.install(".")` do the same. Such an environment holds the user's code as it
was at that build, not a link to the tree, so a check run there imports that copy and tests the
user's old code instead of the plan's: a false green. Rebuilding the copy for every check needs
the build backend and, for an isolated build, the network (tox offline: "a name did not
resolve"). So the copy is stood in for by its source: for each distribution of a virtualenv laid
over the check that was installed from the repository (its `direct_url.json` names a place
inside it: the root, `.tox/.tmp/package/…`, `dist/…`) and not as editable, the directories of the
checkout holding its top-level modules go first on the check's PYTHONPATH. The plan's modules
are imported; the copy's metadata (version, entry points) stays the installed one, which is
right as long as the packaging files are the tip's. A copy holding compiled modules cannot be
stood in for by source: it is said, with the setting that rebuilds (`papayu.check.reinstall`).
"""

from __future__ import annotations

import csv
import io
import json
import os
from dataclasses import dataclass
from pathlib import Path
from urllib.parse import unquote, urlparse

# Where a project keeps its import roots, looked at in this order (then the root's other
# directories, one level down).
_ROOTS = ("src", "", "lib", "python")
_COMPILED = (".so", ".pyd", ".dylib")
# The tree's files a package build reads: a plan changing one changes what a rebuild would install.
PACKAGING_FILES = frozenset({"pyproject.toml", "setup.py", "setup.cfg", "MANIFEST.in"})


@dataclass(frozen=True)
class Copy:
    """One distribution installed from the repository as a copy into a virtualenv."""

    venv: Path
    name: str  # "tomli 2.4.0"
    roots: tuple[str, ...]  # directories of the checkout (from its root, "" the root) holding its modules
    compiled: tuple[str, ...] = ()  # its top-level names holding compiled modules
    missing: tuple[str, ...] = ()  # its top-level names the checkout does not have


def virtualenvs(env_dirs: list[Path]) -> list[Path]:
    """The virtualenvs among the environment directories and one level inside them (`.tox/py`,
    `.nox/tests`: tox and nox keep one per environment)."""
    out = []
    for path in env_dirs:
        if (path / "pyvenv.cfg").is_file():
            out.append(path)
            continue
        try:
            children = sorted(path.iterdir())
        except OSError:
            continue
        out += [child for child in children if (child / "pyvenv.cfg").is_file() and not child.is_symlink()]
    return out


def copies(repo_root: Path, work: Path, venvs: list[Path]) -> list[Copy]:
    """The distributions of ``venvs`` installed from ``repo_root`` as copies, with where the
    checkout ``work`` has their modules."""
    out = []
    for venv in venvs:
        for dist in sorted(venv.glob("lib*/python*/site-packages/*.dist-info")):
            if _installed_from(dist, repo_root):
                out.append(_copy(venv, dist, work))
    return out


def _installed_from(dist: Path, repo_root: Path) -> bool:
    """Whether the distribution was installed from inside the repository, not as editable."""
    try:
        data = json.loads((dist / "direct_url.json").read_text(encoding="utf-8"))
    except (OSError, ValueError):
        return False
    if not isinstance(data, dict) or (data.get("dir_info") or {}).get("editable"):
        return False
    url = urlparse(str(data.get("url", "")))
    if url.scheme != "file":
        return False
    where = Path(unquote(url.path))
    root = repo_root.resolve()
    return where == root or root in where.parents


def _copy(venv: Path, dist: Path, work: Path) -> Copy:
    name = dist.name[: -len(".dist-info")].replace("-", " ", 1)
    tops: dict[str, bool] = {}  # top-level module name -> holds compiled code
    try:
        record = (dist / "RECORD").read_text(encoding="utf-8", errors="replace")
    except OSError:
        record = ""
    for row in csv.reader(io.StringIO(record)):
        path = row[0] if row else ""
        first = path.split("/", 1)[0]
        if not first or first in ("..", "__pycache__") or first.endswith((".dist-info", ".data", ".pth")):
            continue
        module = first.split(".", 1)[0] if "/" not in path else first
        tops[module] = tops.get(module, False) or path.endswith(_COMPILED)
    roots: list[str] = []
    missing = []
    for module in sorted(tops):
        where = _root_of(work, module)
        if where is None:
            missing.append(module)
        elif where not in roots:
            roots.append(where)
    compiled = tuple(m for m, c in sorted(tops.items()) if c)
    return Copy(venv, name, tuple(roots), compiled, tuple(missing))


def _root_of(work: Path, module: str) -> str | None:
    """The directory of the checkout (from its root) holding the module or package ``module``."""
    candidates = list(_ROOTS)
    try:
        candidates += sorted(
            p.name for p in work.iterdir() if p.is_dir() and not p.name.startswith(".") and p.name not in _ROOTS
        )
    except OSError:
        return None
    for rel in candidates:
        base = work / rel if rel else work
        if (base / module / "__init__.py").is_file() or (base / f"{module}.py").is_file():
            return rel
    return None


def python_path(copies_found: list[Copy], repo_root: str) -> list[str]:
    """The check's PYTHONPATH entries standing in for the copies (the checkout is at ``repo_root``
    in the check), in order, each once."""
    out: list[str] = []
    for copy in copies_found:
        if copy.compiled:
            continue
        for rel in copy.roots:
            entry = os.path.join(repo_root, rel) if rel else repo_root
            if entry not in out:
                out.append(entry)
    return out


def notes(copies_found: list[Copy], repo_root: Path, work: Path) -> list[str]:
    """What the check's log says of each copy, and of packaging files the checkout changes: a copy
    stood in for keeps the metadata (dependencies, entry points) of the build it came from."""
    out = []
    changed = [name for name in sorted(PACKAGING_FILES) if copies_found and _differs(repo_root / name, work / name)]
    if changed:
        out.append(
            f"the checkout's {', '.join(changed)} differ from your tree's, from which the environments' copies "
            "were built: their dependencies and entry points are not rebuilt; `git config papayu.check.reinstall "
            "true` has tox and nox rebuild and reinstall (needs the build backend and dependencies offline, or "
            "papayu.check.network)"
        )
    for copy in copies_found:
        venv = copy.venv.relative_to(repo_root) if repo_root in copy.venv.parents else copy.venv
        if copy.compiled:
            out.append(
                f"{venv} holds {copy.name} installed as a copy with compiled modules "
                f"({', '.join(copy.compiled)}): the check uses that copy, not the plan's code; "
                "`git config papayu.check.reinstall true` has tox and nox rebuild it (needs its build "
                "backend and dependencies offline, or papayu.check.network)"
            )
        elif copy.roots:
            roots = ", ".join(f"{r}/" if r else "the root" for r in copy.roots)
            out.append(
                f"{venv} holds {copy.name} installed as a copy of the tree: the check imports it from "
                f"the checkout ({roots}, first on PYTHONPATH), not from that copy"
            )
        if copy.missing:
            out.append(f"{venv}: {copy.name}'s {', '.join(copy.missing)} not found in the checkout")
    return out


def _differs(mine: Path, theirs: Path) -> bool:
    try:
        return mine.read_bytes() != theirs.read_bytes()
    except FileNotFoundError:
        return mine.exists() or theirs.exists()
    except OSError:
        return False
