"""Making the check's test runners write results papayu can read, without changing what passes,
and knowing from the command which results a run may have (docs/DESIGN.md, "A verdict per test"
and "What the check runs").

What the command runs is read on the tip's tree, through its package scripts (check/scripts.py),
and each command that runs is classified (runners.py). pytest (and unittest suites run by
pytest) is told through PYTEST_ADDOPTS, wherever it runs, and papayu's plugin streams it where
it loads (pytest_plugin.py). jest and vitest, wherever a script runs them, are given a report by
papayu's hook in their own process (node_reports.cjs, loaded through NODE_OPTIONS): jest its
JSON, vitest its JSON reporter (its usual output stays), one file per run. `node --test` named
in the command also writes JUnit (its spec output stays on stdout); run by a script, its TAP
lines are read from the log. `go test` in the command becomes `go test -json`: go has no second
reporter, so the check's log holds go's JSON events, read back for the results (`go_plain_text`
gives the text go would have printed). `cargo test` gets `--no-fail-fast` (it stops at the first
test binary that fails, and every test after it would be "missing"); its libtest lines in the log
are read. gotestsum, wherever it runs (behind make too), is given its own variable,
GOTESTSUM_JSONFILE, and the file of go's events it writes there is read as `go test -json` is.
Maven (`--fail-at-end`) and Gradle (`--continue`) named in the command go on past a
failing module, so that its failure hides no other module's tests; their surefire and failsafe
reports and test results are found under the root once the command ended, as are the files the
project names itself (`papayu.check.junit`, which then replaces them); all are sent by the
check's first process (inside.py). tox is given its own `TOX_SKIP_PKG_INSTALL` and a
`TOX_OVERRIDE` passing papayu's variables to its environments, nox named in the command `-R`: the
session runs in the environment the user has, offline, and the pytest or unittest inside is read
like any other (docs/DESIGN.md, "What the check runs": tox and nox).

The log is read only for the formats the command's runners print there: go's events where the
command runs `go test` with -json, libtest's lines where it runs `cargo test`, TAP where it runs
`node --test` with a reporter of its own or through a script (or `prove`, `tape`, `tap`). Lines
of those formats printed by anything else (code under test) are not results.

Left alone: a runner whose output is piped (the reader at the pipe's end expects its usual
output), one given its own reporter or report file. A runner run twice in one check reports its
tests twice: a collision. A runner papayu knows and cannot read is said (`notes`), with what to
set; the verdict is then the exit code's unless another runner gives per-test results.
"""

from __future__ import annotations

import re
import shlex
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path, PurePosixPath

from papayu_git import settings
from papayu_git.check import scripts
from papayu_git.check.results import runners
from papayu_git.check.scripts import Runs
from papayu_git.errors import PapayuError

PYTEST_XML = "pytest.xml"
JEST_JSON = "jest-*.json"  # one per jest run: node_reports.cjs names them after the process
VITEST_JSON = "vitest-*.json"
NODE_TEST_JSON = "node-test-*.jsonl"  # one per node --test runner: node_test_reporter.cjs
GOTESTSUM_JSON = "gotestsum.jsonl"  # go test -json's events, written by gotestsum wherever it runs
REPORT_FILES = (PYTEST_XML, JEST_JSON, VITEST_JSON, NODE_TEST_JSON, GOTESTSUM_JSON)
# gotestsum's own variable for its --jsonfile: read by every gotestsum, whatever runs it.
GOTESTSUM_VAR = "GOTESTSUM_JSONFILE"
JUNIT_DIR = "junit"  # the papayu.check.junit files, at their paths from the root
# The build tools' reports, found under the root (inside.py matches `**` at any depth).
MAVEN_DIR, GRADLE_DIR = "maven", "gradle"
MAVEN_REPORTS = ("**/target/surefire-reports/TEST-*.xml", "**/target/failsafe-reports/TEST-*.xml")
GRADLE_REPORTS = ("**/build/test-results/*/TEST-*.xml",)
# node_reports.cjs reads these: where to write, and which runners to give a report.
NODE_REPORTS_VAR = "PAPAYU_NODE_REPORTS"
NODE_RUNNERS_VAR = "PAPAYU_NODE_RUNNERS"
# Set when node --test runs: NODE_OPTIONS then names papayu's reporter (channel.node_options).
NODE_TEST_VAR = "PAPAYU_NODE_TEST"
# What tox must pass on to its environments for papayu's reporters to load there (tox_override).
TOX_PASSED = ("PYTHONPATH", "PYTEST_ADDOPTS", "PYTHONSAFEPATH")

