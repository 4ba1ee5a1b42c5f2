"""Path rules for everything papayu writes or reads on a model's behalf (SPEC §2.3).

Pure string checks: no filesystem access. Symlinks and submodules are checked
against the base tree in validate.py.
"""

from __future__ import annotations

import re
from fnmatch import fnmatchcase
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


def _is_git_segment(segment: str) -> bool:
    # NTFS/HFS treat ".git.", ".git " and the 8.3 name "git~1" as ".git" (git's verify_path).
    folded = segment.casefold().rstrip(". ")
    return folded == ".git" or folded == "git~1"


def check_path(path: object, *, kind: str = "") -> str:
    """Return the normalised path or raise the ERR_PATH_* code of the first broken rule."""
    if not isinstance(path, str) or path == "":
        raise PapayuError("ERR_PATH_EMPTY", "path is empty", path="")
    shown = path if len(path) <= 80 else path[:77] + "..."
    shown = shown.encode("unicode_escape").decode("ascii") if not shown.isprintable() else shown
    if any(ord(c) < 32 or 127 <= ord(c) < 160 for c in path):
        raise PapayuError("ERR_PATH_CONTROL_CHAR", "path contains a NUL or control character", path=shown)
    if len(path) > MAX_PATH_LEN:
        raise PapayuError("ERR_PATH_TOO_LONG", f"path has {len(path)} characters (max {MAX_PATH_LEN})", path=shown)
    if path[0] in "/\\" or _DRIVE.match(path):
        raise PapayuError("ERR_PATH_ABSOLUTE", "path is absolute", path=shown)
    if path[0] == "~":
        raise PapayuError("ERR_PATH_HOME", "path starts with '~'", path=shown)
    if kind in ("CREATE_DIR", "DELETE_DIR") and path.endswith("/") and len(path) > 1:
        path = path[:-1]
    segments = _SEPARATORS.split(path)
    for segment in segments:
        if segment == "..":
            raise PapayuError("ERR_PATH_TRAVERSAL", "path has a '..' segment", path=shown)
        if segment in ("", "."):
            raise PapayuError("ERR_PATH_DOT_SEGMENT", "path has a '.' or empty segment", path=shown)
        if _is_git_segment(segment):
            raise PapayuError("ERR_PATH_GIT_DIR", "path is inside .git", path=shown)
    return "/".join(segments)


def _match(pattern_segments: list[str], path_segments: list[str]) -> bool:
    if not pattern_segments:
        return not path_segments
    head, rest = pattern_segments[0], pattern_segments[1:]
    if head == "**":
        return any(_match(rest, path_segments[i:]) for i in range(len(path_segments) + 1))
    return bool(path_segments) and fnmatchcase(path_segments[0], head) and _match(rest, path_segments[1:])


def matches_pattern(pattern: str, path: str) -> bool:
    """gitignore-like: a pattern without '/' matches the base name at any depth."""
    folded = path.casefold().split("/")
    pattern = pattern.casefold()
    if "/" not in pattern:
        return fnmatchcase(folded[-1], pattern)
    return _match(pattern.split("/"), folded)


def is_protected(path: str, patterns: Sequence[str] = DEFAULT_PROTECTED) -> bool:
    protected = False
    for pattern in patterns:
        negate = pattern.startswith("!")
        if matches_pattern(pattern[1:] if negate else pattern, path):
            protected = not negate
    return protected


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
