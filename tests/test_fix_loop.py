"""The everyday loop through the CLI: see then land, retry a red check with its failures, fail
early on dirty files, and states that say what happened. Real repositories, the real sandboxed
check (pytest, per-test results), a scripted OpenAI-compatible server on 127.0.0.1."""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
import time
from pathlib import Path
from typing import Any

import pytest
from calc_project import CALC, GOAL, GOOD, WRONG, attempt
from helpers import ROOT, git, papayu, processes_with, snapshot, stored_plans
from llm_server import Reply, ScriptedLLM
from terminal import Terminal

from papayu_git.check import sandbox

pytestmark = pytest.mark.skipif(
    sandbox.unavailable_reason() is not None, reason=f"bwrap does not work here: {sandbox.unavailable_reason()}"
)


def user_text(body: dict[str, Any]) -> str:
    return "\n".join(str(m.get("content") or "") for m in body.get("messages", []) if m.get("role") == "user")


def fix(repo: Path, llm: ScriptedLLM, *args: str) -> tuple[subprocess.CompletedProcess[str], dict[str, Any]]:
    proc = papayu("fix", GOAL, "--json", *args, cwd=repo, env=llm.env(), timeout=300)
    assert proc.stdout.startswith("{"), proc.stderr
    return proc, json.loads(proc.stdout)


def test_a_red_check_is_retried_with_the_failing_test_and_the_previous_plan(calc: Path, llm: ScriptedLLM) -> None:
    llm.script = [*attempt(WRONG), *attempt(GOOD)]
    proc, out = fix(calc, llm, "-y")  # -y: two attempts by default
    assert proc.returncode == 0, proc.stderr
    assert [a["state"] for a in out["attempts"]] == ["review", "landed"]
    assert out["attempts"][0]["error_code"] == "ERR_CHECK_FIXES_NOTHING"
    assert out["attempts"][0]["failing"] == ["tests/test_calc.py::test_add"]
    assert len(llm.requests) == 4
    second = user_text(llm.requests[2])  # the second attempt's PLAN request
    assert "PREVIOUS ATTEMPT" in second and out["attempts"][0]["plan_id"] in second
    assert "tests/test_calc.py::test_add" in second
    assert "+    return a * b" in second  # the previous plan's change
    assert "assert 6 == 5" in second  # the failing test's own output
    assert "PREVIOUS ATTEMPT" not in user_text(llm.requests[0])
    assert (calc / "calc.py").read_text() == CALC.replace("a - b", "a + b", 1)
    records = {p["id"]: p for p in stored_plans(calc)}
    first, second_id = out["attempts"][0]["plan_id"], out["attempts"][1]["plan_id"]
    assert records[second_id]["extra"]["retry_of"] == first
    # The held first attempt can no longer land (its base is not the tip): its branch is dropped.
    assert out["attempts"][0]["superseded_by"] == second_id and "superseded_by" not in out["attempts"][1]
    assert git(calc, "branch", "--list", "papayu/*") == ""
    assert records[first]["extra"]["apply"]["state"] == "dropped"
    assert records[first]["extra"]["apply"]["superseded_by"] == second_id
    # Each attempt keeps its own log.
    logs = calc / ".git" / "papayu" / "checks"
    assert (logs / f"{first}.log").is_file() and (logs / f"{second_id}.log").is_file()
    assert "assert 6 == 5" in (logs / f"{first}.log").read_text()


def test_keep_failed_keeps_a_held_attempt_after_a_later_one_landed(calc: Path, llm: ScriptedLLM) -> None:
    llm.script = [*attempt(WRONG), *attempt(GOOD)]
    proc = papayu("fix", GOAL, "-y", "--keep-failed", cwd=calc, env=llm.env(), timeout=300)
    assert proc.returncode == 0, proc.stderr
    held = [p["id"] for p in stored_plans(calc) if (p["extra"].get("apply") or {}).get("state") == "review"]
    assert len(held) == 1 and git(calc, "branch", "--list", "papayu/*").split() == [f"papayu/{held[0]}"]
    assert "dropped papayu/" not in proc.stderr and "2 attempts" in proc.stderr


