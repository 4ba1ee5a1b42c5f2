"""What a plan may change and still be judged by the tip (docs/DESIGN.md, "What judges a plan").

A plan's verdict is the tip's tests run on the plan's code. Everything else that shapes that
verdict must come from the tip: the tests and their helpers, the data and expected values they
read, the runner's configuration and plugins, the scripts the check command runs, the
environment. Listing what judges a plan (test files, runner configs) left everything the list
forgot in the plan's hands: a Makefile recipe that repairs the code inside the sandbox, a Go
golden file, a `pytest.toml`, a `*.dist-info` entry point, an in-package `tests/helpers.py`.

So the rule is the other way round, in one place: a plan's **code** is a source file of a
language papayu knows, outside test, support, data and tooling locations, that is neither a file
the check command runs nor a new module standing in for the runner or the standard library.
Everything else a plan changes judges it: the regression run takes it from the tip
(check/judge_tree.py), and the plan's own run (its tree as is) shows whether the plan's version
changes the outcome (check/verdict.py: held for a human, named, when it does).
"""

from __future__ import annotations

import fnmatch
import re
import shlex
import sys
from collections.abc import Iterable, Sequence
from typing import Protocol

from papayu_git.judge_support import Tree as SupportTree
from papayu_git.judge_support import test_support
from papayu_git.paths import is_protected as _matches  # the gitignore-like matcher (test patterns)

# Source files by suffix (case-folded): what a test process runs as the code under test.
SOURCE_SUFFIXES = frozenset(
    [
        ".py",
        ".pyi",
        ".pyx",
        ".pxd",
        ".js",
        ".mjs",
        ".cjs",
        ".jsx",
        ".ts",
        ".mts",
        ".cts",
        ".tsx",
        ".vue",
        ".svelte",
        ".go",
        ".rs",
        ".java",
        ".kt",
        ".scala",
        ".groovy",
        ".c",
        ".h",
        ".cc",
        ".cpp",
        ".cxx",
        ".hh",
        ".hpp",
        ".hxx",
        ".m",
        ".mm",
        ".swift",
        ".cs",
        ".fs",
        ".rb",
        ".php",
        ".ex",
        ".exs",
        ".erl",
        ".hrl",
        ".hs",
        ".ml",
        ".mli",
        ".lua",
        ".dart",
        ".zig",
        ".nim",
        ".jl",
        ".clj",
        ".cljs",
        ".elm",
    ]
)
# Directories of tests, their support and their data, at any depth.
TEST_DIRS = frozenset(
    [
        "tests",
        "test",
        "testing",
        "__tests__",
        "__test__",
        "spec",
        "specs",
        "e2e",
        "testdata",
        "test_data",
        "test-data",
        "testutil",
        "testutils",
        "test_utils",
        "test_helpers",
        "testhelpers",
        "fixtures",
        "__fixtures__",
        "__snapshots__",
        "snapshots",
        "__mocks__",
        "mocks",
        "golden",
        "goldens",
        "benches",
        "benchmarks",
    ]
)
# Directories of tooling, documentation and examples at the root of the repository.
ROOT_TOOLING_DIRS = frozenset(
    [
        "scripts",
        "script",
        "tools",
        "ci",
        "docs",
        "doc",
        "examples",
        "example",
        "bench",
        "buildSrc",
        "build-support",
        "hack",
        "vendor",
        "third_party",
    ]
)
# Environments and what installers leave in them, at any depth.
ENVIRONMENT_DIRS = frozenset(["node_modules", "venv", "site-packages", "dist-packages", "__pycache__"])
ENVIRONMENT_SUFFIXES = (".dist-info", ".egg-info", ".egg-link")
# Files that run the tests, build the project or start with every interpreter (any depth):
# build scripts, task files, runner setup files, Python's startup hooks.
TOOLING_FILES = (
    "setup.py", "conftest.py", "noxfile.py", "toxfile.py", "fabfile.py", "tasks.py", "dodo.py", "pavement.py",
    "hatch_build.py", "build.rs", "magefile.go", "Gruntfile.*", "gulpfile.*", "Jakefile.*", "*.config.*",
    "*.conf.js", "setupTests.*", "setup-tests.*", "jest.setup.*", "vitest.setup.*", "test-setup.*",
    "*.gradle.kts", "sitecustomize.py", "usercustomize.py",
)  # fmt: skip
# Test files by name, whatever the configured patterns say (any depth).
TEST_FILES = (
    "test_*.py", "*_test.py", "*_tests.py", "*_test.go", "*.test.*", "*.spec.*", "*Test.java", "*Tests.java",
    "*IT.java", "*Test.kt", "*Tests.kt", "*_spec.rb", "*_test.rb", "*_test.c", "*_test.cc", "*_test.cpp",
    "*_unittest.cc", "test_*.c",
)  # fmt: skip
# What a test runner imports besides the standard library: a new top-level module of one of these
# names (or of a standard module) stands in for the runner in a flat layout, where the working
# directory comes first on sys.path.
RUNNER_MODULES = frozenset(
    [
        "pytest",
        "_pytest",
        "py",
        "pluggy",
        "iniconfig",
        "packaging",
        "exceptiongroup",
        "tomli",
        "colorama",
        "pygments",
        "unittest",
        "nose",
        "nose2",
        "coverage",
        "xdist",
        "execnet",
        "hypothesis",
        "typing_extensions",
        "attr",
        "attrs",
        "pytest_cov",
        "pytest_asyncio",
        "pytest_mock",
        "anyio",
        "trio",
    ]
)
# What the check command runs by name: a runner word -> the files it reads first.
COMMAND_FILES = {
    "make": ("Makefile", "makefile", "GNUmakefile"),
    "gmake": ("Makefile", "makefile", "GNUmakefile"),
    "tox": ("tox.ini",),
    "nox": ("noxfile.py",),
    "just": ("justfile", "Justfile", ".justfile"),
    "task": ("Taskfile.yml", "Taskfile.yaml"),
    "invoke": ("tasks.py",),
    "inv": ("tasks.py",),
    "rake": ("Rakefile",),
    "mage": ("magefile.go",),
}


