"""Running the check in the isolated checkout, sandboxed.

The command runs in its own session and process group (under bubblewrap when
available, see sandbox.py) with an allowlisted environment; the group is recorded in
the checkout's slot lock so that whoever finds the lock stale kills what is left; the
timeout kills the whole group; the output goes to `.git/papayu/checks/<id>.log`, masked
(secrets.mask) once the check ends.
"""

from __future__ import annotations

import collections
import os
import signal
import subprocess
import sys
import threading
import time
from collections.abc import Callable
from dataclasses import asdict, dataclass, field, replace
from pathlib import Path
from typing import IO, TYPE_CHECKING, Any

from papayu_git import atomic, locks, output, settings
from papayu_git.check.diagnose import environment_causes
from papayu_git.check.results import Outcome, TestResults, instrumented, junit_patterns, summary
from papayu_git.check.results.channel import STREAM_FIFO, Channel, Delivery, PluginAsk, delivered_inputs
from papayu_git.check.results.gotest import PlainLog
from papayu_git.check.results.instrument import GO_JSON, JUNIT_COPY, REPORT_FILES
from papayu_git.check.results.outcome import RANK
from papayu_git.check.results.read import read_delivery
from papayu_git.check.secret_files import repository_masker
from papayu_git.check.tail import without_warnings
from papayu_git.check.verdict import Verdict, plan_lands
from papayu_git.check.view import CheckView
from papayu_git.secrets import masker, printable
from papayu_git.stages import pause_point

if TYPE_CHECKING:
    from papayu_git.check.command import CheckCommand
    from papayu_git.check.sandbox import Sandbox
    from papayu_git.worktree import CheckCheckout

TAIL_LINES = 40
LOG_READ_CHARS = 64 * 1024 * 1024  # the log is capped (papayu.check.outputMB); this is a backstop


@dataclass(frozen=True)
class CheckResult:
    command: str
    source: str
    exit_code: int | None  # None: killed by the timeout
    duration_sec: float
    log: str
    tail: str
    timed_out: bool = False
    sandbox: str = "none"
    commit: str = ""  # the commit the check ran on (what `land ID` may land)
    environment: tuple[str, ...] = ()  # causes of a failure in the check's environment, not the plan
    user_tree_links: tuple[str, ...] = ()  # unsandboxed: the environment reaches the user's tree
    tests: TestResults | None = None  # per test, as the runners reported (results/)
    inputs: bytes = field(default=b"", repr=False)  # what each test read, when recorded (selection/)
    selection: dict[str, Any] | None = None  # the fail-first order the run asked for (selection/)
    # Where the run's time went: "setup" (the view, mounts, helpers), "command" (the check's
    # command in the sandbox, to its exit), "reading" (the results, masking the log).
    timing: dict[str, float] = field(default_factory=dict)
    runs: tuple[dict[str, Any], ...] = ()  # every run of the suite the check made, named (gate.py)
    verdict: Verdict | None = None  # the gate's per-test verdict (gate.py), when it judged
    own_log: str = ""  # the log of the plan's own run (its tree as is), when there was one

    @property
    def passed(self) -> bool:
        return plan_lands(self.verdict, self.exit_code, self.timed_out)

    def to_dict(self) -> dict[str, Any]:
        data = {**asdict(self), "passed": self.passed}
        data.pop("inputs", None)  # kept apart (check/base.py), never in records
        data["tests"] = summary(self.tests) if self.tests is not None else None
        data["verdict"] = self.verdict.to_dict() if self.verdict is not None else None
        if self.tests is not None and self.tests.failures:  # what a retry tells the model (retry.py)
            said = self.verdict
            first = [*said.broken, *said.new_failing, *said.already_failing] if said is not None else []
            failing = [t for t in dict.fromkeys([*first, *sorted(self.tests.failures)]) if t in self.tests.failures]
            failing = failing[:FAILURES_KEPT]
            data["failures"] = {test: self.tests.failures[test] for test in failing}
        return data


FAILURES_KEPT = 10  # failing tests whose messages the record keeps (each clipped by the readers)


