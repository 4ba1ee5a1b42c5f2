"""One story, in order, once (docs/TRANSACTION.md, "What next"), through the real CLI: the check's
verdict and its tests (named once, capped) before "landed" or "rolled back", the runner's warnings
out of the tail, words that match the states, and every next step papayu names run as printed and
doing what it says. Real repositories, the real sandboxed pytest, a scripted model on 127.0.0.1;
a pty where the terminal matters."""

from __future__ import annotations

import itertools
import json
import os
import re
import subprocess
import sys
from pathlib import Path

import pytest
from calc_project import CALC, GOAL, GOOD, PYPROJECT, PYTEST, TESTS, WRONG, apply_answer, attempt, patch
from helpers import ROOT, git, make_repo, papayu, patch_action, plan_record, stored_plans, trace_record, write_plan
from llm_server import ScriptedLLM, chat, plan_answer
from terminal import CTRL_C, Terminal, screen

from papayu_git.check import sandbox

pytestmark = pytest.mark.skipif(
    sandbox.unavailable_reason() is not None, reason=f"bwrap does not work here: {sandbox.unavailable_reason()}"
)

BREAKS_SUB = (  # fixes add, breaks sub: every test of sub newly fails
    "--- a/calc.py\n+++ b/calc.py\n@@ -1,5 +1,5 @@\n def add(a, b):\n-    return a - b\n+    return a + b\n"
    " \n \n def sub(a, b):\n-    return a - b\n+    return a + b\n"
)
# Eleven more tests of sub, each warning as an old API would: the log's end is mostly warnings.
MANY = "import warnings\n\nfrom calc import add, sub\n\n\n" + "".join(
    f"def test_sub_{i}():\n    warnings.warn('old api {i}', DeprecationWarning)\n    assert sub({i + 5}, {i}) == 5\n\n\n"
    for i in range(1, 12)
)
ERROR_LINE = re.compile(r"^ERR_[A-Z0-9_]+(?: (?:at|before|while) [^:]+)?: \S")


def run(repo: Path, *args: str, env: dict[str, str] | None = None) -> subprocess.CompletedProcess[str]:
    """The real CLI with stderr into stdout, as a terminal shows both: the order is the story's."""
    return subprocess.run(
        [sys.executable, "-m", "papayu_git", *args],
        cwd=repo,
        stdout=subprocess.PIPE,
        stderr=subprocess.STDOUT,
        text=True,
        timeout=300,
        env={**os.environ, "PYTHONPATH": str(ROOT), **(env or {})},
    )


def pasted(repo: Path, command: str, env: dict[str, str] | None = None) -> subprocess.CompletedProcess[str]:
    """A command papayu printed, pasted into a shell as it is (`git papayu` through git)."""
    path = f"{Path(sys.executable).parent}:{os.environ['PATH']}"
    return subprocess.run(
        ["sh", "-c", command],
        cwd=repo,
        capture_output=True,
        text=True,
        timeout=300,
        env={**os.environ, **(env or {}), "PATH": path, "PYTHONPATH": str(ROOT)},
    )


def before(text: str, first: str, then: str) -> bool:
    return first in text and then in text and text.index(first) < text.index(then)


def without_tail(text: str) -> str:
    """papayu's own lines: the check output's tail (the runner's words) left out."""
    return re.sub(r"--- check output \(tail\) ---\n.*?\n---\n", "", text, flags=re.S)


def test_fix_y_on_a_green_plan_says_the_verdict_then_lands(calc: Path, llm: ScriptedLLM) -> None:
    llm.script = [*attempt(GOOD)]
    proc = run(calc, "fix", GOAL, "-y", env=llm.env())
    out, plan_id = proc.stdout, stored_plans(calc)[-1]["id"]
    assert proc.returncode == 0, out
    steps = [
        "check: passed (",
        "verdict against the tip: passed 2, fixed 1, already failing 0",
        "  fixed: tests/test_calc.py::test_add",
        f"landing plan {plan_id} on main:",
        "calc.py | 2 +-",
        f"landed plan {plan_id} on main (",
        f"undo: git reset --keep ORIG_HEAD   (or: git papayu undo {plan_id})",
    ]
    assert all(before(out, a, b) for a, b in itertools.pairwise(steps)), out
    assert out.count("tests/test_calc.py::test_add") == 1 and out.count("verdict against the tip") == 1, out


