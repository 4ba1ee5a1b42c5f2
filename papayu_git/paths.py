"""Path rules for everything papayu writes or reads on a model's behalf (docs/DESIGN.md,
"The protocol and its validation").

Pure string checks: no filesystem access. Symlinks and submodules are checked
against the base tree in validate.py.
"""

from __future__ import annotations

import re
import unicodedata
from collections.abc import Sequence
from functools import lru_cache

from papayu_git import settings
from papayu_git.errors import PapayuError

MAX_PATH_LEN = 240

# Last matching pattern wins; "!" re-allows (gitignore-like). Never empty: user
# patterns from `papayu.protectedPaths` are added to these, they do not replace them.
# A pattern without '/' matches the base name at any depth; one with '/' is anchored at the
# root, so the credential files of tools that live in a directory start with '**/'.
DEFAULT_PROTECTED: tuple[str, ...] = (
    ".env",
    ".env.*",
    "!.env.example",
    ".envrc",
    "*.pem",
    "*.key",
    "*.p12",
    "*.pfx",
    "*.jks",
    "*.keystore",
    "id_rsa*",
    "id_ed25519*",
    "id_ecdsa*",
    "id_dsa*",
    "**/.ssh/**",
    "**/secrets/**",
    ".npmrc",
    ".pypirc",
    ".netrc",
    ".git-credentials",
    "credentials.json",
    "*.tfstate",
    "*.tfstate.*",
    "**/.aws/credentials",
    "**/.docker/config.json",
    "**/.kube/config",
)

_DRIVE = re.compile(r"^[A-Za-z]:")
_SEPARATORS = re.compile(r"[\\/]")
_CONTROL = re.compile("[\x00-\x1f\x7f-\x9f]")
# Only these ASCII spellings can name .git or a git dotfile on some file system (an 8.3 short
# name always has a '~'); a non-ASCII path is always checked in full.
_MAYBE_GIT = re.compile("git|mailmap|~", re.I)
# The common case in one regex: plain segments that start with a letter, digit or '_' cannot be
# '.', '..', '.git' or 'git~1', cannot be absolute, a drive or '~' (fast path, bench/validate_bench.py).
_PLAIN = re.compile(
    r"[A-Za-z0-9_][A-Za-z0-9_.+@=,-]*(?:/[A-Za-z0-9_][A-Za-z0-9_.+@=,-]*)*"
)  # cheap pre-filter: most paths never mention git
_SEGMENT_CODES = {
    "..": ("ERR_PATH_TRAVERSAL", "path has a '..' segment"),
    ".": ("ERR_PATH_DOT_SEGMENT", "path has a '.' or empty segment"),
    "": ("ERR_PATH_DOT_SEGMENT", "path has a '.' or empty segment"),
}
# Code points HFS+ ignores when it compares names: ".g\u200cit" opens ".git" on macOS.
_HFS_IGNORED = re.compile("[\u200c-\u200f\u202a-\u202e\u206a-\u206f\ufeff]")
# Invisible or direction-changing characters (format, line and paragraph separators) and lone
# surrogates: a name that shows as one path and is another, or cannot be written as UTF-8.
_INVISIBLE = frozenset({"Cf", "Zl", "Zp", "Cs"})
# The dotfiles git reads from the tree, and the first six characters of the 8.3 short name
# Windows derives from each when the plain one ("gitmod~1") is taken (as git's verify_path).
_GIT_DOTFILES = {"gitmodules": "gi7eba", "gitattributes": "gi7d29", "gitignore": "gi250a", "mailmap": "maba30"}
_DOTFILE_LITERALS = frozenset("." + name for name in _GIT_DOTFILES)
_SHORT_TAIL = re.compile("~[1-9][0-9]*")


def _hfs_name(segment: str) -> str:
    """How HFS+ compares a name with git's: ignorable code points dropped, case folded."""
    return (_HFS_IGNORED.sub("", segment) if not segment.isascii() else segment).lower()


def _ntfs_name(segment: str) -> str:
    """The file NTFS opens: ':' starts a stream ('.git::$INDEX_ALLOCATION' is the directory
    .git), trailing dots and spaces are dropped, case folded."""
    return segment.split(":", 1)[0].rstrip(". ").lower()


def _is_git_segment(segment: str) -> bool:
    # NTFS/HFS treat ".git.", ".git ", "git~1", ".git::$INDEX_ALLOCATION" and ".g\u200cit" as ".git".
    return _ntfs_name(segment) in (".git", "git~1") or _hfs_name(segment) == ".git"


