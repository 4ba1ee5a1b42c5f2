"""The secrets a check could print, masked by value (docs/DESIGN.md, "Masking").

A check's output goes to the model (agent mode's run_tests) and into stored records, and a test
the model wrote can print any file the check sees, spelled so that no pattern recognises it:
`print(base64.b64encode(open("deploy/.env.production", "rb").read()))`. So the values of the
files that hold secrets are masked as values: the repository's protected files that exist (a
tracked one is in every checkout a check runs on; an ignored one is readable to an unsandboxed
check), the files `papayu.check.include` copies in, and the credential files papayu hides from
the check. Each value is masked as it is, reversed, in hex and in base64 at each of the three
byte alignments it can have inside a longer encoded text; each of those also spaced out
(`" ".join(value)`) or split over lines (`xxd -p`, two prints); a base64 block wrapped over
several lines (`base64 FILE`) is masked whole when it holds one.
"""

from __future__ import annotations

import base64
import os
import re
from collections.abc import Callable, Iterable
from pathlib import Path

from papayu_git.check.credential_files import HOME_CREDENTIALS, named_credentials
from papayu_git.check.includes import included
from papayu_git.git import run_git
from papayu_git.paths import configured_protected, is_protected
from papayu_git.secrets import MASK, literal_masker, literal_pattern, masker, placeholder, secret_name

MAX_FILE_BYTES = 256 * 1024  # a larger file is no credential file: its start is read
MAX_FILES = 200
MIN_VALUE = 6  # as secrets' environment values: shorter ones are ordinary words
MIN_SPELLING = 8  # an encoded piece shorter than this turns up by chance
WHOLE_FILE_BYTES = 4096  # a file this small is also masked whole, encoded

_ASSIGNED = re.compile(r"""^\s*(?:export\s+)?["']?([\w.\-]+)["']?\s*[:=]\s*(.*?)\s*,?\s*$""")
_TOKEN = re.compile(r"[A-Za-z0-9+/=_\-.~]{20,}")
_URL_PASSWORD = re.compile(r"://[^/\s:@]*:([^\s/@]+)@")
_NETRC_PASSWORD = re.compile(r"\b(?:password|passwd)\s+(\S+)")
_SPACES = re.compile(r"\s+")
_BASE64_BLOCK = re.compile(
    r"(?m)^[ \t]*[A-Za-z0-9+/_\-]{16,}={0,2}[ \t]*\r?$(?:\n[ \t]*[A-Za-z0-9+/_\-]+={0,2}[ \t]*\r?$)+"
)


def file_values(data: bytes, *, every_key: bool) -> set[str]:
    """The secret values in a file's text: assigned values (of every key in the repository's own
    secret files, of secret-looking keys elsewhere: a git config's name is no secret), URL and
    netrc passwords, the last field of a .pgpass line, and long opaque tokens (keys, PEM lines)."""
    text = data.decode("utf-8", "replace")
    values: set[str] = set()
    for line in text.splitlines():
        assigned = _ASSIGNED.match(line)
        if assigned and (every_key or secret_name(assigned.group(1))):
            values.add(assigned.group(2).strip("'\""))
        if line.count(":") == 4 and not line.lstrip().startswith("#"):
            values.add(line.rsplit(":", 1)[1])  # host:port:db:user:password
        values.update(_URL_PASSWORD.findall(line))
        values.update(_NETRC_PASSWORD.findall(line))
        values.update(t for t in _TOKEN.findall(line) if not t.startswith(("/", ".", "~")) and "://" not in t)
    return {v for v in values if len(v) >= MIN_VALUE and not placeholder(v)}


# base64 packs 3 bytes into 4 characters: at byte alignment 0, 1 or 2 inside a longer text, the
# value's first group shares 0, 2 or 3 characters with the bytes before it, and a last partial
# group of 0, 1 or 2 of its bytes owns that many characters of its own.
_FIRST_OWN = (0, 2, 3)


def spellings(value: bytes) -> set[str]:
    """``value`` as text (and reversed), in hex, and in base64 (standard and URL-safe) as it
    appears inside a longer encoded text at each byte alignment: the characters that depend on
    ``value`` alone, so it is found whatever surrounds it and at most a few bits of it stay
    around the mask."""
    text = value.decode("utf-8", "replace")
    out = {text, text[::-1], value.hex(), value.hex().upper()}
    for offset in range(3):
        encoded = base64.b64encode(bytes(offset) + value).decode()
        groups, rest = divmod(offset + len(value), 3)
        core = encoded[_FIRST_OWN[offset] : 4 * groups + rest]
        out.update({core, core.replace("+", "-").replace("/", "_")})
    return {s for s in out if len(s) >= MIN_SPELLING}