def test_a_red_apply_names_its_failing_tests_once_capped_before_it_rolls_back(calc: Path, tmp_path: Path) -> None:
    (calc / "tests" / "test_many.py").write_text(MANY)
    git(calc, "add", "-A")
    git(calc, "commit", "-q", "-m", "sub's tests")
    plan = write_plan(tmp_path, [patch_action("calc.py", CALC.encode(), BREAKS_SUB)], "add fixed")
    proc = run(calc, "apply", str(plan), "-y")
    out, plan_id = proc.stdout, stored_plans(calc)[-1]["id"]
    assert proc.returncode == 1, out
    ours = without_tail(out)
    failing = ["tests/test_calc.py::test_sub", *(f"tests/test_many.py::test_sub_{i}" for i in range(1, 12))]
    counts = {test: len(re.findall(rf"{re.escape(test)}\b", ours)) for test in failing}
    assert sorted(counts.values()) == [0] * 4 + [1] * 8, counts  # each named once, eight of them
    assert "  newly failing (12):\n" in ours and "    ... and 4 more (the log names them)\n" in ours, ours
    assert all(len(line) < 200 for line in ours.splitlines()), ours  # no list as one long line
    assert before(out, "--- check output (tail) ---", "check: FAILED (")
    assert before(out, "verdict against the tip: passed 1, fixed 1, already failing 0, newly failing 12", "ERR_")
    assert before(out, "ERR_CHECK_REGRESSION at the check: 12 tests that passed on the tip fail", "rolled back plan")
    error = next(line for line in out.splitlines() if line.startswith("ERR_"))
    assert "::" not in error and ERROR_LINE.match(error), error
    assert out.rstrip().endswith(f"see its change: git papayu show {plan_id}"), out
    # The tail is the failures, not the runner's warnings: those are counted, and the log keeps them.
    tail = out.split("--- check output (tail) ---\n", 1)[1].split("\n---\n", 1)[0]
    assert "DeprecationWarning: old api" not in tail and "E       assert" in tail, tail  # no warning record
    assert re.search(r"^\[papayu\] \d+ lines of the runner's warnings left out of this tail", tail, re.M), tail
    record = plan_record(calc, plan_id)["extra"]["apply"]
    assert "DeprecationWarning: old api" in Path(record["check"]["log"]).read_text()
    assert "newly failing: tests/test_calc.py::test_sub" in record["error"]["reason"]  # --json keeps every name


def test_a_check_that_lands_on_a_red_tip_never_says_passed_beside_failed(tmp_path: Path, llm: ScriptedLLM) -> None:
    mul = "from calc import add\n\n\ndef test_mul():\n    assert add(2, 2) * 0 == 1\n"  # red on the tip, and after
    files = {"calc.py": CALC, "tests/test_calc.py": TESTS, "tests/test_mul.py": mul, "pyproject.toml": PYPROJECT}
    repo = make_repo(tmp_path / "calc", files)
    git(repo, "config", "papayu.check.command", PYTEST)
    llm.script = [*attempt(GOOD)]
    proc = run(repo, "fix", GOAL, "-y", env=llm.env())
    assert proc.returncode == 0, proc.stdout
    check = next(line for line in proc.stdout.splitlines() if line.startswith("check: passed"))
    assert "failed" not in check, check  # the runner's "1 failed" is not said beside the verdict's word
    assert "verdict against the tip: passed 2, fixed 1, already failing 1" in proc.stdout
    assert "  already failing on the tip: tests/test_mul.py::test_mul" in proc.stdout


def test_list_shows_the_verdict_a_green_review_and_a_plan_that_fixes_nothing_apart(calc: Path, tmp_path: Path) -> None:
    nothing = write_plan(tmp_path, [patch_action("calc.py", CALC.encode(), WRONG)], "nothing", name="a.json")
    green = write_plan(tmp_path, [patch_action("calc.py", CALC.encode(), GOOD)], "green", name="b.json")
    assert run(calc, "apply", str(nothing), "-y").returncode == 1
    assert run(calc, "apply", str(green), "--review").returncode == 0
    held, kept = (p["id"] for p in stored_plans(calc))
    rows = {r["id"]: r for r in json.loads(papayu("list", "--json", cwd=calc).stdout)["plans"]}
    assert (rows[held]["state"], rows[held]["check"]) == ("review", "fixes nothing")
    assert (rows[kept]["state"], rows[kept]["check"]) == ("review", "passed")
    table = papayu("list", cwd=calc).stdout.splitlines()
    assert table[0].split()[:3] == ["ID", "STATE", "CHECK"]
    assert re.search(rf"^{held}\s+review\s+fixes nothing\s+main", "\n".join(table), re.M), table


