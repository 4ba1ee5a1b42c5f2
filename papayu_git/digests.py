"""sha1 and sha256 hex digests, without loading OpenSSL for small inputs (docs/DESIGN.md,
"Start-up and cost").

hashlib's import loads OpenSSL's libcrypto, ~4 ms of every apply, which hashes a few files, a
schema and the objects of one commit, most of them a few KB. CPython's own implementations give
the same digests at no import cost (~13 µs for 4 KB); OpenSSL's are 5x faster per byte, so a
large input (a big file a plan rewrites) goes to hashlib, loaded then. An interpreter without
the built-in modules uses hashlib for everything.
"""

from __future__ import annotations

import importlib
from collections.abc import Callable
from typing import Any

_LARGE = 64 * 1024  # bytes: from here on OpenSSL's speed repays its import


def _builtin(name: str, modules: tuple[str, ...]) -> Callable[[bytes], Any] | None:
    for module in modules:
        try:
            return getattr(importlib.import_module(module), name)
        except (ImportError, AttributeError):
            continue
    return None


_SHA1 = _builtin("sha1", ("_sha1",))
_SHA256 = _builtin("sha256", ("_sha2", "_sha256"))  # _sha2 since Python 3.12


def sha1_hex(data: bytes) -> str:
    if _SHA1 is None or len(data) >= _LARGE:
        import hashlib

        return hashlib.sha1(data).hexdigest()
    return str(_SHA1(data).hexdigest())


def sha256_hex(data: bytes) -> str:
    if _SHA256 is None or len(data) >= _LARGE:
        import hashlib

        return hashlib.sha256(data).hexdigest()
    return str(_SHA256(data).hexdigest())
