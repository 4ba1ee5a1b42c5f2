"""The check's checkout prepared while the model thinks (prewarm.py; docs/DESIGN.md, "The check's
trust boundary"): real git repositories, the real CLI, a scripted model that answers late."""

from __future__ import annotations

import dataclasses
import json
import os
import signal
import subprocess
import sys
import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
from helpers import checkout_pool, git, make_repo, papayu, snapshot, user_view, wait_for_marker, write_plan
from llm_server import ScriptedLLM, chat, plan_answer

from papayu_git import locks, prewarm, settings, worktree

GOAL = "fix the failing test tests/test_calc.py"
CALC = "def add(a, b):\n    return a - b\n"
TEST = "from calc import add\n\n\ndef test_add():\n    assert add(2, 3) == 5\n"


def slow(delay: float) -> Any:
    return dataclasses.replace(chat(plan_answer()), delay=delay)


@pytest.fixture
def repo(tmp_path: Path) -> Iterator[Path]:
    files = {"calc.py": CALC, "tests/test_calc.py": TEST, ".gitignore": "*.log\n"}
    files.update({f"pkg/m{i:03d}.py": f"X = {i}\n" for i in range(50)})
    path = make_repo(tmp_path / "repo", files)
    git(path, "config", "papayu.check.command", "true")
    git(path, "config", "papayu.check.prewarmBase", "false")  # the slot alone here; the base run: its own test
    yield path
    _kill_prewarms(path)  # nothing of ours outlives the test


def pool(repo: Path) -> Path:
    return checkout_pool(repo)


def prewarm_lock(repo: Path) -> Path:
    return repo / ".git/papayu/locks" / prewarm.LOCK_NAME


def state(slot: Path) -> dict[str, Any]:
    return json.loads((slot / "state.papayu").read_text())


def head(repo: Path) -> str:
    return git(repo, "rev-parse", "HEAD").strip()


def _holders(repo: Path) -> list[int]:
    found = []
    for lock in [prewarm_lock(repo), *pool(repo).glob("*.lock")]:
        info = locks.read_lock(lock)
        if info is not None and info.alive and info.pid != os.getpid():
            found.append(info.pid)
    return found


def _kill_prewarms(repo: Path) -> None:
    for pid in _holders(repo):
        try:
            os.kill(pid, signal.SIGKILL)
        except ProcessLookupError:
            pass


def wait_prepared(repo: Path, timeout: float = 60) -> Path:
    """The slot a background prewarm prepared, once it released everything."""
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        slots = [s for s in pool(repo).glob("slot-*") if (s / "state.papayu").exists()]
        if slots and not prewarm_lock(repo).exists() and not list(pool(repo).glob("*.lock")):
            assert len(slots) == 1, slots
            return slots[0]
        time.sleep(0.05)
    raise AssertionError(f"no prepared slot after {timeout}s: {sorted(pool(repo).glob('*'))}")


def run_prewarm(repo: Path, *args: str, env: dict[str, str] | None = None) -> subprocess.Popen[str]:
    """The background process itself, with its report on stdout and markers on stderr."""
    return subprocess.Popen(
        [sys.executable, "-m", "papayu_git.prewarm", str(repo), *args],
        cwd=repo,
        text=True,
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        env={**os.environ, **(env or {})},
    )


def test_plan_with_a_slow_model_leaves_a_prepared_slot_at_the_tip(repo: Path, llm: ScriptedLLM) -> None:
    (repo / "untracked.txt").write_text("mine\n")
    (repo / "calc.py").write_text(CALC + "# local edit\n")
    before = snapshot(repo)
    llm.script = [slow(3.0)]
    started = time.monotonic()
    proc = papayu("plan", GOAL, "--json", cwd=repo, env=llm.env())
    assert proc.returncode == 0, proc.stderr
    assert json.loads(proc.stdout)["ok"] is True  # nothing of the background process on stdout
    # Prepared while the model was thinking: the slot is ready by the time plan returns.
    slot = wait_prepared(repo, timeout=max(1.0, 3.0 - (time.monotonic() - started)) + 30)
    assert slot.name == "slot-0"
    assert state(slot) == {"commit": head(repo), "by": "prewarm"}
    assert (slot / "work/calc.py").read_text() == CALC  # the tip, not the user's edit
    assert not (slot / "work/untracked.txt").exists()
    assert git(repo, "--git-dir", str(slot / "git"), "--work-tree", str(slot / "work"), "status", "--porcelain") == ""
    assert snapshot(repo) == before  # the user's side untouched
    assert sorted(p.name for p in (repo / ".git/papayu").iterdir()) == [
        "locks",
        "plans",
        "traces",
    ]  # the pool is elsewhere


