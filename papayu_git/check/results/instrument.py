"""Making the check's test runner write results papayu can read, without changing what passes,
and knowing from the command which results a run may have (docs/DESIGN.md, "A verdict per test").

pytest (and unittest suites run by pytest) are told through PYTEST_ADDOPTS, whatever runs them
(`make test`, tox, a script), and papayu's plugin streams them where it loads (pytest_plugin.py).
The runners that need a flag are found in the command's text: `node --test` also writes JUnit
(its spec output stays on stdout), jest its JSON, vitest JUnit (its default output stays), and
`go test` becomes `go test -json`: go has no second reporter, so the check's log holds go's JSON
events, read back for the results (`go_plain_text` gives the text go would have printed).
`cargo test` gets `--no-fail-fast` (it stops at the first test binary that fails, and every
test after it would be "missing"); its libtest lines in the log are read. Files the project writes
itself (`papayu.check.junit`) are sent by the check's first process once the command ended
(inside.py).

The log is read only for the formats the command's runners print there: go's events where the
command runs `go test` with -json, libtest's lines where it runs `cargo test`, TAP where it runs
`node --test` with a reporter of its own (or `prove`, `tape`, `tap`). Lines of those formats
printed by anything else (code under test) are not results.

Left alone: a runner whose output is piped (the reader at the pipe's end expects its usual
output), one given its own reporter or report file. A runner run twice in one check writes its
report twice: the last run's is read. A runner named only inside a script (`make test` running
`cargo test`) is not seen: its log lines are not read.
"""

from __future__ import annotations

import re
import shlex
from collections.abc import Mapping
from dataclasses import dataclass
from pathlib import Path, PurePosixPath

from papayu_git import settings
from papayu_git.errors import PapayuError

PYTEST_XML = "pytest.xml"
NODE_XML = "node.xml"
JEST_JSON = "jest.json"
VITEST_XML = "vitest.xml"
REPORT_FILES = (PYTEST_XML, NODE_XML, JEST_JSON, VITEST_XML)
JUNIT_DIR = "junit"  # the papayu.check.junit files, at their paths from the root

# The sources a run's results come from, by name (TestResults.sources).
PYTEST_STREAM = "pytest stream"
PYTEST_JUNIT = "pytest junit"
NODE_JUNIT = "node junit"
JEST = "jest json"
VITEST = "vitest junit"
GO_JSON = "go test -json"
LIBTEST = "cargo libtest"
TAP = "tap"
JUNIT_COPY = "junit:"  # + the file's path from the root
_FILES = {NODE_JUNIT: NODE_XML, JEST: JEST_JSON, VITEST: VITEST_XML}

_WORD_END = r"(?=$|[\s;&|)])"
_NODE_TEST = re.compile(r"(?<![\w./@-])(node(?:\s+-[^\s;&|]+)*?\s+--test)" + _WORD_END)
_JEST = re.compile(r"(?<![\w./@-])((?:[\w.@-]*/)*jest)" + _WORD_END)
_VITEST = re.compile(r"(?<![\w./@-])((?:[\w.@-]*/)*vitest(?:\s+(?:run|watch|dev|related))?)" + _WORD_END)
_CARGO_TEST_COMMAND = re.compile(r"(?<![\w./@-])(cargo(?:\s+\+[\w.-]+)?\s+test)" + _WORD_END)
_GO_TEST = re.compile(r"(?<![\w./@-])(go\s+test)" + _WORD_END)
_CARGO_TEST = re.compile(r"(?<![\w./@-])cargo(?:\s+\+\S+)?(?:\s+-[^\s;&|]+)*\s+(?:test|t)" + _WORD_END)
_TAP_RUNNER = re.compile(r"(?<![\w./@-])(?:[\w.@-]*/)*(?:prove|tape|tap)" + _WORD_END)
_NPM_SCRIPT = re.compile(r"(?:npm|pnpm)\s+(?:run|run-script)\s+$")
# Characters a papayu.check.junit glob may use: none the shell would read as more than a glob.
_SAFE_GLOB = re.compile(r"[\w./*?\[\]@+=:-]+")


@dataclass(frozen=True)
class Instrumented:
    command: str  # what runs
    env: dict[str, str]  # the variables to add
    readers: frozenset[str]  # the sources its results may come from (besides papayu.check.junit files)


def instrument(command: str, report_dir: str, *, env: Mapping[str, str] | None = None) -> tuple[str, dict[str, str]]:
    """The command to run and the variables to add so that the runners write their results under
    ``report_dir`` (the path inside the check; it must exist and be writable there). ``env`` is
    the check's environment (an existing PYTEST_ADDOPTS is kept)."""
    done = instrumented(command, report_dir, env=env)
    return done.command, done.env


