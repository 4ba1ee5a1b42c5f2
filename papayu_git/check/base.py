"""The base run: the check on the tip a plan is built on, once per (tip tree, check command,
environment), shared by every plan on that tip and by concurrent applies (docs/DESIGN.md, "A
verdict per test").

The result lives in `.git/papayu/base/<key>.json`. Whoever computes it holds
`locks/base-<key>.lock`; anyone else needing the same key waits for the file (or for the lock
to go stale, then computes it itself): one base run, never two.
"""

from __future__ import annotations

import hashlib
import json
import os
import time
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING, Any

from papayu_git import atomic, locks, settings
from papayu_git.check.command import CheckCommand
from papayu_git.check.environment import ENV_DIR_NAMES, manifest_dirs
from papayu_git.check.includes import included
from papayu_git.check.lockfiles import ignored_lockfiles
from papayu_git.check.results import TestResults
from papayu_git.check.results.channel import PluginAsk
from papayu_git.check.results.outcome import IDS_VERSION
from papayu_git.check.run import run_check
from papayu_git.check.sandbox import check_env
from papayu_git.housekeeping import dead_check
from papayu_git.objects import commit_of
from papayu_git.worktree import acquire_checkout, release_checkout

if TYPE_CHECKING:
    import pygit2

    from papayu_git.check.sandbox import Sandbox

BASE_DIR = "base"
# How runs are read (results/): part of the key, since a plan's runs are compared with the base
# only when both were read from the same sources (results/provenance.py). Bumped when that changes.
RESULTS_FORMAT = (
    "4: runners behind package scripts, jest and vitest reports per run, Maven and Gradle reports; the runtime shield"
)
INSTALL_STAMPS = ("lib/python*/site-packages", "Lib/site-packages", ".package-lock.json", ".modules.yaml")
WAIT_POLL_SEC = 0.2


@dataclass(frozen=True)
class BaseRun:
    key: str
    commit: str
    results: TestResults
    exit_code: int | None
    timed_out: bool
    duration_sec: float
    log: str
    cached: bool = False  # read from the cache, not run by this call

    @property
    def green(self) -> bool:
        return self.exit_code == 0 and not self.timed_out

    def to_record(self) -> dict[str, Any]:
        return {
            "key": self.key,
            "commit": self.commit,
            "tests": self.results.to_dict(),
            "exit_code": self.exit_code,
            "timed_out": self.timed_out,
            "duration_sec": self.duration_sec,
            "log": self.log,
        }

    @classmethod
    def of(cls, key: str, commit: str, run: Any) -> BaseRun:
        """The base a check run (a CheckResult with per-test results) makes of ``commit``."""
        return cls(key, commit, run.tests, run.exit_code, run.timed_out, run.duration_sec, run.log)

    @classmethod
    def from_record(cls, data: dict[str, Any]) -> BaseRun:
        results = TestResults.from_dict(data["tests"])
        return cls(
            str(data["key"]),
            str(data["commit"]),
            results,
            data["exit_code"],
            bool(data["timed_out"]),
            float(data["duration_sec"]),
            str(data["log"]),
            cached=True,
        )


def base_key(repo: pygit2.Repository, repo_root: Path, commit: str, check: CheckCommand, sandbox: Sandbox) -> str:
    """What a base run's result depends on: the tip's tree (not the commit: a rebased message
    changes nothing), the command and how its Python finds modules, the environment the check
    gets, how its results are read, and how they name tests."""
    tree = str(commit_of(repo, commit).tree_id)
    digest = hashlib.sha256()
    safe_path = f"PYTHONSAFEPATH={check.python_safe_path}"
    parts = (
        tree,
        check.command,
        safe_path,
        sandbox.level,
        environment_fingerprint(repo_root),
        RESULTS_FORMAT,
        f"ids={IDS_VERSION}",
        f"inputs={recording(repo_root)}",
    )
    for part in parts:
        digest.update(part.encode("utf-8", "surrogateescape") + b"\0")
    return digest.hexdigest()[:32]


def environment_fingerprint(repo_root: Path) -> str:
    """The check's variables, the settings that shape its view, and the state of the project's
    environment directories, included files and ignored lockfiles (their mtimes and those of their
    entries: an install or a build changes them)."""
    root = str(repo_root)
    parts = [json.dumps(sorted(check_env("", "", root).items()))]
    for name in ("check_env_dirs", "check_include", "check_local_ports", "check_network", "check_junit"):
        parts.append(f"{name}={settings.get(name, root)}")
    dirs = {repo_root / rel / name for rel in manifest_dirs(repo_root) for name in ENV_DIR_NAMES}
    carried = {repo_root / rel for rel in ignored_lockfiles(repo_root)}  # check/lockfiles.py
    for path in sorted(dirs | set(included(repo_root)) | carried):
        parts.append(f"{path}:{_stamp(path)}")
        for deeper in INSTALL_STAMPS:  # where an install shows (pip into site-packages, npm's lock)
            parts += [f"{p}:{_stamp(p)}" for p in sorted(path.glob(deeper))[:8]]
    return hashlib.sha256("\n".join(parts).encode("utf-8", "surrogateescape")).hexdigest()


