"""The red path as a person meets it, through the real CLI: a question left with Ctrl-C or Ctrl-D
(on a real terminal), and the next command papayu names after a red check, a plan that fixes
nothing, a dirty work tree and an undo: each one is run as printed and does what it says."""

from __future__ import annotations

import json
import os
import re
import subprocess
import sys
from pathlib import Path

import pytest
from calc_project import CALC, GOAL, GOOD, WRONG, attempt, patch
from helpers import assert_error, git, make_repo, papayu, patch_action, sha, stored_plans, write_plan
from llm_server import ScriptedLLM
from terminal import CTRL_C, CTRL_D, Terminal

from papayu_git.check import sandbox

pytestmark = pytest.mark.skipif(
    sandbox.unavailable_reason() is not None, reason=f"bwrap does not work here: {sandbox.unavailable_reason()}"
)


@pytest.mark.parametrize("key, said", [(CTRL_C, "Ctrl-C"), (CTRL_D, "Ctrl-D")])
def test_ctrl_c_or_ctrl_d_at_the_landing_question_keeps_the_checked_plan_for_land(
    calc: Path, llm: ScriptedLLM, key: bytes, said: str
) -> None:
    llm.script = [*attempt(GOOD)]
    before = git(calc, "rev-parse", "main")
    term = Terminal(["fix", GOAL], calc, llm.env())
    term.expect("? [y/N]: ")
    helpers = threads_taking_ctrl_c(term.pid)
    term.type(key)
    code = term.wait()
    # Typed the moment the question shows: a Ctrl-C between input()'s prompt and its read() was
    # never raised, and the question waited for Enter (one run in two). And the kernel gives a
    # Ctrl-C to any thread not blocking it, where it interrupts no read of the answer.
    assert helpers == [], f"threads of papayu that would take the Ctrl-C: {helpers}"
    plan_id = stored_plans(calc)[-1]["id"]
    record = stored_plans(calc)[-1]["extra"]["apply"]
    assert code == 0, term.text  # as for a "no"
    assert "ERR_INTERNAL" not in term.text and "This is a bug" not in term.text
    assert f"papayu: {said} at the question: not landing" in term.text
    assert f"land it: git papayu land {plan_id}" in term.text
    assert record["state"] == "review" and record["declined"] is True and record["check"]["passed"]
    assert git(calc, "rev-parse", "main") == before
    kept = git(calc, "rev-parse", f"papayu/{plan_id}").strip()
    assert kept == record["commit"]
    # What it said works: the checked plan lands.
    landed = Terminal(["land", plan_id], calc)
    assert landed.wait() == 0, landed.text
    assert git(calc, "rev-parse", "main").strip() == kept


def threads_taking_ctrl_c(pid: int) -> list[str]:
    """The threads of process ``pid`` other than its main one that do not block SIGINT."""
    taking = []
    for task in sorted(Path(f"/proc/{pid}/task").iterdir()):
        status = dict(line.split(":\t", 1) for line in (task / "status").read_text().splitlines() if ":\t" in line)
        if task.name != str(pid) and not int(status["SigBlk"], 16) & (1 << (2 - 1)):  # SIGINT is 2
            taking.append(f"{task.name} ({status['Name'].strip()})")
    return taking


def test_every_thread_papayu_starts_leaves_the_terminals_signals_to_the_main_thread() -> None:
    """What the landing question relies on, for every thread of papayu's, not only those alive at
    one question: each is started through output.start_thread (or a pool's block_signals)."""
    root = Path(__file__).resolve().parent.parent / "papayu_git"
    found = []
    for path in root.rglob("*.py"):
        if path.name == "local_runner.py":  # the embedded model's server: a process of its own, no terminal
            continue
        for n, line in enumerate(path.read_text().splitlines(), 1):
            code = line.split("#", 1)[0]
            if re.search(r"threading\.(Thread|Timer)\(|ThreadPoolExecutor\(", code) and not re.search(
                r"start_thread\(|block_signals|^\s*(class|for t in|threads = )", code
            ):
                found.append(f"{path.relative_to(root)}:{n}: {line.strip()}")
    # The relay's script runs inside the sandbox (a string, not papayu's code); a Timer assigned
    # then started through start_thread is checked below.
    found = [f for f in found if not f.startswith("check/relay.py:5") and "self._timer = threading.Timer" not in f]
    assert found == []
    assert "output.start_thread(self._timer)" in (root / "webfetch.py").read_text()


# --- what papayu names next --------------------------------------------------------------------


def next_commands(text: str) -> dict[str, str]:
    """The `  label: git papayu …` lines a report ends with, by label."""
    found = re.findall(r"^  ([a-z][a-z ]+): (git papayu .+?)\s*$", text, re.M)
    return {label: command for label, command in found}


