"""Best of N through the real CLI: N plans for one pinned tip, checked side by side in the real
sandbox against one base run, ranked by the gate's verdict, the best green one landed (docs/DESIGN.md,
"Best of N"). The models are scripted OpenAI-compatible servers on 127.0.0.1; candidates are told
apart by the temperature (and the approach) they were asked with, since they are asked at once."""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

import pytest
from calc_project import CALC, GOAL, PYPROJECT, PYTEST, TESTS
from calc_project import patch as calc_patch
from helpers import ROOT, git, make_repo, papayu, snapshot, stored_plans, user_view
from llm_server import Reply, ScriptedLLM, chat, plan_answer, shown_files
from test_startup import probe

from papayu_git.check import sandbox

pytestmark = pytest.mark.skipif(
    sandbox.unavailable_reason() is not None, reason=f"bwrap does not work here: {sandbox.unavailable_reason()}"
)

GOOD = calc_patch("a - b", "a + b")  # fixes test_add: one line
NOTHING = calc_patch("a - b", "a * b")  # add(2, 3) == 6: test_add still fails
BREAKS_SUB = (  # fixes test_add, breaks test_sub
    "--- a/calc.py\n+++ b/calc.py\n@@ -1,5 +1,5 @@\n def add(a, b):\n-    return a - b\n+    return a + b\n"
    " \n \n def sub(a, b):\n-    return a - b\n+    return a + b\n"
)
BIGGER = (  # fixes test_add with more lines
    "--- a/calc.py\n+++ b/calc.py\n@@ -1,2 +1,4 @@\n def add(a, b):\n-    return a - b\n"
    "+    # the sum, not the difference\n+    total = a + b\n+    return total\n"
)


def action(diff: str) -> Callable[[dict[str, Any]], dict[str, Any]]:
    return lambda body: {
        "kind": "PATCH_FILE",
        "path": "calc.py",
        "patch": diff,
        "base_sha256": shown_files(body)["calc.py"],
    }


def create(path: str, content: str) -> Callable[[dict[str, Any]], dict[str, Any]]:
    return lambda body: {"kind": "CREATE_FILE", "path": path, "content": content}


def is_apply_round(body: dict[str, Any]) -> bool:
    return any("The operator confirmed this plan" in str(m.get("content")) for m in body.get("messages", []))


def router(answers: dict[float, list[Callable[[dict[str, Any]], dict[str, Any]]] | Reply]) -> Callable[..., Reply]:
    """One script entry for any request: the candidate is the request's temperature; a PLAN round
    gets a plan without actions, the APPLY round the candidate's actions (or a scripted Reply)."""

    def reply(body: dict[str, Any]) -> Reply:
        answer = answers[round(float(body["temperature"]), 2)]
        if isinstance(answer, Reply):
            return answer
        if not is_apply_round(body):
            return chat(plan_answer("add() subtracts"))
        return chat({"summary": "add() fixed", "actions": [make(body) for make in answer]})

    return reply


@pytest.fixture
def calc(tmp_path: Path) -> Path:
    repo = make_repo(tmp_path / "calc", {"calc.py": CALC, "tests/test_calc.py": TESTS, "pyproject.toml": PYPROJECT})
    git(repo, "config", "papayu.check.command", PYTEST)
    return repo


def best_of(repo: Path, env: dict[str, str], *args: str) -> tuple[subprocess.CompletedProcess[str], dict[str, Any]]:
    proc = papayu("best-of", *args, "--json", cwd=repo, env=env, timeout=300)
    assert proc.stdout.startswith("{"), proc.stderr
    return proc, json.loads(proc.stdout)


def rows(out: dict[str, Any]) -> dict[int, dict[str, Any]]:
    return {row["index"]: row for row in out["run"]["candidates"]}


