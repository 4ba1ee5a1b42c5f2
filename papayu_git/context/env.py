"""The ENV block of the base context (docs/DESIGN.md, "Context": the base set).

OS, versions of the runtimes the project uses (a runtime's `--version` runs only when its
manifest is at the top of the base tree; in parallel, with a short timeout, never allowed to
download a toolchain), the venv, package managers from lockfiles/manifests, project memory,
files changed in recent commits and the names of dirty files (their content is not sent).
"""

from __future__ import annotations

import json
import os
import platform
import shutil
import subprocess
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path

from papayu_git import output
from papayu_git.context.basetree import BaseTree
from papayu_git.context.blocks import PRIORITY_TOP, BlockKind, ContextBlock
from papayu_git.memory import read_layer

VERSION_TIMEOUT_SEC = 5.0
LIST_MAX = 40

# Lockfile/manifest -> package manager, most specific first (a lockfile beats its manifest).
PACKAGE_MANAGERS: tuple[tuple[str, str], ...] = (
    ("poetry.lock", "poetry"),
    ("uv.lock", "uv"),
    ("pdm.lock", "pdm"),
    ("Pipfile.lock", "pipenv"),
    ("Pipfile", "pipenv"),
    ("requirements.txt", "pip"),
    ("pyproject.toml", "pip"),
    ("setup.py", "pip"),
    ("package-lock.json", "npm"),
    ("yarn.lock", "yarn"),
    ("pnpm-lock.yaml", "pnpm"),
    ("bun.lockb", "bun"),
    ("bun.lock", "bun"),
    ("package.json", "npm"),
    ("Cargo.toml", "cargo"),
    ("go.mod", "go modules"),
    ("pom.xml", "maven"),
    ("build.gradle", "gradle"),
    ("build.gradle.kts", "gradle"),
    ("Gemfile", "bundler"),
    ("composer.json", "composer"),
)
PYTHON_MANIFESTS = (
    "pyproject.toml",
    "setup.py",
    "setup.cfg",
    "Pipfile",
    "poetry.lock",
    "uv.lock",
    "requirements.txt",
    "tox.ini",
)
# runtime -> (manifests that show the project uses it, version command)
RUNTIMES: dict[str, tuple[tuple[str, ...], tuple[str, ...]]] = {
    "node": (("package.json",), ("node", "--version")),
    "rust": (("Cargo.toml",), ("rustc", "--version")),
    "go": (("go.mod",), ("go", "version")),
    "java": (("pom.xml", "build.gradle", "build.gradle.kts"), ("java", "-version")),
}
# Version probes must never fetch a toolchain (rust-toolchain.toml, go.mod `toolchain` lines).
_PROBE_ENV = {"RUSTUP_AUTO_INSTALL": "0", "GOTOOLCHAIN": "local", "COREPACK_ENABLE_DOWNLOAD_PROMPT": "0"}


def _uses_python(names: set[str]) -> bool:
    return any(n in names for n in PYTHON_MANIFESTS) or any(
        n.startswith("requirements") and n.endswith(".txt") for n in names
    )


def python_executable(repo_root: Path) -> str:
    active = os.environ.get("VIRTUAL_ENV")
    for candidate in ([Path(active)] if active else []) + [repo_root / ".venv", repo_root / "venv"]:
        if (candidate / "bin" / "python").exists():
            return str(candidate / "bin" / "python")
    return "python3"


def probe_version(command: tuple[str, ...], cwd: Path) -> str:
    exe = shutil.which(command[0]) if "/" not in command[0] else command[0]
    if not exe:
        return "not installed"
    try:
        proc = subprocess.run(
            [exe, *command[1:]],
            cwd=cwd,
            capture_output=True,
            text=True,
            timeout=VERSION_TIMEOUT_SEC,
            env={**os.environ, **_PROBE_ENV},
        )
    except (OSError, subprocess.TimeoutExpired) as exc:
        return f"unknown ({type(exc).__name__})"
    lines = (proc.stdout.strip() or proc.stderr.strip()).splitlines()
    return lines[0][:200] if lines else f"unknown (exit {proc.returncode})"


def runtime_versions(repo_root: Path, names: set[str]) -> dict[str, str]:
    probes: dict[str, tuple[str, ...]] = {}
    if _uses_python(names):
        probes["python"] = (python_executable(repo_root), "--version")
    for runtime, (manifests, command) in RUNTIMES.items():
        if any(m in names for m in manifests):
            probes[runtime] = command
    if not probes:
        return {}
    with ThreadPoolExecutor(max_workers=len(probes), initializer=output.block_signals) as pool:
        futures = {name: pool.submit(probe_version, cmd, repo_root) for name, cmd in probes.items()}
        return {name: future.result() for name, future in futures.items()}


def package_managers(names: set[str]) -> list[str]:
    found: dict[str, str] = {}
    requirements = sorted(n for n in names if n.startswith("requirements") and n.endswith(".txt"))
    for manifest, manager in PACKAGE_MANAGERS:
        hits = requirements if manifest == "requirements.txt" else [manifest] if manifest in names else []
        if hits and manager not in found:
            found[manager] = ", ".join(hits)
    return [f"{manager} ({where})" for manager, where in found.items()]


def venv_line(repo_root: Path) -> str:
    active = os.environ.get("VIRTUAL_ENV") or os.environ.get("CONDA_PREFIX")
    if active:
        return f"{active} (active)"
    present = [d for d in (".venv", "venv", "env") if (repo_root / d / "pyvenv.cfg").exists()]
    return f"{present[0]} (present, not active)" if present else "none active"


def project_memory(repo_root: Path) -> dict[str, object]:
    """project.* values of `.papa-yu/project.json` (memory.py owns the file and its whitelist)."""
    return read_layer("project", repo_root, strict=False)


def _listing(items: list[str]) -> str:
    shown = ", ".join(items[:LIST_MAX])
    return shown + (f", … (+{len(items) - LIST_MAX} more)" if len(items) > LIST_MAX else "") if items else "none"


def env_block(tree: BaseTree, recent_commits: int) -> ContextBlock:
    names = tree.top_level()
    lines = [f"os: {platform.system()} {platform.release()} ({platform.machine()})", f"base_commit: {tree.base}"]
    lines += [f"{name}: {version}" for name, version in runtime_versions(tree.repo_root, names).items()]
    if _uses_python(names):
        lines.append(f"venv: {venv_line(tree.repo_root)}")
    memory = project_memory(tree.repo_root)
    managers = package_managers(names)
    if isinstance(memory.get("package_manager"), str):
        managers.insert(0, f"{memory['package_manager']} (project memory)")
    lines.append(f"package_managers: {', '.join(managers) or 'none detected'}")
    if memory:
        lines.append(f"project_memory: {json.dumps(memory, ensure_ascii=False, sort_keys=True)}")
    lines.append(f"recent_files (last {recent_commits} commits): {_listing(tree.recent_paths(recent_commits))}")
    dirty = [f"{code.strip()} {path}" for path, code in sorted(tree.dirty().items())]
    lines.append(f"dirty_files (uncommitted; content not sent unless requested): {_listing(dirty)}")
    return ContextBlock(BlockKind.ENV, "env", "\n".join(lines), PRIORITY_TOP)