def _is_short_name(name: str, dotfile: str, hashed: str) -> bool:
    """An 8.3 short name of ``.<dotfile>``: 'gitmod~1'..'gitmod~4', or the hashed form
    '<up to 6 characters of hashed>~<digits>' (exactly 8 characters)."""
    if len(name) != 8 or "~" not in name:
        return False
    if name[:6] == dotfile[:6] and name[6] == "~" and name[7] in "1234":
        return True
    tilde = name.index("~")
    return tilde <= 6 and hashed.startswith(name[:tilde]) and _SHORT_TAIL.fullmatch(name, tilde) is not None


def git_dotfile_alias(segment: str) -> str | None:
    """The git dotfile (".gitmodules", ...) a name stands for on HFS+ or NTFS when it is not
    literally that name; None otherwise."""
    if segment in _DOTFILE_LITERALS:
        return None
    hfs, ntfs = _hfs_name(segment), _ntfs_name(segment)
    for dotfile, hashed in _GIT_DOTFILES.items():
        if hfs == "." + dotfile or ntfs == "." + dotfile or _is_short_name(ntfs, dotfile, hashed):
            return "." + dotfile
    return None


def _segment_error(segment: str, maybe_git: bool) -> tuple[str, str] | None:
    bad = _SEGMENT_CODES.get(segment)
    if bad:
        return bad
    if maybe_git and _is_git_segment(segment):
        return "ERR_PATH_GIT_DIR", "path is inside .git"
    alias = git_dotfile_alias(segment) if maybe_git else None
    if alias:
        return "ERR_PATH_GIT_ALIAS", f"{segment!r} is {alias} on macOS or Windows"
    return None


def _invisible_char(path: str) -> str | None:
    for char in path:
        if char > "\x7f" and unicodedata.category(char) in _INVISIBLE:
            return f"U+{ord(char):04X}"
    return None


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
    maybe_git = not path.isascii() or _MAYBE_GIT.search(path) is not None
    for segment in segments:
        bad = _segment_error(segment, maybe_git)
        if bad:
            raise PapayuError(bad[0], bad[1], path=_shown(original))
    _check_characters(path, original)
    return "/".join(segments)


def _check_characters(path: str, original: str) -> None:
    """After the segment rules, so that a disguised .git is reported as .git."""
    if ":" in path:
        raise PapayuError("ERR_PATH_NTFS_STREAM", "a path segment contains ':'", path=_shown(original))
    invisible = None if path.isascii() else _invisible_char(path)
    if invisible:
        raise PapayuError(
            "ERR_PATH_INVISIBLE_CHAR", f"path contains the invisible character {invisible}", path=_shown(original)
        )


def fold_key(path: str) -> str:
    """One key for the names macOS and Windows store as one file: letter case, Unicode
    normalization (NFD 'café' is NFC 'café'), HFS+'s ignored code points and Windows' trailing
    dots and spaces do not count. ASCII paths pay one lower() and three substring tests."""
    if path.isascii():
        key = path.lower()
    else:
        key = unicodedata.normalize("NFC", _HFS_IGNORED.sub("", path)).casefold()
    if key.endswith((".", " ")) or "./" in key or " /" in key:
        key = "/".join(segment.rstrip(". ") for segment in key.split("/"))
    return key


_ANY_DEPTH = "(?:[^/]*/)*"  # '**': any number of segments, also none


def _glob_segment(segment: str) -> list[tuple[str, str]]:
    """fnmatch syntax for one path segment as (regex, text) pieces: '*' and '?' never cross '/';
    ``text`` is what a literal piece matches, "" for a wildcard or a bracket class."""
    out: list[tuple[str, str]] = []
    literal, i = "", 0
    while i < len(segment):
        c = segment[i]
        close = segment.find("]", i + 2) if c == "[" else -1
        if c not in "*?" and close < 0:
            literal += c  # escaped as one run: re.escape works character by character
            i += 1
            continue
        if literal:
            out.append((re.escape(literal), literal))
            literal = ""
        if c == "*":
            out.append(("[^/]*", ""))
        elif c == "?":
            out.append(("[^/]", ""))
        else:
            body = segment[i + 1 : close]
            body = "^" + body[1:] if body.startswith("!") else body
            out.append(("[" + body.replace("\\", "\\\\") + "]", ""))
            i = close
        i += 1
    return [*out, (re.escape(literal), literal)] if literal else out