def test_the_background_process_is_detached_and_holds_no_terminal(repo: Path, llm: ScriptedLLM) -> None:
    llm.script = [slow(0.5)]
    env = llm.env(PAPAYU_TEST_PAUSE_AT="prewarm_checkout")
    proc = papayu("plan", GOAL, "--json", cwd=repo, env=env, timeout=60)  # returns: no pipe held open
    assert proc.returncode == 0, proc.stderr
    deadline = time.monotonic() + 30
    while not _holders(repo) and time.monotonic() < deadline:
        time.sleep(0.05)
    (pid,) = set(_holders(repo))  # the prewarm lock and the slot lock: one process
    assert os.getsid(pid) == pid  # its own session: no controlling terminal, no ^C from it
    for fd in (0, 1, 2):
        assert os.readlink(f"/proc/{pid}/fd/{fd}") == "/dev/null"
    assert Path(os.readlink(f"/proc/{pid}/cwd")) == repo
    info = locks.read_lock(pool(repo) / "slot-0.lock")
    assert info is not None and info.data["purpose"] == "prewarm" and info.data["until"] > time.time()


def test_a_second_prewarm_is_a_no_op(repo: Path) -> None:
    # One at a time per repository: while one holds the prewarm lock, another does nothing.
    assert locks.try_acquire(prewarm_lock(repo), kind="prewarm")
    try:
        out = run_prewarm(repo).communicate(timeout=60)[0]
    finally:
        locks.release(prewarm_lock(repo))
    assert out.strip() == "already running"
    assert not pool(repo).exists()

    # Two started together: one slot prepared, never two.
    first, second = run_prewarm(repo), run_prewarm(repo)
    reports = sorted(p.communicate(timeout=60)[0].strip() for p in (first, second))
    assert reports[1] == "prepared slot-0" and reports[0] in ("already running", "already prepared")
    assert sorted(p.name for p in pool(repo).iterdir() if p.name != "repository") == ["slot-0"]
    # At the tip already: nothing to do.
    assert run_prewarm(repo).communicate(timeout=60)[0].strip() == "already prepared"


def test_prewarm_false_prepares_nothing(repo: Path, llm: ScriptedLLM) -> None:
    git(repo, "config", "papayu.check.prewarm", "false")
    llm.script = [slow(1.0)]
    proc = papayu("plan", GOAL, cwd=repo, env=llm.env())
    assert proc.returncode == 0, proc.stderr
    time.sleep(1.0)
    assert not pool(repo).exists()
    settings._git_config.cache_clear()
    assert not prewarm.enabled(repo)
    git(repo, "config", "--unset", "papayu.check.prewarm")
    settings._git_config.cache_clear()
    assert prewarm.enabled(repo) and not prewarm.enabled(repo, no_check=True)
    os.environ["PAPAYU_CHECK_PREWARM"] = "0"
    try:
        assert not prewarm.enabled(repo) and not prewarm.start(repo)
    finally:
        del os.environ["PAPAYU_CHECK_PREWARM"]


def test_fix_no_check_prepares_nothing(repo: Path, llm: ScriptedLLM) -> None:
    llm.script = [slow(1.0)]
    proc = papayu("fix", GOAL, "--no-check", cwd=repo, env=llm.env())  # no terminal: not confirmed
    assert proc.returncode == 0, proc.stderr
    time.sleep(1.0)
    assert not pool(repo).exists()


