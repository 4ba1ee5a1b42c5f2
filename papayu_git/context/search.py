"""`search` context requests: `git grep` over the base commit.

The query is a fixed string (models send symbols, not regexes); `glob` limits the paths
(a glob without '/' matches at any depth, like .gitignore); `case_sensitive` defaults to true;
`max_results` defaults to 50 (schema: 1..500). Protected paths never appear in results.
"""

from __future__ import annotations

import re
from collections.abc import Sequence
from dataclasses import dataclass

from papayu_git.context.basetree import BaseTree
from papayu_git.context.blocks import PRIORITY_HIGH, BlockKind, ContextBlock
from papayu_git.git import run_git
from papayu_git.paths import is_protected
from papayu_git.secrets import mask

DEFAULT_MAX_RESULTS = 50
MAX_RESULTS_LIMIT = 500
MAX_LINE_CHARS = 300
MAX_GLOB_ALTERNATIVES = 32
_BRACES = re.compile(r"\{([^{}]*,[^{}]*)\}")


@dataclass(frozen=True)
class SearchQuery:
    query: str
    glob: str = ""
    case_sensitive: bool = True
    max_results: int = DEFAULT_MAX_RESULTS

    def key(self) -> tuple[str, str, str, bool, int]:
        return ("search", self.query, self.glob, self.case_sensitive, self.max_results)


def pathspec(glob: str) -> list[str]:
    """git pathspecs for a model's glob: `{a,b}` alternatives expanded (git globs have none)."""
    if not glob:
        return []
    specs = []
    for pattern in expand_braces(glob.lstrip("/"))[:MAX_GLOB_ALTERNATIVES]:
        specs.append(f":(glob){pattern}" if "/" in pattern else f":(glob)**/{pattern}")
    return specs


def expand_braces(pattern: str) -> list[str]:
    match = _BRACES.search(pattern)
    if not match:
        return [pattern]
    head, tail = pattern[: match.start()], pattern[match.end() :]
    return [x for alt in match.group(1).split(",") for x in expand_braces(f"{head}{alt}{tail}")]


def grep(tree: BaseTree, q: SearchQuery, protected: Sequence[str]) -> tuple[list[tuple[str, int, str]], str]:
    """(matches, error) — matches are (path, line, text) in git's order, at most max_results."""
    args = ["grep", "-n", "-z", "-I", "--no-color", "-F", f"--max-count={q.max_results}"]
    if not q.case_sensitive:
        args.append("-i")
    proc = run_git([*args, "-e", q.query, tree.base, "--", *pathspec(q.glob)], cwd=tree.repo_root, check=False)
    if proc.returncode not in (0, 1):
        return [], proc.stderr.strip().splitlines()[-1] if proc.stderr.strip() else f"git grep exited {proc.returncode}"
    prefix = tree.base + ":"
    matches: list[tuple[str, int, str]] = []
    for record in proc.stdout.split("\n"):
        parts = record.split("\0", 2)
        if len(parts) != 3 or not parts[1].isdigit():
            continue
        path = parts[0][len(prefix) :] if parts[0].startswith(prefix) else parts[0]
        if is_protected(path, protected):
            continue
        matches.append((path, int(parts[1]), parts[2]))
        if len(matches) >= q.max_results:
            break
    return matches, ""


def search_block(tree: BaseTree, q: SearchQuery, protected: Sequence[str]) -> ContextBlock:
    matches, error = grep(tree, q, protected)
    details = [f"glob={q.glob}"] if q.glob else []
    if not q.case_sensitive:
        details.append("case-insensitive")
    if error:
        body = f"search failed: {error}"
    elif not matches:
        body = "no matches in the base commit"
    else:
        body = "\n".join(f"{p}:{n}: {_clip(t)}" for p, n, t in matches)
    capped = " (limit reached)" if len(matches) >= q.max_results else ""
    details.append(f"{len(matches)} matches{capped}")
    return ContextBlock(BlockKind.SEARCH, q.query, mask(body), PRIORITY_HIGH, requested=True, detail=", ".join(details))


def _clip(line: str) -> str:
    line = line.rstrip("\r")
    return line if len(line) <= MAX_LINE_CHARS else line[:MAX_LINE_CHARS] + "…"
