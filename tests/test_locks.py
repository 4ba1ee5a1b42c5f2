"""papayu's lock files under contention: real processes, one owner at a time."""

from __future__ import annotations

import json
import multiprocessing
import os
from pathlib import Path

from papayu_git import locks


def _contend(lock: Path, log: Path, rounds: int) -> None:
    for _ in range(rounds):
        while not locks.try_acquire(lock, kind="test"):  # spin: the tightest contention
            pass
        with open(log, "a") as f:
            f.write(f"in {os.getpid()}\n")
        with open(log, "a") as f:
            f.write(f"out {os.getpid()}\n")
        locks.release(lock)


def test_many_processes_never_hold_one_lock_at_once(tmp_path: Path) -> None:
    lock, log = tmp_path / "papayu" / "locks" / "land-main.lock", tmp_path / "log"
    context = multiprocessing.get_context("fork")
    procs = [context.Process(target=_contend, args=(lock, log, 150)) for _ in range(8)]
    for proc in procs:
        proc.start()
    for proc in procs:
        proc.join(120)
        assert proc.exitcode == 0
    lines = log.read_text().splitlines()
    assert len(lines) == 8 * 150 * 2
    for enter, leave in zip(lines[::2], lines[1::2], strict=False):  # strictly alternating, same owner
        assert enter.startswith("in ") and leave == "out " + enter[3:], (enter, leave)
    assert not lock.exists() and list(lock.parent.iterdir()) == []


def test_a_dead_owners_lock_is_taken_over_and_a_live_one_is_not(tmp_path: Path) -> None:
    lock = tmp_path / "papayu" / "locks" / "x.lock"
    lock.parent.mkdir(parents=True)
    context = multiprocessing.get_context("fork")
    child = context.Process(target=lambda: None)
    child.start()
    child.join()
    lock.write_text(json.dumps({"pid": child.pid, "start_time": "1", "kind": "test"}))
    assert locks.try_acquire(lock, kind="test")  # the owner is gone
    assert json.loads(lock.read_text())["pid"] == os.getpid()
    assert not locks.try_acquire(lock, kind="test")  # held by a live process (this one)
    locks.release(lock)
    assert not lock.exists()


def test_removing_a_stale_lock_spares_a_live_lock_that_replaced_it(tmp_path: Path) -> None:
    """Between reading a dead owner's lock and removing it, another process may have cleared
    it and taken the lock: that new lock must survive."""
    lock = tmp_path / "papayu" / "locks" / "x.lock"
    lock.parent.mkdir(parents=True)
    lock.write_text(json.dumps({"pid": 999_999_999, "start_time": "1", "kind": "test"}))
    stale = locks.read_lock(lock)
    assert stale is not None and not stale.alive
    lock.unlink()  # another process clears it ...
    assert locks.try_acquire(lock, kind="test")  # ... and a live owner takes it
    locks.remove_stale(stale)
    assert lock.exists() and json.loads(lock.read_text())["pid"] == os.getpid()
    assert [p.name for p in lock.parent.iterdir()] == ["x.lock"]
