"""Best of N: the judge model for ties, the question on a terminal, `fix --candidates N`, and the
MCP tool `best_of` under the operator's rules. Real CLI, real sandbox, scripted models."""

from __future__ import annotations

import json
import os
import re
import select
import signal
import subprocess
import sys
import time
from pathlib import Path
from typing import Any

from helpers import ROOT, git, make_repo, papayu, snapshot, user_view
from llm_server import Reply, ScriptedLLM, chat
from test_best_of import (  # noqa: F401
    CALC,
    GOAL,
    GOOD,
    NOTHING,
    PYPROJECT,
    PYTEST,
    TESTS,
    action,
    best_of,
    calc,
    calc_patch,
    router,
    rows,
)
from test_best_of import pytestmark as pytestmark  # the sandbox must work here

SWAPPED = calc_patch("a - b", "b + a")  # as small as GOOD, and as right


def judge_picks(text: str) -> Reply:
    """The judge's answer: the letter of the candidate whose diff holds ``text``."""

    def reply(body: dict[str, Any]) -> Reply:
        shown = body["messages"][-1]["content"]
        for letter, diff in re.findall(r"CANDIDATE ([A-Z]):\n```diff\n(.*?)```", shown, re.S):
            if text in diff:
                return chat({"choice": letter, "reason": "it reads the way the sum is usually written"})
        return chat({"choice": "?"})

    return reply  # type: ignore[return-value]


def test_a_judge_breaks_a_tie_between_green_candidates_seeing_no_names(calc: Path, llm: ScriptedLLM) -> None:  # noqa: F811
    judge = ScriptedLLM([judge_picks("b + a")])
    try:
        llm.script = [router({0.0: [action(GOOD)], 0.3: [action(SWAPPED)]})] * 4
        git(calc, "config", "papayu.candidates.judge", f"openai-compatible/judge-model@{judge.base_url}")
        proc, out = best_of(calc, llm.env(), "2", GOAL, "-y")
    finally:
        judge.close()
    assert proc.returncode == 0, proc.stderr
    matrix = rows(out)
    assert out["run"]["winner"] == 2 and matrix[2]["state"] == "landed"
    assert matrix[1]["lost"].startswith("tied with #2; the judge (openai-compatible/judge-model) chose #2")
    assert out["run"]["judge"]["choice"] == 2 and sorted(out["run"]["judge"]["shown"].values()) == [1, 2]
    asked = json.dumps(judge.requests[0])
    assert len(judge.requests) == 1 and "CANDIDATE A" in asked and "CANDIDATE B" in asked
    for name in ("test-model", matrix[1]["plan_id"], matrix[2]["plan_id"], "#1", "#2"):
        assert name not in asked  # anonymized: no model, no plan, no number
    assert "b + a" in (calc / "calc.py").read_text()
    stats = json.loads(papayu("stats", "--json", cwd=calc).stdout)
    assert stats["best_of"]["runs"] == 1 and stats["best_of"]["candidates"] == 2
    judged = [m for m in stats["usage"]["by_model"] if m["model"] == "judge-model"]
    assert judged and judged[0]["calls"] == 1  # the judge's tokens are counted too


def test_a_failing_judge_is_said_and_the_lower_number_wins(calc: Path, llm: ScriptedLLM) -> None:  # noqa: F811
    judge = ScriptedLLM([Reply(500, {"error": "judge down"})] * 4)
    try:
        llm.script = [router({0.0: [action(GOOD)], 0.3: [action(SWAPPED)]})] * 4
        git(calc, "config", "papayu.candidates.judge", f"openai-compatible/judge-model@{judge.base_url}")
        env = {**llm.env(), "PAPAYU_LLM_RETRIES": "0"}
        proc, out = best_of(calc, env, "2", GOAL, "-y")
    finally:
        judge.close()
    assert proc.returncode == 0, proc.stderr
    assert "the judge failed: ERR_LLM_HTTP" in proc.stderr  # never silent
    assert out["run"]["winner"] == 1 and out["run"]["judge"]["error"]["code"] == "ERR_LLM_HTTP"
    assert rows(out)[2]["lost"] == "tied with #1; the judge failed (ERR_LLM_HTTP), so the lower number wins"