def run_check(
    check: CheckCommand,
    checkout: CheckCheckout,
    log_path: Path,
    *,
    timeout_sec: float,
    sandbox: Sandbox,
    repo_root: Path,
    commit: str = "",
    extra_commands: tuple[str, ...] = (),
    ask: PluginAsk | None = None,
) -> CheckResult:
    """Run the check (then any consented proposed commands) in ``checkout``; never raises on red.
    ``ask``: what papayu's pytest plugin is to do beyond reporting (record inputs, select tests)."""
    log_path.parent.mkdir(parents=True, exist_ok=True)
    start = time.monotonic()
    exit_code: int | None = 0
    timed_out = False
    view = CheckView.prepare(checkout, sandbox, repo_root, python_safe_path=check.python_safe_path)
    command_sec = 0.0
    junit_globs = junit_patterns(repo_root)
    reinstall = settings.get_bool("check_reinstall", str(repo_root))
    own = _Reading(b"", Delivery(), frozenset())
    with open(log_path, "wb") as log:
        log.write(
            f"[papayu] sandbox: {sandbox.level}{'' if sandbox.sandboxed else ' (' + sandbox.reason + ')'}\n".encode()
        )
        if check.python_safe_path is not None:
            said = "PYTHONSAFEPATH=1" if check.python_safe_path else "no PYTHONSAFEPATH"
            log.write(f"[papayu] python: {said} (papayu.check.pythonSafePath)\n".encode())
        if view.host_reports is not None:
            log.write(
                f"[papayu] reports: {view.report}, on disk while the check runs (no sandbox to bound it)\n".encode()
            )
        for rel in view.carried:
            log.write(f"[papayu] carried: {printable(rel)} (ignored in your tree; a copy for the check)\n".encode())
        for note in view.notes:
            log.write(f"[papayu] {printable(note)}\n".encode())
        for index, command in enumerate((check.command, *extra_commands)):
            log.write(f"$ {printable(command)}\n".encode())  # a proposed command is the model's
            log.flush()
            remaining = timeout_sec - (time.monotonic() - start)
            cap = settings.get_int("check_output_mb", str(repo_root)) * 1024 * 1024
            began = time.monotonic()
            if index == 0:  # the check writes its per-test results where papayu reads them back (results/)
                exit_code, timed_out, own = _run_reported(
                    check, view, (junit_globs, reinstall), checkout, log, remaining, cap, ask or PluginAsk()
                )
            else:
                argv, env = view.command_line(command)
                exit_code, timed_out = _run_group(argv, env, checkout, log, max(remaining, 0.001), view.pass_fds, cap)
            command_sec += time.monotonic() - began
            if exit_code != 0 or timed_out:
                break
    view.close()
    reading = time.monotonic()
    mask = repository_masker(repo_root)  # the repository's secret files' values, in every spelling
    tests = _results(own, view, mask)
    tail = _masked_tail(log_path, mask)
    failed, safe_path = exit_code != 0 or timed_out, bool(view.env.get("PYTHONSAFEPATH"))
    end = time.monotonic()
    timing = {
        "setup": round(end - start - command_sec - (end - reading), 3),
        "command": round(command_sec, 3),
        "reading": round(end - reading, 3),
    }
    return CheckResult(
        check.command,
        check.source,
        exit_code,
        round(end - start, 3),
        str(log_path),
        tail,
        timed_out,
        sandbox.level,
        commit,
        environment=tuple(environment_causes(tail, repo_root, sandbox, safe_path=safe_path)) if failed else (),
        user_tree_links=tuple(view.user_tree_links),
        tests=tests,
        inputs=mask(delivered_inputs(own.delivery).decode("utf-8", "replace")).encode() if ask and ask.record else b"",
        timing=timing,
    )


@dataclass(frozen=True)
class _Reading:
    """What the check's own command left to read: its part of the log, what its report channel
    delivered, and the sources its runners may give."""

    log: bytes
    delivery: Delivery
    readers: frozenset[str]
    notes: tuple[str, ...] = ()  # the runners papayu cannot read, and what to set (instrument.py)


