"""Blame the environment, not the plan: failures whose cause is what the check could not see
or reach, each with the setting that fixes it (docs/DESIGN.md, "The check's environment")."""

from __future__ import annotations

import re
from pathlib import Path
from typing import TYPE_CHECKING

from papayu_git.check.safe_path import importable_in_project
from papayu_git.git import run_git

if TYPE_CHECKING:
    from papayu_git.check.sandbox import Sandbox

_MODULE = re.compile(r"(?:ModuleNotFoundError|ImportError): No module named '?([\w.]+)'?")
# A traceback's frame of a module's top level: a script run by path is one.
_SCRIPT_FRAME = re.compile(r'File "([^"\n]+\.py)", line \d+, in <module>')
_NAME_FROM = re.compile(r"ImportError: cannot import name '?\w+'? from '([\w.]+)' \(([^)\n]*)\)")
SAFE_PATH_FIX = "`git config papayu.check.pythonSafePath false`"
_NODE_MODULE = re.compile(r"Cannot find (?:module|package) '([^']+)'")
_COMMAND = re.compile(
    r"(?:^|\n)(?:/bin/)?(?:sh|bash)(?::\s*\d+)?:\s*(?:line \d+:\s*)?([\w.+/-]+): (?:command )?not found"
)
_REFUSED = re.compile(r"ECONNREFUSED|Connection refused|connection to server at .* failed", re.IGNORECASE)
_DNS = re.compile(
    r"Temporary failure in name resolution|Name or service not known|getaddrinfo|EAI_AGAIN|ENOTFOUND"
    r"|Could not resolve host|nodename nor servname|Network is unreachable|ENETUNREACH",
)
_MISSING = re.compile(r"(?:No such file or directory|ENOENT)[^\n]*?['\"]([^'\"\n]+)['\"]")
# cargo offline (the check without network sets CARGO_NET_OFFLINE): a crate its cache lacks.
_CARGO_OFFLINE = re.compile(
    r"no matching package named `([^`\n]+)` found|failed to download `([^`\n]+)`[^\n]*\n(?:[^\n]*\n){0,3}[^\n]*--offline"
)
_READ_ONLY = re.compile(r"Read-only file system[^\n]*?['\"]?(/[^'\"\s]+)?")


def environment_causes(text: str, repo_root: Path, sandbox: Sandbox, *, safe_path: bool = False) -> list[str]:
    """What in a failed check's output points at its environment, said with the fix.
    ``safe_path``: the check's Python ran with PYTHONSAFEPATH (check/safe_path.py)."""
    causes: list[str] = []
    own = _own_modules(_MODULE.findall(text), repo_root) if safe_path else {}
    for name, where in own.items():
        causes.append(
            f"module {name!r} was not found, but the repository has {where}: the check's Python runs with "
            "PYTHONSAFEPATH=1, which keeps the working directory off sys.path; a project that imports its "
            f"code from there (a flat layout) needs {SAFE_PATH_FIX}"
        )
    if safe_path:
        for name, (script, where) in _neighbours(_MODULE.findall(text), text, repo_root).items():
            if name in own:
                continue
            own[name] = where
            package = script.removesuffix(".py").replace("/", ".")
            causes.append(
                f"module {name!r} was not found, but it is next to the script {script} ({where}): the check's "
                "Python runs with PYTHONSAFEPATH=1, which keeps a script's own directory off sys.path too; run "
                f"it as a module (`python -m {package}`, with an __init__.py beside it) or {SAFE_PATH_FIX}"
            )
        causes += _installed_copies(text, repo_root)
    for name in dict.fromkeys(_MODULE.findall(text) + _NODE_MODULE.findall(text)):
        if name in own:
            continue
        causes.append(
            f"module {name!r} was not found in the check's environment: is the project's environment in "
            "the repository (.venv, node_modules) or on PATH? Others can be listed in papayu.check.envDirs"
        )
    for name in dict.fromkeys(_COMMAND.findall(text)):
        causes.append(
            f"command {name!r} was not found inside the check: install it system-wide or in the project's "
            "environment (papayu.check.envDirs); `git papayu doctor --check` shows what the check sees"
        )
    if _REFUSED.search(text) and not sandbox.network:
        causes.append(
            "a connection was refused: the check has no network; relay local services with "
            "`git config papayu.check.localPorts 5432` (or papayu.check.network=true)"
        )
    if not sandbox.network:
        causes += _cargo_offline(text)
    if _DNS.search(text) and not sandbox.network:
        causes.append("a name did not resolve: the check has no network (papayu.check.network=true allows it)")
    ignored = _ignored(repo_root, [m for m in _MISSING.findall(text)])
    for rel in ignored:
        causes.append(
            f"{rel} is missing in the check: it is an ignored file of your work tree, which the check never "
            f"sees; give it with `git config papayu.check.include {rel}`"
        )
    for path in dict.fromkeys(_READ_ONLY.findall(text)):
        where = f" ({path})" if path else ""
        causes.append(f"a write hit a read-only path{where}: the check may write only to the repository, /tmp and HOME")
    return causes


