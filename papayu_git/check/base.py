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
from dataclasses import dataclass, replace
from pathlib import Path
from typing import TYPE_CHECKING, Any

from papayu_git import atomic, locks, settings
from papayu_git.check.command import CheckCommand
from papayu_git.check.environment import ENV_DIR_NAMES, manifest_dirs
from papayu_git.check.includes import included
from papayu_git.check.lockfiles import ignored_lockfiles
from papayu_git.check.results import TestResults
from papayu_git.check.results.channel import PluginAsk
from papayu_git.check.results.outcome import IDS_VERSION, Outcome
from papayu_git.check.run import CheckResult, dead_check, run_check
from papayu_git.check.sandbox import check_env
from papayu_git.objects import commit_of
from papayu_git.worktree import acquire_checkout, release_checkout

if TYPE_CHECKING:
    from collections.abc import Callable

    import pygit2

    from papayu_git.check.sandbox import Sandbox

BASE_DIR = "base"
ORDER_DIR = "order"  # beside it: which record is the newest, the tests that failed in recent checks
# How runs are read (results/): part of the key, since a plan's runs are compared with the base
# only when both were read from the same sources (results/provenance.py). Bumped when that changes.
RESULTS_FORMAT = (
    "5: runners behind package scripts, jest and vitest reports per run, Maven and Gradle reports; the runtime shield; "
    "pytest subtests folded into their test"
)
# tox's and nox's environments are one level down (.tox/py, .nox/tests).
INSTALL_STAMPS = (
    "lib/python*/site-packages",
    "*/lib/python*/site-packages",
    "Lib/site-packages",
    ".package-lock.json",
    ".modules.yaml",
)
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
    origin: str = ""  # which run it was: "doctor --check", "the prewarm", "plan ID's check", "this check"

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
            "origin": self.origin,
        }

    @classmethod
    def of(cls, key: str, commit: str, run: Any, origin: str = "") -> BaseRun:
        """The base a check run (a CheckResult with per-test results) makes of ``commit``."""
        return cls(key, commit, run.tests, run.exit_code, run.timed_out, run.duration_sec, run.log, origin=origin)

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
            origin=str(data.get("origin") or ""),
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
    for name in (
        "check_env_dirs",
        "check_include",
        "check_local_ports",
        "check_network",
        "check_junit",
        "check_reinstall",
    ):
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
    """Whether base runs may record what each test reads (papayu.check.select is not off)."""
    return settings.get("check_select", str(repo_root)).strip().lower() != "off"


def inputs_path(pdir: Path, key: str) -> Path:
    """A base run's record of what each test read (check/selection/inputs.py), beside it."""
    return pdir / BASE_DIR / f"{key}.inputs.jsonl"


RECORD_FILE = "record.json"  # in ORDER_DIR: the newest record kept, its base, how many tests, why it stopped
RECORD_MAX_AGE_SEC = 30 * 24 * 3600  # a record older than this is made again by the next base run
RECORD_STOPPED_FOR_COST = "over its budget"  # said by the recorder (pytest_inputs.Recorder) when it stopped


def newest_record(pdir: Path) -> Path | None:
    """The newest record kept (of any tip: a record only orders, an older tip's does)."""
    try:
        said = json.loads((pdir / ORDER_DIR / RECORD_FILE).read_text(encoding="utf-8"))
        path = inputs_path(pdir, str(said["key"]))
    except (OSError, ValueError, KeyError, TypeError):
        return None
    return path if path.exists() else None


def needs_record(pdir: Path) -> bool:
    """Record once (docs/DESIGN.md, "Fail first"): when no record of some tests is kept, or the
    one kept is a month old. Not again within that month where the recorder stopped for its
    cost (the interpreter's monitoring costs more than its budget on this suite)."""
    try:
        said = json.loads((pdir / ORDER_DIR / RECORD_FILE).read_text(encoding="utf-8"))
        age = time.time() - float(said["at"])
        tests, off = int(said.get("tests") or 0), str(said.get("off") or "")
    except (OSError, ValueError, KeyError, TypeError):
        return True
    if age > RECORD_MAX_AGE_SEC:
        return True
    return tests == 0 and RECORD_STOPPED_FOR_COST not in off


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
    origin: str = "this check",
) -> BaseRun:
    """The base run for ``commit``: cached, or computed now (waiting for whoever is computing
    it). ``origin``: what to call a run made now. It records what each test reads when no record
    is kept (docs/DESIGN.md, "Fail first")."""
    key = base_key(repo, repo_root, commit, check, sandbox)
    lock = locks.locks_dir(pdir) / f"base-{key[:24]}.lock"
    while True:
        found = cached(pdir, key)
        if found is not None:
            return found
        lock.parent.mkdir(parents=True, exist_ok=True)
        if locks.try_acquire(lock, kind="base", key=key):
            break
        time.sleep(WAIT_POLL_SEC)  # someone else computes it: wait for the file
    try:
        found = cached(pdir, key)
        if found is not None:
            return found
        (pdir / BASE_DIR).mkdir(parents=True, exist_ok=True)
        record = recording(repo_root) and needs_record(pdir)
        log = pdir / "checks" / f"base-{key[:16]}.log"
        result = run_on(repo, pdir, commit, check, sandbox, repo_root, log, timeout_sec, PluginAsk(record=record))
        if record and _counted(result.inputs)[0]:  # it did record: its failures are confirmed without it
            result = _confirmed(repo, pdir, commit, check, sandbox, repo_root, timeout_sec, result)
        run = BaseRun.of(key, commit, result, origin)
        _keep(pdir, key, run, result.inputs)
        return run
    finally:
        locks.release(lock)


