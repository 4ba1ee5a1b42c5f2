"""Masking of secrets in traces, logs and error messages (SPEC §7).

Issue 6 owns the full pattern list; every writer of text that may carry model
output or environment data calls ``mask``.
"""

from __future__ import annotations

import os
import re

_PATTERNS = [
    re.compile(r"sk-[A-Za-z0-9_\-]{8,}"),
    re.compile(r"(?i)bearer\s+[A-Za-z0-9._\-~+/]+=*"),
    re.compile(r"gh[pousr]_[A-Za-z0-9]{20,}"),
    re.compile(r"github_pat_[A-Za-z0-9_]{20,}"),
    re.compile(r"(?:AKIA|ASIA)[A-Z0-9]{16}"),
    re.compile(r"-----BEGIN [A-Z ]*PRIVATE KEY-----.*?-----END [A-Z ]*PRIVATE KEY-----", re.S),
]
_ENV_SUFFIXES = ("_API_KEY", "_TOKEN", "_SECRET", "_PASSWORD")
MASK = "***"


def _env_secret_values() -> list[str]:
    values = [v for k, v in os.environ.items() if k.upper().endswith(_ENV_SUFFIXES) and len(v) >= 6]
    return sorted(values, key=len, reverse=True)


def mask(text: str) -> str:
    for value in _env_secret_values():
        text = text.replace(value, MASK)
    for pattern in _PATTERNS:
        text = pattern.sub(MASK, text)
    return text