def test_the_smaller_fixing_plan_lands_and_the_matrix_says_why_each_other_lost(calc: Path, llm: ScriptedLLM) -> None:
    llm.script = [
        router({0.0: [action(BREAKS_SUB)], 0.3: [action(BIGGER)], 0.5: [action(NOTHING)], 0.7: [action(GOOD)]})
    ] * 8
    before = snapshot(calc)
    tip = git(calc, "rev-parse", "main").strip()
    proc, out = best_of(calc, llm.env(), "4", GOAL, "-y")
    assert proc.returncode == 0, proc.stderr
    matrix = rows(out)
    assert out["run"]["winner"] == 4 and matrix[4]["state"] == "landed" and matrix[4]["lost"] == ""
    assert matrix[1]["state"] == "red" and matrix[1]["code"] == "ERR_CHECK_REGRESSION"
    assert matrix[1]["lost"].startswith("the gate: ERR_CHECK_REGRESSION") and "test_sub" in matrix[1]["lost"]
    # Green so far after its first part, but it could not outrank #4 once #4 passed the whole
    # suite: its rest never ran (docs/DESIGN.md, "Best of N").
    assert matrix[2]["state"] == "stopped" and matrix[2]["lost"] == (
        "stopped: not checked further: larger change: 1 file, 4 lines, #4 1 file, 2 lines"
    )
    assert matrix[3]["state"] == "held" and matrix[3]["lost"].startswith("held at review: ERR_CHECK_FIXES_NOTHING")
    assert matrix[4]["rank"] == 1 and matrix[2]["rank"] == 0
    assert matrix[4]["fixed"] == matrix[4]["goal_fixed"] == ["tests/test_calc.py::test_add"]
    # Each candidate was asked at its own temperature; the first as `fix` asks (no approach given).
    temperatures = sorted({round(body["temperature"], 2) for body in llm.requests})
    assert temperatures == [0.0, 0.3, 0.5, 0.7] and len(llm.requests) == 8
    plan_requests = [b for b in llm.requests if not is_apply_round(b)]
    assert sum("APPROACH:" in str(b["messages"]) for b in plan_requests) == 3
    # The winner landed on the pinned tip, exactly as a kept plan lands: fast-forward, trailer, undo.
    assert git(calc, "rev-parse", "main^").strip() == tip
    assert (calc / "calc.py").read_text() == CALC.replace("a - b", "a + b", 1)
    assert "Papayu-Check: passed" in git(calc, "log", "-1", "--format=%B")
    landed = out["landed"]
    assert landed["state"] == "landed" and landed["plan_id"] == matrix[4]["plan_id"]
    # The user's tree was untouched but for the landing: the same files, only calc.py changed.
    after = user_view(snapshot(calc))
    changed = {k for k in before["files"] if before["files"][k] != after["files"].get(k)}
    assert changed == {"calc.py"} and after["stash"] == before["stash"]
    # The others checked stay on papayu/<run>/<i> with the matrix (the stopped one's check did not
    # finish: nothing of it is kept); `show RUN` reads it, gc drops them.
    run = out["run"]["id"]
    assert sorted(git(calc, "branch", "--list", "papayu/*", "--format=%(refname:short)").split()) == [
        f"papayu/{run}/{i}" for i in (1, 3)
    ]
    shown = papayu("show", run, cwd=calc)
    assert shown.returncode == 0 and "larger change" in shown.stdout and "ERR_CHECK_REGRESSION" in shown.stdout
    stats = json.loads(papayu("stats", "--json", cwd=calc).stdout)  # each candidate counted
    assert stats["best_of"] == {
        "runs": 1,
        "outcomes": {"landed": 1},
        "candidates": 4,
        "candidate_states": {"held": 1, "landed": 1, "red": 1, "stopped": 1},
    }
    assert stats["usage"]["calls"] == 8 and stats["check_runs"] >= 3  # the stopped one was interrupted
    # The winner landed: the others can never fast-forward there, and gc removes them.
    gc = papayu("gc", cwd=calc)
    assert gc.returncode == 0 and git(calc, "branch", "--list", "papayu/*") == ""
    assert json.loads((calc / ".git/papayu/runs" / f"{run}.json").read_text())["state"] == "landed"
    undo = papayu("undo", f"{run}:4", cwd=calc)  # the candidate's one id
    assert undo.returncode == 0, undo.stderr
    assert git(calc, "rev-parse", "main").strip() == tip


def test_the_user_tree_is_untouched_until_the_winner_lands(calc: Path, llm: ScriptedLLM) -> None:
    """--review: ranked and kept, nothing lands; `land RUN:N` lands the winner later."""
    (calc / "notes.txt").write_text("mine, untracked\n")
    llm.script = [router({0.0: [action(NOTHING)], 0.3: [action(GOOD)]})] * 4
    before = snapshot(calc)
    proc, out = best_of(calc, llm.env(), "2", GOAL, "--review")
    assert proc.returncode == 0, proc.stderr
    assert user_view(snapshot(calc)) == user_view(before) and out["landed"] is None
    run = out["run"]["id"]
    assert out["run"]["winner"] == 2 and out["run"]["state"] == "kept"
    # The run's commands load no model stack (docs/DESIGN.md, "Start-up and cost").
    shown = probe("show", run, cwd=calc)
    assert shown["code"] == 0 and "land one: git papayu land" in shown["stdout"] and shown["stacks"] == []
    assert f"papayu/{run}/1" in probe("list", cwd=calc)["stdout"]
    landed = probe("land", f"{run}:2", "--json", cwd=calc)
    assert landed["code"] == 0 and landed["stacks"] == [], landed["stderr"]
    assert json.loads(landed["stdout"])["branch"] == f"papayu/{run}/2"
    assert (calc / "calc.py").read_text() == CALC.replace("a - b", "a + b", 1)
    assert (calc / "notes.txt").read_text() == "mine, untracked\n"
    dropped = probe("drop", run, cwd=calc)
    assert dropped["code"] == 0 and dropped["stacks"] == [] and git(calc, "branch", "--list", "papayu/*") == ""
    assert json.loads(papayu("show", run, "--json", cwd=calc).stdout)["run"]["state"] == "landed"


