"""Which test runner a command that runs is, and whether papayu can read it (docs/DESIGN.md, "What
the check runs").

The commands come from check/scripts.py: the check command's own simple commands and those of
the package scripts it runs. Each is a runner papayu reads (jest, vitest, `node --test`, cargo,
Maven, Gradle, TAP producers), one it knows and cannot read (mocha, `python -I` keeping papayu's
unittest reporter out, go inside a script, ...: said, with what to set), or anything else (a compiler, a linter: nothing
to say). pytest needs no entry: PYTEST_ADDOPTS reaches it wherever it runs.
"""

from __future__ import annotations

import posixpath
import re
from dataclasses import dataclass

from papayu_git.check.results.outcome import TestResults
from papayu_git.check.scripts import Leaf

JEST, VITEST, NODE_TEST, CARGO, GO, GOTESTSUM, MAVEN, GRADLE, TAP_PRODUCER, TOX, NOX = (
    "jest",
    "vitest",
    "node --test",
    "cargo test",
    "go test",
    "gotestsum",
    "maven",
    "gradle",
    "tap",
    "tox",
    "nox",
)
# What the preload (node_reports.cjs) recognises as the runner's own entry point.
_JEST_BIN = re.compile(r"(^|/)node_modules/(jest|jest-cli)/bin/jest\.js$")
_VITEST_BIN = re.compile(r"(^|/)node_modules/vitest/vitest\.mjs$")
# jest's and vitest's arguments that make papayu leave the run alone (node_reports.cjs: the same).
JEST_OWN = ("--json", "--outputFile", "--watch", "--watchAll", "--listTests", "--showConfig", "--init")
VITEST_OWN = ("--outputFile", "--watch")
VITEST_NOT_TESTS = ("bench", "list", "init")
SET = (
    "set papayu.check.command to the runner itself with its options, or papayu.check.junit to the JUnit XML files "
    "it writes"
)
_UNREAD = {
    "mocha": "mocha's reporters print no per-test report papayu reads",
    "ava": "ava's output is not a per-test report papayu reads (`ava --tap` is)",
    "karma": "karma's reporters print no per-test report papayu reads",
    "jasmine": "jasmine's output is not a per-test report papayu reads",
    "playwright": "playwright's reporters print no per-test report papayu reads (its junit reporter writes one)",
    "cypress": "cypress's reporters print no per-test report papayu reads (its junit reporter writes one)",
    "uvu": "uvu's output is not a per-test report papayu reads",
    "react-scripts": "react-scripts runs jest inside its own process, where papayu cannot give it a reporter",
    "craco": "craco runs jest inside its own process, where papayu cannot give it a reporter",
    "kcd-scripts": "kcd-scripts runs jest inside its own process, where papayu cannot give it a reporter",
    "ng": "the Angular CLI's test runners print no per-test report papayu reads",
    "bun": "bun's test runner prints no per-test report papayu reads",
    "deno": "deno's test runner prints no per-test report papayu reads",
    "nx": "nx runs the projects' targets from its own cache and processes: papayu does not read through it",
    "turbo": "turbo replays cached task output instead of running the tests: papayu does not read through it",
    "lerna": "papayu does not read the scripts lerna runs",
    "make": "papayu does not read the recipe (pytest, unittest and gotestsum under it are read)",
    "just": "papayu does not read the recipe (pytest, unittest and gotestsum under it are read)",
}


@dataclass(frozen=True)
class Found:
    """What papayu makes of one command that runs."""

    runner: str | None  # a kind above when papayu reads it
    unread: str = ""  # why papayu cannot read a test runner it knows ("" when it can, or it is none)


def classify(leaf: Leaf) -> Found:
    words = list(leaf.words)
    program = leaf.program
    if program in ("node", "tsx") and _node_test(words):
        return _node_test_run(leaf, words)
    script = _node_script(words) if program == "node" else ""
    if program == "jest" or _JEST_BIN.search(script):
        return _jest(leaf, words)
    if program == "vitest" or _VITEST_BIN.search(script):
        return _vitest(leaf, words)
    if program in ("mvn", "mvnw", "mvnd"):
        return Found(MAVEN)
    if program in ("gradle", "gradlew"):
        return Found(GRADLE)
    if program == "tox":
        return Found(TOX)  # the pytest or unittest inside is read (tox_plugin.py)
    if program == "nox":
        return (
            Found(NOX)
            if not leaf.via
            else Found(None, "nox inside a script reinstalls the project, which the check cannot do offline")
        )
    if program in ("prove", "tape", "tap"):
        return Found(TAP_PRODUCER)
    if program == "cargo" and _subcommand(words[1:]) in ("test", "t"):
        return Found(CARGO)
    if program == "cargo" and _subcommand(words[1:]) == "nextest":
        return Found(None, "cargo nextest's output is not libtest's lines papayu reads")
    if program == "gotestsum" or _go_tool(words) == "gotestsum":
        if any(w.split("=", 1)[0] in ("--jsonfile", "--help", "--version") for w in words[1:]):
            return Found(None, "gotestsum is given --jsonfile of its own: its events go there, not to papayu")
        return Found(GOTESTSUM)  # it reads GOTESTSUM_JSONFILE wherever it runs (instrument.py)
    if program == "go" and _subcommand(words[1:]) == "test":
        return (
            Found(GO)
            if not leaf.via
            else Found(None, "go test inside a script prints text, not the -json events papayu reads")
        )
    if re.fullmatch(r"python[0-9.]*", program) and (flag := _no_startup_hook(words[1:])):
        return Found(
            None,
            f"python {flag} does not read PYTHONPATH or run site's start-up hook, where papayu's unittest "
            "reporter loads (pytest under it is read through its JUnit file)",
        )
    if program in ("bun", "deno") and _subcommand(words[1:]) != "test":
        return Found(None)
    if program in _UNREAD and not (program in ("react-scripts", "craco", "kcd-scripts", "ng") and "test" not in words):
        return Found(None, _UNREAD[program])
    return Found(None)