def run_on(
    repo: pygit2.Repository,
    pdir: Path,
    commit: str,
    check: CheckCommand,
    sandbox: Sandbox,
    repo_root: Path,
    log: Path,
    timeout_sec: float,
    ask: PluginAsk,
    plan_id: str = "base",
    *,
    extra: tuple[str, ...] = (),
    before: Callable[[Path], None] | None = None,
) -> CheckResult:
    """One run of the check on ``commit`` in a pooled checkout (then ``extra``, consented proposed
    commands); the slot's move counts as set-up. ``before``: given the checkout's path before the
    check runs (the bytes a plan's check ran, failfirst.checked_bytes)."""
    began = time.monotonic()
    checkout = acquire_checkout(repo, pdir, commit, plan_id=plan_id, on_stale=dead_check)
    moved = time.monotonic() - began
    try:
        if before is not None:
            before(checkout.path)
        result = run_check(
            check,
            checkout,
            log,
            timeout_sec=timeout_sec,
            sandbox=sandbox,
            repo_root=repo_root,
            commit=commit,
            extra_commands=extra,
            ask=ask,
        )
    finally:
        release_checkout(checkout)
    timing = {**result.timing, "setup": round(result.timing.get("setup", 0.0) + moved, 3)}
    return replace(result, commit=commit, timing=timing, duration_sec=round(result.duration_sec + moved, 3))


def _confirmed(
    repo: pygit2.Repository,
    pdir: Path,
    commit: str,
    check: CheckCommand,
    sandbox: Sandbox,
    repo_root: Path,
    timeout_sec: float,
    result: CheckResult,
) -> CheckResult:
    """A failure in the record is never a verdict: the tests that failed while recording run
    again without it (the recorder's own frames can push a deep recursion over the limit), and
    their outcome there is the tip's. Only pytest with papayu's plugin can run tests by id."""
    tests = result.tests
    if tests is None or not tests.trusted or "pytest stream" not in tests.read_from:
        return result
    failing = sorted(t for t, o in tests.outcomes.items() if o in (Outcome.FAILED, Outcome.ERROR))
    if not failing:
        return result
    wanted = frozenset(failing)
    ask = PluginAsk(only=wanted, only_files=frozenset(t for t in wanted if "::" not in t))
    log = Path(result.log).with_name(Path(result.log).stem + ".unrecorded.log")
    again = run_on(repo, pdir, commit, check, sandbox, repo_root, log, timeout_sec, ask)
    if again.tests is None or not again.tests.trusted or again.timed_out:
        return result
    outcomes = dict(tests.outcomes)
    failures = dict(tests.failures)
    for test in failing:
        now = again.tests.outcomes.get(test)
        if now is not None:
            outcomes[test] = now
            if now not in (Outcome.FAILED, Outcome.ERROR):
                failures.pop(test, None)
    still = any(o in (Outcome.FAILED, Outcome.ERROR) for o in outcomes.values())
    code = 0 if result.exit_code == 1 and not still else result.exit_code
    merged = replace(tests, outcomes=outcomes, failures=failures)
    return replace(
        result, tests=merged, exit_code=code, duration_sec=round(result.duration_sec + again.duration_sec, 3)
    )


def remember(
    repo: pygit2.Repository,
    pdir: Path,
    commit: str,
    check: CheckCommand,
    sandbox: Sandbox,
    repo_root: Path,
    run: Any,
    origin: str,
) -> None:
    """A run that is exactly what a base run of its commit would be (a plan's run of its tree as
    is, nothing else ran after the check; `doctor --check`'s run of the tip): kept as that
    commit's base, so that no check runs it again. ``run``: a CheckResult; one whose results
    cannot be trusted, or that did not run every test (an order's early stop), is no base
    (results/provenance.py)."""
    if run.tests is None or run.timed_out or not run.tests.trusted or run.tests.order.get("stopped"):
        return
    key = base_key(repo, repo_root, commit, check, sandbox)
    if cached(pdir, key) is None:
        _keep(pdir, key, BaseRun.of(key, commit, run, origin), b"")


def _keep(pdir: Path, key: str, run: BaseRun, inputs: bytes) -> None:
    """The base's record, its record of inputs first (a base found without one is ordered by the
    newest record kept, or by the signals)."""
    (pdir / BASE_DIR).mkdir(parents=True, exist_ok=True)
    if inputs:
        with atomic.replacing(inputs_path(pdir, key)) as tmp:
            tmp.write_bytes(inputs)
        tests, off = _counted(inputs)
        said = {"key": key, "tests": tests, "off": off, "at": round(time.time())}
        (pdir / ORDER_DIR).mkdir(parents=True, exist_ok=True)
        atomic.write_json(pdir / ORDER_DIR / RECORD_FILE, said, indent=None)
    atomic.write_json(pdir / BASE_DIR / f"{key}.json", run.to_record(), indent=None)


def _counted(inputs: bytes) -> tuple[int, str]:
    """How many tests a record names, and why its recorder stopped ("" when it did not)."""
    tests, off = 0, ""
    for line in inputs.splitlines():
        if line.startswith(b'{"t":'):
            tests += 1
        elif line.startswith(b'{"off":') and not off:
            try:
                off = str(json.loads(line)["off"])
            except (ValueError, KeyError, TypeError):
                off = "unreadable"
    return tests, off
