"""Which paths are tests, and which existing tests a plan modifies or deletes.

A plan that rewrites an existing test (say, its assertion, to match broken code) passes any
check, so such plans need a human: `apply` asks on a terminal and otherwise stops at `review`
unless --allow-test-edits (transaction/held.py). New test files are fine.

So is a plan that changes how tests run, new files included: a `conftest.py` hook can deselect
every test, `addopts = "-k nothing"` in pytest's config runs none, `"test": "exit 0"` in
package.json passes always. Dedicated runner configs count whenever they change; shared files
(pyproject.toml, setup.cfg, package.json) only when their tests' part changes. So does code Python
runs before any test: a `*.pth` file or a `sitecustomize.py` (site.py runs them at interpreter
start), or a new top-level `pytest`/`unittest` module that replaces the runner itself.

Patterns are gitignore-like (paths.py: case-folded, '**' is any number of segments, a pattern
without '/' matches a name at any depth, '!' re-allows, the last match wins), and a pattern
naming a directory covers everything below it: `tests`, `src/tests/` and `tests/**` all work.
Where they come from, first found wins: memory `project.test_roots`, the setting
`test_patterns` (PAPAYU_TEST_PATTERNS / git config papayu.testPatterns, comma-separated),
the built-in list.
"""

from __future__ import annotations

import json
from collections.abc import Callable, Sequence
from functools import lru_cache
from pathlib import Path
from typing import TYPE_CHECKING

from papayu_git import settings
from papayu_git.memory import memory_value
from papayu_git.paths import is_protected as _matches  # the gitignore-like matcher (last match wins)

if TYPE_CHECKING:
    from papayu_git.objects import GitTree, TreeChanges

BUILTIN_TEST_PATTERNS: tuple[str, ...] = (
    "tests/**",
    "test/**",
    "**/test_*.py",
    "**/*_test.py",
    "**/conftest.py",
    "**/*_test.go",
    "**/*.test.[jt]s",
    "**/*.test.[jt]sx",
    "**/*.spec.[jt]s",
    "**/*.spec.[jt]sx",
)


# Files whose only job is to decide which tests run and how (any depth).
HARNESS_PATTERNS: tuple[str, ...] = (
    "conftest.py", "pytest.toml", ".pytest.toml", "pytest.ini", ".pytest.ini", "tox.ini", "noxfile.py",
    "jest.config.*", "vitest.config.*",
    ".mocharc*", "karma.conf.*", "phpunit.xml", "phpunit.xml.dist", ".rspec",
)  # fmt: skip
_PACKAGE_TEST_KEYS = ("jest", "mocha", "ava", "vitest", "c8", "nyc")

# A top-level module in any of its forms (package, source, bytecode, extension), at the root or in src/.
_MODULE_FORMS = ("/", ".py", ".py[cd]", ".so", ".*.so", ".*.pyd")


def _top_level_modules(*names: str) -> tuple[str, ...]:
    return tuple(f"/{root}{name}{form}" for root in ("", "src/") for name in names for form in _MODULE_FORMS)


# Run by site.py at interpreter start, before any runner: every *.pth line, then these modules.
STARTUP_HOOK_PATTERNS: tuple[str, ...] = (*_top_level_modules("sitecustomize", "usercustomize"), "*.pth")
# Found on sys.path before the installed runner, a project module of the same name replaces it.
RUNNER_MODULE_PATTERNS: tuple[str, ...] = _top_level_modules("unittest", "pytest", "_pytest", "nose2", "py")


def _pyproject_tests(data: bytes) -> object:
    import tomllib  # see changes_how_tests_run

    tool = tomllib.loads(data.decode("utf-8")).get("tool", {})
    return {key: tool.get(key) for key in ("pytest", "tox", "coverage", "hatch")}


def _setup_cfg_tests(data: bytes) -> object:
    import configparser  # see changes_how_tests_run

    parser = configparser.ConfigParser(interpolation=None)
    parser.read_string(data.decode("utf-8"))
    return {name: dict(parser[name]) for name in parser.sections() if name in ("tool:pytest", "pytest", "tox:tox")}


def _package_tests(data: bytes) -> object:
    package = json.loads(data.decode("utf-8"))
    scripts = package.get("scripts", {}) if isinstance(package, dict) else {}
    tests = {k: v for k, v in scripts.items() if "test" in k} if isinstance(scripts, dict) else scripts
    return {"scripts": tests, **{k: package.get(k) for k in _PACKAGE_TEST_KEYS if isinstance(package, dict)}}


# name -> (the tests' part of such a file, the file's content when it is absent)
_SHARED_CONFIGS: dict[str, tuple[Callable[[bytes], object], bytes]] = {
    "pyproject.toml": (_pyproject_tests, b""),
    "setup.cfg": (_setup_cfg_tests, b""),
    "package.json": (_package_tests, b"{}"),
}