class Tree(Protocol):
    def entry_kind(self, path: str) -> str | None: ...


def _name_matcher(patterns: Iterable[str]) -> re.Pattern[str]:
    """Names matched as written (case matters: `Latest.java` is no test of `*Test.java`)."""
    return re.compile("|".join(fnmatch.translate(p) for p in patterns))


_TOOLING = _name_matcher(TOOLING_FILES)
_TESTS = _name_matcher(TEST_FILES)


def is_code(path: str, tip: Tree, *, tests: Sequence[str] = (), command_files: frozenset[str] = frozenset()) -> bool:
    """Whether ``path`` (a file the plan writes or deletes) is the plan's code: judged by the tip's
    tests, never itself part of their judge. ``tests``: the configured test patterns, compiled
    (testfiles.compile_patterns); ``command_files``: the files the check command runs (command_files)."""
    parts = path.split("/")
    name = parts[-1]
    suffix = name[name.rfind(".") :].casefold() if "." in name else ""
    if suffix not in SOURCE_SUFFIXES or path in command_files:
        return False
    if any(part.startswith(".") for part in parts):
        return False  # dotfiles and dot-directories: tool configuration
    if parts[0] in ROOT_TOOLING_DIRS or any(part in TEST_DIRS or part in ENVIRONMENT_DIRS for part in parts[:-1]):
        return False
    if any(part.endswith(ENVIRONMENT_SUFFIXES) for part in parts[:-1]):
        return False
    if _TOOLING.match(name) or _TESTS.match(name) or (tests and _matches(path, tests)):
        return False
    return not stands_in_for_a_module(path, tip)


def stands_in_for_a_module(path: str, tip: Tree) -> bool:
    """A new top-level Python module (at the root or in `src/`) named like the runner, one of its
    dependencies or a standard module: in a flat layout it is imported instead of the real one.
    The tip's own modules of such names (pytest's own repository) are its code."""
    parts = path.split("/")
    depth = 2 if parts[0] == "src" and len(parts) > 1 else 1
    top = parts[depth - 1]
    module = top[: -len(".py")] if depth == len(parts) and top.endswith(".py") else top
    if depth == len(parts) and not top.endswith((".py", ".pyi")):
        return False
    if module not in RUNNER_MODULES and module not in sys.stdlib_module_names:
        return False
    return tip.entry_kind("/".join(parts[:depth])) is None


# Programs that run a script named by their first operand (unless code comes from an option:
# `python -c`, `python -m`, `node -e`, `sh -c`).
INTERPRETERS = frozenset(
    ["sh", "bash", "dash", "zsh", "ksh", "python", "python3", "python2", "pypy", "pypy3", "node", "nodejs", "deno",
     "bun", "ruby", "perl", "php", "lua", "Rscript", "tclsh", "tsx", "ts-node", "coffee", "julia", "elixir", "groovy"]
)  # fmt: skip
_INLINE_CODE = frozenset(["-c", "-e", "--eval", "-p", "--print", "-E"])
# Words that run the rest of the command line as a command of its own.
WRAPPERS = frozenset(
    ["env", "exec", "command", "time", "nice", "nohup", "timeout", "xvfb-run", "cross-env", "stdbuf", "unbuffer",
     "dotenv", "with-contenv", "catchsegv", "strace", "ltrace", "valgrind", "sudo", "doas", "chronic"]
)  # fmt: skip
# Options whose value names a file the program reads as its configuration.
CONFIG_OPTIONS = frozenset(
    ["-c", "--config", "--config-file", "--configfile", "--rcfile", "--rc", "-f", "--file", "--makefile",
     "--settings", "--ini", "--conf", "--confcutdir", "--inifile", "-C", "--project", "--tsconfig", "--prefs"]
)  # fmt: skip
_SEPARATORS = frozenset([";", "&&", "||", "|", "&", "(", ")", "|&", ";;", "!", "{", "}"])


