"""`cargo test`: libtest's own lines in the log (`test a::b ... ok`), a format stable for years.

Ids are the test binary's name (its hash dropped, so ids do not change with the build) and the
test's path: `calc::tests::adds`, `integration::adds`, `calc (doc)::src/lib.rs - add (#1)`.
A package's library and binary share a name: the second one seen is `name@src/main.rs`.

A doctest is named by cargo with its line (`src/lib.rs - add (line 3)`): any edit above it would
make it another test, and the base's one "missing" (docs/DESIGN.md, "A verdict per test"). Its id
keeps the file and the item and replaces the line by the doctest's place among the item's
doctests: `src/lib.rs - add (#1)`, `(#2)` for the next one down; `- compile` (no_run) and
`- compile fail` stay, since they say what the doctest checks.
"""

from __future__ import annotations

import re
from collections import defaultdict

from papayu_git.check.results.outcome import CaseResult, Outcome

_RUNNING = re.compile(r"^\s*Running (?:unittests )?(?P<source>\S.*?) \((?P<binary>[^()]*)\)\s*$")
_DOC_TESTS = re.compile(r"^\s*Doc-tests (?P<crate>\S+)\s*$")
_HASH = re.compile(r"-[0-9a-f]{16}(?:\.exe)?$")
_START = re.compile(r"^running \d+ tests?$")
_TEST = re.compile(r"^test (?P<name>.+?) \.\.\. (?P<status>ok|FAILED|ignored)(?:, .*)?$")
_SHOULD_PANIC = re.compile(r" - should panic(?: with `.*`)?$")
_OUTPUT = re.compile(r"^---- (?P<name>.+?) (?:stdout|stderr) ----$")
_OUTPUT_END = re.compile(r"^(?:failures|successes):$|^test result: ")
_STATUS = {"ok": Outcome.PASSED, "FAILED": Outcome.FAILED, "ignored": Outcome.SKIPPED}
# rustdoc's name: `<file> - <item path, no spaces> (line N)`, the item empty for the crate's own
# docs, then libtest's ` - compile` / ` - compile fail` for no_run and compile_fail.
_DOCTEST = re.compile(r"^(?P<file>.+) - (?P<item>\S*?) ?\(line (?P<line>\d+)\)(?P<kind>(?: - [\w ]+)?)$")

Key = tuple[str, str]  # (binary, the name libtest printed)


def read_libtest(log_text: str) -> list[CaseResult] | None:
    """None when the log holds no libtest run."""
    binary, seen_sources = "", dict[str, str]()
    started = False
    results: dict[Key, Outcome] = {}
    output: dict[Key, list[str]] = {}
    current: list[str] | None = None
    for raw in log_text.splitlines():
        line = raw.rstrip("\r")
        if match := _RUNNING.match(line):
            binary = _binary(match["binary"], match["source"], seen_sources)
        elif match := _DOC_TESTS.match(line):
            binary = f"{match['crate']} (doc)"
        elif _START.match(line):
            started, current = True, None
        elif not started:
            continue
        elif match := _TEST.match(line):
            results[(binary, _SHOULD_PANIC.sub("", match["name"]))] = _STATUS[match["status"]]
        elif match := _OUTPUT.match(line):
            current = output.setdefault((binary, _SHOULD_PANIC.sub("", match["name"])), [])
        elif _OUTPUT_END.match(line):
            current = None
        elif current is not None:
            current.append(line)
    if not started:
        return None
    ids = _ids(list(results))
    return [
        CaseResult(ids[key], outcome, "\n".join(output.get(key, [])) if outcome is Outcome.FAILED else "")
        for key, outcome in results.items()
    ]


def _ids(keys: list[Key]) -> dict[Key, str]:
    """Each test's id; a doctest's line becomes its rank among its item's doctests."""
    ids = {key: _id(*key) for key in keys}
    items: defaultdict[tuple[str, str, str], list[tuple[int, Key, str]]] = defaultdict(list)
    for key in keys:
        binary, name = key
        match = _DOCTEST.match(name) if binary.endswith(" (doc)") else None
        if match is not None:
            items[(binary, match["file"], match["item"])].append((int(match["line"]), key, match["kind"]))
    for (binary, file, item), doctests in items.items():
        for rank, (_, key, kind) in enumerate(sorted(doctests), start=1):
            ids[key] = _id(binary, f"{file} - {item + ' ' if item else ''}(#{rank}){kind}")
    return ids


def _binary(path: str, source: str, seen: dict[str, str]) -> str:
    name = _HASH.sub("", path.replace("\\", "/").rsplit("/", 1)[-1])
    if seen.setdefault(name, source) != source:
        return f"{name}@{source}"
    return name


def _id(binary: str, name: str) -> str:
    return f"{binary}::{name}" if binary else name