def test_the_loop_stops_when_an_attempt_makes_nothing_better(calc: Path, llm: ScriptedLLM) -> None:
    llm.script = [*attempt(WRONG), *attempt(WRONG), *attempt(GOOD)]
    before = git(calc, "rev-parse", "main")
    proc, out = fix(calc, llm, "-y", "--attempts", "3")
    assert proc.returncode == 1, proc.stderr
    assert len(out["attempts"]) == 2 and len(llm.requests) == 4  # the third was never asked for
    assert "fails as many tests as the one before it" in proc.stderr
    assert git(calc, "rev-parse", "main") == before


def test_without_yes_a_red_check_is_not_retried(calc: Path, llm: ScriptedLLM) -> None:
    """Without -y (here on no terminal) one attempt: the plan is stored, not applied."""
    llm.script = [*attempt(WRONG)]
    proc = papayu("fix", GOAL, cwd=calc, env=llm.env())
    assert proc.returncode == 0 and "apply it with: git papayu apply" in proc.stderr
    assert "next: git papayu apply" not in proc.stdout  # fix says how to go on once, not twice
    assert len(llm.requests) == 1


def test_retry_id_sends_the_regression_and_lands_the_new_plan(calc: Path, llm: ScriptedLLM) -> None:
    breaks_sub = (
        "--- a/calc.py\n+++ b/calc.py\n@@ -1,5 +1,5 @@\n def add(a, b):\n-    return a - b\n+    return a + b\n"
        " \n \n def sub(a, b):\n-    return a - b\n+    return a + b\n"
    )
    llm.script = [*attempt(breaks_sub)]
    proc, out = fix(calc, llm, "-y", "--attempts", "1")
    assert proc.returncode == 1 and out["apply"]["state"] == "rolled_back", proc.stderr
    assert out["apply"]["error"]["code"] == "ERR_CHECK_REGRESSION" and out["apply"]["stage"] == "check"
    failed = out["plan"]["plan_id"]
    llm.script = [*attempt(GOOD)]
    proc = papayu("retry", failed.rsplit("-", 1)[-1][:4], "-y", "--json", cwd=calc, env=llm.env(), timeout=300)
    assert proc.returncode == 0, proc.stderr
    data = json.loads(proc.stdout)
    assert data["apply"]["state"] == "landed" and data["attempts"][0]["state"] == "landed"
    sent = user_text(llm.requests[-2])
    assert "tests/test_calc.py::test_sub" in sent and f"plan {failed}" in sent
    # A plan that landed has no failed check to tell.
    again = papayu("retry", data["plan"]["plan_id"], "--json", cwd=calc, env=llm.env())
    assert again.returncode == 1 and json.loads(again.stdout)["errors"][0]["code"] == "ERR_NOT_RETRYABLE"


def test_yes_prints_the_diffstat_before_landing(calc: Path, llm: ScriptedLLM) -> None:
    llm.script = [*attempt(GOOD)]
    proc = papayu("fix", GOAL, "-y", cwd=calc, env=llm.env(), timeout=300)
    assert proc.returncode == 0, proc.stderr
    out = proc.stdout
    assert out.index("landing plan") < out.index("calc.py | 2 +-") < out.index("landed plan")
    assert out.count("calc.py | 2 +-") == 1
    assert "undo: git reset --keep ORIG_HEAD" in out


def _run_on_a_terminal(repo: Path, env: dict[str, str], answer: str, *args: str) -> tuple[int, str]:
    """`fix` on a terminal; ``answer`` to the landing question."""
    term = Terminal(["fix", GOAL, *args], repo, env)
    term.expect("Land plan")
    term.type(f"{answer}\n".encode())
    return term.wait(), term.text