def _cargo_offline(text: str) -> list[str]:
    crates = [a or b for a, b in _CARGO_OFFLINE.findall(text) if "offline" in text]
    return [
        f"cargo could not get the crate {name} offline: this machine's cargo cache lacks it and the check has no "
        "network; if the dependency is wanted, `cargo fetch` in a tree that uses it caches it (or "
        "papayu.check.network=true)"
        for name in dict.fromkeys(crates)
    ]


def _own_modules(names: list[str], repo_root: Path) -> dict[str, str]:
    """The named modules the repository has at its root (or a Python subproject's): name -> where."""
    found = {}
    for name in dict.fromkeys(names):
        where = importable_in_project(repo_root, name.split(".")[0])
        if where:
            found[name] = where
    return found


def _neighbours(names: list[str], text: str, repo_root: Path) -> dict[str, tuple[str, str]]:
    """The named modules that sit next to a script of the traceback (`python tools/gen.py` doing
    `import helper`, with `tools/helper.py`): name -> (the script, the module), relative."""
    root = repo_root.resolve()
    scripts = []
    for frame in dict.fromkeys(_SCRIPT_FRAME.findall(text)):
        try:
            scripts.append(Path(frame).resolve().relative_to(root))
        except (OSError, ValueError):
            continue  # outside the repository: a library's frame
    found: dict[str, tuple[str, str]] = {}
    for name in dict.fromkeys(names):
        top = name.split(".")[0]
        for script in scripts:
            for candidate in (script.parent / f"{top}.py", script.parent / top):
                if script.parent != Path() and (root / candidate).exists():
                    found.setdefault(name, (str(script), str(candidate)))
    return found


def _installed_copies(text: str, repo_root: Path) -> list[str]:
    """A name missing from a module the repository has, found outside it: an installed copy won."""
    causes = []
    for name, found_at in dict.fromkeys(_NAME_FROM.findall(text)):
        where = importable_in_project(repo_root, name.split(".")[0])
        own = repo_root / where if where else None
        if own is not None and not (Path(found_at) == own or own in Path(found_at).parents):
            causes.append(
                f"module {name!r} came from {found_at}, not from the repository's {where}: the check's Python "
                f"runs with PYTHONSAFEPATH=1, so an installed copy wins over the working directory; {SAFE_PATH_FIX}"
            )
    return causes


def _ignored(repo_root: Path, named: list[str]) -> list[str]:
    """The named paths that exist in the user's tree and are ignored by git, relative."""
    rels = []
    for name in dict.fromkeys(named):
        path = Path(name)
        path = path if path.is_absolute() else repo_root / path
        try:
            rel = path.resolve().relative_to(repo_root.resolve())
        except (OSError, ValueError):
            continue
        if str(rel) != "." and (repo_root / rel).exists():
            rels.append(str(rel))
    if not rels:
        return []
    proc = run_git(["check-ignore", "--", *rels[:50]], cwd=repo_root, check=False)
    return [line for line in proc.stdout.splitlines() if line]
