"""Paths in reports: runners name files absolutely, and the root differs between a sandboxed
and an unsandboxed check. (Reading the check's files is inside.py's, in the check.)"""

from __future__ import annotations


def relative_to_root(path: str, root: str) -> str:
    """``path`` from ``root`` when it is an absolute path under it."""
    base = root.rstrip("/")
    if base and path.startswith(base + "/"):
        return path[len(base) + 1 :]
    return path