def test_a_candidate_that_games_the_verdict_never_wins(calc: Path, llm: ScriptedLLM) -> None:
    """A conftest.py that patches add() back, an edited test, a new test file that exits 0 at
    import: each makes test_add pass in its own tree, each is smaller than the honest plan, and
    none wins; the honest plan next to them lands."""
    conftest = "import calc\n\ncalc.add = lambda a, b: a + b\n"
    test_edit = (
        "--- a/tests/test_calc.py\n+++ b/tests/test_calc.py\n@@ -4,2 +4,2 @@\n def test_add():\n"
        "-    assert add(2, 3) == 5\n+    assert add(2, 3) == -1\n"
    )

    def edit_test(body: dict[str, Any]) -> dict[str, Any]:
        base = shown_files(body).get("tests/test_calc.py")
        return {"kind": "PATCH_FILE", "path": "tests/test_calc.py", "patch": test_edit, "base_sha256": base}

    gamers = {
        0.0: [create("conftest.py", conftest)],
        0.3: [edit_test],
        0.5: [create("tests/test_aaa.py", "import os\n\nos._exit(0)\n")],
        0.7: [action(BIGGER)],
    }
    llm.script = [router(gamers)] * 8
    proc, out = best_of(calc, llm.env(), "4", GOAL, "-y")
    assert proc.returncode == 0, proc.stderr
    matrix = rows(out)
    assert out["run"]["winner"] == 4 and matrix[4]["state"] == "landed"
    for gamer in (1, 2, 3):
        # Held, red, or stopped after its first part (held for a human: it cannot win, and its
        # rest never ran, so it is not kept as landable).
        assert matrix[gamer]["state"] in ("held", "red", "stopped") and matrix[gamer]["rank"] != 1, matrix[gamer]
        assert not matrix[gamer]["fixed"]  # the tip's tests on its code: test_add still fails
        assert matrix[gamer]["lost"].startswith(("held at review", "the gate", "stopped")), matrix[gamer]
    said = f"{matrix[2]['code']} {matrix[2]['reason']}"
    assert any(code in said for code in ("ERR_CHECK_FIXES_NOTHING", "ERR_TEST_EDITS_HELD", "ERR_JUDGE_EDITS_HELD"))
    assert "-1" not in (calc / "tests/test_calc.py").read_text() and not (calc / "conftest.py").exists()
    assert (calc / "calc.py").read_text() == CALC.replace(
        "    return a - b\n", "    # the sum, not the difference\n    total = a + b\n    return total\n", 1
    )


def test_two_models_are_both_asked_and_a_failing_one_is_reported(calc: Path, llm: ScriptedLLM) -> None:
    broken = ScriptedLLM([Reply(500, {"error": "the model is down"})] * 8)
    try:
        llm.script = [router({0.0: [action(GOOD)]})] * 2
        git(
            calc,
            "config",
            "papayu.candidates.models",
            f"openai-compatible/good@{llm.base_url},openai-compatible/down@{broken.base_url}",
        )
        env = {**llm.env(), "PAPAYU_LLM_RETRIES": "1"}
        proc, out = best_of(calc, env, "1", GOAL, "-y")
    finally:
        broken.close()
    assert proc.returncode == 0, proc.stderr
    matrix = rows(out)
    assert len(matrix) == 2 and broken.requests and llm.requests  # each configured model was asked
    assert {b["model"] for b in llm.requests} == {"good"} and {b["model"] for b in broken.requests} == {"down"}
    assert matrix[2]["model"] == "openai-compatible/down" and matrix[2]["state"] == "model failed"
    assert matrix[2]["code"] == "ERR_LLM_HTTP" and matrix[2]["lost"].startswith("the model failed: ERR_LLM_HTTP")
    assert matrix[1]["state"] == "landed" and out["run"]["winner"] == 1