def test_fix_y_asks_again_without_offering_what_it_then_drops(calc: Path, llm: ScriptedLLM) -> None:
    """Attempt 1 (fixes nothing, held) is followed by attempt 2 (lands): attempt 1's lines offer no
    retry, land or drop of a branch papayu drops itself, and a `retry` of it says what landed."""
    llm.script = [*attempt(WRONG), *attempt(GOOD)]
    proc = run(calc, "fix", GOAL, "-y", env=llm.env())
    first, second = (p["id"] for p in stored_plans(calc))
    assert proc.returncode == 0, proc.stdout
    attempt_one = proc.stdout.split("papayu: attempt 2 of 2", 1)[0]
    assert "ERR_CHECK_FIXES_NOTHING: the tip was already red and the plan fixes none" in attempt_one
    assert "git papayu" not in attempt_one.split("ERR_CHECK_FIXES_NOTHING", 1)[1], attempt_one
    assert f"attempt 2 of 2: asking the model again with plan {first}'s failures (1 failing test)" in proc.stdout
    assert f"papayu: dropped papayu/{first}: plan {second} landed in its place" in proc.stdout
    assert proc.stdout.rstrip().endswith(
        f"papayu: 2 attempts: {first} fixes nothing, dropped; {second} passed, landed on main"
    ), proc.stdout
    again = papayu("retry", first, "-y", cwd=calc, env=llm.env())
    assert again.returncode == 1 and "ERR_NOT_RETRYABLE" in again.stderr, again.stderr
    assert f"plan {second} landed on main in its place" in again.stderr and "nothing to apply" not in again.stderr
    assert f"'git papayu show {second}' shows what landed" in again.stderr
    assert len(stored_plans(calc)) == 2  # the model was not asked for a change main already has


def test_when_no_attempt_lands_the_summary_names_how_to_drop_the_earlier_kept_one(calc: Path, llm: ScriptedLLM) -> None:
    llm.script = [*attempt(WRONG), *attempt(WRONG)]
    proc = run(calc, "fix", GOAL, "-y", env=llm.env())
    first, second = (p["id"] for p in stored_plans(calc))
    summary = proc.stdout.rstrip().splitlines()[-1]
    assert proc.returncode == 1 and summary == (
        f"papayu: 2 attempts: {first} fixes nothing, kept on papayu/{first} (git papayu drop {first}); "
        f"{second} fixes nothing, kept on papayu/{second}"
    ), proc.stdout
    assert f"  drop it: git papayu drop {second}" in proc.stdout  # the last one's steps, with its report
    assert pasted(calc, f"git papayu drop {first}").returncode == 0
    assert git(calc, "branch", "--list", "papayu/*", "--format=%(refname:short)").split() == [f"papayu/{second}"]


def test_a_rolled_back_attempt_that_a_later_one_replaced_is_not_retried(calc: Path, llm: ScriptedLLM) -> None:
    llm.script = [*attempt(BREAKS_SUB), *attempt(GOOD)]
    assert run(calc, "fix", GOAL, "-y", env=llm.env()).returncode == 0
    first, second = (p["id"] for p in stored_plans(calc))
    assert plan_record(calc, first)["extra"]["apply"]["superseded_by"] == second
    again = papayu("retry", first, cwd=calc, env=llm.env())
    assert again.returncode == 1 and f"plan {second} landed on main in its place" in again.stderr
    # once that landing is undone, the goal is open again: retry asks the model
    assert papayu("undo", second, cwd=calc).returncode == 0
    llm.script = [*attempt(GOOD)]
    assert "landed plan" in papayu("retry", first, "-y", cwd=calc, env=llm.env(), timeout=300).stdout


def test_a_plan_the_branch_already_has_says_so(calc: Path, tmp_path: Path) -> None:
    plan = write_plan(tmp_path, [patch_action("calc.py", CALC.encode(), GOOD)], "add fixed")
    assert run(calc, "apply", str(plan), "-y").returncode == 0
    proc = run(calc, "apply", str(plan), "-y")  # the same change again: merged onto the tip, it changes nothing
    assert proc.returncode == 0 and "main already has this change; nothing to land" in proc.stdout, proc.stdout
    assert "nothing to apply" not in proc.stdout


