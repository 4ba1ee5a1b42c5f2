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


def command_files(command: str, tip: Tree) -> frozenset[str]:
    """The files of the tip the check command runs by name: its words that are files of the tip
    (`sh ci/test.sh`, `python run_tests.py`, `./check`), and what a task runner it names reads first
    (`make` -> Makefile, `tox` -> tox.ini, ...)."""
    try:
        words = shlex.split(command)
    except ValueError:
        words = command.split()
    found: set[str] = set()
    for word in words:
        if "=" in word and not word.startswith(("./", "/")):
            word = word.split("=", 1)[1]  # --rcfile=ci/x.cfg, -c=conf.py
        rel = word[2:] if word.startswith("./") else word
        if rel and not rel.startswith("/") and ".." not in rel.split("/") and tip.entry_kind(rel) == "file":
            found.add(rel)
        for candidate in COMMAND_FILES.get(word.rsplit("/", 1)[-1], ()):
            if tip.entry_kind(candidate) == "file":
                found.add(candidate)
    return frozenset(found)


def judging_paths(changed: Iterable[str], tip: Tree, *, tests: Sequence[str] = (), command: str = "") -> list[str]:
    """The paths of ``changed`` that are not the plan's code (is_code), sorted."""
    files = command_files(command, tip) if command else frozenset()
    return sorted(p for p in changed if not is_code(p, tip, tests=tests, command_files=files))