def _run_reported(
    check: CheckCommand,
    view: CheckView,
    asked: tuple[list[str], bool],
    checkout: CheckCheckout,
    log: Any,
    remaining: float,
    cap: int,
    ask: PluginAsk,
) -> tuple[int | None, bool, _Reading]:
    """The check's command, instrumented, with its report channel (results/channel.py). ``asked``:
    the papayu.check.junit globs and papayu.check.reinstall."""
    command, runs = check.command, check.runs
    junit_globs, reinstall = asked
    done = instrumented(command, view.report, env=view.env, runs=runs, junit=junit_globs, reinstall=reinstall)
    readers = done.readers | ({JUNIT_COPY} if junit_globs else frozenset())
    helpers = Path(view.host_helpers)
    plugin = ask.plugin_config(helpers, view.helpers, view.root, view.report)
    channel = Channel(helpers, {**plugin, "fifo": f"{view.report}/{STREAM_FIFO}"})
    config: dict[str, object] = {"names": list(REPORT_FILES), "junit": junit_globs, "tools": list(done.reports)}
    config["stream_fifo"] = STREAM_FIFO
    config["globs"] = ask.report_globs()
    config.update(stream_fd=channel.stream_w, files_fd=channel.files_w)
    argv, env = view.command_line(done.command, done.env, config)
    begin = log.tell()
    # go's events are read from memory and their text goes to the log (gotest.PlainLog).
    split = PlainLog(cap) if GO_JSON in readers else None
    try:
        fds = (*view.pass_fds, *channel.pass_fds)
        code, timed_out = _run_group(
            argv, env, checkout, log, max(remaining, 0.001), fds, cap, channel.started, split=split
        )
    finally:
        delivery = channel.finish()
    end = log.tell()
    log.flush()
    with open(log.name, "rb") as again:  # its own output only: not a proposed command's after it
        again.seek(begin)
        text = again.read(min(end - begin, LOG_READ_CHARS))
    notes = done.notes
    if split is not None:
        text += b"\n" + bytes(split.events)
        if split.over:
            notes = (*notes, f"go test's events went over papayu.check.outputMB: {split.over} bytes not read")
    return code, timed_out, _Reading(text, delivery, readers, notes)


def _results(own: _Reading, view: CheckView, mask: Callable[[str], str]) -> TestResults:
    """The run's per-test results masked like the log, here once for every reader of them
    (verdict lines, records, retries, agent results; docs/DESIGN.md, "Masking"): the messages,
    and the ids too, since a test may be named after a value (a parametrize id). Ids that mask
    alike are one group, as for an id reported more than once: its worst outcome, its count."""
    text = own.log.decode("utf-8", "replace")
    results = read_delivery(own.delivery, text, own.readers, root=view.root, report_dir=view.report)
    results = replace(results, unreadable=(*own.notes, *results.unreadable))
    outcomes: dict[str, Outcome] = {}
    counts: dict[str, int] = {}
    for test, name in zip(results.outcomes, _mask_each(list(results.outcomes), mask), strict=True):
        outcome = results.outcomes[test]
        counts[name] = counts.get(name, 0) + results.count(test)
        if name not in outcomes or RANK[outcome] > RANK[outcomes[name]]:
            outcomes[name] = outcome
    failures: dict[str, str] = {}
    for test, message in results.failures.items():
        failures.setdefault(mask(test), mask(message))
    return replace(
        results,
        outcomes=outcomes,
        failures=failures,
        unreadable=tuple(map(mask, results.unreadable)),
        errors=tuple(map(mask, results.errors)),
        collisions=tuple(map(mask, results.collisions)),
        counts={name: n for name, n in counts.items() if n > 1},
    )


def _mask_each(texts: list[str], mask: Callable[[str], str]) -> list[str]:
    """``mask`` of each of ``texts`` (one line each: test ids), in one pass over them joined: a
    run reports thousands of ids, and each call of the masker scans with every pattern."""
    joined = mask("\n".join(texts))
    parts = joined.split("\n")
    if len(parts) == len(texts) and all("\n" not in t for t in texts):
        return parts
    return [mask(t) for t in texts]


