"""`git papayu doctor --check`: the check on the tip, sandboxed as a plan's would be, beside the
same command run directly in the user's tree, before any model is called. Its run is kept as the
tip's base run: the next plan's check on this tip does not run it again."""

from __future__ import annotations

import subprocess
import time
from dataclasses import dataclass, field
from pathlib import Path
from typing import TYPE_CHECKING, Any

from papayu_git import output, settings
from papayu_git.check.base import remember
from papayu_git.check.command import CheckCommand, resolve_command
from papayu_git.check.environment import env_dirs
from papayu_git.check.results import summary
from papayu_git.check.run import dead_check, run_check
from papayu_git.check.sandbox import Sandbox
from papayu_git.check.sandbox import resolve as resolve_sandbox
from papayu_git.git import common_dir, scrubbed_env
from papayu_git.objects import GitTree
from papayu_git.worktree import acquire_checkout, release_checkout

if TYPE_CHECKING:
    import pygit2


@dataclass
class TipCheck:
    command: str = ""
    source: str = ""
    sandbox: str = ""
    passed: bool = False
    exit_code: int | None = None
    seconds: float = 0.0
    direct_passed: bool | None = None
    direct_seconds: float | None = None
    environment: list[str] = field(default_factory=list)  # what the failure points at
    env_dirs: list[str] = field(default_factory=list)  # the repository's environment, copy-on-write
    log: str = ""
    tests: dict[str, Any] = field(default_factory=dict)  # per test, as read (results.summary)

    def to_dict(self) -> dict[str, Any]:
        return dict(self.__dict__)


def run_on_tip(repo: pygit2.Repository, root: Path, *, direct: bool = True) -> TipCheck | None:
    """None when no check command is found for the tip."""
    tip = str(repo.head.target)
    found = resolve_command(root, GitTree(repo, repo[tip].tree), None)
    if found is None:
        return None
    box = resolve_sandbox(str(root))
    pdir = common_dir(repo) / "papayu"
    spinner = output.progress(f"doctor: the check on the tip, sandboxed ({box.level}): {found.command}")
    with spinner:
        report = _sandboxed(repo, root, pdir, tip, found, box)
        if direct:
            output.stage(f"doctor: the same command run directly in {root}, to compare")
            report.direct_passed, report.direct_seconds = _direct(found.command, root)
    return report


def _sandboxed(
    repo: pygit2.Repository, root: Path, pdir: Path, tip: str, found: CheckCommand, box: Sandbox
) -> TipCheck:
    checkout = acquire_checkout(repo, pdir, tip, plan_id="doctor", on_stale=dead_check)
    try:
        result = run_check(
            found,
            checkout,
            pdir / "checks" / "doctor.log",
            timeout_sec=settings.get_int("check_timeout_sec", str(root)),
            sandbox=box,
            repo_root=root,
            commit=tip,
        )
        dirs = [str(p.relative_to(root)) for p in env_dirs(root, checkout.path, checkout.gitdir)]
    finally:
        release_checkout(checkout)
    # Exactly the base run of the tip a plan's check needs: kept, so that no check runs it again
    # (docs/DESIGN.md, "Fail first").
    remember(repo, pdir, tip, found, box, root, result, origin="doctor --check")
    return TipCheck(
        found.command,
        found.source,
        box.level,
        result.passed,
        result.exit_code,
        result.duration_sec,
        environment=list(result.environment),
        env_dirs=dirs,
        log=result.log,
        tests=summary(result.tests) if result.tests is not None else {},
    )


def _direct(command: str, root: Path) -> tuple[bool | None, float | None]:
    """The same command in the user's own tree and environment: the cost baseline."""
    start = time.monotonic()
    try:
        proc = subprocess.run(
            ["/bin/sh", "-c", command],
            cwd=root,
            env=scrubbed_env(),
            stdin=subprocess.DEVNULL,
            stdout=subprocess.DEVNULL,
            stderr=subprocess.DEVNULL,
            timeout=settings.get_int("check_timeout_sec", str(root)),
            start_new_session=True,
        )
    except (OSError, subprocess.TimeoutExpired):
        return None, None
    return proc.returncode == 0, round(time.monotonic() - start, 3)