def command_files(command: str, tip: Tree) -> frozenset[str]:
    """The files of the tip the check command runs or is configured by: the program of each
    simple command when it is a file (`./check`, `ci/test.sh`), the script an interpreter runs
    (`sh ci/test.sh`, `python run_tests.py`, `bash -c "..."` read again), a file given to a
    configuration option (`-c ci/pytest.ini`, `make -f ci.mk`), and what a task runner it names
    reads first (`make` -> Makefile, `tox` -> tox.ini, ...). Not the files the program reads as
    its operands (`grep -q 'a + b' calc.py`, `python -m doctest pkg/mod.py`, `python -m
    py_compile calc.py`): there the judge is the program, and the file is what it judges."""
    found: set[str] = set()
    for words in _simple_commands(command):
        _one_command(words, tip, found)
    return frozenset(found)


def _simple_commands(command: str, depth: int = 0) -> list[list[str]]:
    try:
        lexer = shlex.shlex(command, posix=True, punctuation_chars=";&|()")
        lexer.whitespace_split = True
        words = list(lexer)
    except ValueError:
        words = command.split()
    out: list[list[str]] = [[]]
    for word in words:
        if word in _SEPARATORS or (word and set(word) <= set(";&|()")):
            out.append([])
        else:
            out[-1].append(word)
    return [w for w in out if w]


def _one_command(words: list[str], tip: Tree, found: set[str], depth: int = 0) -> None:
    while words and (("=" in words[0] and not words[0].startswith(("-", "./", "/"))) or words[0] in WRAPPERS):
        words = words[1:]
        while (words and words[0].startswith("-")) or (words and words[0].replace(".", "").isdigit()):
            words = words[1:]  # the wrapper's options (`timeout 60`, `env -i`, `nice -n 5`)
    if not words:
        return
    program = words[0]
    _add_file(program, tip, found)
    name = program.rsplit("/", 1)[-1]
    for candidate in COMMAND_FILES.get(name, ()):
        if tip.entry_kind(candidate) == "file":
            found.add(candidate)
    args = words[1:]
    if _interpreter(name):
        args = _script(name, args, tip, found, depth)
    for index, word in enumerate(args):
        option, _, value = word.partition("=")
        if option in CONFIG_OPTIONS and value:
            _add_file(value, tip, found)
        elif word in CONFIG_OPTIONS and index + 1 < len(args):
            _add_file(args[index + 1], tip, found)


def _interpreter(name: str) -> bool:
    return name in INTERPRETERS or re.fullmatch(r"python\d+(?:\.\d+)?|pypy\d*(?:\.\d+)?", name) is not None


def _script(name: str, args: list[str], tip: Tree, found: set[str], depth: int) -> list[str]:
    """The script an interpreter runs (its first operand) is a command file; returns the words
    the script or module gets (`python -m pytest -c ci/pytest.ini`: pytest's), none after inline
    code (`python -c CODE`, `sh -c CMD`: a shell's is read as a command of its own)."""
    for index, word in enumerate(args):
        if word == "-m" and index + 1 < len(args):
            return args[index + 2 :]
        if word in _INLINE_CODE:
            shell = name in ("sh", "bash", "dash", "zsh", "ksh")
            if word == "-c" and shell and index + 1 < len(args) and depth < 3:
                for words in _simple_commands(args[index + 1]):
                    _one_command(words, tip, found, depth + 1)
            return []
        if (word in ("run", "test") and name in ("deno", "bun")) or word == "--" or word.startswith("-"):
            continue
        _add_file(word, tip, found)
        return args[index + 1 :]
    return []


def _add_file(word: str, tip: Tree, found: set[str]) -> None:
    rel = word[2:] if word.startswith("./") else word
    if rel and not rel.startswith("/") and ".." not in rel.split("/") and tip.entry_kind(rel) == "file":
        found.add(rel)


def judging_paths(
    changed: Iterable[str], tip: Tree, *, tests: Sequence[str] = (), command: str = "", support: Sequence[str] = ()
) -> list[str]:
    """The paths of ``changed`` that are not the plan's code (is_code), and those that are test
    support by what the tip's tests use (judge_support.py; ``support``: what the tip's run
    loaded as such), sorted."""
    files = command_files(command, tip) if command else frozenset()
    judging: list[str] = []
    code: list[str] = []
    for path in changed:
        (code if is_code(path, tip, tests=tests, command_files=files) else judging).append(path)
    if code and isinstance(tip, SupportTree):
        is_test = lambda p: not is_code(p, tip, tests=tests, command_files=files)  # noqa: E731
        judging += test_support(tip, code, is_test, loaded=support)
    return sorted(judging)
