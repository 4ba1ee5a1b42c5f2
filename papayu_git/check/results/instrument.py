"""Making the check's test runner write results papayu can read, without changing what passes.

pytest (and unittest suites run by pytest) are told through PYTEST_ADDOPTS, whatever runs them
(`make test`, tox, a script). The runners that need a flag are found in the command's text:
`node --test` also writes JUnit (its spec output stays on stdout), jest its JSON, vitest JUnit
(its default output stays), and `go test` becomes `go test -json`: go has no second reporter,
so the check's log holds go's JSON events, read back for the results (`go_plain_text` gives the
text go would have printed). `cargo test` gets `--no-fail-fast` (it stops at the first test binary that
fails, and every test after it would be "missing"); its libtest lines in the log are read.
Files the project writes itself (`papayu.check.junit`) are copied into the report directory
when the check's shell exits: in the sandbox, the checkout's writes vanish with it.

Left alone: a runner whose output is piped (the reader at the pipe's end expects its usual
output), one given its own reporter or report file. A runner run twice in one check writes its
report twice: the last run's is read. A command that replaces its shell (`exec`) or sets its own
EXIT trap skips the copy of the `papayu.check.junit` files.
"""

from __future__ import annotations

import re
import shlex
from collections.abc import Mapping, Sequence
from pathlib import Path, PurePosixPath

from papayu_git import settings
from papayu_git.errors import PapayuError

PYTEST_XML = "pytest.xml"
NODE_XML = "node.xml"
JEST_JSON = "jest.json"
VITEST_XML = "vitest.xml"
JUNIT_DIR = "junit"  # copies of the papayu.check.junit files, at their paths from the root

_WORD_END = r"(?=$|[\s;&|)])"
_NODE_TEST = re.compile(r"(?<![\w./@-])(node(?:\s+-[^\s;&|]+)*?\s+--test)" + _WORD_END)
_JEST = re.compile(r"(?<![\w./@-])((?:[\w.@-]*/)*jest)" + _WORD_END)
_VITEST = re.compile(r"(?<![\w./@-])((?:[\w.@-]*/)*vitest(?:\s+(?:run|watch|dev|related))?)" + _WORD_END)
_CARGO_TEST = re.compile(r"(?<![\w./@-])(cargo(?:\s+\+[\w.-]+)?\s+test)" + _WORD_END)
_GO_TEST = re.compile(r"(?<![\w./@-])(go\s+test)" + _WORD_END)
_NPM_SCRIPT = re.compile(r"(?:npm|pnpm)\s+(?:run|run-script)\s+$")
# Characters a papayu.check.junit glob may use: none the shell would read as more than a glob.
_SAFE_GLOB = re.compile(r"[\w./*?\[\]@+=:-]+")


def instrument(
    command: str, report_dir: str, *, junit_globs: Sequence[str] = (), env: Mapping[str, str] | None = None
) -> tuple[str, dict[str, str]]:
    """The command to run and the variables to add so that the runners write their results under
    ``report_dir`` (the path inside the check; it must exist and be writable there). ``env`` is
    the check's environment (an existing PYTEST_ADDOPTS is kept)."""
    env = env or {}
    extra: dict[str, str] = {}
    original = command  # what the user asked for decides; our own flags do not
    addopts = env.get("PYTEST_ADDOPTS", "")
    if not re.search(r"--junit-?xml|no:junitxml", f"{original} {addopts}"):
        # xunit1 names the test's file: ids become pytest's own node ids.
        ours = f"--junitxml={shlex.quote(f'{report_dir}/{PYTEST_XML}')} -o junit_family=xunit1"
        extra["PYTEST_ADDOPTS"] = f"{addopts} {ours}".strip()
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
    command = _CARGO_TEST.sub(_no_fail_fast, command)
    if junit_globs:
        command = _copy_on_exit(junit_globs, f"{report_dir}/{JUNIT_DIR}") + command
    return command, extra


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


def _copy_on_exit(globs: Sequence[str], dest: str) -> str:
    """Shell words that copy the files matching ``globs`` (relative to the directory the command
    starts in) to ``dest`` when the shell exits, however it exits, keeping its exit status."""
    target = shlex.quote(dest)
    copy = (
        f'{{ cd "$papayu_check_root" && for f in {" ".join(globs)}; do if [ -f "$f" ]; then '
        f'mkdir -p {target}/"$(dirname "$f")" && cp "$f" {target}/"$f"; fi; done; }} 2>/dev/null'
    )
    return f"papayu_check_root=$PWD; trap {shlex.quote(copy)} EXIT; "


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
