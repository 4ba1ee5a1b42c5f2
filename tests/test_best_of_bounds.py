"""Best of N, bounded and stopped: --first-green, --budget-tokens, --timeout, a run killed with
kill -9. Whatever stops a candidate kills its check and leaves no ref of it; the user's tree is
untouched. Real CLI, real sandbox, scripted models on 127.0.0.1."""

from __future__ import annotations

import os
import signal
import subprocess
import sys
import time
from pathlib import Path

from helpers import ROOT, git, papayu, plan_record, snapshot, user_view, wait_gone
from llm_server import Reply, ScriptedLLM
from test_best_of import GOAL, GOOD, PYTEST, action, best_of, calc, create, router, rows  # noqa: F401
from test_best_of import pytestmark as pytestmark  # the sandbox must work here

SLOW = "9''{pid}.5"  # quoted: only the sleep itself carries the marker


def slow_check(repo: Path) -> str:
    """A check that sleeps (for ages) when the tree has slow.txt; the marker finds the sleep."""
    marker = f"9{os.getpid()}.5"
    git(repo, "config", "papayu.check.command", f"test -e slow.txt && sleep {SLOW.format(pid=os.getpid())}; {PYTEST}")
    return marker


def test_first_green_stops_the_others_and_kills_their_checks(calc: Path, llm: ScriptedLLM) -> None:  # noqa: F811
    marker = slow_check(calc)
    llm.script = [router({0.0: [action(GOOD)], 0.3: [action(GOOD), create("slow.txt", "zz\n")]})] * 4
    started = time.monotonic()
    proc, out = best_of(calc, llm.env(), "2", GOAL, "-y", "--first-green")
    assert proc.returncode == 0, proc.stderr
    assert time.monotonic() - started < 120
    matrix = rows(out)
    assert matrix[1]["state"] == "landed" and matrix[2]["state"] == "stopped"
    assert matrix[2]["reason"] == "--first-green: #1 passed the gate first"
    assert matrix[2]["lost"] == "stopped: ERR_INTERRUPTED: --first-green: #1 passed the gate first"
    stopped = plan_record(calc, matrix[2]["plan_id"])["extra"]["apply"]
    assert stopped["state"] == "interrupted" and stopped["stage"] == "check"  # stopped in its check
    assert wait_gone(marker, timeout=10) == []
    assert git(calc, "branch", "--list", f"papayu/{out['run']['id']}/2") == ""


def test_the_token_budget_stops_requests_before_they_are_sent(calc: Path, llm: ScriptedLLM) -> None:  # noqa: F811
    llm.script = [router({0.0: [action(GOOD)], 0.3: [action(GOOD)]})] * 4
    before = snapshot(calc)
    proc, out = best_of(calc, llm.env(), "2", GOAL, "-y", "--budget-tokens", "10")
    assert proc.returncode == 1 and out["error"]["code"] == "ERR_BEST_OF_NO_GREEN"
    assert llm.requests == []  # nothing was sent past the budget
    for row in rows(out).values():
        assert row["state"] == "skipped" and row["code"] == "ERR_BUDGET_EXHAUSTED"
        assert row["lost"].startswith("not asked: ERR_BUDGET_EXHAUSTED")
    assert user_view(snapshot(calc)) == user_view(before)


def test_the_timeout_stops_what_still_runs(calc: Path, llm: ScriptedLLM) -> None:  # noqa: F811
    llm.script = [Reply(200, {"choices": []}, delay=60)] * 4
    started = time.monotonic()
    proc, out = best_of(calc, llm.env(), "2", GOAL, "-y", "--timeout", "2")
    assert time.monotonic() - started < 30, "the run waited past its --timeout"
    assert proc.returncode == 1 and out["error"]["code"] == "ERR_BEST_OF_NO_GREEN"
    assert {row["state"] for row in rows(out).values()} == {"stopped"}
    assert {row["code"] for row in rows(out).values()} == {"ERR_BEST_OF_TIMEOUT"}


def test_a_run_killed_with_kill_9_leaves_no_candidate_behind(calc: Path, llm: ScriptedLLM) -> None:  # noqa: F811
    marker = slow_check(calc)
    git(calc, "config", "papayu.check.prewarm", "false")
    llm.script = [router({0.0: [create("slow.txt", "a\n")], 0.3: [create("slow.txt", "b\n")]})] * 4
    git(calc, "config", "papayu.check.command", f"sleep {SLOW.format(pid=os.getpid())}; {PYTEST}")
    before = snapshot(calc)
    proc = subprocess.Popen(
        [sys.executable, "-m", "papayu_git", "best-of", "2", GOAL, "-y"],
        cwd=calc,
        stdout=subprocess.DEVNULL,
        stderr=subprocess.DEVNULL,
        env={**os.environ, **llm.env(), "PYTHONPATH": str(ROOT)},
    )
    deadline = time.monotonic() + 120
    while not git(calc, "branch", "--list", "papayu/*").strip():  # a candidate is committed: checks run
        assert time.monotonic() < deadline and proc.poll() is None
        time.sleep(0.1)
    proc.send_signal(signal.SIGKILL)
    proc.wait(timeout=30)
    assert wait_gone(marker, timeout=30) == []  # its children noticed and stopped their checks
    listed = papayu("list", cwd=calc)  # every command clears what a dead run left
    assert listed.returncode == 0, listed.stderr
    assert git(calc, "branch", "--list", "papayu/*") == ""
    assert user_view(snapshot(calc)) == user_view(before)