def test_the_judge_is_never_asked_past_the_gate(calc: Path, llm: ScriptedLLM) -> None:  # noqa: F811
    """One green, one held: nothing to break a tie between; the judge is not asked."""
    judge = ScriptedLLM([judge_picks("a * b")])
    try:
        llm.script = [router({0.0: [action(NOTHING)], 0.3: [action(GOOD)]})] * 4
        git(calc, "config", "papayu.candidates.judge", f"openai-compatible/judge-model@{judge.base_url}")
        proc, out = best_of(calc, llm.env(), "2", GOAL, "-y")
    finally:
        judge.close()
    assert proc.returncode == 0 and out["run"]["winner"] == 2 and judge.requests == []


def test_fix_candidates_is_best_of(calc: Path, llm: ScriptedLLM) -> None:  # noqa: F811
    llm.script = [router({0.0: [action(NOTHING)], 0.3: [action(GOOD)]})] * 4
    proc = papayu("fix", GOAL, "--candidates", "2", "-y", "--json", cwd=calc, env=llm.env(), timeout=300)
    assert proc.returncode == 0, proc.stderr
    out = json.loads(proc.stdout)
    assert out["run"]["winner"] == 2 and out["landed"]["state"] == "landed"
    refused = papayu("fix", GOAL, "--candidates", "2", "--no-check", "--json", cwd=calc, env=llm.env())
    assert refused.returncode == 1 and json.loads(refused.stdout)["errors"][0]["code"] == "ERR_USAGE"


def _at_the_question(repo: Path, env: dict[str, str]) -> tuple[subprocess.Popen[bytes], int, bytes]:
    """`best-of 2 GOAL` on a pty, read until it asks; (process, the pty's master end, what it printed)."""
    import pty

    master, slave = pty.openpty()
    proc = subprocess.Popen(
        [sys.executable, "-m", "papayu_git", "best-of", "2", GOAL],
        cwd=repo,
        stdin=slave,
        stdout=slave,
        stderr=slave,
        env={**os.environ, **env, "GIT_PAGER": "cat", "PYTHONPATH": str(ROOT)},
    )
    os.close(slave)
    seen, deadline = b"", time.monotonic() + 240
    while b"Land candidate" not in seen:
        assert time.monotonic() < deadline and proc.poll() is None, seen.decode(errors="replace")
        if select.select([master], [], [], 1.0)[0]:
            seen += os.read(master, 65536)
    return proc, master, seen


def _rest(proc: subprocess.Popen[bytes], master: int, seen: bytes) -> str:
    """What it prints until it exits (never a blocking read: a run that hangs fails the test)."""
    deadline = time.monotonic() + 120
    try:
        while proc.poll() is None or select.select([master], [], [], 0.2)[0]:
            assert time.monotonic() < deadline, seen.decode(errors="replace")
            if not select.select([master], [], [], 0.5)[0]:
                continue
            try:
                chunk = os.read(master, 65536)
            except OSError:
                break
            if not chunk:
                break
            seen += chunk
    finally:
        os.close(master)
        if proc.poll() is None:
            proc.kill()
        proc.wait(timeout=60)
    return seen.decode(errors="replace")


def test_on_a_terminal_a_live_table_then_the_winners_diff_and_the_question(calc: Path, llm: ScriptedLLM) -> None:  # noqa: F811
    llm.script = [router({0.0: [action(NOTHING)], 0.3: [action(GOOD)]})] * 4
    before, untouched = git(calc, "rev-parse", "main"), user_view(snapshot(calc))
    proc, master, seen = _at_the_question(calc, llm.env())
    assert user_view(snapshot(calc)) == untouched  # all asked and checked: the user's side as it was
    os.write(master, b"y\n")
    text = _rest(proc, master, seen)
    asked = text[: text.index("Land candidate")]
    assert "MODEL" in asked and "checking" in asked and "\x1b[" in asked  # the live table, redrawn
    assert "lost: held at review: ERR_CHECK_FIXES_NOTHING" in asked  # the matrix, then the winner
    assert asked.index("lost: held") < asked.index("\x1b[32m+    return a + b")  # its diff, coloured
    assert "verdict against the tip: passed 2, fixed 1" in asked
    assert proc.returncode == 0, text
    run = json.loads(next((calc / ".git/papayu/runs").glob("*.json")).read_text())
    assert f"Land candidate {run['id']}:2 on main? [y/N]" in text  # the candidate by its one id
    assert git(calc, "rev-parse", "main") != before and f"landed candidate {run['id']}:2" in text