def _jest(leaf: Leaf, words: list[str]) -> Found:
    own = [w for w in words[1:] if w.split("=", 1)[0] in JEST_OWN]
    if own:
        return Found(None, f"jest is given {own[0]}: papayu leaves that run alone")
    if leaf.node_options_replaced:
        return Found(None, _NODE_OPTIONS)
    return Found(JEST)


def _vitest(leaf: Leaf, words: list[str]) -> Found:
    rest = [w for w in words[1:] if not w.startswith("-")]
    if rest[:1] and rest[0] in VITEST_NOT_TESTS:
        return Found(None)
    own = [w for w in words[1:] if w.split("=", 1)[0].split(".", 1)[0] in VITEST_OWN]
    if own:
        return Found(None, f"vitest is given {own[0]}: papayu leaves that run alone")
    if leaf.node_options_replaced:
        return Found(None, _NODE_OPTIONS)
    return Found(VITEST)


_NODE_OPTIONS = (
    "NODE_OPTIONS is set for it without keeping the variable's value, which drops the hook that gives it "
    'papayu\'s report (write NODE_OPTIONS="$NODE_OPTIONS ...")'
)


def _node_test_run(leaf: Leaf, words: list[str]) -> Found:
    """`node --test`: papayu's reporter through NODE_OPTIONS, unless the run names its own (TAP is
    read from the log)."""
    named = [w.split("=", 1)[1] if "=" in w else "" for w in words if w.split("=", 1)[0] == "--test-reporter"]
    named += [words[i + 1] for i, w in enumerate(words[:-1]) if w == "--test-reporter"]
    if named:
        if "tap" in named:
            return Found(TAP_PRODUCER)
        return Found(None, "node --test is given a reporter of its own: papayu leaves that run alone")
    if leaf.node_options_replaced:
        return Found(None, _NODE_OPTIONS)
    return Found(NODE_TEST)


_NODE_VALUED = {"-r", "--require", "--import", "--loader", "--experimental-loader", "-C", "--conditions"}


def _node_test(words: list[str]) -> bool:
    """Whether `node [options]` runs its test runner (`--require X --test` too)."""
    index = 1
    while index < len(words) and words[index].startswith("-"):
        if words[index] == "--test":
            return True
        index += 2 if words[index] in _NODE_VALUED else 1
    return False


def _node_script(words: list[str]) -> str:
    """The script `node [options] SCRIPT` runs ("" when none)."""
    values = _NODE_VALUED
    index = 1
    while index < len(words) and words[index].startswith("-"):
        index += 2 if words[index] in values else 1
    return posixpath.normpath(words[index]) if index < len(words) else ""


def _no_startup_hook(words: list[str]) -> str:
    """The interpreter option (before the script or `-m`) that keeps papayu's start-up hook out:
    -I, -E or -S, alone or among single-letter options (`-IB`); "" when none."""
    index = 0
    while index < len(words):
        word = words[index]
        if not word.startswith("-") or word.startswith("--") or word in ("-m", "-c"):
            return ""
        if word in ("-W", "-X"):  # their value is the next word
            index += 2
            continue
        found = next((c for c in "IES" if c in word[1:] and not word.startswith(("-W", "-X"))), "")
        if found:
            return f"-{found}"
        index += 1
    return ""


def _go_tool(words: list[str]) -> str:
    """The program `go tool NAME` or `go run PACKAGE[@VERSION]` runs, by its last path segment
    ("" for any other command): `go tool gotestsum`, `go run gotest.tools/gotestsum@latest`."""
    if words[:1] != ["go"] or _subcommand(words[1:]) not in ("tool", "run"):
        return ""
    rest = words[words.index(_subcommand(words[1:]), 1) + 1 :]
    target = _subcommand(rest)
    return posixpath.basename(target.split("@", 1)[0]) if target else ""


def _subcommand(words: list[str]) -> str:
    """The first word that is no option (cargo's `+toolchain` included)."""
    return next((w for w in words if not w.startswith(("-", "+"))), "")


def notes(leaves: tuple[Leaf, ...]) -> list[str]:
    """What papayu says of each test runner it cannot read: where, and what to set."""
    out = []
    for leaf in leaves:
        found = classify(leaf)
        if found.unread:
            out.append(f"{leaf.said()}: {found.unread}")
    return out


def why_exit_code_only(results: TestResults | None) -> str:
    """Why a run's verdict is its exit code's, and what to set ("" when it is read per test, or
    papayu has nothing to say): the runners it cannot read, the scripts it could not follow."""
    if results is None or not results.exit_code_only or not results.unreadable:
        return ""
    said = "; ".join(results.unreadable[:5])
    more = f" (and {len(results.unreadable) - 5} more)" if len(results.unreadable) > 5 else ""
    return f"{said}{more}; {SET}"
