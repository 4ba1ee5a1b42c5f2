"""Masking of secrets, and the one text filter for what papayu prints or writes.

``mask`` replaces every credential we can recognise with ``***``; ``mask_data`` does
it for every string of a JSON-like value; ``safe_text`` masks and then escapes the
terminal control characters (``printable``). Every writer of text that may carry
model output, check output, environment data or a URL goes through one of them:
traces, events, error messages, stored plans, `--json` output, the check log, commit
messages and pull requests (docs/FEATURES.md, "Masking secrets"). File contents carried by a
plan's actions are the user's code and are written as they are. The patterns are
deliberately greedy: a masked non-secret costs little, a leaked key costs a rotation.
They are also linear: check output and model text are hostile and can be megabytes,
so no pattern may try a long run once per character of it (docs/DESIGN.md, "Masking").
"""

from __future__ import annotations

import os
import re
from collections.abc import Callable, Collection, Iterable
from functools import lru_cache
from typing import Any

from papayu_git.paths import is_protected

MASK = "***"

# PEM private keys (RSA, EC, OPENSSH, PGP...); an unterminated block is masked to the end.
_PRIVATE_KEY = re.compile(
    r"-----BEGIN [A-Z0-9 ]{0,40}PRIVATE KEY(?: BLOCK)?-----"
    r"(?:.*?-----END [A-Z0-9 ]{0,40}PRIVATE KEY(?: BLOCK)?-----|.*)",
    re.S,
)
# Credentials recognised by their shape. Distinctive prefixes are masked wherever they
# start, even glued to a preceding word ("tokenghp_…", "keysk-proj-…"): no ordinary word
# ends in them. The generic shapes are not a token start when glued to a preceding letter
# or digit ("task-…" is not "sk-…"), unless that letter ends a backslash escape such as
# \n (a secret inside a repr() or JSON-escaped text). A JWT must start a token: its shape
# needs two dots after a run, which "eyJeyJeyJ…" would otherwise try once per "eyJ".
_DISTINCTIVE = [
    r"sk-(?:proj|ant|svcacct|admin)-[A-Za-z0-9_\-]{8,}",  # OpenAI project/service keys, Anthropic
    r"gh[pousr]_[A-Za-z0-9]{20,}",  # GitHub ghp_/gho_/ghu_/ghs_/ghr_
    r"github_pat_[A-Za-z0-9_]{20,}",  # GitHub fine-grained
    r"glpat-[A-Za-z0-9_\-]{20,}",  # GitLab
    r"xox[abposr]-[A-Za-z0-9\-]{10,}",  # Slack
    r"(?:AKIA|ASIA|AGPA|AIDA|AROA|ANPA|ANVA|AIPA)[A-Z0-9]{16}\b",  # AWS access key ids
    r"AIza[0-9A-Za-z_\-]{35}",  # Google API key
    r"hf_[A-Za-z0-9]{30,}",  # Hugging Face
    r"npm_[A-Za-z0-9]{36}",  # npm
    r"(?:(?<![A-Za-z0-9_\-])|(?<=\\[nrt]))eyJ[A-Za-z0-9_\-]{8,}+\.eyJ[A-Za-z0-9_\-]{8,}+\.[A-Za-z0-9_\-]{8,}",  # JWT
]
_GENERIC = [
    r"sk-[A-Za-z0-9_\-]{8,}",  # OpenAI legacy sk-…
    r"[rsp]k_(?:live|test)_[A-Za-z0-9]{10,}",  # Stripe
    r"(?i:bearer)\s++[A-Za-z0-9._\-~+/]+=*",
]
# One alternation, one pass over the text (a leading literal keeps the scan fast).
_TOKENS = re.compile("|".join(_DISTINCTIVE + _GENERIC))
_GLUED = re.compile("|".join(_DISTINCTIVE))
# Prefix-keeping replacements: the one group that matched stays, the rest becomes MASK.
_PREFIXED = re.compile(
    # https://user:password@host -> https://user:***@host (also redis://:password@host). Found
    # from its "://" after a scheme character, not from the scheme's start: that was tried at
    # every letter of a long word and scanned the word each time.
    r"(?<=[A-Za-z0-9+.\-])(://[^/\s:@]*+:)[^\s/]+(?=@)"
    # scheme-less user:password@host (not git@host:path, whose @ comes first; not mailto:; the
    # host a name or an IPv4 address, not image:tag@sha256:… or npm:pkg@1.2.3). The user starts
    # a run of user characters, so each run is tried once.
    r"|(?<![\w/:@.%+\-])(?!mailto:)([A-Za-z0-9_.%+\-]++:)[^\s/:@]++"
    r"(?=@(?!sha\d+:)(?:[A-Za-z]|\d{1,3}\.\d{1,3}\.\d{1,3}\.\d{1,3}\b))"
    # Authorization: Basic/Token …
    r"|((?i:authorization)[\"']?\s*+[:=]\s*+[\"']?)[^\"'\n]+"
    # Slack incoming webhooks: the path is the credential
    r"|((?i:hooks\.slack\.com)/(?:services|workflows|triggers)/)[A-Za-z0-9_/\-]+"
)
# api_key=…, "password": "…", aws_secret_access_key = …, DB_HOST_PASSWORD_PLAIN=…, X_TOKEN=…,
# AccountKey=… (Azure connection strings). A candidate is a whole key name (a run of name
# characters holding a key word, tried once per run) followed by ':' or '='; whether the name
# names a secret is secret_name()'s call. A quoted value is masked up to its closing quote
# (passwords with spaces), JSON-escaped quotes included. Line by line (see _sub_lines).
_KEY = re.compile(
    r"(?<![\w.\-])(?=[\w.\-]*?(?i:pass|pwd|secret|token|credential|key))([\w.\-]++)"
    r"(\\{0,2}[\"'])?\s*+[:=]\s*+"
)
_VALUE = re.compile(r"\\{1,2}\"(?:(?!\\{1,2}\").)+\\{1,2}\"|\"[^\"\n]+\"|'[^'\n]+'|(?!\*\*\*)[^\s\"'\\,;}]{4,}+")
# mysql -uroot -pS3cret (the password glued to -p; a bare -p prompts), sshpass -p S3cret: a -p
# flag at most ~200 characters after the command's name. Commands and flags are found in one
# pass each and paired up (_mask_password_flags): a window scanned from every "mysql" of a
# line of them would be quadratic in the window.
_PASSWORD_COMMAND = re.compile(r"(?<![\w.\-])(?:((?i:sshpass))|(?i:mysql|mariadb)[\w.\-]*+)(?=\s)")
_PASSWORD_FLAG = re.compile(r"(?<=\s)-p(\s*+)(\"[^\"\n]*\"|'[^'\n]*'|(?!\*\*\*)[^\s\"']+)")
_FLAG_WINDOW = 202
_ERROR_CODE = re.compile(r"ERR_[A-Z0-9_]+")
_CAMEL = re.compile(r"([a-z0-9])([A-Z])")
_SEGMENTS = re.compile(r"[_\-.]+")