def changes_how_tests_run(path: str, old: bytes | None, new: bytes | None) -> bool:
    """True when writing ``new`` over ``old`` (None: absent) at ``path`` changes which tests run or
    how: any change to a dedicated runner config, the tests' part of a shared config file."""
    if old == new:
        return False
    if _matches(path, compile_patterns(HARNESS_PATTERNS)):
        return True
    shared = _SHARED_CONFIGS.get(path.rsplit("/", 1)[-1])
    if shared is None:
        return False
    section, absent = shared
    # Only a shared config's change reads one: their parsers were ~3 ms of imports every apply paid.
    import configparser

    try:
        return section(absent if old is None else old) != section(absent if new is None else new)
    except (ValueError, UnicodeDecodeError, configparser.Error, AttributeError):
        return True  # unreadable either side: a human decides


def shadows_runner(path: str, tip: GitTree) -> bool:
    """True when ``path`` is a startup hook, or lies in a top-level module named like a test runner
    that the tip does not have (or in a plain directory of that name, made a package by its new
    ``__init__``). A runner's own repository (pytest's src/_pytest) edits its code, not a shadow."""
    if _matches(path, compile_patterns(STARTUP_HOOK_PATTERNS)):
        return True
    if not _matches(path, compile_patterns(RUNNER_MODULE_PATTERNS)):
        return False
    parts = path.split("/")
    depth = 2 if parts[0].casefold() == "src" and len(parts) > 1 else 1
    if tip.entry_kind("/".join(parts[:depth])) is None:
        return True
    return len(parts) == depth + 1 and parts[depth].startswith("__init__.") and tip.entry_kind(path) is None


def _expand(pattern: str) -> str | None:
    """One user or built-in pattern as a paths.py pattern that also covers what lies below it."""
    negate = pattern.startswith("!")
    body = (pattern[1:] if negate else pattern).strip()
    while body.startswith("./"):
        body = body[2:]
    anchored = "/" in body.rstrip("/")  # gitignore: a '/' anywhere but at the end anchors at the root
    body = body.strip("/")
    if not body:
        return None
    if body != "**" and not body.endswith("/**"):
        body += "/**"  # the path itself ('**' may be no segment at all) or anything below it
    if not anchored and body.split("/")[0] != "**":
        body = "**/" + body
    return ("!" if negate else "") + body


def compile_patterns(patterns: Sequence[str]) -> tuple[str, ...]:
    return _expanded(tuple(patterns))


@lru_cache(maxsize=32)
def _expanded(patterns: tuple[str, ...]) -> tuple[str, ...]:
    """Asked once per path and pattern list (edited_tests, shadows_runner): expanded once."""
    return tuple(p for p in (_expand(raw) for raw in patterns) if p)


def is_test_path(path: str, patterns: Sequence[str] = BUILTIN_TEST_PATTERNS) -> bool:
    """``patterns`` as written (raw): built-in, config or memory entries."""
    return _matches(path, compile_patterns(patterns))


def configured_test_patterns(repo_root: str | Path | None) -> tuple[tuple[str, ...], str]:
    """(patterns, where they come from) for this repository."""
    root = Path(repo_root) if repo_root else None
    roots = memory_value(root, "project.test_roots") if root else None
    if isinstance(roots, list) and any(isinstance(r, str) and r.strip() for r in roots):
        return tuple(r.strip() for r in roots if isinstance(r, str) and r.strip()), "memory project.test_roots"
    raw = settings.get("test_patterns", str(root) if root else None)
    configured = tuple(p.strip() for p in raw.replace("\n", ",").split(",") if p.strip())
    if configured:
        return configured, "setting test_patterns"
    return BUILTIN_TEST_PATTERNS, "built-in"


def edited_tests(base: GitTree, changes: TreeChanges, patterns: Sequence[str]) -> list[str]:
    """Existing test files (in ``base``) that ``changes`` modify (new bytes) or delete, and files
    whose change (creation included) changes how tests run or shadows the runner; sorted."""
    compiled = compile_patterns(patterns)
    edited: set[str] = set()
    harness: set[str] = set()
    for path, data in changes.writes.items():
        old = base.read_blob(path)
        if changes_how_tests_run(path, old, data) or (old != data and shadows_runner(path, base)):
            harness.add(path)
        if old is None and base.entry_kind(path) is None:
            continue  # a new file
        if old != data:
            edited.add(path)
    deleted = {p for p in changes.delete_files if base.entry_kind(p) is not None}
    for directory in changes.delete_dirs:
        deleted.update(base.files_under(directory))
    edited.update(deleted)
    harness.update(p for p in deleted if changes_how_tests_run(p, base.read_blob(p), None) or shadows_runner(p, base))
    tests = {p for p in edited if compiled and _matches(p, compiled)}
    return sorted(tests | harness)