@pytest.mark.parametrize("answer, lands", [("y", True), ("n", False)])
def test_the_question_comes_with_the_coloured_diff_and_the_verdict(
    calc: Path, llm: ScriptedLLM, answer: str, lands: bool
) -> None:
    llm.script = [*attempt(GOOD)]
    before = git(calc, "rev-parse", "main")
    code, seen = _run_on_a_terminal(calc, llm.env(), answer)
    asked = seen[: seen.index("Land plan")]
    assert "\x1b[32m+    return a + b" in asked  # the diff, coloured, before the question
    assert "verdict against the tip: passed 2, fixed 1" in asked
    assert "Apply plan" not in seen  # no question before there is anything to see
    plan_id = stored_plans(calc)[-1]["id"]
    assert code == 0, seen
    if lands:
        assert git(calc, "rev-parse", "main") != before and "landed plan" in seen
    else:
        assert git(calc, "rev-parse", "main") == before
        assert git(calc, "rev-parse", f"papayu/{plan_id}").strip()  # kept for `land ID`
        assert f"land it: git papayu land {plan_id}" in seen
        assert stored_plans(calc)[-1]["extra"]["apply"]["declined"] is True


def test_a_plan_touching_a_dirty_file_stops_before_the_check(calc: Path, llm: ScriptedLLM) -> None:
    (calc / "calc.py").write_text(CALC + "# my edit, not committed\n")
    llm.script = [*attempt(GOOD)]
    before = snapshot(calc)
    proc, out = fix(calc, llm, "-y")
    assert proc.returncode == 1
    plan_id = out["plan"]["plan_id"]
    # Named before the model was asked, and the plan stopped before its check with the real id.
    assert "uncommitted changes in files the model is shown: calc.py" in proc.stderr
    result = out["apply"]
    assert result["state"] == "refused" and result["check"] is None and result["stage"] == "preflight"
    assert result["error"]["code"] == "ERR_DIRTY_WORKTREE" and "stopped before the check" in result["error"]["reason"]
    assert (
        f"git papayu apply {plan_id}" in result["error"]["hint"]
        and "git stash push -u -- calc.py" in result["error"]["hint"]
    )
    assert len(out["attempts"]) == 1  # a dirty file is not the plan's failing check: no retry
    assert snapshot(calc) == before
    assert not (calc / ".git" / "papayu" / "checks" / f"{plan_id}.log").exists()


def start_apply(repo: Path, tmp_path: Path, check: str, *extra: str) -> subprocess.Popen[str]:
    """`apply` of a one-file plan in the background; returns once its commit exists (the check runs)."""
    response = tmp_path / "plan.json"
    response.write_text(json.dumps({"actions": [{"kind": "CREATE_FILE", "path": "n.txt", "content": "n\n"}]}))
    proc = subprocess.Popen(
        [sys.executable, "-m", "papayu_git", "apply", str(response), "--check", check, *extra],
        cwd=repo,
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
        env={**os.environ, "PYTHONPATH": str(ROOT)},
    )
    deadline = time.monotonic() + 60
    while not git(repo, "branch", "--list", "papayu/*").strip():  # committed: the check runs now
        assert time.monotonic() < deadline and proc.poll() is None
        time.sleep(0.05)
    return proc


def test_a_branch_that_moved_during_the_check_is_recorded_as_such(calc: Path, tmp_path: Path) -> None:
    proc = start_apply(calc, tmp_path, "sleep 4", "--json")
    git(calc, "commit", "-q", "--allow-empty", "-m", "the user commits meanwhile")
    out, err = proc.communicate(timeout=120)
    assert proc.returncode == 1 and json.loads(out)["errors"][0]["code"] == "ERR_BRANCH_MOVED", err
    record = stored_plans(calc)[-1]["extra"]["apply"]
    assert record["state"] == "refused_branch_moved" and record["stage"] == "land"
    listed = json.loads(papayu("list", "--json", cwd=calc).stdout)["plans"]
    assert listed[-1]["state"] == "refused_branch_moved"