def _files(root: Path) -> list[tuple[Path, bool]]:
    """(file, its every key a secret): the repository's protected and included files, then the
    credential files papayu hides."""
    patterns = configured_protected(str(root))
    tracked = run_git(["ls-files", "-z", "--cached", "--others", "--exclude-standard"], cwd=root, check=False)
    ignored = run_git(  # collapsed: an ignored directory is one entry, never walked
        ["ls-files", "-z", "--others", "--ignored", "--exclude-standard", "--directory"], cwd=root, check=False
    )
    found: list[Path] = []
    for entry in dict.fromkeys(f"{tracked.stdout}\0{ignored.stdout}".split("\0")):
        if entry.endswith("/") and is_protected(entry + "x", patterns):  # an untracked protected directory
            found += sorted(p for p in (root / entry).rglob("*") if p.is_file() and not p.is_symlink())
        elif entry and not entry.endswith("/") and is_protected(entry, patterns):
            found.append(root / entry)
    for path in included(root):
        found += [path] if path.is_file() else sorted(p for p in path.rglob("*") if p.is_file())
    home = Path(os.path.expanduser("~"))
    # The credential files of every tool (credential_files.py), as an unsandboxed check could
    # read them: the files of the table, and those directly inside its directories (.aws/).
    table = [home / c for c in HOME_CREDENTIALS]
    inside = [p for d in table if d.is_dir() and not d.is_symlink() for p in sorted(d.iterdir())[:MAX_FILES]]
    credentials = [p for p in (*named_credentials(os.environ), *table, *inside) if p.is_file()][:MAX_FILES]
    repository = [(p, True) for p in found if not p.is_symlink()][:MAX_FILES]
    return repository + [(p, False) for p in credentials]


def secret_values(root: Path) -> list[str]:
    """Every spelling of every secret value of the files papayu knows hold secrets."""
    values: set[str] = set()
    for path, every_key in _files(root):
        try:
            with open(path, "rb") as handle:
                data = handle.read(MAX_FILE_BYTES)
        except OSError:
            continue
        for value in file_values(data, every_key=every_key):
            values |= spellings(value.encode())
        if len(data.strip()) >= MIN_VALUE and len(data) <= WHOLE_FILE_BYTES:  # printed whole, encoded
            values |= {base64.b64encode(data).decode(), base64.urlsafe_b64encode(data).decode(), data.hex()}
    return sorted(values)


def value_masker(values: Iterable[str]) -> Callable[[str], str]:
    """Masks ``values`` wherever they stand, spaced out or split over lines too, and each
    multi-line base64 block that holds one once its lines are joined; then every pattern of
    secrets.mask."""
    values = list(values)
    literal, spread, patterns = literal_masker(values), spread_masker(values), masker(values)

    def apply(text: str) -> str:
        if "\n" in text:  # before the values: masked pieces would split a block into lines that hold none
            text = _BASE64_BLOCK.sub(lambda m: MASK if literal(_joined(m[0])) != _joined(m[0]) else m[0], text)
        return patterns(spread(text))

    return apply


def _joined(block: str) -> str:
    return _SPACES.sub("", block)


def spread_masker(values: Iterable[str]) -> Callable[[str], str]:
    """Masks ``values`` where whitespace stands between their characters: spaced out (every
    character alone) or split over lines (every gap holds a line break). One pattern, the values'
    prefix tree with any whitespace allowed between two characters, so the cost stays linear; a
    gap of spaces between longer pieces is ordinary prose ("test data"), never a spread value."""
    pattern = literal_pattern({_joined(v) for v in values}, gap=r"\s*+")
    if pattern is None:
        return lambda text: text
    return lambda text: pattern.sub(_spread, text)


def _spread(match: re.Match[str]) -> str:
    found = match[0]
    gaps = _SPACES.findall(found)
    pieces = _SPACES.split(found)
    if not all("\n" in gap or len(pieces[i]) == len(pieces[i + 1]) == 1 for i, gap in enumerate(gaps)):
        return found
    return "\n".join(MASK if line.strip() else line for line in found.split("\n"))  # line breaks kept


def repository_masker(root: Path) -> Callable[[str], str]:
    """mask(), and every spelling of the values of the files that hold the repository's secrets."""
    return value_masker(secret_values(root))