def test_the_prewarm_computes_the_base_run_the_apply_then_reuses(repo: Path, tmp_path: Path) -> None:
    from papayu_git.check import sandbox

    if sandbox.unavailable_reason() is not None:
        pytest.skip(f"bwrap does not work here: {sandbox.unavailable_reason()}")
    git(repo, "config", "papayu.check.prewarmBase", "true")
    git(repo, "config", "papayu.check.command", f"{sys.executable} -m pytest -q -p no:cacheprovider")
    out = run_prewarm(repo).communicate(timeout=120)[0].strip()
    assert out == "prepared slot-0; base computed (pytest stream + pytest junit)", out
    fixed = "def add(a, b):\n    return a + b\n"
    plan = write_plan(tmp_path, [{"kind": "UPDATE_FILE", "path": "calc.py", "content": fixed}])
    env = {"PAPAYU_PROTOCOL_VERSION": "1"}
    data = json.loads(papayu("apply", str(plan), "--json", "-y", cwd=repo, env=env).stdout)
    assert data["state"] == "landed", data
    assert data["check"]["verdict"]["trailer"] == "passed 1, fixed 1, already failing 0", data
    assert len(list((repo / ".git/papayu/checks").glob("base-*.log"))) == 1  # the prewarm's, not a second


def test_nothing_prepared_without_a_check_or_a_commit(tmp_path: Path) -> None:
    bare = make_repo(tmp_path / "nocheck", {"notes.txt": "n\n"})  # nothing detected, nothing configured
    assert run_prewarm(bare).communicate(timeout=60)[0].strip() == "no check"
    assert not pool(bare).exists()
    # An explicit --check (fix --check CMD) is a check.
    assert run_prewarm(bare, "--explicit-check").communicate(timeout=60)[0].strip() == "prepared slot-0"

    empty = tmp_path / "empty"
    empty.mkdir()
    git(empty, "init", "-q", "-b", "main")
    git(empty, "config", "papayu.check.command", "true")
    assert run_prewarm(empty).communicate(timeout=60)[0].strip() == "no commits"
    assert not (empty / ".git/papayu").exists()


def test_fix_prewarms_the_onto_branch(repo: Path) -> None:
    main = head(repo)
    git(repo, "checkout", "-q", "-b", "other")
    (repo / "calc.py").write_text(CALC + "# other\n")
    git(repo, "commit", "-qam", "other")
    assert run_prewarm(repo, "--onto", "main").communicate(timeout=60)[0].strip() == "prepared slot-0"
    assert state(pool(repo) / "slot-0")["commit"] == main


def test_the_check_after_a_prewarm_reuses_the_prepared_slot(repo: Path, tmp_path: Path) -> None:
    assert run_prewarm(repo).communicate(timeout=60)[0].strip() == "prepared slot-0"
    slot = pool(repo) / "slot-0"
    marker = slot / "kept-by-test"  # gone if the slot were recreated
    marker.write_text("x")
    created = (slot / "config.papayu").stat().st_ino
    plan = write_plan(tmp_path, [{"kind": "CREATE_FILE", "path": "new.py", "content": "n\n"}])
    proc = papayu("apply", str(plan), "--json", "--check", "test -f new.py && test -f pkg/m049.py", cwd=repo)
    assert proc.returncode == 0, proc.stderr
    assert json.loads(proc.stdout)["state"] == "landed"
    assert marker.exists() and (slot / "config.papayu").stat().st_ino == created
    assert sorted(p.name for p in pool(repo).iterdir() if p.name != "repository") == ["slot-0"]
    assert state(slot)["by"] == "check"
    assert git(repo, "rev-parse", "HEAD^").strip() != head(repo)


def test_the_check_prefers_the_slot_prepared_at_its_parent(repo: Path, tmp_path: Path) -> None:
    from papayu_git.repository import open_repo

    old = head(repo)
    (repo / "calc.py").write_text(CALC + "# newer\n")
    git(repo, "commit", "-qam", "newer")
    pygit_repo = open_repo(repo)
    busy = worktree.acquire_checkout(pygit_repo, repo / ".git/papayu", old)  # slot-0, at an old commit
    try:
        assert run_prewarm(repo).communicate(timeout=60)[0].strip() == "prepared slot-1"
    finally:
        worktree.release_checkout(busy)
    plan = write_plan(tmp_path, [{"kind": "CREATE_FILE", "path": "new.py", "content": "n\n"}])
    proc = papayu("apply", str(plan), "--check", "true", cwd=repo)
    assert proc.returncode == 0, proc.stderr
    assert state(pool(repo) / "slot-0") == {"commit": old, "by": "check"}  # not taken
    # slot-1 holds the checked commit; what landed is that commit with the verdict's trailer added.
    held = state(pool(repo) / "slot-1")
    assert held["by"] == "check" and git(repo, "rev-parse", f"{held['commit']}^{{tree}}") == git(
        repo, "rev-parse", "HEAD^{tree}"
    )