def kept_under_tmp(*paths: Path) -> tuple[Path, ...]:
    """Paths under /tmp among ``paths`` (and papayu's own prefix): shown read-only to probes
    that replace /tmp with their own."""
    wanted: list[str | Path] = [*paths, sys.prefix, os.environ.get("VIRTUAL_ENV") or "/"]
    candidates = {Path(p).resolve() for p in wanted}
    return tuple(sorted(p for p in candidates if p != Path("/tmp") and Path("/tmp") in p.parents))


def _run_group(
    argv: list[str],
    env: dict[str, str],
    checkout: CheckCheckout,
    log: Any,
    timeout_sec: float,
    fds: tuple[int, ...],
    cap: int,
    started: Callable[[], None] | None = None,
    *,
    split: PlainLog | None = None,
) -> tuple[int | None, bool]:
    proc = subprocess.Popen(
        argv,
        cwd=checkout.path,
        stdin=subprocess.DEVNULL,
        stdout=subprocess.PIPE,
        stderr=subprocess.STDOUT,
        env=env,
        start_new_session=True,
        pass_fds=fds,
    )
    if started is not None:
        started()
    assert proc.stdout is not None
    pump = CappedLog(proc.stdout, log, cap, split)
    # Whoever finds this slot's lock stale (papayu was killed) kills the group: see kill_orphans.
    locks.update(checkout.lock, check_pgid=proc.pid, check_start=locks.process_start_time(proc.pid))
    try:
        pause_point("during_check")
        try:
            code: int | None = _wait(proc, timeout_sec)
            timed_out = False
        except subprocess.TimeoutExpired:
            code, timed_out = None, True
    finally:
        _kill_group(proc)
        pump.finish()
    if timed_out:
        log.write(f"\n[papayu] check killed after {timeout_sec:.0f}s (PAPAYU_CHECK_TIMEOUT_SEC)\n".encode())
    return code, timed_out


