"""The check command (SPEC §4.4): which one, and running it safely in a worktree.

Resolution order: `--check`, `git config papayu.checkCommand` (or PAPAYU_CHECK_COMMAND),
`project.default_test_command` of `.papa-yu/project.json`, else detected from the
result tree (pytest, npm test, cargo test, go test ./...). None → land with a warning.
The command runs in its own process group with git's environment scrubbed; the
timeout kills the whole group; the output goes to `.git/papayu/checks/<id>.log`.
"""

from __future__ import annotations

import json
import os
import shutil
import signal
import subprocess
import sys
import time
from dataclasses import asdict, dataclass
from pathlib import Path
from typing import Any, Protocol

from papayu_git import settings
from papayu_git.git import scrubbed_env
from papayu_git.stages import pause_point

TAIL_LINES = 40


class _Tree(Protocol):
    def entry_kind(self, path: str) -> str | None: ...
    def read_blob(self, path: str) -> bytes | None: ...


@dataclass(frozen=True)
class CheckCommand:
    command: str
    source: str  # --check | git config | project.json | detected


@dataclass(frozen=True)
class CheckResult:
    command: str
    source: str
    exit_code: int | None  # None: killed by the timeout
    duration_sec: float
    log: str
    tail: str
    timed_out: bool = False

    @property
    def passed(self) -> bool:
        return self.exit_code == 0 and not self.timed_out

    def to_dict(self) -> dict[str, Any]:
        return {**asdict(self), "passed": self.passed}


def resolve_command(repo_root: Path, tree: _Tree, explicit: str | None) -> CheckCommand | None:
    if explicit:
        return CheckCommand(explicit, "--check")
    configured = settings.get("check_command", str(repo_root)).strip()
    if configured:
        return CheckCommand(configured, "git config papayu.checkCommand")
    # project.default_test_command: its git config override beats the file (memory.py mapping).
    from papayu_git.memory import git_config_key

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
    if any(tree.entry_kind(p) for p in ("pytest.ini", "conftest.py", "tests/conftest.py", "tox.ini")) or \
            _mentions(tree, "pyproject.toml", b"[tool.pytest") or _mentions(tree, "setup.cfg", b"[tool:pytest"):
        return _pytest(repo_root)
    if tree.entry_kind("package.json") == "file" and _npm_has_test(tree.read_blob("package.json") or b""):
        return "npm test"
    if tree.entry_kind("Cargo.toml") == "file":
        return "cargo test"
    if tree.entry_kind("go.mod") == "file":
        return "go test ./..."
    if tree.entry_kind("tests") == "dir" or tree.entry_kind("test") == "dir":
        if any(tree.entry_kind(p) for p in ("pyproject.toml", "setup.py", "setup.cfg", "requirements.txt")):
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
            return f"{python} -m pytest -q"
    if shutil.which("pytest"):
        return "pytest -q"
    return f"{sys.executable} -m pytest -q"


def run_check(check: CheckCommand, workdir: Path, log_path: Path, *, timeout_sec: float,
              extra_commands: tuple[str, ...] = ()) -> CheckResult:
    """Run the check (then any consented proposed commands) in ``workdir``; never raises on red."""
    log_path.parent.mkdir(parents=True, exist_ok=True)
    start = time.monotonic()
    exit_code: int | None = 0
    timed_out = False
    with open(log_path, "wb") as log:
        for command in (check.command, *extra_commands):
            log.write(f"$ {command}\n".encode())
            log.flush()
            remaining = timeout_sec - (time.monotonic() - start)
            exit_code, timed_out = _run_group(command, workdir, log, max(remaining, 0.001))
            if exit_code != 0 or timed_out:
                break
    return CheckResult(check.command, check.source, exit_code, round(time.monotonic() - start, 3),
                       str(log_path), _tail(log_path), timed_out)


def _run_group(command: str, workdir: Path, log: Any, timeout_sec: float) -> tuple[int | None, bool]:
    proc = subprocess.Popen(command, shell=True, cwd=workdir, stdin=subprocess.DEVNULL, stdout=log,
                            stderr=subprocess.STDOUT, env=scrubbed_env({"PAPAYU_CHECK": "1"}),
                            start_new_session=True)
    pause_point("during_check")
    try:
        code: int | None = proc.wait(timeout=timeout_sec)
        timed_out = False
    except subprocess.TimeoutExpired:
        code, timed_out = None, True
        log.write(f"\n[papayu] check killed after {timeout_sec:.0f}s (PAPAYU_CHECK_TIMEOUT_SEC)\n".encode())
    finally:
        _kill_group(proc)
    return code, timed_out


def _kill_group(proc: subprocess.Popen) -> None:  # type: ignore[type-arg]
    """Kill whatever the check left in its process group (always: also stray background jobs)."""
    for sig in (signal.SIGTERM, signal.SIGKILL):
        try:
            os.killpg(proc.pid, sig)
        except (ProcessLookupError, PermissionError):
            break
        if sig is signal.SIGTERM:
            try:
                proc.wait(timeout=2)
            except subprocess.TimeoutExpired:
                pass
            time.sleep(0.05)
    try:
        proc.wait(timeout=5)
    except subprocess.TimeoutExpired:
        pass


def _tail(log_path: Path, lines: int = TAIL_LINES) -> str:
    try:
        data = log_path.read_bytes()[-64 * 1024:]
    except OSError:
        return ""
    return "\n".join(data.decode("utf-8", "replace").splitlines()[-lines:])
