"""package.json files and workspaces on the tip's tree, as npm, pnpm and yarn find them."""

from __future__ import annotations

import fnmatch
import json
import posixpath
import re
from typing import Any

from papayu_git.check.scripts.walk import Tree

MAX_PACKAGES = 200
MAX_GLOB_DEPTH = 6  # `**` in a workspace pattern


def scripts_of(tree: Tree | None, where: str) -> dict[str, Any] | None:
    manifest = manifest_of(tree, where)
    scripts = manifest.get("scripts") if manifest is not None else None
    return scripts if isinstance(scripts, dict) else None


def manifest_of(tree: Tree | None, where: str) -> dict[str, Any] | None:
    if tree is None:
        return None
    raw = tree.read_blob(posixpath.join(where, "package.json") if where else "package.json")
    try:
        data = json.loads(raw) if raw is not None else None
    except ValueError:
        return None
    return data if isinstance(data, dict) else None


def workspace_root(tree: Tree | None, where: str) -> str:
    """The nearest directory at or above ``where`` that declares workspaces (else the root)."""
    here = where
    while True:
        if _workspace_patterns(tree, here) is not None:
            return here
        if not here:
            return ""
        here = posixpath.dirname(here)


def _workspace_patterns(tree: Tree | None, where: str) -> list[str] | None:
    if tree is None:
        return None
    raw = tree.read_blob(posixpath.join(where, "pnpm-workspace.yaml") if where else "pnpm-workspace.yaml")
    if raw is not None:
        return _yaml_packages(raw.decode("utf-8", "replace"))
    manifest = manifest_of(tree, where) or {}
    patterns = manifest.get("workspaces")
    if isinstance(patterns, dict):
        patterns = patterns.get("packages")
    return [p for p in patterns if isinstance(p, str)] if isinstance(patterns, list) else None


def _yaml_packages(text: str) -> list[str]:
    """The `packages:` list of a pnpm-workspace.yaml (a block list of strings, or a flow list)."""
    out: list[str] = []
    inside = False
    for line in text.splitlines():
        stripped = line.split(" #", 1)[0].rstrip()
        if re.match(r"packages\s*:", stripped):
            flow = stripped.split(":", 1)[1].strip()
            if flow.startswith("["):
                return [p.strip().strip("'\"") for p in flow.strip("[]").split(",") if p.strip()]
            inside = True
        elif inside and re.match(r"\s+-\s*", stripped):
            out.append(re.sub(r"^\s+-\s*", "", stripped).strip().strip("'\""))
        elif inside and stripped and not stripped.startswith(" "):
            inside = False
    return out


def workspace_packages(tree: Tree | None, where: str) -> dict[str, str]:
    """Directory -> package name of every workspace package (the root's own package not included)."""
    if tree is None:
        return {}
    root = workspace_root(tree, where)
    patterns = _workspace_patterns(tree, root) or []
    keep = [p for p in patterns if not p.startswith("!")]
    drop = [p[1:] for p in patterns if p.startswith("!")]
    found: dict[str, str] = {}
    for pattern in keep:
        parts = [s for s in pattern.strip("/").split("/") if s and s != "."]
        if ".." in parts:
            continue  # a package outside the workspace's directory: not followed
        for rel in _expand(tree, root, parts, 0):
            path = posixpath.normpath(posixpath.join(root, rel)) if root else rel
            if path in found or path == root or any(fnmatch.fnmatchcase(rel, d.strip("/")) for d in drop):
                continue
            manifest = manifest_of(tree, path)
            if manifest is not None:
                found[path] = str(manifest.get("name") or "")
            if len(found) >= MAX_PACKAGES:
                return found
    return found


def _expand(tree: Tree, base: str, parts: list[str], depth: int) -> list[str]:
    if not parts:
        return [""]
    head, rest = parts[0], parts[1:]
    out: list[str] = []
    names = sorted(tree.names_in(base))
    dirs = [n for n in names if tree.entry_kind(posixpath.join(base, n) if base else n) == "dir"]
    if head == "**":
        out += _expand(tree, base, rest, depth)
        if depth < MAX_GLOB_DEPTH:
            for name in dirs:
                if name != "node_modules" and not name.startswith("."):
                    deeper = _expand(tree, posixpath.join(base, name) if base else name, parts, depth + 1)
                    out += [posixpath.join(name, r) if r else name for r in deeper]
        return out
    for name in dirs:
        if fnmatch.fnmatchcase(name, head) and name != "node_modules":
            deeper = _expand(tree, posixpath.join(base, name) if base else name, rest, depth + 1)
            out += [posixpath.join(name, r) if r else name for r in deeper]
    return out


def selects(selectors: list[str], directory: str, name: str, where: str) -> bool:
    """Whether a pnpm `--filter` or npm `-w` selects the package (what papayu cannot evaluate,
    such as `[origin/main]` or `...^`, selects every package)."""
    for raw in selectors:
        selector = raw.lstrip("!").replace("...", "").strip("^{}")
        if not selector or selector.startswith("["):
            return True
        if selector.startswith((".", "/")) or ("/" in selector and not selector.startswith("@")):
            path = posixpath.normpath(posixpath.join(where or ".", selector.lstrip("/")))
            if fnmatch.fnmatchcase(directory, path):
                return True
        elif fnmatch.fnmatchcase(name, selector):
            return True
    return False