def _stamp(path: Path) -> str:
    try:
        stat = path.stat()
    except OSError:
        return "-"
    stamps = [str(stat.st_mtime_ns)]
    if path.is_dir():
        try:
            with os.scandir(path) as entries:
                for entry in sorted(entries, key=lambda e: e.name)[:1000]:
                    try:
                        stamps.append(f"{entry.name}={entry.stat(follow_symlinks=False).st_mtime_ns}")
                    except OSError:
                        continue
        except OSError:
            pass
    return hashlib.sha256(",".join(stamps).encode()).hexdigest()[:16]


def recording(repo_root: Path) -> bool:
    """Whether base runs record what each test read (papayu.check.select is observe or on)."""
    return settings.get("check_select", str(repo_root)).strip().lower() != "off"


def inputs_path(pdir: Path, key: str) -> Path:
    """The base run's record of what each test read (check/selection/inputs.py), beside it."""
    return pdir / BASE_DIR / f"{key}.inputs.jsonl"


def cached(pdir: Path, key: str) -> BaseRun | None:
    try:
        return BaseRun.from_record(json.loads((pdir / BASE_DIR / f"{key}.json").read_text(encoding="utf-8")))
    except (OSError, ValueError, KeyError, TypeError):
        return None


def base_run(
    repo: pygit2.Repository,
    pdir: Path,
    commit: str,
    check: CheckCommand,
    sandbox: Sandbox,
    repo_root: Path,
    *,
    timeout_sec: float,
    fresh: bool = False,
) -> BaseRun:
    """The base run for ``commit``: cached, or computed now (waiting for whoever is computing
    it). ``fresh``: run it again whatever the cache says (the flake re-run), not stored."""
    key = base_key(repo, repo_root, commit, check, sandbox)
    lock = locks.locks_dir(pdir) / f"base-{key[:24]}.lock"
    while True:
        found = None if fresh else cached(pdir, key)
        if found is not None:
            return found
        lock.parent.mkdir(parents=True, exist_ok=True)
        if locks.try_acquire(lock, kind="base", key=key):
            break
        time.sleep(WAIT_POLL_SEC)  # someone else computes it: wait for the file
    try:
        found = None if fresh else cached(pdir, key)
        if found is not None:
            return found
        (pdir / BASE_DIR).mkdir(parents=True, exist_ok=True)
        checkout = acquire_checkout(repo, pdir, commit, plan_id="base", on_stale=dead_check)
        try:
            log = pdir / "checks" / f"base-{key[:16]}{'-rerun' if fresh else ''}.log"
            ask = PluginAsk(record=recording(repo_root) and not fresh)
            result = run_check(
                check, checkout, log, timeout_sec=timeout_sec, sandbox=sandbox, repo_root=repo_root, ask=ask
            )
        finally:
            release_checkout(checkout)
        run = BaseRun.of(key, commit, result)
        if not fresh:
            _keep(pdir, key, run, result.inputs)
        return run
    finally:
        locks.release(lock)


def remember(
    repo: pygit2.Repository, pdir: Path, commit: str, check: CheckCommand, sandbox: Sandbox, repo_root: Path, run: Any
) -> None:
    """A plan's run that is exactly what a base run of its commit would be (the plan changes no
    test or runner config, nothing else ran after the check): kept as that commit's base, so the
    next plan on the tip it lands as needs no base run of its own. ``run``: a CheckResult; one
    whose results cannot be trusted is no base (results/provenance.py)."""
    if run.tests is None or run.timed_out or not run.tests.trusted:
        return
    key = base_key(repo, repo_root, commit, check, sandbox)
    if cached(pdir, key) is None:
        _keep(pdir, key, BaseRun.of(key, commit, run), run.inputs)


def _keep(pdir: Path, key: str, run: BaseRun, inputs: bytes) -> None:
    """The base's record, its record of inputs first (a base found without one runs every test)."""
    (pdir / BASE_DIR).mkdir(parents=True, exist_ok=True)
    if inputs:
        with atomic.replacing(inputs_path(pdir, key)) as tmp:
            tmp.write_bytes(inputs)
    atomic.write_json(pdir / BASE_DIR / f"{key}.json", run.to_record(), indent=None)
