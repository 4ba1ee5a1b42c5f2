"""Best of N as a newcomer sees it, through the real CLI (a pty where the screen matters): the table
printed once with the model the server serves, one id per candidate (`RUN:N`) in every message and
command, and `land RUN:N`, `show RUN`, `drop RUN` and `gc` saying and doing what the run's real
state is, whichever command changed it (docs/DESIGN.md, "Best of N")."""

from __future__ import annotations

import json
import os
import re
import subprocess
import sys
from pathlib import Path

import pytest
from calc_project import CALC, GOAL
from helpers import ROOT, git, papayu, stored_plans
from llm_server import ScriptedLLM
from terminal import Terminal, screen
from test_best_of import BREAKS_SUB, GOOD, NOTHING, action, router

from papayu_git.check import sandbox

pytestmark = pytest.mark.skipif(
    sandbox.unavailable_reason() is not None, reason=f"bwrap does not work here: {sandbox.unavailable_reason()}"
)


def pasted(repo: Path, command: str) -> subprocess.CompletedProcess[str]:
    path = f"{Path(sys.executable).parent}:{os.environ['PATH']}"
    env = {**os.environ, "PATH": path, "PYTHONPATH": str(ROOT)}
    return subprocess.run(["sh", "-c", command], cwd=repo, capture_output=True, text=True, timeout=300, env=env)


def kept(repo: Path) -> list[str]:
    return sorted(git(repo, "branch", "--list", "papayu/*", "--format=%(refname:short)").split())


def test_on_a_terminal_the_table_is_printed_once_with_the_served_model_and_the_winner_has_one_id(
    calc: Path, llm: ScriptedLLM
) -> None:
    llm.script = [router({0.0: [action(NOTHING)], 0.3: [action(GOOD)]})] * 4
    env = {k: v for k, v in llm.env().items() if k != "PAPAYU_LLM_MODEL"}  # the server says which model it serves
    term = Terminal(["best-of", "2", GOAL, "-y"], calc, env)
    assert term.wait(timeout=300) == 0, term.text
    shown = screen(term.seen.decode("utf-8", "replace"))
    headers = [line for line in shown if re.match(r"^\s*#\s+MODEL\s+TEMP\s+STATE", line)]
    assert len(headers) == 1, "\n".join(shown)
    rows = [line for line in shown if re.match(r"^\s*[12]\s+openai-compatible/discovered-model\s", line)]
    assert len(rows) == 2 and "(served)" not in term.text and "/? " not in term.text, "\n".join(shown)
    run = json.loads(next((calc / ".git/papayu/runs").glob("*.json")).read_text())
    assert {row["model"] for row in run["candidates"]} == {"openai-compatible/discovered-model"}
    winner = f"{run['id']}:2"
    text = "\n".join(shown)
    assert f"landing candidate {winner} on main:" in text and f"landed candidate {winner} on main (" in text
    undo = next(line for line in shown if "undo:" in line).split("(or: ", 1)[1].rstrip(")")
    assert undo == f"git papayu undo {winner}"
    plan_ids = {row["plan_id"] for row in run["candidates"]}
    named = re.sub(r"\S*/checks/\S+\.log", "LOG", text)  # the check's log file is named by its plan
    assert not any(plan_id in named for plan_id in plan_ids), named  # a candidate is called by one id
    tip = git(calc, "rev-parse", "main^")
    assert pasted(calc, undo).returncode == 0 and git(calc, "rev-parse", "main") == tip


def test_land_show_drop_and_gc_follow_the_runs_real_state(calc: Path, llm: ScriptedLLM) -> None:
    llm.script = [router({0.0: [action(NOTHING)], 0.3: [action(BREAKS_SUB)], 0.5: [action(GOOD)]})] * 6
    proc = papayu("best-of", "3", GOAL, "--review", "--json", cwd=calc, env=llm.env(), timeout=300)
    run = json.loads(proc.stdout)["run"]
    run_id, by = run["id"], {row["index"]: row for row in run["candidates"]}
    assert proc.returncode == 0 and run["winner"] == 3 and by[2]["state"] == "red", proc.stderr
    # The red candidate: refused under its one id and its real branch, with a hint that works.
    red = papayu("land", f"{run_id}:2", cwd=calc)
    assert red.returncode == 1 and "ERR_CHECK_NOT_PASSED" in red.stderr, red.stderr
    assert f"papayu/{run_id}/2" in red.stderr and f"git papayu land {run_id}:2 --force" in red.stderr
    assert by[2]["plan_id"] not in re.sub(r"\S*/checks/\S+\.log", "LOG", red.stderr), red.stderr
    listed = [row["name"] for row in json.loads(papayu("list", "--json", cwd=calc).stdout)["plans"]]
    assert sorted(listed) == [f"{run_id}:{n}" for n in (1, 2, 3)]
    # The winner landed by its plan id (as `land ID` takes any plan): the run knows it.
    landed = papayu("land", by[3]["plan_id"], cwd=calc)
    assert landed.returncode == 0 and f"landed candidate {run_id}:3 on main" in landed.stdout, landed.stderr
    shown = papayu("show", run_id, cwd=calc).stdout
    assert f"run {run_id}  state: landed" in shown and re.search(r"^\s*3\s.*\slanded\s", shown, re.M), shown
    assert f"kept: {run_id}:1, {run_id}:2" in shown
    gc = papayu("gc", cwd=calc)
    assert gc.returncode == 0 and kept(calc) == [], gc.stdout  # they can never fast-forward there now
    assert f"removed branch: papayu/{run_id}/1" in gc.stdout
    shown = papayu("show", run_id, cwd=calc).stdout
    assert "state: landed" in shown and "no candidate is kept: #3 landed, the rest were dropped" in shown
    assert (calc / "calc.py").read_text() == CALC.replace("a - b", "a + b", 1)


def test_drop_run_leaves_a_run_that_says_dropped_and_lands_nothing(calc: Path, llm: ScriptedLLM) -> None:
    llm.script = [router({0.0: [action(NOTHING)], 0.3: [action(GOOD)]})] * 4
    proc = papayu("best-of", "2", GOAL, "--review", "--json", cwd=calc, env=llm.env(), timeout=300)
    run_id = json.loads(proc.stdout)["run"]["id"]
    assert proc.returncode == 0 and len(kept(calc)) == 2, proc.stderr
    assert papayu("drop", f"{run_id}:1", cwd=calc).returncode == 0
    shown = papayu("show", run_id, cwd=calc).stdout
    assert "state: kept" in shown and f"kept: {run_id}:2" in shown and f"land {run_id}:2" in shown
    assert papayu("drop", run_id, cwd=calc).returncode == 0 and kept(calc) == []
    shown = papayu("show", run_id, cwd=calc).stdout
    assert f"run {run_id}  state: dropped" in shown and "no candidate is kept: dropped" in shown
    assert "land one" not in shown and "drop them" not in shown
    nothing = papayu("land", f"{run_id}:2", cwd=calc)
    assert nothing.returncode == 1 and "ERR_NOTHING_TO_LAND" in nothing.stderr
    assert f"candidate {run_id}:2 has no branch papayu/{run_id}/2" in nothing.stderr, nothing.stderr
    assert f"git papayu apply {run_id}:2" in nothing.stderr
    assert len(stored_plans(calc)) == 2