# Words one of which a line must contain (lower-cased) before the slower patterns run on it.
_PREFIXED_NEEDLES = ("@", "authorization", "hooks.slack")
_ASSIGNMENT_NEEDLES = ("key", "secret", "token", "pass", "pwd", "credential")
_PASSWORD_FLAG_NEEDLES = ("mysql", "mariadb", "sshpass")

# Key words that name a secret wherever they stand in a key name (DB_HOST_PASSWORD_PLAIN).
_SECRET_WORDS = (
    "password", "passwd", "passphrase", "passcode", "passkey", "secret", "credential", "apikey",
    "accesskey", "accountkey", "privatekey", "pwd",
)  # fmt: skip
# "token" and "pass" name a secret as a segment of their own ("token_budget", "max_tokens" and
# "passed" do not), unless the next segment makes it a count ("pass_rate", "token_count").
_COUNT_WORDS = frozenset({
    "budget", "count", "counts", "limit", "limits", "len", "length", "size", "max", "min", "num", "number",
    "usage", "ids", "id", "index", "idx", "type", "kind", "estimate", "ratio", "rate", "per", "window", "total",
})  # fmt: skip


def _segments(name: str) -> list[str]:
    return [s for s in _SEGMENTS.split(_CAMEL.sub(r"\1_\2", name).lower()) if s]