class CappedLog:
    """Copies the check's output to its log, keeping at most ``cap`` bytes: the first half as
    it comes, the last half in a ring; the cut is said in the log. papayu's memory stays bounded
    whatever the check prints (one line of hundreds of MiB included)."""

    def __init__(self, source: IO[bytes], log: IO[bytes], cap: int, split: PlainLog | None = None) -> None:
        self.source, self.log, self.half = source, log, max(cap // 2, 4096)
        self.split = split  # what of the output goes to the log (go's events as their text)
        self.written = 0
        self.tail: collections.deque[bytes] = collections.deque()
        self.tail_bytes = self.cut = 0
        self.thread = output.start_thread(threading.Thread(target=self._pump, daemon=True))

    def _pump(self) -> None:
        fd = self.source.fileno()
        while chunk := os.read(fd, 65536):
            self._keep(self.split.feed(chunk) if self.split is not None else chunk)
        if self.split is not None:
            self._keep(self.split.flush())

    def _keep(self, chunk: bytes) -> None:
        room = self.half - self.written
        if room > 0:
            self.log.write(chunk[:room])
            self.log.flush()
            self.written += min(room, len(chunk))
            chunk = chunk[room:]
        if chunk:
            self.tail.append(chunk)
            self.tail_bytes += len(chunk)
            while self.tail_bytes - len(self.tail[0]) >= self.half:
                self.cut += len(self.tail[0])
                self.tail_bytes -= len(self.tail.popleft())

    def finish(self) -> None:
        self.thread.join(timeout=10)
        self.source.close()
        if self.cut:
            self.log.write(f"\n[papayu] ... {self.cut} bytes of output cut (papayu.check.outputMB) ...\n".encode())
        self.log.write(b"".join(self.tail))
        self.log.flush()


def _wait(proc: subprocess.Popen[bytes], timeout_sec: float) -> int:
    """``proc.wait(timeout)``, woken by the kernel when the process exits: Popen.wait with a
    timeout polls with sleeps of up to 50 ms, which every check would pay (bench/check_bench.py)."""
    import select

    try:
        pidfd = os.pidfd_open(proc.pid)
    except (AttributeError, OSError):  # not Linux >= 5.3
        return proc.wait(timeout=timeout_sec)
    try:
        poller = select.poll()
        poller.register(pidfd, select.POLLIN)
        if not poller.poll(max(timeout_sec, 0.001) * 1000):
            raise subprocess.TimeoutExpired(proc.args, timeout_sec)
    finally:
        os.close(pidfd)
    return proc.wait()


def _kill_group(proc: subprocess.Popen[bytes]) -> None:
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


def kill_orphans(info: locks.LockInfo) -> list[int]:
    """A dead papayu's slot lock: kill what its check left running before the slot is reused
    or deleted. Its process group (recorded when the check started; only processes started
    since, so a reused group id is safe), and, for an unsandboxed check whose processes left
    the group (setsid), every process of ours whose working directory is inside the slot."""
    pgid = info.data.get("check_pgid")
    started = str(info.data.get("check_start") or "")
    slot = Path(str(info.data.get("path") or ""))
    killed = []
    for pid, stat in _processes():
        fields = stat.rsplit(")", 1)[-1].split()
        in_group = (
            isinstance(pgid, int)
            and fields[2] == str(pgid)
            and (not started or not started.isdigit() or int(fields[19]) >= int(started))
        )
        if in_group or (slot.name and _cwd_inside(pid, slot)):
            try:
                os.kill(pid, signal.SIGKILL)
                killed.append(pid)
            except (ProcessLookupError, PermissionError):
                pass
    return killed


def dead_check(info: locks.LockInfo) -> None:
    """A check checkout whose papayu died (its slot lock's ``on_stale``): kill what its check left
    running, and say so."""
    killed = kill_orphans(info)
    if killed:
        output.info(f"killed {len(killed)} process(es) a dead papayu's check left running in {info.data.get('path')}")


def _processes() -> list[tuple[int, str]]:
    out = []
    own = os.getpid()
    for entry in os.listdir("/proc") if os.path.isdir("/proc") else []:
        if entry.isdigit() and int(entry) != own:
            try:
                out.append((int(entry), Path(f"/proc/{entry}/stat").read_text()))
            except OSError:
                continue
    return out


def _cwd_inside(pid: int, slot: Path) -> bool:
    try:
        cwd = Path(os.readlink(f"/proc/{pid}/cwd"))
    except OSError:
        return False
    return cwd == slot or slot in cwd.parents


MASK_CHUNK_CHARS = 8 * 1024 * 1024
TAIL_CHARS = 64 * 1024


def _masked_tail(log_path: Path, mask: Callable[[str], str] | None = None, lines: int = TAIL_LINES) -> str:
    """Mask secrets in the log (rewritten in place when that changes it) and return its last
    lines, the runner's warnings left out (tail.py) and counted."""
    try:
        tail, left_out = without_warnings(_mask_file(log_path, mask or masker()))
    except OSError:
        return ""
    shown = tail.splitlines()[-lines:]
    if left_out:
        shown.insert(0, f"[papayu] {left_out} lines of the runner's warnings left out of this tail; the log has them")
    return "\n".join(shown)


def _mask_file(path: Path, mask: Any) -> str:
    """Rewrite ``path`` masked, in chunks that end on a line end (a secret on one line is never
    split; a PEM block across chunks of a log over 8 MiB may be); return its masked last 64 KiB."""
    changed, tail = False, ""
    with atomic.replacing(path) as tmp:
        with (
            open(path, encoding="utf-8", errors="replace", newline="") as src,
            open(tmp, "w", encoding="utf-8", newline="") as dst,
        ):
            while block := src.read(MASK_CHUNK_CHARS):
                block += src.readline()
                masked = mask(block)
                changed = changed or masked != block
                dst.write(masked)
                tail = (tail + masked)[-TAIL_CHARS:]
        if not changed:
            tmp.unlink()  # nothing to mask: the log stays as it is
    return tail
