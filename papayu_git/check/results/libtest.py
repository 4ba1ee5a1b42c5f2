"""`cargo test`: libtest's own lines in the log (`test a::b ... ok`), a format stable for years.

Ids are the test binary's name (its hash dropped, so ids do not change with the build) and the
test's path: `calc::tests::adds`, `integration::adds`, `calc (doc)::src/lib.rs - add (line 3)`.
A package's library and binary share a name: the second one seen is `name@src/main.rs`.
"""

from __future__ import annotations

import re

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


def read_libtest(log_text: str) -> list[CaseResult] | None:
    """None when the log holds no libtest run."""
    binary, seen_sources = "", dict[str, str]()
    started = False
    results: dict[str, Outcome] = {}
    output: dict[str, list[str]] = {}
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
            results[_id(binary, _SHOULD_PANIC.sub("", match["name"]))] = _STATUS[match["status"]]
        elif match := _OUTPUT.match(line):
            current = output.setdefault(_id(binary, match["name"]), [])
        elif _OUTPUT_END.match(line):
            current = None
        elif current is not None:
            current.append(line)
    if not started:
        return None
    return [CaseResult(k, v, "\n".join(output.get(k, [])) if v is Outcome.FAILED else "") for k, v in results.items()]


def _binary(path: str, source: str, seen: dict[str, str]) -> str:
    name = _HASH.sub("", path.replace("\\", "/").rsplit("/", 1)[-1])
    if seen.setdefault(name, source) != source:
        return f"{name}@{source}"
    return name


def _id(binary: str, name: str) -> str:
    return f"{binary}::{name}" if binary else name