def test_kill_9_during_preparation_then_apply_succeeds(repo: Path, tmp_path: Path) -> None:
    (repo / "untracked.txt").write_text("mine\n")
    (repo / "debug.log").write_text("ignored\n")
    before = snapshot(repo)
    proc = run_prewarm(repo, env={"PAPAYU_TEST_PAUSE_AT": "prewarm_checkout"})  # slot made, checkout next
    wait_for_marker(proc)
    # A check arriving now waits for the prewarm rather than make a slot of its own...
    plan = write_plan(tmp_path, [{"kind": "CREATE_FILE", "path": "new.py", "content": "n\n"}])
    apply = subprocess.Popen(
        [sys.executable, "-m", "papayu_git", "apply", str(plan), "--json", "--check", "test -f calc.py"],
        cwd=repo,
        text=True,
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
    )
    time.sleep(1.5)
    assert apply.poll() is None and not (pool(repo) / "slot-1").exists()
    assert user_view(snapshot(repo)) == user_view(before)
    # ...and, the prewarm killed, takes its slot over: the stale lock cleared, the slot usable.
    os.kill(proc.pid, signal.SIGKILL)
    proc.communicate()
    out, err = apply.communicate(timeout=120)
    assert apply.returncode == 0, err
    assert json.loads(out)["state"] == "landed"
    assert sorted(p.name for p in pool(repo).iterdir() if p.name != "repository") == ["slot-0"]
    assert (repo / "new.py").read_text() == "n\n"
    assert (repo / "untracked.txt").read_text() == "mine\n" and (repo / "debug.log").read_text() == "ignored\n"
    # The dead prewarm's own lock goes at the next start or command; it never blocks one. (The
    # slot holds the checked commit: the new tip is that commit with the verdict's trailer.)
    assert run_prewarm(repo).communicate(timeout=60)[0].strip() in ("already prepared", "prepared slot-0")
    assert papayu("gc", cwd=repo).returncode == 0
    assert list((repo / ".git/papayu/locks").glob("*.lock")) == [] and list(pool(repo).glob("*.lock")) == []


def test_kill_9_in_the_middle_of_the_git_checkout(tmp_path: Path) -> None:
    files = {f"d{i // 100:02d}/f{i:05d}.txt": f"{i}\n" * 20 for i in range(6000)}
    repo = make_repo(tmp_path / "big", {**files, "calc.py": CALC})
    git(repo, "config", "papayu.check.command", "true")
    before = snapshot(repo)
    proc = run_prewarm(repo)
    work = pool(repo) / "slot-0" / "work"
    deadline = time.monotonic() + 60
    while not (work / "d00").exists() and time.monotonic() < deadline:
        time.sleep(0.002)
    os.kill(proc.pid, signal.SIGKILL)  # its git goes on as an orphan: the next command kills it
    proc.communicate()
    assert not (pool(repo) / "slot-0" / "state.papayu").exists()  # killed before it finished
    assert snapshot(repo) == before
    plan = write_plan(tmp_path, [{"kind": "CREATE_FILE", "path": "new.py", "content": "n\n"}])
    check = "test -f new.py && test -f d59/f05999.txt && test $(find d* -type f | wc -l) -eq 6000"
    result = papayu("apply", str(plan), "--check", check, cwd=repo)
    assert result.returncode == 0, result.stderr
    assert (repo / "new.py").read_text() == "n\n"
    assert list((repo / ".git/papayu/locks").glob("*.lock")) == []
    assert list(pool(repo).glob("*.lock")) == []
    assert state(pool(repo) / "slot-0")["by"] == "check"


def test_a_half_created_slot_is_recreated(repo: Path, tmp_path: Path) -> None:
    slot = pool(repo) / "slot-0"
    (slot / "git").mkdir(parents=True)  # killed inside `git init`: no pristine config yet
    (slot / "work").mkdir()
    (slot / "work" / "leftover.txt").write_text("x")
    assert worktree.slot_commit(slot) == ""
    plan = write_plan(tmp_path, [{"kind": "CREATE_FILE", "path": "new.py", "content": "n\n"}])
    proc = papayu("apply", str(plan), "--check", "test ! -e leftover.txt && test -f new.py", cwd=repo)
    assert proc.returncode == 0, proc.stderr
    assert state(slot)["by"] == "check" and (slot / "config.papayu").is_file()
