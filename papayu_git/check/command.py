"""Which command checks a plan: resolved on the tip, never on the plan's result.

Resolution order: `--check`, then the setting check_command (PAPAYU_CHECK_COMMAND, `git config
papayu.check.command`: settings.resolve says which won), `project.default_test_command` of
`.papa-yu/project.json` (its git config override first), else detected (pytest, npm
test, cargo test, go test ./..., Maven, Gradle). Everything read from the repository is read
on the tip the plan is built on, never on the plan's result: the plan cannot choose, dodge or
weaken its own check (docs/DESIGN.md, "The check's trust boundary"). None found →
the transaction stops at review. So is whether the check's Python runs with PYTHONSAFEPATH
(safe_path.py), and what the command runs through its package scripts (scripts.py), which
decides how its results are read.
"""

from __future__ import annotations

import json
import shlex
import shutil
import sys
from dataclasses import dataclass, replace
from pathlib import Path
from typing import Protocol

from papayu_git import settings
from papayu_git.check import safe_path, scripts
from papayu_git.check.scripts import Runs
from papayu_git.memory import git_config_key


class _Tree(Protocol):
    def entry_kind(self, path: str) -> str | None: ...
    def read_blob(self, path: str) -> bytes | None: ...
    def names_in(self, directory: str) -> list[str]: ...


@dataclass(frozen=True)
class CheckCommand:
    command: str
    source: str  # --check | PAPAYU_CHECK_COMMAND | git config KEY | .papa-yu/project.json | detected
    # PYTHONSAFEPATH=1 for the check's Python (safe_path.py, decided on the tip); None: not
    # decided (a command of the model's), the variable is left as the environment has it.
    python_safe_path: bool | None = None
    # What it runs through its package scripts, read on the tip (scripts.py); None: not read on
    # a tree (a command of the model's), its own text alone is read.
    runs: Runs | None = None


def resolve_command(repo_root: Path, tree: _Tree, explicit: str | None) -> CheckCommand | None:
    found = _resolve(repo_root, tree, explicit)
    if found is None:
        return None
    return replace(
        found, python_safe_path=safe_path.resolve(repo_root, tree), runs=scripts.resolve(found.command, tree)
    )


def _resolve(repo_root: Path, tree: _Tree, explicit: str | None) -> CheckCommand | None:
    configured = settings.resolve("check_command", str(repo_root), flag=explicit or None, flag_name="--check")
    if configured.value.strip():
        return CheckCommand(configured.value.strip(), configured.source)
    # project.default_test_command: its git config override beats the file (memory.py mapping).
    key = git_config_key("project.default_test_command")
    overridden = (settings.git_config_value(key, str(repo_root)) or "").strip()
    if overridden:
        return CheckCommand(overridden, f"git config {key}")
    from_project = _project_command(tree)
    if from_project:
        return CheckCommand(from_project, ".papa-yu/project.json")
    detected = detect_command(repo_root, tree)
    return CheckCommand(detected, "detected") if detected else None


def _project_command(tree: _Tree) -> str | None:
    raw = tree.read_blob(".papa-yu/project.json")
    if raw is None:
        return None
    try:
        data = json.loads(raw)
    except ValueError:
        return None
    project = data.get("project") if isinstance(data, dict) else None
    command = project.get("default_test_command") if isinstance(project, dict) else None
    return command.strip() if isinstance(command, str) and command.strip() else None


def detect_command(repo_root: Path, tree: _Tree) -> str | None:
    """The usual test runner of the project, judged from files in the result tree."""
    if (
        any(tree.entry_kind(p) for p in ("pytest.ini", "conftest.py", "tests/conftest.py", "tox.ini"))
        or _mentions(tree, "pyproject.toml", b"[tool.pytest")
        or _mentions(tree, "setup.cfg", b"[tool:pytest")
    ):
        return _pytest(repo_root)
    if tree.entry_kind("package.json") == "file" and _npm_has_test(tree.read_blob("package.json") or b""):
        return "npm test"
    if tree.entry_kind("Cargo.toml") == "file":
        return "cargo test"
    if tree.entry_kind("go.mod") == "file":
        return "go test ./..."
    if tree.entry_kind("pom.xml") == "file":
        return "./mvnw test" if tree.entry_kind("mvnw") == "file" else "mvn test"
    if any(
        tree.entry_kind(f"{name}{ext}") == "file"
        for name in ("build.gradle", "settings.gradle")
        for ext in ("", ".kts")
    ):
        return "./gradlew test" if tree.entry_kind("gradlew") == "file" else "gradle test"
    has_tests = tree.entry_kind("tests") == "dir" or tree.entry_kind("test") == "dir"
    if has_tests and any(tree.entry_kind(p) for p in ("pyproject.toml", "setup.py", "setup.cfg", "requirements.txt")):
        return _pytest(repo_root)
    return None


def _mentions(tree: _Tree, path: str, needle: bytes) -> bool:
    return needle in (tree.read_blob(path) or b"")


def _npm_has_test(raw: bytes) -> bool:
    try:
        scripts = json.loads(raw).get("scripts") or {}
    except (ValueError, AttributeError):
        return False
    test = scripts.get("test", "") if isinstance(scripts, dict) else ""
    return bool(test) and "no test specified" not in test


def _pytest(repo_root: Path) -> str:
    # Prefer the project's own virtualenv; then pytest on PATH; then our interpreter.
    for venv in (".venv", "venv"):
        python = repo_root / venv / "bin" / "python"
        if python.is_file():
            return f"{shlex.quote(str(python))} -m pytest -q"
    if shutil.which("pytest"):
        return "pytest -q"
    return f"{shlex.quote(sys.executable)} -m pytest -q"
