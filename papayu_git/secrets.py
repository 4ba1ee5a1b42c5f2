"""Masking of secrets in traces, logs and error messages (SPEC §7, seed 002).

Every writer of text that may carry model output, environment data or a URL calls
``mask``: traces (traces.write_trace), stderr events (output.event) and error
messages (error_handler). The patterns are deliberately greedy: a masked
non-secret costs little, a leaked key costs a rotation.
"""

from __future__ import annotations

import os
import re
from collections.abc import Callable

MASK = "***"

# PEM private keys (RSA, EC, OPENSSH, PGP...); an unterminated block is masked to the end.
_PRIVATE_KEY = re.compile(
    r"-----BEGIN [A-Z0-9 ]*PRIVATE KEY(?: BLOCK)?-----(?:.*?-----END [A-Z0-9 ]*PRIVATE KEY(?: BLOCK)?-----|.*)", re.S)
# Credentials recognised by their shape, in one alternation (one pass over the text; a
# leading literal keeps the scan fast). A match glued to a preceding letter or digit is
# not a token start ("task-…" is not "sk-…"), unless that letter ends a backslash escape
# such as \n (a secret inside a repr() or JSON-escaped text).
_TOKENS = re.compile("|".join([
    r"sk-[A-Za-z0-9_\-]{8,}",                                   # OpenAI sk-…, sk-proj-…, Anthropic sk-ant-…
    r"[rsp]k_(?:live|test)_[A-Za-z0-9]{10,}",                   # Stripe
    r"gh[pousr]_[A-Za-z0-9]{20,}",                              # GitHub ghp_/gho_/ghu_/ghs_/ghr_
    r"github_pat_[A-Za-z0-9_]{20,}",                            # GitHub fine-grained
    r"glpat-[A-Za-z0-9_\-]{20,}",                               # GitLab
    r"xox[abposr]-[A-Za-z0-9\-]{10,}",                          # Slack
    r"(?:AKIA|ASIA|AGPA|AIDA|AROA|ANPA|ANVA|AIPA)[A-Z0-9]{16}\b",  # AWS access key ids
    r"AIza[0-9A-Za-z_\-]{35}",                                  # Google API key
    r"hf_[A-Za-z0-9]{30,}",                                     # Hugging Face
    r"npm_[A-Za-z0-9]{36}",                                     # npm
    r"eyJ[A-Za-z0-9_\-]{8,}\.eyJ[A-Za-z0-9_\-]{8,}\.[A-Za-z0-9_\-]{8,}",  # JWT
    r"(?i:bearer)\s+[A-Za-z0-9._\-~+/]+=*",
]))
# Prefix-keeping replacements: group 1 stays, the rest becomes MASK.
_PREFIXED = re.compile(
    # https://user:password@host -> https://user:***@host
    r"([A-Za-z][A-Za-z0-9+.\-]*://[^/\s:@]+:)[^@\s/]+(?=@)"
    # Authorization: Basic/Token …
    r"|((?i:authorization)[\"']?\s*[:=]\s*[\"']?)[^\"'\n]+")
# api_key=…, "password": "…", aws_secret_access_key = …, client_secret: …, X_TOKEN=…: the
# keyword must END the key name (token_budget, max_tokens stay readable); a quoted value
# is masked up to its closing quote (passwords with spaces). Line by line (see _sub_lines).
_ASSIGNMENT = re.compile(
    r"(?i)((?:api[_\-]?key|apikey|secret|token|passw(?:or)?d|pwd|access[_\-]?key|private[_\-]?key|credentials?)"
    r"(?:\\{0,2}[\"'])?\s*[:=]\s*)"
    # JSON-escaped quotes (a JSON answer inside a JSON string: \"password\": \"a b\"), quotes, bare
    r"(\\{1,2}\"(?:(?!\\{1,2}\").)+\\{1,2}\"|\"[^\"\n]+\"|'[^'\n]+'|(?!\*\*\*)[^\s\"'\\,;}]{4,})")


# Words one of which a line must contain (lower-cased) before the slower patterns run on it.
_PREFIXED_NEEDLES = ("://", "authorization")
_ASSIGNMENT_NEEDLES = ("key", "secret", "token", "passw", "pwd", "credential")


def _sub_lines(pattern: re.Pattern[str], repl: Callable[[re.Match[str]], str], text: str,
               needles: tuple[str, ...]) -> str:
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
    return MASK if _token_start(match.string, match.start()) else match.group(0)


def _mask_prefixed(match: re.Match[str]) -> str:
    return (match.group(1) or match.group(2)) + MASK


def _mask_assignment(match: re.Match[str]) -> str:
    value = match.group(2)
    quote = value[: len(value) - len(value.lstrip("\\")) + 1] if value[0] in "\"'\\" else ""
    return f"{match.group(1)}{quote}{MASK}{quote}"


# Environment variables whose values are secrets wherever they appear (seed 002).
_ENV_SUFFIXES = ("_API_KEY", "_TOKEN", "_SECRET", "_PASSWORD", "_SECRET_KEY", "_ACCESS_KEY", "_PRIVATE_KEY",
                 "_APIKEY", "_PAT")
_ENV_MIN_LEN = 6  # shorter values ("1", "yes") would mask ordinary words


def _env_secret_values() -> list[str]:
    values = {v for k, v in os.environ.items() if k.upper().endswith(_ENV_SUFFIXES) and len(v) >= _ENV_MIN_LEN}
    return sorted(values, key=len, reverse=True)


def masker() -> Callable[[str], str]:
    """A ``mask`` bound to the current environment's secret values (read once: for many strings)."""
    values = _env_secret_values()
    env_pattern = re.compile("|".join(map(re.escape, values))) if values else None

    def apply(text: str) -> str:
        if env_pattern is not None:
            text = env_pattern.sub(MASK, text)
        if "PRIVATE KEY" in text:
            text = _PRIVATE_KEY.sub(MASK, text)
        text = _TOKENS.sub(_mask_token, text)
        text = _sub_lines(_PREFIXED, _mask_prefixed, text, _PREFIXED_NEEDLES)
        return _sub_lines(_ASSIGNMENT, _mask_assignment, text, _ASSIGNMENT_NEEDLES)

    return apply


def mask(text: str) -> str:
    """``text`` with every credential we can recognise replaced by ``***``."""
    return masker()(text)