# The sources a run's results come from, by name (TestResults.sources).
PYTEST_STREAM = "pytest stream"
UNITTEST_STREAM = "unittest stream"
PYTEST_JUNIT = "pytest junit"
NODE_TEST_EVENTS = "node --test reporter"
JEST = "jest json"
VITEST = "vitest json"
GO_JSON = "go test -json"
GOTESTSUM = "gotestsum jsonfile"
LIBTEST = "cargo libtest"
TAP = "tap"
MAVEN = "maven surefire"
GRADLE = "gradle junit"
JUNIT_COPY = "junit:"  # + the file's path from the root

_WORD_END = r"(?=$|[\s;&|)])"
_CARGO_TEST_COMMAND = re.compile(r"(?<![\w./@-])(cargo(?:\s+\+[\w.-]+)?\s+test)" + _WORD_END)
_NPM_SCRIPT = re.compile(r"(?:npm|pnpm)\s+(?:run|run-script)\s+$")
_GO_TEST = re.compile(r"(?<![\w./@-])(go\s+test)" + _WORD_END)
_CARGO_TEST = re.compile(r"(?<![\w./@-])cargo(?:\s+\+\S+)?(?:\s+-[^\s;&|]+)*\s+(?:test|t)" + _WORD_END)
_MAVEN = re.compile(r"(?<![\w.@-])((?:[\w.@-]*/)*(?:mvnw?|mvnd))" + _WORD_END)
_GRADLE = re.compile(r"(?<![\w.@-])((?:[\w.@-]*/)*gradlew?)" + _WORD_END)
_NOX = re.compile(r"(?<![\w.@-])((?:[\w.@-]*/)*nox)" + _WORD_END)
_TAP_RUNNER = re.compile(r"(?<![\w./@-])(?:[\w.@-]*/)*(?:prove|tape|tap)" + _WORD_END)
# Characters a papayu.check.junit glob may use: none the shell would read as more than a glob.
_SAFE_GLOB = re.compile(r"[\w./*?\[\]@+=:-]+")
_BY_RUNNER = {
    runners.JEST: JEST,
    runners.VITEST: VITEST,
    runners.CARGO: LIBTEST,
    runners.TAP_PRODUCER: TAP,
    runners.NODE_TEST: NODE_TEST_EVENTS,
    runners.MAVEN: MAVEN,
    runners.GRADLE: GRADLE,
}


@dataclass(frozen=True)
class Instrumented:
    command: str  # what runs
    env: dict[str, str]  # the variables to add
    readers: frozenset[str]  # the sources its results may come from (besides papayu.check.junit files)
    reports: tuple[tuple[str, str], ...] = ()  # (directory in the delivery, glob from the root): build tools'
    notes: tuple[str, ...] = ()  # the runners papayu cannot read, and what to set
    runners: frozenset[str] = frozenset()  # the runners papayu reads that the command runs (runners.py)


def instrument(command: str, report_dir: str, *, env: Mapping[str, str] | None = None) -> tuple[str, dict[str, str]]:
    """The command to run and the variables to add so that the runners write their results under
    ``report_dir`` (the path inside the check; it must exist and be writable there). ``env`` is
    the check's environment (an existing PYTEST_ADDOPTS is kept)."""
    done = instrumented(command, report_dir, env=env)
    return done.command, done.env


