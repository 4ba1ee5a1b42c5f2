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

# Start of a token: not preceded by a letter/digit, or right after a backslash escape
# such as \\n (a secret inside a repr() or JSON-escaped text).
_B = r"(?:(?<![A-Za-z0-9])|(?<=\\[nrt]))"
# Whole-match replacements: the matched text is a credential by its shape.
_SHAPES = [
    # PEM private keys (RSA, EC, OPENSSH, PGP...); an unterminated block is masked to the end.
    re.compile(r"-----BEGIN [A-Z0-9 ]*PRIVATE KEY(?: BLOCK)?-----(?:.*?-----END [A-Z0-9 ]*PRIVATE KEY(?: BLOCK)?-----|.*)",
               re.S),
    re.compile(_B + r"sk-[A-Za-z0-9_\-]{8,}"),                         # OpenAI sk-…, sk-proj-…, Anthropic sk-ant-…
    re.compile(_B + r"[rsp]k_(?:live|test)_[A-Za-z0-9]{10,}"),         # Stripe
    re.compile(_B + r"gh[pousr]_[A-Za-z0-9]{20,}"),                    # GitHub ghp_/gho_/ghu_/ghs_/ghr_
    re.compile(_B + r"github_pat_[A-Za-z0-9_]{20,}"),                  # GitHub fine-grained
    re.compile(_B + r"glpat-[A-Za-z0-9_\-]{20,}"),                     # GitLab
    re.compile(_B + r"xox[abposr]-[A-Za-z0-9\-]{10,}"),                 # Slack
    re.compile(_B + r"(?:AKIA|ASIA|AGPA|AIDA|AROA|ANPA|ANVA|AIPA)[A-Z0-9]{16}\b"),  # AWS access key ids
    re.compile(_B + r"AIza[0-9A-Za-z_\-]{35}"),                        # Google API key
    re.compile(_B + r"hf_[A-Za-z0-9]{30,}"),                           # Hugging Face
    re.compile(_B + r"npm_[A-Za-z0-9]{36}"),                           # npm
    re.compile(_B + r"eyJ[A-Za-z0-9_\-]{8,}\.eyJ[A-Za-z0-9_\-]{8,}\.[A-Za-z0-9_\-]{8,}"),  # JWT
    re.compile(r"(?i)" + _B + r"bearer\s+[A-Za-z0-9._\-~+/]+=*"),
]
# Prefix-keeping replacements: group 1 stays, the rest becomes MASK.
_PREFIXED = [
    # https://user:password@host -> https://user:***@host
    re.compile(r"([A-Za-z][A-Za-z0-9+.\-]*://[^/\s:@]+:)[^@\s/]+(?=@)"),
    # Authorization: Basic/Token …
    re.compile(r"(?i)(\bauthorization[\"']?\s*[:=]\s*[\"']?)[^\"'\n]+"),
]
# api_key=…, "password": "…", aws_secret_access_key = …, client_secret: …, X_TOKEN=…: the key
# name must END with the keyword (token_budget, max_tokens stay readable); a quoted value is
# masked up to its closing quote (passwords with spaces).
_ASSIGNMENT = re.compile(
    r"(?i)((?<![A-Za-z0-9])[A-Za-z0-9_.\-]*?(?:api[_\-]?key|apikey|secret|token|passw(?:or)?d|pwd|"
    r"access[_\-]?key|private[_\-]?key|credentials?)[\"']?\s*[:=]\s*)"
    r"(\"[^\"\n]+\"|'[^'\n]+'|(?!\*\*\*)[^\s\"',;}]{4,})")


def _mask_assignment(match: re.Match[str]) -> str:
    value = match.group(2)
    quote = value[0] if value[0] in "\"'" else ""
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
        for pattern in _SHAPES:
            text = pattern.sub(MASK, text)
        for pattern in _PREFIXED:
            text = pattern.sub(lambda m: m.group(1) + MASK, text)
        return _ASSIGNMENT.sub(_mask_assignment, text)

    return apply


def mask(text: str) -> str:
    """``text`` with every credential we can recognise replaced by ``***``."""
    return masker()(text)