def run_printed(repo: Path, command: str, llm: ScriptedLLM | None = None) -> subprocess.CompletedProcess[str]:
    """A command papayu printed, run as the user would paste it into a shell (`git papayu`
    through git, `git stash`, `{ …; }`)."""
    env = {**os.environ, **(llm.env() if llm else {}), "PATH": f"{Path(sys.executable).parent}:{os.environ['PATH']}"}
    return subprocess.run(["sh", "-c", command], cwd=repo, env=env, capture_output=True, text=True, timeout=300)


def test_a_plan_that_fixes_nothing_names_retry_and_land_force_never_a_land_that_fails(
    calc: Path, llm: ScriptedLLM
) -> None:
    llm.script = [*attempt(WRONG)]
    proc = papayu("fix", GOAL, "-y", "--attempts", "1", cwd=calc, env=llm.env(), timeout=300)
    plan_id = stored_plans(calc)[-1]["id"]
    assert proc.returncode == 1 and "ERR_CHECK_FIXES_NOTHING" in proc.stderr, proc.stderr
    steps = next_commands(proc.stdout)
    assert steps == {
        "ask the model again": f"git papayu retry {plan_id}",
        "land it anyway": f"git papayu land {plan_id} --force",
        "drop it": f"git papayu drop {plan_id}",
    }, proc.stdout
    assert f"git papayu land {plan_id}\n" not in proc.stdout + proc.stderr  # land without --force refuses it
    # The error says what happened; its hint (the same commands) is said once, as the steps, last.
    error = next(line for line in proc.stderr.splitlines() if line.startswith("ERR_CHECK_FIXES_NOTHING"))
    assert "git papayu" not in error and proc.stdout.rstrip().endswith(f"drop it: git papayu drop {plan_id}")
    hint = stored_plans(calc)[-1]["extra"]["apply"]["error"]["hint"]  # as --json and the record keep it
    assert f"'git papayu retry {plan_id}' asks the model again" in hint and " ID" not in hint
    # Each one does what it says: the retry tells the model, and its plan lands.
    llm.script = [*attempt(GOOD)]
    retried = run_printed(calc, steps["ask the model again"] + " -y", llm)
    assert retried.returncode == 0 and "landed plan" in retried.stdout, retried.stderr
    assert f"PREVIOUS ATTEMPT: plan {plan_id}" in "\n".join(str(m.get("content")) for m in llm.requests[-2]["messages"])


def test_a_regression_speaks_to_the_user_and_names_retry_with_the_plan_id(calc: Path, llm: ScriptedLLM) -> None:
    breaks_sub = (
        "--- a/calc.py\n+++ b/calc.py\n@@ -1,5 +1,5 @@\n def add(a, b):\n-    return a - b\n+    return a + b\n"
        " \n \n def sub(a, b):\n-    return a - b\n+    return a + b\n"
    )
    llm.script = [*attempt(breaks_sub)]
    proc = papayu("fix", GOAL, "-y", "--attempts", "1", cwd=calc, env=llm.env(), timeout=300)
    plan_id = stored_plans(calc)[-1]["id"]
    assert proc.returncode == 1 and "ERR_CHECK_REGRESSION" in proc.stderr, proc.stderr
    hint = stored_plans(calc)[-1]["extra"]["apply"]["error"]["hint"]
    assert f"'git papayu retry {plan_id}' asks the model again" in hint and " ID" not in hint
    assert "Make the tests named above pass" not in proc.stderr + hint  # words for the model, not for the user
    assert next_commands(proc.stdout) == {
        "ask the model again": f"git papayu retry {plan_id}",
        "see its change": f"git papayu show {plan_id}",
    }
    shown = run_printed(calc, f"git papayu show {plan_id}")
    assert shown.returncode == 0 and "+    return a + b" in shown.stdout


def test_doctor_check_on_a_red_tip_says_plans_land_by_fixing_a_failing_test(calc: Path) -> None:
    proc = papayu("doctor", "--check", "--json", cwd=calc, timeout=300)
    item = next(c for c in json.loads(proc.stdout)["checks"] if c["name"] == "check on the tip")
    assert item["status"] == "warn" and "the tip is red" in item["detail"], item
    assert "lands on a red tip when it makes at least one of the failing tests pass" in item["hint"]
    assert "cannot land" not in item["hint"]