def instrumented(
    command: str,
    report_dir: str,
    *,
    env: Mapping[str, str] | None = None,
    runs: Runs | None = None,
    junit: Sequence[str] = (),
    reinstall: bool = False,
) -> Instrumented:
    """`instrument`, and which sources the run's results may come from: a report papayu asked
    for, or a format a runner of the command prints to the log. ``runs``: what the command runs
    through its scripts, read on the tip (None: its own text alone); ``junit``: the
    papayu.check.junit globs, which replace the build tools' reports; ``reinstall``:
    papayu.check.reinstall (tox and nox install the project as they would)."""
    env = env or {}
    runs = runs if runs is not None else scripts.resolve(command, None)
    original = command  # what the user asked for decides; our own flags do not
    # papayu's reporters and gotestsum's file (GOTESTSUM_JSONFILE), wherever the runner runs: a
    # recipe papayu does not read (`make test`) reaches them too.
    readers = {PYTEST_STREAM, UNITTEST_STREAM, GOTESTSUM}
    extra: dict[str, str] = {GOTESTSUM_VAR: f"{report_dir}/{GOTESTSUM_JSON}"}
    addopts = env.get("PYTEST_ADDOPTS", "")
    if not re.search(r"--junit-?xml|no:junitxml", f"{original} {addopts}"):
        # xunit1 names the test's file: ids become pytest's own node ids (junit.py).
        ours = f"--junitxml={shlex.quote(f'{report_dir}/{PYTEST_XML}')} -o junit_family=xunit1"
        extra["PYTEST_ADDOPTS"] = f"{addopts} {ours}".strip()
        readers.add(PYTEST_JUNIT)
    if not re.search(r"(?<!\S)-json\b", original) and not _piped(r"go\s+test", original):
        command = _GO_TEST.sub(r"\1 -json", command)
    command = _CARGO_TEST_COMMAND.sub(_no_fail_fast, command)
    # A failing module must not hide the tests of the modules after it (as cargo's --no-fail-fast).
    if not re.search(r"(?<!\S)(-fae|--fail-at-end|-ff|--fail-fast|-fn|--fail-never)(?!\S)", original):
        command = _MAVEN.sub(r"\1 --fail-at-end", command)
    if not re.search(r"(?<!\S)--continue(?!\S)", original):
        command = _GRADLE.sub(r"\1 --continue", command)
    # The session's environment as it is: no reinstall, which would need the network (project_copies.py).
    if not reinstall and not re.search(r"(?<!\S)(-R|--no-install)(?!\S)", original):
        command = _NOX.sub(r"\1 -R", command)
    readers |= _log_readers(original, command)
    found = {runners.classify(leaf).runner for leaf in runs.leaves}
    if runners.NODE_TEST in found and "--test-reporter" in env.get("NODE_OPTIONS", ""):
        found = (found - {runners.NODE_TEST}) | {runners.TAP_PRODUCER}  # the environment chose its reporter
    if runners.NODE_TEST in found:
        extra.update({NODE_REPORTS_VAR: report_dir, NODE_TEST_VAR: "1"})
    if runners.TOX in found:  # tox's own options, read from the environment wherever tox runs
        extra["TOX_OVERRIDE"] = tox_override(runs.leaves, env)
        if not reinstall:
            extra["TOX_SKIP_PKG_INSTALL"] = "true"
    if junit:  # the user named the JUnit files: the build tools' are among them
        found -= {runners.MAVEN, runners.GRADLE}
    readers |= {_BY_RUNNER[r] for r in found if r in _BY_RUNNER}
    node = sorted(r for r in found if r in (runners.JEST, runners.VITEST))
    if node:
        extra.update({NODE_REPORTS_VAR: report_dir, NODE_RUNNERS_VAR: ",".join(node)})
    reports = [(MAVEN_DIR, g) for g in MAVEN_REPORTS] if runners.MAVEN in found else []
    reports += [(GRADLE_DIR, g) for g in GRADLE_REPORTS] if runners.GRADLE in found else []
    notes = (*runs.notes, *runners.notes(runs.leaves))
    return Instrumented(
        command, extra, frozenset(readers), tuple(reports), notes, frozenset(r for r in found if r is not None)
    )


def tox_override(leaves: Sequence[scripts.Leaf], env: Mapping[str, str]) -> str:
    """TOX_OVERRIDE giving tox's environments the variables papayu's reporters need: tox passes an
    environment only what its `pass_env` names. Added to the base environment in each spelling of
    tox's configuration formats (tox.ini's `testenv`, tox.toml's `env_run_base`, pyproject's
    `tool.tox.env_run_base`; a spelling a project does not use changes nothing) and to each
    environment the command names (`-e`, TOXENV), whose own `pass_env` would replace the base's."""
    names: list[str] = [n for n in env.get("TOXENV", "").split(",") if n]
    for leaf in leaves:
        if leaf.program != "tox":
            continue
        words = list(leaf.words[1:])
        for index, word in enumerate(words):
            if word in ("-e", "--env"):
                value = words[index + 1] if index + 1 < len(words) else ""
            elif word.startswith("--env="):
                value = word[len("--env=") :]
            elif word.startswith("-e") and not word.startswith("--"):
                value = word[2:].lstrip("=")
            else:
                continue
            names += value.split(",")
    sections = ["testenv", "env_run_base", "tool.tox.env_run_base"]
    for name in dict.fromkeys(n.strip() for n in names if n.strip() and n.strip() != "ALL"):
        quoted = name.replace(".", "\\.")
        sections += [f"testenv:{quoted}", f"env.{quoted}", f"tool.tox.env.{quoted}"]
    ours = ";".join(f"{section}.pass_env+={','.join(TOX_PASSED)}" for section in sections)
    return f"{env['TOX_OVERRIDE']};{ours}" if env.get("TOX_OVERRIDE") else ours


def _log_readers(original: str, command: str) -> set[str]:
    """The formats the command's runners print to the log."""
    out = set()
    if _GO_TEST.search(original) and re.search(r"(?<!\S)-json\b", command) and not _piped(r"go\s+test", original):
        out.add(GO_JSON)
    if _CARGO_TEST.search(original):
        out.add(LIBTEST)
    if _TAP_RUNNER.search(original):
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