def test_ctrl_c_while_the_model_thinks_is_traced_as_interrupted(calc: Path, llm: ScriptedLLM) -> None:
    llm.script = [Reply(200, {"choices": []}, delay=30)]
    proc = subprocess.Popen(
        [sys.executable, "-m", "papayu_git", "plan", GOAL],
        cwd=calc,
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
        env={**os.environ, **llm.env(), "PYTHONPATH": str(ROOT)},
    )
    deadline = time.monotonic() + 60
    while not llm.requests:
        assert time.monotonic() < deadline and proc.poll() is None
        time.sleep(0.05)
    proc.send_signal(signal.SIGINT)
    _out, err = proc.communicate(timeout=60)
    assert proc.returncode == 130 and "interrupted" in err
    traces = list((calc / ".git" / "papayu" / "traces").glob("*.json"))
    assert len(traces) == 1
    trace = json.loads(traces[0].read_text())
    assert trace["error_code"] == "ERR_INTERRUPTED" and "ERR_INTERNAL" not in json.dumps(trace)


def test_ctrl_c_during_the_check_rolls_back_as_interrupted(calc: Path, tmp_path: Path) -> None:
    before = snapshot(calc)
    marker = f"30.{os.getpid()}"  # quoted in papayu's own command line, so only the check carries it
    proc = start_apply(calc, tmp_path, f"exec sleep 30''.{os.getpid()}")
    deadline = time.monotonic() + 60
    while not processes_with(f"sleep {marker}"):  # the check is running (a busy machine is slow to get there)
        assert proc.poll() is None and time.monotonic() < deadline, proc.communicate()
        time.sleep(0.05)
    proc.send_signal(signal.SIGINT)
    proc.communicate(timeout=60)
    assert proc.returncode == 130
    record = stored_plans(calc)[-1]["extra"]["apply"]
    assert record["state"] == "interrupted" and record["error"]["code"] == "ERR_INTERRUPTED"
    assert record["stage"] == "check"
    assert git(calc, "branch", "--list", "papayu/*") == ""
    assert snapshot(calc) == before


def test_a_landing_on_a_branch_checked_out_nowhere_names_its_undo(calc: Path, tmp_path: Path) -> None:
    git(calc, "branch", "other")
    tip = git(calc, "rev-parse", "other")
    response = tmp_path / "plan.json"
    response.write_text(json.dumps({"actions": [{"kind": "CREATE_FILE", "path": "o.txt", "content": "o\n"}]}))
    proc = papayu("apply", str(response), "--onto", "other", "--no-check", cwd=calc)
    assert proc.returncode == 0 and "update-ref" in proc.stdout, proc.stderr
    undo = next(line.split("undo: ", 1)[1] for line in proc.stdout.splitlines() if "undo: " in line)
    assert undo.startswith("git papayu undo ") and "ORIG_HEAD" not in undo
    assert papayu(*undo.split()[2:], cwd=calc).returncode == 0
    assert git(calc, "rev-parse", "other") == tip


def test_every_check_of_a_plan_keeps_its_log(calc: Path, tmp_path: Path) -> None:
    """A plan checked again (`apply ID` after a rollback) does not overwrite its first log."""
    response = tmp_path / "plan.json"
    response.write_text(json.dumps({"actions": [{"kind": "CREATE_FILE", "path": "n.txt", "content": "n\n"}]}))
    first = json.loads(papayu("apply", str(response), "--check", "echo first-run; false", "--json", cwd=calc).stdout)
    plan_id = first["plan_id"]
    second = json.loads(papayu("apply", plan_id, "--check", "echo second-run; false", "--json", cwd=calc).stdout)
    logs = calc / ".git" / "papayu" / "checks"
    assert first["check"]["log"] == str(logs / f"{plan_id}.log")
    assert second["check"]["log"] == str(logs / f"{plan_id}.2.log")
    assert "first-run" in (logs / f"{plan_id}.log").read_text()
    assert "second-run" in (logs / f"{plan_id}.2.log").read_text()