def test_ctrl_c_during_the_check_says_what_it_left_and_the_command_that_goes_on(calc: Path, tmp_path: Path) -> None:
    plan = write_plan(tmp_path, [patch_action("calc.py", CALC.encode(), GOOD)], "add fixed")
    term = Terminal(["apply", str(plan), "-y", "--check", "sleep 60"], calc)
    term.expect("check: sleep 60")
    term.type(CTRL_C)
    assert term.wait() == 130, term.text
    plan_id = stored_plans(calc)[-1]["id"]
    said = [line for line in screen(term.seen.decode()) if line]
    assert said[-2].endswith(f"interrupted during the check of plan {plan_id}: rolled back, main unchanged"), said
    assert said[-1] == f"  apply it again: git papayu apply {plan_id}"
    record = plan_record(calc, plan_id)["extra"]["apply"]
    assert (
        record["state"] == "interrupted" and trace_record(calc, record["trace_id"])["check"]["state"] == "interrupted"
    )
    listed = json.loads(papayu("list", "--json", cwd=calc).stdout)["plans"][-1]
    assert (listed["state"], listed["check"]) == ("interrupted", "interrupted")
    ran = pasted(calc, said[-1].split(": ", 1)[1] + " --check true")
    assert ran.returncode == 0 and f"landed plan {plan_id}" in ran.stdout, ran.stdout + ran.stderr


def test_undo_names_the_command_that_lands_it_again(calc: Path, tmp_path: Path) -> None:
    plan = write_plan(tmp_path, [patch_action("calc.py", CALC.encode(), GOOD)], "add fixed")
    assert run(calc, "apply", str(plan), "-y").returncode == 0
    plan_id = stored_plans(calc)[-1]["id"]
    undone = papayu("undo", cwd=calc)
    again = next(line for line in undone.stdout.splitlines() if line.startswith("  land it again: "))
    assert again == f"  land it again: git papayu apply {plan_id}"
    tip = git(calc, "rev-parse", "main")
    ran = pasted(calc, again.split(": ", 1)[1])
    assert ran.returncode == 0 and "check: passed" in ran.stderr, ran.stderr  # checked again on this tip
    assert git(calc, "rev-parse", "main^") == tip and "a + b" in (calc / "calc.py").read_text()


@pytest.mark.parametrize("where", ["at a branch's tip", "at no branch's tip"])
def test_plan_on_a_detached_head_names_an_apply_that_works(calc: Path, llm: ScriptedLLM, where: str) -> None:
    if where == "at no branch's tip":
        git(calc, "commit", "-q", "--allow-empty", "-m", "one more")
        git(calc, "checkout", "-q", "--detach")
        git(calc, "reset", "-q", "--soft", "HEAD~1")  # HEAD is detached where main is not
    else:
        git(calc, "checkout", "-q", "--detach")
    llm.script = [chat(plan_answer())]
    planned = papayu("plan", GOAL, cwd=calc, env=llm.env())
    plan_id = stored_plans(calc)[-1]["id"]
    nexts = [line.removeprefix("next: ") for line in planned.stdout.splitlines() if line.startswith("next: ")]
    expected = (
        f"git papayu apply {plan_id} --onto main"
        if where == "at a branch's tip"
        else f"git switch -c fix-{plan_id[-6:]} && git papayu apply {plan_id}"
    )
    assert nexts == [expected], planned.stdout
    llm.script = [apply_answer(GOOD)]
    ran = pasted(calc, nexts[0], llm.env())
    assert ran.returncode == 0 and f"landed plan {plan_id}" in ran.stdout, ran.stdout + ran.stderr


@pytest.mark.parametrize("command", [["show"], ["diff"], ["retry"], ["undo"], ["drop"], ["land"], ["trace", "show"]])
@pytest.mark.parametrize("typo", ["letter", "digit dropped"])
def test_a_mistyped_plan_id_gets_a_did_you_mean_everywhere(
    calc: Path, tmp_path: Path, command: list[str], typo: str
) -> None:
    plan = write_plan(tmp_path, [patch_action("calc.py", CALC.encode(), GOOD)], "add fixed")
    assert run(calc, "apply", str(plan), "--review").returncode == 0
    plan_id = stored_plans(calc)[-1]["id"]
    wrong = plan_id[:-1] + "x" if typo == "letter" else plan_id[:10] + plan_id[11:]
    proc = papayu(*command, wrong, cwd=calc)
    assert proc.returncode == 1 and f"did you mean {plan_id}?" in proc.stderr, proc.stderr
    assert ERROR_LINE.match(proc.stderr), proc.stderr  # the code first, as every error