@lru_cache(maxsize=4096)  # names repeat down a log
def secret_name(name: str, *, quoted: bool = False, glued_equals: bool = False) -> bool:
    """Whether ``name`` (a key of ``name=value`` or ``name: value``) names a secret. "pass"
    alone is one only as ``pass=`` or a quoted key: "tests pass: 12" is prose."""
    segments = _segments(name)
    if any(word in "".join(segments) for word in _SECRET_WORDS):
        return True
    for i, segment in enumerate(segments):
        if segment == "token" or (segment.endswith("token") and segment != "tokens"):
            word = "token"
        elif segment == "pass":
            word = "pass"
        else:
            continue
        if i + 1 < len(segments) and segments[i + 1] in _COUNT_WORDS:
            continue
        if word == "pass" and segments == ["pass"] and not (quoted or glued_equals):
            continue
        return True
    return False


def _names_a_file(line: str, start: int, name: str) -> bool:
    """A key-looking name that is a file or an error code, not a key: '.aws/credentials: …',
    '.git-credentials: ERR_…', 'credentials.json: …' (docs/DESIGN.md, "Masking")."""
    before = line[start - 1] if start else ""
    if before == "/" or (before == "\\" and name[:1] not in ("n", "r", "t")):
        return True
    return name.startswith(".") or _code_or_protected(name)


def _kept_value(value: str) -> bool:
    return _code_or_protected(value.strip("\\\"'"))


@lru_cache(maxsize=4096)
def _code_or_protected(text: str) -> bool:
    """An ERR_* code or a protected path: never masked, whatever precedes it."""
    return bool(_ERROR_CODE.fullmatch(text)) or is_protected(text)


def _mask_assignments(line: str) -> str:
    out: list[str] = []
    done = 0
    for key in _KEY.finditer(line):
        name = key.group(1)
        if key.start() < done:
            continue  # inside a value masked already
        glued = line.startswith("=", key.end(1))
        if not secret_name(name, quoted=key.group(2) is not None, glued_equals=glued):
            continue
        value = _VALUE.match(line, key.end())
        if value is None or _names_a_file(line, key.start(), name) or _kept_value(value.group(0)):
            continue
        out += [line[done : key.end()], _masked_value(value.group(0))]
        done = value.end()
    return "".join(out) + line[done:] if out else line


def _masked_value(value: str) -> str:
    quote = value[: len(value) - len(value.lstrip("\\")) + 1] if value[0] in "\"'\\" else ""
    return f"{quote}{MASK}{quote}"


def _sub_lines(fix: Callable[[str], str], text: str, needles: tuple[str, ...]) -> str:
    """``fix`` on the lines that contain a needle: most model output has none."""
    if not any(n in text.lower() for n in needles):
        return text
    lines = text.split("\n")
    for i, line in enumerate(lines):
        lowered = line.lower()
        if any(n in lowered for n in needles):
            lines[i] = fix(line)
    return "\n".join(lines)


def _token_start(text: str, start: int) -> bool:
    if start == 0 or not text[start - 1].isalnum():
        return True
    return start >= 2 and text[start - 2] == "\\" and text[start - 1] in "nrt"


def _mask_token(match: re.Match[str]) -> str:
    token = match.group(0)
    if _GLUED.match(token) or _token_start(match.string, match.start()):
        return MASK
    # A refused generic match ("task-…") may have swallowed a distinctive token.
    return _GLUED.sub(MASK, token)


def _mask_prefixed(match: re.Match[str]) -> str:
    return (match.group(1) or match.group(2) or match.group(3) or match.group(4)) + MASK


def _mask_password_flags(line: str) -> str:
    commands = [(m.end(), m.group(1) is not None) for m in _PASSWORD_COMMAND.finditer(line)]
    out: list[str] = []
    done = latest = 0
    for flag in _PASSWORD_FLAG.finditer(line):
        while latest < len(commands) and commands[latest][0] <= flag.start():
            latest += 1
        if not latest or flag.start() < done:
            continue
        end, sshpass = commands[latest - 1]
        glued = not flag.group(1) and not flag.group(2).startswith("-")
        if flag.start() - end > _FLAG_WINDOW or not (sshpass or glued):
            continue
        out += [line[done : flag.start(2)], _masked_value(flag.group(2))]
        done = flag.end()
    return "".join(out) + line[done:] if out else line