def instrumented(command: str, report_dir: str, *, env: Mapping[str, str] | None = None) -> Instrumented:
    """`instrument`, and which sources the run's results may come from: a report papayu asked
    for, or a format a runner of the command prints to the log."""
    env = env or {}
    extra: dict[str, str] = {}
    original = command  # what the user asked for decides; our own flags do not
    readers = {PYTEST_STREAM}
    addopts = env.get("PYTEST_ADDOPTS", "")
    if not re.search(r"--junit-?xml|no:junitxml", f"{original} {addopts}"):
        # xunit1 names the test's file: ids become pytest's own node ids (junit.py).
        ours = f"--junitxml={shlex.quote(f'{report_dir}/{PYTEST_XML}')} -o junit_family=xunit1"
        extra["PYTEST_ADDOPTS"] = f"{addopts} {ours}".strip()
        readers.add(PYTEST_JUNIT)
    if "--test-reporter" not in f"{original} {env.get('NODE_OPTIONS', '')}" and not _piped("--test", original):
        flags = "--test-reporter=spec --test-reporter-destination=stdout --test-reporter=junit"
        destination = shlex.quote(f"{report_dir}/{NODE_XML}")
        command = _NODE_TEST.sub(rf"\1 {flags} --test-reporter-destination={destination}", command)
    if not re.search(r"--json\b|--outputFile", original):
        command = _after(_JEST, command, f"--json --outputFile={shlex.quote(f'{report_dir}/{JEST_JSON}')}")
    if "--reporter" not in original:
        junit = shlex.quote(f"{report_dir}/{VITEST_XML}")
        command = _after(_VITEST, command, f"--reporter=default --reporter=junit --outputFile.junit={junit}")
    if not re.search(r"(?<!\S)-json\b", original) and not _piped(r"go\s+test", original):
        command = _GO_TEST.sub(r"\1 -json", command)
    command = _CARGO_TEST_COMMAND.sub(_no_fail_fast, command)
    readers |= _log_readers(original, command, report_dir)
    return Instrumented(command, extra, frozenset(readers))


def _log_readers(original: str, command: str, report_dir: str) -> set[str]:
    """The reports asked for (their paths are in the command now) and the formats the command's
    runners print to the log."""
    asked = {name for name, file in _FILES.items() if shlex.quote(f"{report_dir}/{file}") in command}
    out = set(asked)
    if _GO_TEST.search(original) and re.search(r"(?<!\S)-json\b", command) and not _piped(r"go\s+test", original):
        out.add(GO_JSON)
    if _CARGO_TEST.search(original):
        out.add(LIBTEST)
    if _TAP_RUNNER.search(original) or (_NODE_TEST.search(original) and NODE_JUNIT not in asked):
        out.add(TAP)
    return out


def _piped(runner: str, command: str) -> bool:
    """Whether the runner's output goes into a pipe (`go test -v | go-junit-report`): the reader
    at its end expects the output it has always had."""
    return re.search(runner + r"(?=$|\s)(?:[^;&|]|[<>]&|&>)*\|(?!\|)", command) is not None


def _no_fail_fast(match: re.Match[str]) -> str:
    """`cargo test` with `--no-fail-fast` right after it (never among the test binaries' args
    after `--`), unless its own options up to `--` or the command's end already say it."""
    own = re.split(r"(?<!\S)--(?!\S)|[;&|)]", match.string[match.end() :], maxsplit=1)[0]
    if re.search(r"(?<!\S)--no-fail-fast(?!\S)", own) or _NPM_SCRIPT.search(match.string[: match.start()]):
        return match.group(0)
    return f"{match.group(0)} --no-fail-fast"


def _after(pattern: re.Pattern[str], command: str, flags: str) -> str:
    """``flags`` after each match of ``pattern`` that is the runner itself, not an npm script's name
    (`npm run jest --json` would give --json to npm)."""

    def insert(match: re.Match[str]) -> str:
        if _NPM_SCRIPT.search(command[: match.start()]):
            return match.group(0)
        return f"{match.group(0)} {flags}"

    return pattern.sub(insert, command)


def junit_patterns(repo_root: Path) -> list[str]:
    """`papayu.check.junit`: globs, relative to the repository's root, of JUnit XML files the
    check writes (`build/test-results/*.xml`)."""
    raw = settings.get("check_junit", str(repo_root))
    patterns = []
    for item in (part.strip() for part in raw.split(",")):
        if not item:
            continue
        path = PurePosixPath(item)
        if not _SAFE_GLOB.fullmatch(item) or path.is_absolute() or ".." in path.parts:
            raise PapayuError(
                "ERR_CONFIG_INVALID",
                f"papayu.check.junit has {item!r}: not a glob from the repository's root",
                path="papayu.check.junit",
                hint="List paths or globs (*, ?, [...]) relative to the root, without spaces or `..`, "
                "e.g. `git config papayu.check.junit build/test-results/*.xml`.",
            )
        patterns.append(str(path))
    return patterns