def test_every_error_begins_with_its_code(calc: Path, tmp_path: Path) -> None:
    bad = tmp_path / "bad.json"
    bad.write_text("{not json")
    plan = write_plan(tmp_path, [patch_action("calc.py", CALC.encode(), GOOD)], "add fixed", name="p.json")
    assert run(calc, "apply", str(plan), "-y").returncode == 0
    landed = stored_plans(calc)[-1]["id"]
    (calc / "calc.py").write_text(CALC.replace("a - b", "a + b", 1) + "# mine\n")
    failing = [
        papayu("show", "20991231-000000-abcdef", cwd=calc),  # an error with a path
        papayu("apply", str(bad), cwd=calc),  # a refusal of the answer
        papayu("land", landed, cwd=calc),  # nothing to land: a hint naming the plan
        papayu("undo", cwd=calc),  # a dirty file: a path and a one-liner
    ]
    for proc in failing:
        errors = [line for line in proc.stderr.splitlines() if "ERR_" in line]
        assert proc.returncode == 1 and errors and all(ERROR_LINE.match(e) for e in errors), proc.stderr


def test_the_missing_key_hint_names_the_variable_without_a_masked_value(repo: Path) -> None:
    proc = papayu("fix", GOAL, "-y", cwd=repo, env={"PAPAYU_LLM_PROVIDER": "openai"})
    assert proc.returncode == 1 and "ERR_LLM_CONFIG" in proc.stderr, proc.stderr
    assert "OPENAI_API_KEY" in proc.stderr and "***" not in proc.stderr and "OPENAI_API_KEY=" not in proc.stderr
    doctor = papayu("doctor", "--json", cwd=repo, env={"PAPAYU_LLM_PROVIDER": "openai"})
    said = json.dumps(json.loads(doctor.stdout))
    assert "OPENAI_API_KEY" in said and "***" not in said


def test_trace_show_reads_as_the_prompt_the_answer_the_validation_and_the_check(calc: Path, llm: ScriptedLLM) -> None:
    llm.script = [*attempt(GOOD)]
    assert run(calc, "fix", GOAL, "-y", env=llm.env()).returncode == 0
    plan_id = stored_plans(calc)[-1]["id"]
    shown = papayu("trace", "show", plan_id, cwd=calc)
    out = shown.stdout
    assert shown.returncode == 0, shown.stderr
    for said in (
        f"goal: {GOAL}",
        "model: openai-compatible/test-model (plan round): 1 call(s)",
        "prompt: 1 message(s) of context",
        "    FILE calc.py (",
        "    FILE tests/test_calc.py (",
        "  summary: add() subtracts",
        "  1. Fix add — return a + b",
        "  PATCH_FILE calc.py",
        "      +    return a + b",
        "validation: ok",
        "check: passed (",
        "  fixed: tests/test_calc.py::test_add",
        "outcome: landed, commit ",
        f"(the whole record: git papayu trace show {plan_id} --json)",
    ):
        assert said in out, (said, out)
    assert not re.search(r'^\s*[{"]', out, re.M) and len(out.splitlines()) < 80, out  # no raw JSON
    raw = json.loads(papayu("trace", "show", plan_id, "--json", cwd=calc).stdout)
    assert [t["command"] for t in raw["traces"]] == ["plan", "apply"] and raw["traces"][0]["prompt"]["rounds"]


def test_the_stash_one_liner_fails_when_the_apply_fails(calc: Path, tmp_path: Path) -> None:
    mine = CALC + "\n# my note\n"
    (calc / "calc.py").write_text(mine)
    plan = write_plan(tmp_path, [patch_action("calc.py", CALC.encode(), patch("a - b", "a + b + 1"))], "red")
    refused = run(calc, "apply", str(plan))
    assert refused.returncode == 1 and not re.search("^check:", refused.stdout, re.M), refused.stdout  # none ran
    one_liner = re.search(r"stash them around a new apply: (.+)\)$", refused.stdout, re.M).group(1)  # type: ignore[union-attr]
    ran = pasted(calc, one_liner)
    assert ran.returncode != 0 and "not landed" in ran.stdout and "landed plan" not in ran.stdout, ran.stdout
    assert (calc / "calc.py").read_text() == mine and git(calc, "stash", "list") == ""
