"""Path rules for everything papayu writes or reads on a model's behalf (SPEC §2.3).

Pure string checks: no filesystem access. Symlinks and submodules are checked
against the base tree in validate.py.
"""

from __future__ import annotations

import re
from functools import lru_cache
from typing import Sequence

from papayu_git.errors import PapayuError

MAX_PATH_LEN = 240

# Last matching pattern wins; "!" re-allows (gitignore-like). Never empty: user
# patterns from `papayu.protectedPaths` are added to these, they do not replace them.
DEFAULT_PROTECTED: tuple[str, ...] = (
    ".env", ".env.*", "!.env.example", "*.pem", "*.key", "*.p12", "id_rsa*", "**/secrets/**",
)

_DRIVE = re.compile(r"^[A-Za-z]:")
_SEPARATORS = re.compile(r"[\\/]")
_CONTROL = re.compile("[\x00-\x1f\x7f-\x9f]")
_MAYBE_GIT = re.compile("git", re.I)
# The common case in one regex: plain segments that start with a letter, digit or '_' cannot be
# '.', '..', '.git' or 'git~1', cannot be absolute, a drive or '~' (fast path, bench/validate_bench.py).
_PLAIN = re.compile(r"[A-Za-z0-9_][A-Za-z0-9_.+@=,-]*(?:/[A-Za-z0-9_][A-Za-z0-9_.+@=,-]*)*")   # cheap pre-filter: most paths never mention git
_SEGMENT_CODES = {
    "..": ("ERR_PATH_TRAVERSAL", "path has a '..' segment"),
    ".": ("ERR_PATH_DOT_SEGMENT", "path has a '.' or empty segment"),
    "": ("ERR_PATH_DOT_SEGMENT", "path has a '.' or empty segment"),
}


def _is_git_segment(segment: str) -> bool:
    # NTFS/HFS treat ".git.", ".git " and the 8.3 name "git~1" as ".git" (git's verify_path).
    folded = segment.casefold().rstrip(". ")
    return folded == ".git" or folded == "git~1"


def _shown(path: str) -> str:
    shown = path if len(path) <= 80 else path[:77] + "..."
    return shown if shown.isprintable() else shown.encode("unicode_escape").decode("ascii")


def _path_error(path: str) -> tuple[str, str] | None:
    """(code, reason) of the first broken rule, None when the path is fine."""
    if _CONTROL.search(path):
        return "ERR_PATH_CONTROL_CHAR", "path contains a NUL or control character"
    if len(path) > MAX_PATH_LEN:
        return "ERR_PATH_TOO_LONG", f"path has {len(path)} characters (max {MAX_PATH_LEN})"
    if path[0] in "/\\" or _DRIVE.match(path):
        return "ERR_PATH_ABSOLUTE", "path is absolute"
    if path[0] == "~":
        return "ERR_PATH_HOME", "path starts with '~'"
    return None


def check_path(path: object, *, kind: str = "") -> str:
    """Return the normalised path or raise the ERR_PATH_* code of the first broken rule."""
    if not isinstance(path, str) or path == "":
        raise PapayuError("ERR_PATH_EMPTY", "path is empty", path="")
    if len(path) <= MAX_PATH_LEN and _PLAIN.fullmatch(path):
        return path
    problem = _path_error(path)
    if problem:
        raise PapayuError(problem[0], problem[1], path=_shown(path))
    original = path
    if kind in ("CREATE_DIR", "DELETE_DIR") and path.endswith("/") and len(path) > 1:
        path = path[:-1]
    segments = _SEPARATORS.split(path)
    maybe_git = _MAYBE_GIT.search(path) is not None
    for segment in segments:
        bad = _SEGMENT_CODES.get(segment)
        if bad:
            raise PapayuError(bad[0], bad[1], path=_shown(original))
        if maybe_git and _is_git_segment(segment):
            raise PapayuError("ERR_PATH_GIT_DIR", "path is inside .git", path=_shown(original))
    return "/".join(segments)


def _glob_segment(segment: str) -> str:
    """fnmatch syntax for one path segment: '*' and '?' never cross '/'."""
    out, i = [], 0
    while i < len(segment):
        c = segment[i]
        close = segment.find("]", i + 2) if c == "[" else -1
        if c == "*":
            out.append("[^/]*")
        elif c == "?":
            out.append("[^/]")
        elif close > 0:
            body = segment[i + 1:close]
            body = "^" + body[1:] if body.startswith("!") else body
            out.append("[" + body.replace("\\", "\\\\") + "]")
            i = close
        else:
            out.append(re.escape(c))
        i += 1
    return "".join(out)


def pattern_regex(pattern: str) -> str:
    """gitignore-like: a pattern without '/' matches the base name at any depth; '**' is any
    number of segments (also none). The regex runs on the case-folded path plus a final '/'."""
    segments = pattern.casefold().split("/")
    if len(segments) == 1:
        segments = ["**", segments[0]]
    return "".join("(?:[^/]*/)*" if seg == "**" else _glob_segment(seg) + "/" for seg in segments)


@lru_cache(maxsize=64)
def _compiled(patterns: tuple[str, ...]) -> tuple[re.Pattern[str], tuple[tuple[bool, re.Pattern[str]], ...]]:
    """(any pattern, runs): runs of patterns with the same polarity merged into one regex,
    last run first (the last matching pattern wins, like .gitignore)."""
    runs: list[tuple[bool, list[str]]] = []
    for pattern in patterns:
        negate = pattern.startswith("!")
        body = pattern_regex(pattern[1:] if negate else pattern)
        if runs and runs[-1][0] == negate:
            runs[-1][1].append(body)
        else:
            runs.append((negate, [body]))
    any_pattern = re.compile("(?:" + "|".join(b for negate, bodies in runs if not negate for b in bodies) + ")")
    return any_pattern, tuple((negate, re.compile("(?:" + "|".join(bodies) + ")")) for negate, bodies in reversed(runs))


def matches_pattern(pattern: str, path: str) -> bool:
    return re.fullmatch(pattern_regex(pattern), path.casefold() + "/") is not None


def is_protected(path: str, patterns: Sequence[str] = DEFAULT_PROTECTED) -> bool:
    folded = path.casefold() + "/"
    any_pattern, runs = _compiled(tuple(patterns))
    if not any_pattern.fullmatch(folded):
        return False  # the common case: one regex and done
    for negate, regex in runs:
        if regex.fullmatch(folded):
            return not negate
    return False


def protected_patterns(extra: Sequence[str] = ()) -> tuple[str, ...]:
    """The built-in denylist plus user patterns. User patterns can only add: a '!'
    pattern from the user is ignored, so the denylist is never weakened (SPEC §2.3)."""
    added = tuple(p.strip() for p in extra if p.strip() and not p.strip().startswith("!"))
    return DEFAULT_PROTECTED + added


def configured_protected(cwd: str | None = None) -> tuple[str, ...]:
    """Denylist for this repository: built-ins + `papayu.protectedPaths` / PAPAYU_PROTECTED_PATHS."""
    from papayu_git import settings

    raw = settings.get("protected_paths", cwd)
    return protected_patterns(raw.replace("\n", ",").split(","))


def check_not_protected(path: str, patterns: Sequence[str] = DEFAULT_PROTECTED) -> None:
    if is_protected(path, patterns):
        raise PapayuError("ERR_PROTECTED_PATH", "protected path (secrets, keys, .env)", path=path)
