"""Which test of one run is which test of another, when a test's id names a value of its run
(docs/DESIGN.md, "A verdict per test": ids that change from run to run).

A Go subtest named after `t.TempDir()`, a parametrised test named after the time, a server's
port, an object's address or a seed: the test is the same, its id is not, and compared as
strings it would be "missing" on every run, so no plan could land. Ids are matched in three
steps, each only among the ids the previous one left unmatched:

1. the same id;
2. the same id once the parts that change run to run are replaced by placeholders
   (`comparable`): temporary paths, hexadecimal addresses, loopback ports, timestamps, UUIDs,
   seeds, process ids and long hexadecimal tokens;
3. the same stable part (`stable_part`): the id without its parameters (`test_x[...]`), its Go
   subtest path (`pkg.TestX/...`) or its unittest subtest (`test_x (i=1)`). A value nobody named
   above still changes only there.

Where several ids share a key they are paired in the order the run reported them. A base id
still unmatched whose stable part the run has under other ids is judged by that stable part: it
is never "missing". The rest are what they seem: a test gone, a test new.
"""

from __future__ import annotations

import re
from collections.abc import Callable, Mapping
from dataclasses import dataclass

# (pattern, placeholder), applied in this order: a temporary path may hold anything below.
_VOLATILE = tuple(
    (re.compile(pattern), placeholder)
    for pattern, placeholder in (
        (r"(?:/private)?/(?:tmp|var/tmp|var/folders|dev/shm)(?:/[^\s\[\]()<>,;:'\"|]*)*", "<tmp>"),
        (r"(?i)\b[0-9a-f]{8}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{12}\b", "<uuid>"),
        (r"\b\d{4}-\d{2}-\d{2}[T _]\d{1,2}[:_-]\d{2}(?:[:_-]\d{2}(?:[.,]\d+)?)?(?:Z|[+-]\d{2}:?\d{2})?", "<time>"),
        (r"(?<![\d.])\d{1,2}:\d{2}:\d{2}(?:[.,]\d+)?(?![\d.])", "<time>"),
        (r"(?<![\w.])1[5-9]\d{8}(?:\d{3}|\d{6}|\d{9})?(?:\.\d+)?(?![\w.])", "<time>"),
        (r"(?i)\b0x[0-9a-f]{4,}\b", "0x<addr>"),
        (r"(?i)(?:127(?:\.\d{1,3}){3}|localhost|0\.0\.0\.0|\[::1?\]|::1?)[:_](?:\d{2,5})\b", "<host>:<port>"),
        (r"(?i)\b(port|seed|pid)([=:_ ]?)\d+\b", r"\1\2<n>"),
        (r"(?i)(?<![0-9a-f])[0-9a-f]{16,}(?![0-9a-f])", "<hex>"),
    )
)
_PARAMETERS = re.compile(r"\[.*\]$")
_GO_SUBTEST = re.compile(r"^(?P<test>[^\s]*?\.(?:Test|Example|Fuzz|Benchmark)[^/\s]*)/.")
_SUBTEST = re.compile(r" \([^()]*\)$")


def comparable(test_id: str) -> str:
    """``test_id`` with the parts that change from run to run replaced by placeholders."""
    for pattern, placeholder in _VOLATILE:
        test_id = pattern.sub(placeholder, test_id)
    return test_id


def stable_part(test_id: str) -> str | None:
    """The part of ``test_id`` that names its test whatever its parameters or subtest (None when
    the id has no such part: it is its own test)."""
    key = comparable(test_id)
    if match := _PARAMETERS.search(key):
        return key[: match.start()]
    if match := _GO_SUBTEST.match(key):
        return match["test"]
    if match := _SUBTEST.search(key):
        return key[: match.start()]
    return None


@dataclass(frozen=True)
class Matched:
    """How one run's ids meet the base's."""

    renamed: dict[str, str]  # the run's id -> the base's id of the same test
    by_stable_part: frozenset[str]  # base ids left unmatched, their stable part there under other ids

    def apply(self, outcomes: Mapping[str, object]) -> dict[str, object]:
        """``outcomes`` (the run's) under the base's ids."""
        return {self.renamed.get(test, test): outcome for test, outcome in outcomes.items()}

    @property
    def changed(self) -> int:
        return len(self.renamed) + len(self.by_stable_part)


def match(base: Mapping[str, object], run: Mapping[str, object]) -> Matched:
    """Which ids of ``run`` are tests of ``base`` under another id (ids in both are the same
    test). Both in the order the runs reported them."""
    gone = [t for t in base if t not in run]
    new = [t for t in run if t not in base]
    kept = {stable_part(t) for t in new} - {None}
    renamed: dict[str, str] = {}
    for key in (comparable, stable_part):
        pairs, gone, new = _pair(gone, new, key)
        renamed.update(pairs)
    return Matched(renamed, frozenset(t for t in gone if stable_part(t) in kept))


def renamed(base: Mapping[str, object], run: Mapping[str, object]) -> frozenset[str]:
    """The base's ids that ``run`` reports under another id, or judges by their stable part."""
    found = match(base, run)
    return frozenset(found.renamed.values()) | found.by_stable_part


def _pair(
    gone: list[str], new: list[str], key: Callable[[str], str | None]
) -> tuple[dict[str, str], list[str], list[str]]:
    """Pairs (new id -> gone id) of the same key, in order; and the ids of each side left over."""
    waiting: dict[str, list[str]] = {}
    for test in gone:
        if (k := key(test)) is not None:
            waiting.setdefault(k, []).append(test)
    pairs: dict[str, str] = {}
    for test in new:
        k = key(test)
        if k is not None and waiting.get(k):
            pairs[test] = waiting[k].pop(0)
    used = set(pairs.values())
    return pairs, [t for t in gone if t not in used], [t for t in new if t not in pairs]