def test_ctrl_c_at_the_question_keeps_the_winner_for_land(calc: Path, llm: ScriptedLLM) -> None:  # noqa: F811
    """As at `fix`'s question: Ctrl-C means no. Nothing landed, the winner kept for `land RUN:N`."""
    llm.script = [router({0.0: [action(NOTHING)], 0.3: [action(GOOD)]})] * 4
    before = snapshot(calc)
    proc, master, seen = _at_the_question(calc, llm.env())
    time.sleep(2.0)  # waiting for the answer (a signal between the prompt and the read would be lost to readline)
    proc.send_signal(signal.SIGINT)  # Ctrl-C while it asks
    text = _rest(proc, master, seen)
    assert proc.returncode == 0 and "Ctrl-C at the question: not landing" in text, text
    assert user_view(snapshot(calc)) == user_view(before)
    run = json.loads(next((calc / ".git/papayu/runs").glob("*.json")).read_text())
    assert run["winner"] == 2 and f"git papayu land {run['id']}:2" in text, (run, text)
    assert git(calc, "branch", "--list", f"papayu/{run['id']}/2").strip()


def _mcp(repo: Path, env: dict[str, str], **arguments: Any) -> tuple[bool, dict[str, Any]]:
    from test_mcp_server import call, serve

    saved = dict(os.environ)
    os.environ.update(env)
    try:
        return serve(repo, lambda session: call(session, "best_of", **arguments))  # type: ignore[no-any-return]
    finally:
        os.environ.clear()
        os.environ.update(saved)


def test_the_mcp_tool_lands_the_winner_and_keeps_the_operators_rules(calc: Path, llm: ScriptedLLM) -> None:  # noqa: F811
    llm.script = [router({0.0: [action(NOTHING)], 0.3: [action(GOOD)]})] * 4
    is_error, data = _mcp(calc, llm.env(), goal=GOAL, candidates=2)
    assert not is_error, data
    assert data["winner"] == 2 and data["landed"]["state"] == "landed"
    assert [c["state"] for c in data["candidates"]] == ["held", "landed"]
    assert data["candidates"][0]["lost"].startswith("held at review: ERR_CHECK_FIXES_NOTHING")
    assert (calc / "calc.py").read_text() == CALC.replace("a - b", "a + b", 1)
    # The client may not choose the check, nor let test edits win, unless the operator allowed it.
    requests = len(llm.requests)
    is_error, data = _mcp(calc, llm.env(), goal=GOAL, candidates=2, check="true", allow_test_edits=True)
    assert is_error and [e["code"] for e in data["errors"]] == ["ERR_MCP_NOT_ALLOWED"] * 2
    assert len(llm.requests) == requests  # refused before any model was asked


def test_the_mcp_tool_leaves_a_deleting_winner_to_a_human(tmp_path: Path, llm: ScriptedLLM) -> None:
    files = {"calc.py": CALC, "tests/test_calc.py": TESTS, "pyproject.toml": PYPROJECT, "old.txt": "x\n"}
    repo = make_repo(tmp_path / "r", files)
    git(repo, "config", "papayu.check.command", PYTEST)
    llm.script = [router({0.0: [action(GOOD), lambda body: {"kind": "DELETE_FILE", "path": "old.txt"}]})] * 2
    before = snapshot(repo)
    is_error, data = _mcp(repo, llm.env(), goal=GOAL, candidates=1)
    assert is_error and [e["code"] for e in data["errors"]] == ["ERR_MCP_NOT_ALLOWED"]
    assert "deletes old.txt" in data["errors"][0]["reason"]
    assert data["winner"] == 1 and data["landed"] is None
    assert user_view(snapshot(repo)) == user_view(before)