def _pattern_pieces(pattern: str) -> list[tuple[str, str]]:
    """gitignore-like: a pattern without '/' matches the base name at any depth; '**' is any
    number of segments (also none). Each segment ends in '/': the regex runs on the case-folded
    path plus a final '/'."""
    segments = pattern.casefold().split("/")
    if len(segments) == 1:
        segments = ["**", segments[0]]
    pieces: list[tuple[str, str]] = []
    for segment in segments:
        pieces += [(_ANY_DEPTH, "")] if segment == "**" else [*_glob_segment(segment), ("/", "/")]
    return pieces


def pattern_regex(pattern: str) -> str:
    """The regex of one pattern (see _pattern_pieces), for fullmatch on ``path.casefold() + "/"``."""
    return "".join(regex for regex, _text in _pattern_pieces(pattern))


def _required(pattern: str) -> tuple[str, str]:
    """(prefix, text) from the literal runs of ``pattern``'s regex: every path it matches starts
    with the first run ("" where the pattern starts with a wildcard) and contains the longest."""
    runs = "".join(text or "\0" for _regex, text in _pattern_pieces(pattern)).split("\0")
    return runs[0], max(runs, key=len)


@lru_cache(maxsize=64)
def _requirements(patterns: tuple[str, ...]) -> tuple[tuple[str, str], ...]:
    """What a path must start with and contain for a pattern but the '!' ones to match it."""
    return tuple({_required(p) for p in patterns if not p.startswith("!")})


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
    any_pattern = _union([b for negate, bodies in runs if not negate for b in bodies])
    return any_pattern, tuple((negate, _union(bodies)) for negate, bodies in reversed(runs))


def _union(bodies: list[str]) -> re.Pattern[str]:
    """One regex for all bodies, their common 'any depth' prefix written once: re does not
    factor alternations itself, and trying each body from every segment is 4x slower."""
    tails = [b[len(_ANY_DEPTH) :] for b in bodies if b.startswith(_ANY_DEPTH)]
    rest = [b for b in bodies if not b.startswith(_ANY_DEPTH)]
    parts = ([_ANY_DEPTH + "(?:" + "|".join(tails) + ")"] if tails else []) + rest
    return re.compile("(?:" + "|".join(parts) + ")" if parts else "(?!)")


def is_protected(path: str, patterns: Sequence[str] = DEFAULT_PROTECTED) -> bool:
    """Also true when the name Windows opens is protected: it drops the trailing dots and
    spaces of each segment ('.env ' and 'k.pem.' are '.env' and 'k.pem')."""
    if _matches_protected(path, patterns):
        return True
    if path.endswith((".", " ")) or "./" in path or " /" in path:
        return _matches_protected("/".join(s.rstrip(". ") for s in path.split("/")), patterns)
    return False


# Pattern lists whose regexes exist in this process (see _matches_protected).
_COMPILED: set[tuple[str, ...]] = set()


def _matches_protected(path: str, patterns: Sequence[str]) -> bool:
    folded = path.casefold() + "/"
    key = tuple(patterns)
    if key not in _COMPILED:
        # Compiling a list's regexes costs ~0.3-1.5 ms (five lists on every apply): while no
        # pattern's literal text is where a match needs it, none can match and none is compiled
        # (docs/DESIGN.md, "Start-up and cost"). Once compiled, the regexes decide alone.
        if not any(folded.startswith(prefix) and text in folded for prefix, text in _requirements(key)):
            return False
        _COMPILED.add(key)
    any_pattern, runs = _compiled(key)
    if not any_pattern.fullmatch(folded):
        return False  # the common case: one regex and done
    for negate, regex in runs:
        if regex.fullmatch(folded):
            return not negate
    return False


def protected_patterns(extra: Sequence[str] = ()) -> tuple[str, ...]:
    """The built-in denylist plus user patterns. User patterns can only add: a '!'
    pattern from the user is ignored, so the denylist is never weakened."""
    added = tuple(p.strip() for p in extra if p.strip() and not p.strip().startswith("!"))
    return DEFAULT_PROTECTED + added


def configured_protected(cwd: str | None = None) -> tuple[str, ...]:
    """Denylist for this repository: built-ins + `papayu.protectedPaths` / PAPAYU_PROTECTED_PATHS."""
    raw = settings.get("protected_paths", cwd)
    return protected_patterns(raw.replace("\n", ",").split(","))
