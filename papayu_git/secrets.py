"""Masking of secrets, and the one text filter for what papayu prints or writes.

``mask`` replaces every credential we can recognise with ``***``; ``mask_data`` does
it for every string of a JSON-like value; ``safe_text`` masks and then escapes the
terminal control characters (output.printable). Every writer of text that may carry
model output, check output, environment data or a URL goes through one of them:
traces, events, error messages, stored plans, `--json` output, the check log, commit
messages and pull requests (README, "Masking secrets"). File contents carried by a
plan's actions are the user's code and are written as they are. The patterns are
deliberately greedy: a masked non-secret costs little, a leaked key costs a rotation.
"""

from __future__ import annotations

import os
import re
from collections.abc import Callable, Collection
from typing import Any

MASK = "***"

# PEM private keys (RSA, EC, OPENSSH, PGP...); an unterminated block is masked to the end.
_PRIVATE_KEY = re.compile(
    r"-----BEGIN [A-Z0-9 ]*PRIVATE KEY(?: BLOCK)?-----(?:.*?-----END [A-Z0-9 ]*PRIVATE KEY(?: BLOCK)?-----|.*)", re.S
)
# Credentials recognised by their shape. Distinctive prefixes are masked wherever they
# start, even glued to a preceding word ("tokenghp_…", "keysk-proj-…"): no ordinary word
# ends in them. The generic shapes are not a token start when glued to a preceding letter
# or digit ("task-…" is not "sk-…"), unless that letter ends a backslash escape such as
# \n (a secret inside a repr() or JSON-escaped text).
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
    r"eyJ[A-Za-z0-9_\-]{8,}\.eyJ[A-Za-z0-9_\-]{8,}\.[A-Za-z0-9_\-]{8,}",  # JWT
]
_GENERIC = [
    r"sk-[A-Za-z0-9_\-]{8,}",  # OpenAI legacy sk-…
    r"[rsp]k_(?:live|test)_[A-Za-z0-9]{10,}",  # Stripe
    r"(?i:bearer)\s+[A-Za-z0-9._\-~+/]+=*",
]
# One alternation, one pass over the text (a leading literal keeps the scan fast).
_TOKENS = re.compile("|".join(_DISTINCTIVE + _GENERIC))
_GLUED = re.compile("|".join(_DISTINCTIVE))
# Prefix-keeping replacements: the one group that matched stays, the rest becomes MASK.
_PREFIXED = re.compile(
    # https://user:password@host -> https://user:***@host (also redis://:password@host)
    r"([A-Za-z][A-Za-z0-9+.\-]*://[^/\s:@]*:)[^\s/]+(?=@)"
    # scheme-less user:password@host (not git@host:path, whose @ comes first; not mailto:; the
    # host a name or an IPv4 address, not image:tag@sha256:… or npm:pkg@1.2.3)
    r"|(?<![\w/:@.%+\-])(?!mailto:)([A-Za-z0-9_.%+\-]+:)[^\s/:@]+"
    r"(?=@(?!sha\d+:)(?:[A-Za-z]|\d{1,3}\.\d{1,3}\.\d{1,3}\.\d{1,3}\b))"
    # Authorization: Basic/Token …
    r"|((?i:authorization)[\"']?\s*[:=]\s*[\"']?)[^\"'\n]+"
    # Slack incoming webhooks: the path is the credential
    r"|((?i:hooks\.slack\.com)/(?:services|workflows|triggers)/)[A-Za-z0-9_/\-]+"
)
# api_key=…, "password": "…", aws_secret_access_key = …, client_secret: …, X_TOKEN=…,
# AccountKey=… (Azure connection strings): the keyword must END the key name
# (token_budget, max_tokens stay readable); "pass" alone only as a key's last segment
# (DB_PASS=, db-pass:) or as pass= ("did not pass: …" is prose); a quoted key containing
# "pass" ("db_pass", "smtp_pass_2"; not "passed") counts too. A quoted value is masked up
# to its closing quote (passwords with spaces). Line by line (see _sub_lines).
_ASSIGNMENT = re.compile(
    r"(?i)((?:api[_\-]?key|apikey|secret|token|passw(?:or)?d|passphrase|[_\-.]pass\b|(?<!\w)pass(?==)|pwd"
    r"|access[_\-]?key|account[_\-]?key"
    r"|private[_\-]?key|credentials?|pass(?!(?:ed|ing|es)(?![a-z]))[\w.\-]*(?=\\{0,2}[\"']))"
    r"(?:\\{0,2}[\"'])?\s*[:=]\s*)"
    # JSON-escaped quotes (a JSON answer inside a JSON string: \"password\": \"a b\"), quotes, bare
    r"(\\{1,2}\"(?:(?!\\{1,2}\").)+\\{1,2}\"|\"[^\"\n]+\"|'[^'\n]+'|(?!\*\*\*)[^\s\"'\\,;}]{4,})"
)
# mysql -uroot -pS3cret (the password glued to -p; a bare -p prompts), sshpass -p S3cret.
_PASSWORD_FLAG = re.compile(
    r"(\b(?i:mysql|mariadb)[\w.\-]*\s(?:[^\n]{0,200}?\s)?-p(?=[^\s\-])|\b(?i:sshpass)\s(?:[^\n]{0,200}?\s)?-p\s*)"
    r"(\"[^\"\n]*\"|'[^'\n]*'|(?!\*\*\*)[^\s\"']+)"
)