# Environment variables whose values are secrets wherever they appear.
_ENV_SUFFIXES = (
    "_API_KEY",
    "_TOKEN",
    "_SECRET",
    "_PASSWORD",
    "_SECRET_KEY",
    "_ACCESS_KEY",
    "_PRIVATE_KEY",
    "_APIKEY",
    "_PAT",
)
_ENV_MIN_LEN = 6  # shorter values ("1", "yes") would mask ordinary words
# What local model servers are given as a key because the client insists on one: not secrets,
# and ordinary words in code ("EMPTY", "ollama", "x"), so never masked as literal values.
PLACEHOLDER_KEYS = frozenset({
    "empty", "none", "null", "dummy", "placeholder", "changeme", "not-needed", "notneeded", "unused",
    "no-key", "nokey", "sk-no-key-required", "sk-dummy", "sk-local", "ollama", "lm-studio", "lmstudio",
    "local", "localhost", "test", "testing", "apikey", "api-key", "api_key", "token", "secret", "password",
    "vllm", "llama", "llamacpp", "llama.cpp", "koboldcpp", "gpt4all", "openai", "anything", "fake", "x",
})  # fmt: skip
API_KEY_MIN_LEN = 16


def placeholder(value: str) -> bool:
    """A value no one would call a secret: a known placeholder, or one character repeated."""
    stripped = value.strip()
    return stripped.lower() in PLACEHOLDER_KEYS or len(set(stripped)) <= 1


def api_key_secret(key: str) -> bool:
    """Whether a provider's API key is worth masking as a literal value: long enough to be a
    secret and no placeholder. Masking "x" or "EMPTY" would rewrite ordinary words."""
    return len(key.strip()) >= API_KEY_MIN_LEN and not placeholder(key)


def _env_secret_values() -> list[str]:
    return [
        v
        for k, v in os.environ.items()
        if k.upper().endswith(_ENV_SUFFIXES) and len(v) >= _ENV_MIN_LEN and not placeholder(v)
    ]


def _trie(values: Iterable[str], gap: str = "") -> str:
    """One pattern for many literals, shaped as their prefix tree: each position of a text costs
    the depth it matches, not one attempt per value. A longer value wins over its prefix.
    ``gap``: a pattern allowed between two characters of a value (none of whose characters it
    may match: it is possessive, never given back)."""
    root: dict[str, Any] = {}
    for value in values:
        node = root
        for char in value:
            node = node.setdefault(char, {})
        node[""] = {}

    def pattern(node: dict[str, Any], lead: str) -> str:
        out = []
        while len(node) == 1 and "" not in node:  # a chain without branches: plain characters
            (char, node), *_ = node.items()
            out.append(lead + re.escape(char))
            lead = gap
        branches = [re.escape(char) + pattern(child, gap) for char, child in sorted(node.items()) if char]
        if branches:
            group = lead + (branches[0] if len(branches) == 1 else "(?:" + "|".join(branches) + ")")
            out.append(f"(?:{group})?" if "" in node else group)
        return "".join(out)

    return pattern(root, "")


@lru_cache(maxsize=64)
def _literals(values: frozenset[str], gap: str = "") -> re.Pattern[str]:
    try:
        return re.compile(_trie(values, gap))
    except RecursionError:  # thousands of values nested in each other: the longest first, one by one
        longest = sorted(values, key=lambda v: (-len(v), v))
        return re.compile("|".join(gap.join(map(re.escape, value)) for value in longest))


def literal_pattern(values: Iterable[str], *, gap: str = "") -> re.Pattern[str] | None:
    """One linear-time pattern for every one of ``values`` (the longest where they overlap), with
    ``gap`` allowed between their characters (see _trie); None: no values."""
    wanted = frozenset(v for v in values if v)
    return _literals(wanted, gap) if wanted else None


def literal_masker(values: Iterable[str]) -> Callable[[str], str]:
    """Each of ``values`` replaced by MASK wherever it occurs (the longest one where they overlap)."""
    pattern = literal_pattern(values)
    if pattern is None:
        return lambda text: text
    return lambda text: pattern.sub(MASK, text)


