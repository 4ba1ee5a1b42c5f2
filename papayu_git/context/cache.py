"""Per-plan-cycle cache of context requests (docs/DESIGN.md, "Context").

Keys: ("env",), ("read", path, start, end), ("search", query, glob, case, max), ("logs", source, last_n).
cache_stats uses the upstream keys: <kind>_hits / <kind>_misses for env, logs, read, search, hit_rate.
"""

from __future__ import annotations

from collections.abc import Callable, Hashable
from typing import TypeVar

from papayu_git import output

CACHE_KINDS = ("env", "logs", "read", "search")
T = TypeVar("T")


class ContextCache:
    def __init__(self) -> None:
        self._values: dict[tuple[Hashable, ...], object] = {}
        self._counts = {f"{kind}_{what}": 0 for kind in CACHE_KINDS for what in ("hits", "misses")}

    def __contains__(self, key: tuple[Hashable, ...]) -> bool:
        return key in self._values

    def get(self, key: tuple[Hashable, ...], compute: Callable[[], T]) -> T:
        kind = str(key[0])
        shown = ":".join(str(part) for part in key)
        if key in self._values:
            self._counts[f"{kind}_hits"] += 1
            output.event("CONTEXT_CACHE_HIT", key=shown)
            return self._values[key]  # type: ignore[return-value]
        self._counts[f"{kind}_misses"] += 1
        output.event("CONTEXT_CACHE_MISS", key=shown)
        value = compute()
        self._values[key] = value
        return value

    @property
    def stats(self) -> dict[str, float]:
        hits = sum(v for k, v in self._counts.items() if k.endswith("_hits"))
        total = sum(self._counts.values())
        return {**self._counts, "hit_rate": hits / total if total else 0.0}
