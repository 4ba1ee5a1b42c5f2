"""What a change reaches without a record: the signals that cost nothing (docs/DESIGN.md, "Fail
first"). A test file that is named after a changed module (`test_strutils.py` for
`strutils.py`), that names a changed function and imports its module, or, failing both, that
imports the module at all. Read from the tip's test files as text: no parse, no import, no
run. They only order the run; the whole suite judges it, so a signal that misses costs time.
"""

from __future__ import annotations

import re
from collections.abc import Callable, Iterable
from dataclasses import dataclass

from papayu_git.check.selection.changes import MODULE

Reader = Callable[[str], bytes | None]  # a path of the tip's tree -> its bytes (None: not a file)
# Names too common to say a test reads the function that has them.
COMMON = frozenset({"__init__", "__call__", "__repr__", "__str__", "__eq__", "__hash__", "get", "run", "main", "call"})
MIN_NAME = 3


@dataclass(frozen=True)
class Touched:
    """One changed file as the signals see it."""

    path: str
    units: frozenset[str] = frozenset()  # the functions it changed (qualified names), when Python

    @property
    def stem(self) -> str:
        name = self.path.rsplit("/", 1)[-1]
        stem = name.rsplit(".", 1)[0] if "." in name else name
        if stem == "__init__" and "/" in self.path:
            return self.path.rsplit("/", 2)[-2]  # a package's __init__ is the package
        return stem

    @property
    def dotted(self) -> str:
        """`src/pkg/mod.py` -> `pkg.mod` (a source root's name left out), or "" when not Python."""
        if not self.path.endswith(".py"):
            return ""
        parts = self.path[: -len(".py")].split("/")
        if parts[-1] == "__init__":
            parts = parts[:-1]
        if parts and parts[0] in ("src", "lib", "python"):
            parts = parts[1:]
        return ".".join(parts)

    def names(self) -> set[str]:
        """The changed functions' own names, those specific enough to say a test calls them."""
        leaves = {u.rsplit(".", 1)[-1] for u in self.units if u != MODULE}
        return {n for n in leaves if len(n) >= MIN_NAME and n not in COMMON}


def reached_files(touched: Iterable[Touched], test_files: Iterable[str], read: Reader) -> dict[str, str]:
    """The test files the changes reach by the signals, each with why."""
    files = sorted(set(test_files))
    out: dict[str, str] = {}
    texts: dict[str, str] = {}

    def text(path: str) -> str:
        if path not in texts:
            data = read(path)
            texts[path] = data.decode("utf-8", "replace") if data else ""
        return texts[path]

    for change in touched:
        found = _by_name(change, files)
        for path in files:
            if path in found:
                continue
            body = text(path)
            if not body or not _imports(change, body, package=True):
                continue
            named = [n for n in sorted(change.names()) if re.search(rf"\b{re.escape(n)}\b", body)]
            if named:
                found[path] = f"names {named[0]} and imports {change.dotted.split('.')[0] or change.stem}"
        if not found:  # nothing names it: every test file that imports the module
            for path in files:
                if _imports(change, text(path)):
                    found[path] = f"imports {change.dotted or change.stem}"
        for path, why in found.items():
            out.setdefault(path, f"{change.path}: {why}")
    return out


def _by_name(change: Touched, files: list[str]) -> dict[str, str]:
    """Test files named after the changed module: test_mod.py, mod_test.py, test_mod_*.py, tests/mod/…"""
    stem = change.stem.lstrip("_")
    if len(stem) < MIN_NAME:
        return {}
    out = {}
    for path in files:
        name = path.rsplit("/", 1)[-1].rsplit(".", 1)[0].lstrip("_")
        own = name in (f"test_{stem}", f"{stem}_test", f"test_{stem}s", f"tests_{stem}") or name.startswith(
            f"test_{stem}_"
        )
        if own or f"/{stem}/" in f"/{path}":
            out[path] = f"named after {change.stem}"
    return out


def _imports(change: Touched, body: str, *, package: bool = False) -> bool:
    """The text imports the changed module (``package``: or its top-level package), or names its
    file, for data and other languages."""
    if not body:
        return False
    if not change.dotted:
        return change.path.rsplit("/", 1)[-1] in body
    parts = change.dotted.split(".")
    if package and len(parts) > 1:
        return re.search(rf"^\s*(?:from|import)\s+{re.escape(parts[0])}\b", body, re.MULTILINE) is not None
    leaf = re.escape(parts[-1])
    parent = re.escape(".".join(parts[:-1]))
    patterns = [rf"^\s*(?:from|import)\s+{re.escape(change.dotted)}\b"]
    if parent:
        patterns.append(rf"^\s*from\s+{parent}\s+import\s+[^\n]*\b{leaf}\b")
    else:
        patterns.append(rf"^\s*(?:from|import)\s+{leaf}\b")
    return any(re.search(p, body, re.MULTILINE) for p in patterns)