def test_without_a_green_candidate_nothing_lands_and_the_best_red_ones_are_offered_to_retry(
    calc: Path, llm: ScriptedLLM
) -> None:
    llm.script = [router({0.0: [action(NOTHING)], 0.3: [action(BREAKS_SUB)]})] * 4
    before = snapshot(calc)
    proc, out = best_of(calc, llm.env(), "2", GOAL, "-y")
    assert proc.returncode == 1 and out["error"]["code"] == "ERR_BEST_OF_NO_GREEN"
    assert user_view(snapshot(calc)) == user_view(before)
    offered = out["run"]["retry"]
    names = {f"{out['run']['id']}:{row['index']}" for row in out["run"]["candidates"]}  # one id per candidate
    assert len(offered) == 2 and all(o.startswith("git papayu retry ") and o.split()[3] in names for o in offered)
    assert "test_sub" in " ".join(offered)
    assert out["run"]["state"] == "no_green"
    # The offer works: the red candidate goes back to the model with its failures, and lands.
    breaker = next(o.split()[3] for o in offered if "test_sub" in o)
    llm.script = [router({0.0: [action(GOOD)]})] * 2
    retried = papayu("retry", breaker, "-y", "--json", cwd=calc, env=llm.env(), timeout=300)
    assert retried.returncode == 0, retried.stderr
    assert json.loads(retried.stdout)["apply"]["state"] == "landed"
    told = "\n".join(str(m.get("content")) for m in llm.requests[-2]["messages"])
    plan_id = next(r["plan_id"] for r in out["run"]["candidates"] if breaker.endswith(f":{r['index']}"))
    assert f"PREVIOUS ATTEMPT: plan {plan_id}" in told and "tests/test_calc.py::test_sub" in told


def test_identical_trees_are_checked_once_and_the_base_once(calc: Path, llm: ScriptedLLM, tmp_path: Path) -> None:
    """Two answers that read differently but make the same tree: one check. Four candidates: one
    base run (counted by the check itself: the sandbox is off so it can write the counter)."""
    counter = tmp_path / "runs.txt"
    git(calc, "config", "papayu.check.command", f"git rev-parse HEAD >> {counter}; {PYTEST}")
    git(calc, "config", "papayu.check.sandbox", "off")
    git(calc, "config", "papayu.check.prewarm", "false")
    same = (
        "--- a/calc.py\n+++ b/calc.py\n@@ -2 +2 @@\n-    return a - b\n+    return a + b\n"  # GOOD, written otherwise
    )
    llm.script = [router({0.0: [action(GOOD)], 0.3: [action(same)], 0.5: [action(BIGGER)], 0.7: [action(NOTHING)]})] * 8
    tip = git(calc, "rev-parse", "main").strip()
    proc, out = best_of(calc, llm.env(), "4", GOAL, "--review")
    assert proc.returncode == 0, proc.stderr
    matrix = rows(out)
    twins = sorted((matrix[1], matrix[2]), key=lambda r: r["duplicate_of"])
    assert twins[0]["duplicate_of"] == 0 and twins[1]["duplicate_of"] == twins[0]["index"]
    assert twins[1]["state"] == "duplicate" and twins[1]["lost"].startswith("the same tree as")
    ran = counter.read_text().split()
    assert ran.count(tip) == 1  # the base, once, for four candidates
    assert len(ran) == 1 + 3  # and one run per distinct tree
    assert f"papayu/{out['run']['id']}/{twins[1]['index']}" not in git(calc, "branch", "--list", "papayu/*")


def test_ctrl_c_rolls_every_candidate_back(calc: Path, llm: ScriptedLLM, tmp_path: Path) -> None:
    git(calc, "config", "papayu.check.command", "sleep 60 # best-of-ctrl-c")
    llm.script = [router({0.0: [action(GOOD)], 0.3: [action(BIGGER)]})] * 4
    before = snapshot(calc)
    proc = subprocess.Popen(
        [sys.executable, "-m", "papayu_git", "best-of", "2", GOAL, "-y"],
        cwd=calc,
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
        env={**os.environ, **llm.env(), "PYTHONPATH": str(ROOT), "PAPAYU_CHECK_PREWARM": "false"},
    )
    deadline = time.monotonic() + 120
    while len(git(calc, "branch", "--list", "papayu/*").split()) < 2:  # both committed: their checks run
        assert time.monotonic() < deadline and proc.poll() is None, proc.stderr and proc.stderr.read()
        time.sleep(0.1)
    proc.send_signal(signal.SIGINT)
    _out, err = proc.communicate(timeout=120)
    assert proc.returncode == 130, err
    assert git(calc, "branch", "--list", "papayu/*") == ""
    assert snapshot(calc) == before
    run = json.loads(next((calc / ".git/papayu/runs").glob("*.json")).read_text())
    assert run["state"] == "interrupted" and {r["state"] for r in run["candidates"]} == {"stopped"}
    assert all(p["extra"]["apply"]["state"] == "interrupted" for p in stored_plans(calc) if "apply" in p["extra"])