@pytest.mark.parametrize("lands", [True, False])
def test_the_dirty_tree_one_liner_gives_the_edits_back_whether_the_apply_lands_or_not(
    calc: Path, tmp_path: Path, lands: bool
) -> None:
    mine = CALC + "\n\n# my note, not committed\n"
    (calc / "calc.py").write_text(mine)
    diff = GOOD if lands else patch("a - b", "a + b + 1")  # still red: rolled back
    response = tmp_path / "plan.json"
    response.write_text(json.dumps({"actions": [patch_action("calc.py", CALC.encode(), diff)], "summary": "add"}))
    refused = papayu("apply", str(response), "--json", cwd=calc, timeout=300)
    error = json.loads(refused.stdout)["error"]
    assert refused.returncode == 1 and error["code"] == "ERR_DIRTY_WORKTREE", refused.stdout
    one_liner = error["hint"].split(": ", 1)[1]
    plan_id = stored_plans(calc)[-1]["id"]
    assert one_liner == (
        f"git stash push -u -- calc.py && {{ git papayu apply {plan_id}; papayu_status=$?; "
        "git stash pop && [ $papayu_status -eq 0 ]; }"
    )
    before = git(calc, "rev-parse", "main")
    ran = run_printed(calc, one_liner)
    assert ("landed plan" in ran.stdout) is lands, ran.stdout + ran.stderr
    assert (ran.returncode == 0) is lands  # a red apply fails the line, though the pop gave the edits back
    assert git(calc, "stash", "list") == ""  # nothing left behind in the stash
    expected = mine.replace("a - b", "a + b", 1) if lands else mine
    assert (calc / "calc.py").read_text() == expected
    assert (git(calc, "rev-parse", "main") != before) is lands


def test_undo_on_a_dirty_tree_names_the_files_and_a_way_past_without_papayus_git_flags(tmp_path: Path) -> None:
    lines = "".join(f"line {n}\n" for n in range(1, 11))
    repo = make_repo(tmp_path / "repo", {"a.txt": lines})
    diff = "--- a/a.txt\n+++ b/a.txt\n@@ -1,2 +1,2 @@\n-line 1\n+line one\n line 2\n"
    response = write_plan(tmp_path, [{"kind": "PATCH_FILE", "path": "a.txt", "base_sha256": sha(lines), "patch": diff}])
    landed = json.loads(papayu("apply", str(response), "--check", "true", "--json", cwd=repo).stdout)
    assert landed["state"] == "landed"
    mine = lines.replace("line 1\n", "line one\n").replace("line 10", "line 10, mine")
    (repo / "a.txt").write_text(mine)
    proc = papayu("undo", cwd=repo)
    assert_error(proc, "ERR_DIRTY_WORKTREE")
    assert "core.hooksPath" not in proc.stderr and "-c " not in proc.stderr and "a.txt" in proc.stderr
    one_liner = proc.stderr.split("stash them around the undo: ", 1)[1].rsplit(")", 1)[0]
    assert one_liner == (
        f"git stash push -- a.txt && {{ git papayu undo {landed['plan_id']}; papayu_status=$?; "
        "git stash pop && [ $papayu_status -eq 0 ]; }"
    )
    ran = run_printed(repo, one_liner)
    assert "undid plan" in ran.stdout and ran.returncode == 0, ran.stderr
    assert git(repo, "rev-parse", "main").strip() == git(repo, "rev-parse", f"{landed['commit']}^").strip()
    assert git(repo, "stash", "list") == ""
    assert (repo / "a.txt").read_text() == lines.replace("line 10", "line 10, mine")  # the landing gone, the edit kept


def test_after_undo_land_names_apply_and_apply_lands_it_again(tmp_path: Path) -> None:
    repo = make_repo(tmp_path / "repo")
    response = write_plan(tmp_path, [{"kind": "CREATE_FILE", "path": "new.txt", "content": "x\n"}])
    landed = json.loads(papayu("apply", str(response), "--check", "true", "--json", cwd=repo).stdout)
    plan_id = landed["plan_id"]
    assert papayu("undo", cwd=repo).returncode == 0
    proc = papayu("land", plan_id, cwd=repo)
    assert_error(proc, "ERR_NOTHING_TO_LAND")
    assert "landed on main and was undone" in proc.stderr and f"'git papayu apply {plan_id}'" in proc.stderr
    again = papayu("apply", plan_id, "--check", "true", cwd=repo)
    assert again.returncode == 0 and "landed plan" in again.stdout, again.stderr
    assert (repo / "new.txt").read_text() == "x\n"


def test_a_bare_undo_takes_back_the_newest_landing_not_the_newest_plan(tmp_path: Path) -> None:
    repo = make_repo(tmp_path / "repo")
    before = git(repo, "rev-parse", "main")
    first = write_plan(tmp_path, [{"kind": "CREATE_FILE", "path": "new.txt", "content": "x\n"}], name="a.json")
    landed = json.loads(papayu("apply", str(first), "--check", "true", "--json", cwd=repo).stdout)
    red = write_plan(tmp_path, [{"kind": "CREATE_FILE", "path": "red.txt", "content": "r\n"}], name="b.json")
    assert papayu("apply", str(red), "--check", "false", cwd=repo).returncode == 1  # newer, never landed
    proc = papayu("undo", cwd=repo)
    assert proc.returncode == 0 and f"undid plan {landed['plan_id']}" in proc.stdout, proc.stderr
    assert git(repo, "rev-parse", "main") == before
    nothing = papayu("undo", cwd=repo)
    assert_error(nothing, "ERR_PLAN_NOT_LANDED")
    assert "nothing to undo" in nothing.stderr