def masker(extra_values: Collection[str] = ()) -> Callable[[str], str]:
    """A ``mask`` bound to the current environment's secret values (read once: for many strings)
    and to ``extra_values`` (the values of files the check was given, say)."""
    values = [*_env_secret_values(), *(v for v in extra_values if len(v) >= _ENV_MIN_LEN and not placeholder(v))]
    literal = literal_masker(values) if values else None

    def apply(text: str) -> str:
        if literal is not None:
            text = literal(text)
        if "PRIVATE KEY" in text:
            text = _PRIVATE_KEY.sub(MASK, text)
        text = _TOKENS.sub(_mask_token, text)
        text = _sub_lines(lambda line: _PREFIXED.sub(_mask_prefixed, line), text, _PREFIXED_NEEDLES)
        text = _sub_lines(_mask_password_flags, text, _PASSWORD_FLAG_NEEDLES)
        return _sub_lines(_mask_assignments, text, _ASSIGNMENT_NEEDLES)

    return apply


def mask(text: str) -> str:
    """``text`` with every credential we can recognise replaced by ``***``."""
    return masker()(text)


# File contents carried by actions are the user's code: written and shown as they are.
FILE_CONTENTS = frozenset({"content", "patch"})
# What a stored plan needs byte for byte to be applied later: besides the contents, the
# paths and base hashes of actions, the files shown to the model ({path: sha256}) and the
# context sent with the plan round (the user's files, which the APPLY round sends again).
PLAN_VERBATIM = FILE_CONTENTS | {"path", "base_sha256", "files", "context"}


def mask_data(data: Any, mask: Callable[[str], str] | None = None, *, keep: Collection[str] = ()) -> Any:
    """``mask`` applied to every string (keys included) of a JSON-like value; the values of
    the keys named in ``keep`` (at any depth) are left as they are."""
    if mask is None:
        mask = masker()
    if isinstance(data, str):
        return mask(data)
    if isinstance(data, dict):
        return {mask(str(k)): v if k in keep else mask_data(v, mask, keep=keep) for k, v in data.items()}
    if isinstance(data, (list, tuple)):
        return [mask_data(v, mask, keep=keep) for v in data]
    return data


def scrub_api_key(data: Any, key: str) -> Any:
    """``data`` (a plan about to be stored) without the provider's API key, which a model may
    echo back. Only a key that can be a secret (api_key_secret), and never in the plan's files
    and contents (PLAN_VERBATIM): they are the user's code, written as they are."""
    if not api_key_secret(key):
        return data
    return mask_data(data, literal_masker([key]), keep=PLAN_VERBATIM)


# Escapes the way git's quote_path writes them: \a \b \t \n \v \f \r by name, any other
# C0 character and DEL as three octal digits (\033, \177), C1 (U+0080-U+009F, which some
# terminals read as ESC [ and the like) as the octal of its UTF-8 bytes (\302\233).
_NAMED = {"\a": "\\a", "\b": "\\b", "\t": "\\t", "\n": "\\n", "\v": "\\v", "\f": "\\f", "\r": "\\r"}
# Bidi overrides, isolates and marks reorder what the reader sees ("Trojan Source"); line and
# paragraph separators break a line where the terminal shows none. Escaped like the controls.
_BIDI_AND_SEPARATORS = "\u061c\u200e\u200f\u2028\u2029\u202a-\u202e\u2066-\u2069"
_LINE_CONTROLS = re.compile(f"[\x00-\x1f\x7f-\x9f{_BIDI_AND_SEPARATORS}]")
# Multi-line text keeps its newlines, tabs and the CR of a CRLF; a lone CR could overwrite the line.
TEXT_CONTROLS = f"[\x00-\x08\x0b\x0c\x0e-\x1f\x7f-\x9f{_BIDI_AND_SEPARATORS}]|\r(?!\n)"
_MULTILINE_CONTROLS = re.compile(TEXT_CONTROLS)


def escape_control(match: re.Match[str]) -> str:
    char = match.group(0)
    return _NAMED.get(char) or "".join(f"\\{byte:03o}" for byte in char.encode())


def printable(text: str, *, multiline: bool = False) -> str:
    """``text`` with its control characters written as visible escapes (``\\033``): C0 (but
    newline, tab and the CR of a CRLF when ``multiline``), DEL, C1, bidi controls and Unicode line
    separators."""
    return (_MULTILINE_CONTROLS if multiline else _LINE_CONTROLS).sub(escape_control, text)


def safe_text(text: object, *, multiline: bool = False) -> str:
    """``text`` as papayu may print it or put it in a commit or pull request: masked, then
    with its control characters escaped (printable; newlines and tabs kept when
    ``multiline``)."""
    return printable(mask(str(text)), multiline=multiline)