# Words one of which a line must contain (lower-cased) before the slower patterns run on it.
_PREFIXED_NEEDLES = ("@", "authorization", "hooks.slack")
_ASSIGNMENT_NEEDLES = ("key", "secret", "token", "pass", "pwd", "credential")
_PASSWORD_FLAG_NEEDLES = ("mysql", "mariadb", "sshpass")


def _sub_lines(
    pattern: re.Pattern[str], repl: Callable[[re.Match[str]], str], text: str, needles: tuple[str, ...]
) -> str:
    """``pattern.sub`` on the lines that contain a needle: most model output has none."""
    if not any(n in text.lower() for n in needles):
        return text
    lines = text.split("\n")
    for i, line in enumerate(lines):
        lowered = line.lower()
        if any(n in lowered for n in needles):
            lines[i] = pattern.sub(repl, line)
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


def _mask_assignment(match: re.Match[str]) -> str:
    value = match.group(2)
    quote = value[: len(value) - len(value.lstrip("\\")) + 1] if value[0] in "\"'\\" else ""
    return f"{match.group(1)}{quote}{MASK}{quote}"


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


def _env_secret_values() -> list[str]:
    values = {v for k, v in os.environ.items() if k.upper().endswith(_ENV_SUFFIXES) and len(v) >= _ENV_MIN_LEN}
    return sorted(values, key=len, reverse=True)


def masker(extra_values: Collection[str] = ()) -> Callable[[str], str]:
    """A ``mask`` bound to the current environment's secret values (read once: for many strings)
    and to ``extra_values`` (the values of files the check was given, say)."""
    values = sorted(
        {*_env_secret_values(), *(v for v in extra_values if len(v) >= _ENV_MIN_LEN)}, key=len, reverse=True
    )
    env_pattern = re.compile("|".join(map(re.escape, values))) if values else None

    def apply(text: str) -> str:
        if env_pattern is not None:
            text = env_pattern.sub(MASK, text)
        if "PRIVATE KEY" in text:
            text = _PRIVATE_KEY.sub(MASK, text)
        text = _TOKENS.sub(_mask_token, text)
        text = _sub_lines(_PREFIXED, _mask_prefixed, text, _PREFIXED_NEEDLES)
        text = _sub_lines(_PASSWORD_FLAG, _mask_assignment, text, _PASSWORD_FLAG_NEEDLES)
        return _sub_lines(_ASSIGNMENT, _mask_assignment, text, _ASSIGNMENT_NEEDLES)

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


def safe_text(text: object, *, multiline: bool = False) -> str:
    """``text`` as papayu may print it or put it in a commit or pull request: masked, then
    with its control characters escaped (output.printable; newlines and tabs kept when
    ``multiline``)."""
    from papayu_git.output import printable  # lazy: output imports this module (cycle)

    return printable(mask(str(text)), multiline=multiline)
