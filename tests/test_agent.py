"""`git papayu agent`: function calling inside the transaction.

Real CLI in a subprocess, real git repositories, a scripted tool-calling server over real HTTP
(llm_server.tool_calls). Each tool result the model got is read back from the next request.
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest
from helpers import assert_error, git, make_repo, papayu, plan_record, snapshot, trace_record, user_view
from llm_server import Reply, ScriptedLLM, chat, tool_calls

CALC = "def add(a, b):\n    return a - b\n"
TEST = "from calc import add\n\n\ndef test_add():\n    assert add(2, 3) == 5\n"
CHECK = 'python -c "import calc; assert calc.add(2, 3) == 5"'
GOAL = "fix add() in calc.py"
FIX = "--- a/calc.py\n+++ b/calc.py\n@@ -1,2 +1,2 @@\n def add(a, b):\n-    return a - b\n+    return a + b\n"
BREAK = "--- a/calc.py\n+++ b/calc.py\n@@ -1,2 +1,2 @@\n def add(a, b):\n-    return a - b\n+    return a * b\n"


@pytest.fixture
def calc_repo(tmp_path: Path) -> Path:
    return make_repo(tmp_path / "repo", {"calc.py": CALC, "tests/test_calc.py": TEST, "util.py": "X = 1\n"})


def agent(repo: Path, llm: ScriptedLLM, *args: str, goal: str = GOAL) -> Any:
    return papayu("-v", "agent", goal, "--json", "--check", CHECK, *args, cwd=repo, env=llm.env())


def tool_results(llm: ScriptedLLM) -> dict[str, str]:
    """tool_call_id -> the result papayu sent back (the last request holds the whole conversation)."""
    messages = llm.requests[-1]["messages"]
    return {m["tool_call_id"]: m["content"] for m in messages if m["role"] == "tool"}


def result_of(llm: ScriptedLLM, call_id: str) -> str:
    return tool_results(llm)[call_id]


def test_lands_after_a_green_check_with_several_calls_per_turn(calc_repo: Path, llm: ScriptedLLM) -> None:
    before = user_view(snapshot(calc_repo))
    seen: list[dict[str, Any]] = []

    def after_patch(body: dict[str, Any]) -> Reply:
        seen.append(user_view(snapshot(calc_repo)))  # mid-run: the patch is only in the workspace
        return tool_calls(("t", "run_tests", {}), ("r", "read_file", {"path": "calc.py"}))

    llm.script = [
        tool_calls(("a", "list_files", {}), ("b", "read_file", {"path": "calc.py"}), ("c", "get_env", {})),
        tool_calls(("p", "apply_patch", {"diff": FIX})),
        after_patch,
        chat("add() subtracted; it adds now. run_tests passed."),
    ]
    proc = agent(calc_repo, llm, "-y")
    data = json.loads(proc.stdout)
    assert proc.returncode == 0, proc.stderr
    assert data["apply"]["state"] == "landed" and data["agent"]["behaviour_flags"] == []
    assert seen == [before]
    assert (calc_repo / "calc.py").read_text() == CALC.replace("a - b", "a + b")
    assert "tests/test_calc.py" in result_of(llm, "a") and "ENV" in result_of(llm, "c")
    assert "PASSED" in result_of(llm, "t") and "return a + b" in result_of(llm, "r")
    # the tools list went with every request; the assistant turns were sent back
    assert all(len(r["tools"]) == 8 for r in llm.requests)
    plan = plan_record(calc_repo, data["agent"]["plan_id"])
    assert plan["mode"] == "agent" and plan["extra"]["apply"]["state"] == "landed"
    assert [s["tool"] for s in plan["extra"]["agent"]["steps"]] == [
        "list_files", "read_file", "get_env", "apply_patch", "run_tests", "read_file",
    ]  # fmt: skip
    trace = trace_record(calc_repo, plan["trace_id"])
    assert trace["command"] == "agent" and trace["apply"]["state"] == "landed"
    assert trace["agent"]["turns"] == 4 and trace["agent"]["usage"]["prompt_tokens"] == 40
    assert git(calc_repo, "log", "-1", "--format=%s").strip().startswith("add() subtracted")


def test_rollback_after_a_red_check(calc_repo: Path, llm: ScriptedLLM) -> None:
    before = user_view(snapshot(calc_repo))
    llm.script = [tool_calls(("p", "apply_patch", {"diff": BREAK})), chat("Changed add().")]
    proc = agent(calc_repo, llm, "-y")
    applied = json.loads(proc.stdout)["apply"]
    assert proc.returncode == 1 and applied["state"] == "rolled_back"
    assert applied["error"]["code"] == "ERR_CHECK_FAILED"
    assert user_view(snapshot(calc_repo)) == before
    assert "papayu/" not in git(calc_repo, "branch", "--list")


def test_every_refusal_is_a_tool_result(calc_repo: Path, llm: ScriptedLLM) -> None:
    big = "--- a/calc.py\n+++ b/calc.py\n@@ -1,2 +1,2 @@\n def nope(a, b):\n-    return 0\n+    return 1\n"
    dotgit = "--- a/.git/config\n+++ b/.git/config\n@@ -1 +1 @@\n-a\n+b\n"
    (calc_repo / "big.txt").write_text("line\n" * 2000)
    git(calc_repo, "add", "big.txt")
    git(calc_repo, "commit", "-qm", "big")
    llm.script = [
        tool_calls(
            ("u", "rm_rf", {}),
            ("j", "read_file", "{not json"),
            ("k", "read_file", {"path": "calc.py", "colour": True}),
            ("t", "read_file", {"path": 7}),
            ("r", "list_files", {"max_results": 0}),
            ("e", "read_file", {"path": ".env"}),
            ("d", "read_file", {"path": "../outside.txt"}),
            ("x", "run", {"command": "rm -rf /"}),
            ("n", "apply_patch", {"diff": big}),
            ("g", "apply_patch", {"diff": dotgit}),
            ("o", "read_file", {"path": "big.txt"}),
            ("l", "get_logs", {"source": "app"}),
        ),
        chat("Nothing to change."),
    ]
    proc = agent(calc_repo, llm, "-y", "--max-tool-output", "1000")
    assert proc.returncode == 0, proc.stderr
    results = tool_results(llm)
    expected = {
        "u": "ERR_AGENT_UNKNOWN_TOOL",
        "j": "ERR_AGENT_BAD_ARGUMENTS",
        "k": "ERR_AGENT_BAD_ARGUMENTS",
        "t": "ERR_AGENT_BAD_ARGUMENTS",
        "r": "ERR_AGENT_BAD_ARGUMENTS",
        "e": "ERR_PROTECTED_PATH",
        "d": "ERR_PATH_TRAVERSAL",
        "x": "ERR_AGENT_RUN_REFUSED",
        "n": "ERR_PATCH_APPLY_FAILED",
        "g": "ERR_PATH_GIT_DIR",
        "l": "ERR_AGENT_BAD_ARGUMENTS",
    }
    for call_id, code in expected.items():
        assert results[call_id].startswith(code), (call_id, results[call_id])
        assert "hint:" in results[call_id]
    assert "configured: none" in results["l"]
    assert len(results["o"]) <= 1000 and "truncated: " in results["o"]
    data = json.loads(proc.stdout)
    assert data["apply"]["state"] == "no_changes"
    steps = data["agent"]["steps"]
    assert [s["code"] for s in steps if not s["ok"]] == list(expected.values())
    assert next(s for s in steps if s["tool"] == "read_file" and s["truncated"])["result_chars"] > 1000


def test_max_steps_ends_the_run_and_nothing_lands(calc_repo: Path, llm: ScriptedLLM) -> None:
    before = user_view(snapshot(calc_repo))
    llm.script = [
        tool_calls(("p", "apply_patch", {"diff": FIX})),
        tool_calls(("r", "read_file", {"path": "calc.py"})),
        chat("never asked"),
    ]
    proc = agent(calc_repo, llm, "-y", "--max-steps", "2")
    assert_error(proc, "ERR_AGENT_MAX_STEPS")
    assert len(llm.requests) == 2
    assert user_view(snapshot(calc_repo)) == before
    assert "papayu/" not in git(calc_repo, "branch", "--list")
    (plan,) = [json.loads(p.read_text()) for p in (calc_repo / ".git/papayu/plans").glob("*.json")]
    assert plan["extra"]["agent"]["end"] == "max_steps" and "apply" not in plan["extra"]


def test_claims_without_evidence_are_flagged(calc_repo: Path, llm: ScriptedLLM) -> None:
    llm.script = [chat("I fixed calc.py and all tests passed.")]
    proc = agent(calc_repo, llm, "-y")
    assert proc.returncode == 0, proc.stderr
    data = json.loads(proc.stdout)
    kinds = {f["kind"] for f in data["agent"]["behaviour_flags"]}
    assert kinds == {"claims_tests_passed", "claims_patched"}
    assert "no run_tests passed" in proc.stderr
    plan = plan_record(calc_repo, data["agent"]["plan_id"])
    assert {f["kind"] for f in plan["extra"]["behaviour_flags"]} == kinds
    assert {f["kind"] for f in trace_record(calc_repo, plan["trace_id"])["behaviour_flags"]} == kinds


def test_multi_file_patch_creates_changes_and_deletes(calc_repo: Path, llm: ScriptedLLM) -> None:
    diff = (
        FIX
        + "--- /dev/null\n+++ b/docs/notes.md\n@@ -0,0 +1,2 @@\n+# Notes\n+add() adds.\n"
        + "diff --git a/util.py b/util.py\ndeleted file mode 100644\n--- a/util.py\n+++ /dev/null\n@@ -1 +0,0 @@\n-X = 1\n"
    )
    failing = FIX + "--- a/util.py\n+++ b/util.py\n@@ -1 +1 @@\n-Y = 2\n+Y = 3\n"
    llm.script = [
        tool_calls(("f", "apply_patch", {"diff": failing})),
        tool_calls(("a", "read_file", {"path": "calc.py"}), ("p", "apply_patch", {"diff": diff})),
        chat("add() adds; notes added; util.py removed."),
    ]
    proc = agent(calc_repo, llm, "-y")
    assert proc.returncode == 0, proc.stderr
    results = tool_results(llm)
    assert results["f"].startswith("ERR_PATCH_APPLY_FAILED [util.py]")
    assert "return a - b" in results["a"]  # all or nothing: the first file of the failed diff did not land
    assert "M calc.py" in results["p"] and "A docs/notes.md" in results["p"] and "D util.py" in results["p"]
    assert json.loads(proc.stdout)["apply"]["state"] == "landed"
    assert (calc_repo / "docs/notes.md").read_text() == "# Notes\nadd() adds.\n"
    assert not (calc_repo / "util.py").exists()
    assert "a + b" in (calc_repo / "calc.py").read_text()


def test_show_lists_the_steps_and_stats_counts_agent_runs(calc_repo: Path, llm: ScriptedLLM) -> None:
    llm.script = [tool_calls(("p", "apply_patch", {"diff": FIX}), ("r", "read_file", {"path": ".env"})), chat("ok")]
    proc = agent(calc_repo, llm, "-y")
    plan_id = json.loads(proc.stdout)["agent"]["plan_id"]
    shown = papayu("show", plan_id, cwd=calc_repo)
    assert shown.returncode == 0, shown.stderr
    assert "agent: 2 tool call(s) in 2 turn(s)" in shown.stdout
    assert "1. apply_patch" in shown.stdout and "read_file" in shown.stdout and "ERR_PROTECTED_PATH" in shown.stdout
    stats = json.loads(papayu("stats", "--json", cwd=calc_repo).stdout)
    assert stats["agent"]["runs"] == 1 and stats["agent"]["outcomes"] == {"landed": 1}
    assert stats["apply_count"] == 0  # agent runs are not protocol APPLY rounds
    assert "agent runs: 1" in papayu("stats", cwd=calc_repo).stdout


def test_questions_are_stored_and_nothing_is_committed(calc_repo: Path, llm: ScriptedLLM) -> None:
    llm.script = [chat("Which Python version do you target?\nShould add() accept strings?")]
    proc = agent(calc_repo, llm, "-y", goal="something is off")
    assert proc.returncode == 0, proc.stderr
    data = json.loads(proc.stdout)
    assert data["apply"] is None and data["agent"]["end"] == "questions"
    assert plan_record(calc_repo, data["agent"]["plan_id"])["response"]["questions"] == [
        "Which Python version do you target?",
        "Should add() accept strings?",
    ]
    assert "papayu/" not in git(calc_repo, "branch", "--list")


def test_run_with_run_proposed_runs_in_the_sandboxed_checkout(calc_repo: Path, llm: ScriptedLLM) -> None:
    llm.script = [
        tool_calls(("p", "apply_patch", {"diff": FIX})),
        tool_calls(("x", "run", {"command": "grep -c 'a + b' calc.py"}), ("t", "run_tests", {"command": "false"})),
        chat("I ran grep."),
    ]
    proc = agent(calc_repo, llm, "-y", "--run-proposed")
    assert proc.returncode == 0, proc.stderr
    results = tool_results(llm)
    assert "PASSED" in results["x"] and "\n1" in results["x"]
    assert "FAILED" in results["t"]  # with --run-proposed the model's test command ran
    assert json.loads(proc.stdout)["agent"]["behaviour_flags"] == []
    assert "a + b" not in CALC and "a + b" in (calc_repo / "calc.py").read_text()


# --- units -------------------------------------------------------------------------------------


def test_split_files_agrees_with_unidiff_on_a_well_formed_diff() -> None:
    from unidiff import PatchSet

    from papayu_git.unified_diff import split_files

    diff = (
        "diff --git a/a.sql b/a.sql\n--- a/a.sql\n+++ b/a.sql\n@@ -1,2 +1,2 @@\n--- a comment\n-x\n+-- b\n+y\n"
        "--- /dev/null\n+++ b/new.txt\n@@ -0,0 +1 @@\n+n\n"
        "--- a/gone.txt\n+++ /dev/null\n@@ -1 +0,0 @@\n-g\n"
    )
    ours = split_files(diff)
    theirs = PatchSet(diff)
    assert [(s.old, s.new) for s in ours] == [("a.sql", "a.sql"), (None, "new.txt"), ("gone.txt", None)]
    assert [len(f) for f in theirs] == [s.hunks for s in ours]
    assert [f.path for f in theirs] == [s.new or s.old for s in ours]


def test_arguments_are_parsed_strictly() -> None:
    from papayu_git.agent_tools import parse_arguments
    from papayu_git.errors import PapayuError
    from papayu_git.llm.tools import agent_tools

    schemas = {t["function"]["name"]: t["function"]["parameters"] for t in agent_tools()}
    assert parse_arguments("read_file", '{"path": "a.py", "start_line": 3}', schemas["read_file"]) == {
        "path": "a.py",
        "start_line": 3,
    }
    assert parse_arguments("get_env", "", schemas["get_env"]) == {}
    for raw in ('{"path": "a", "path": "b"}', "[]", '{"path": true}', '{"path": "a", "start_line": 0}', "{}"):
        with pytest.raises(PapayuError) as info:
            parse_arguments("read_file", raw, schemas["read_file"])
        assert info.value.code == "ERR_AGENT_BAD_ARGUMENTS", raw


def test_claims_are_judged_against_what_the_tools_did() -> None:
    from papayu_git.llm.behaviour import flag_agent_claims

    text = "I updated calc.py; the tests pass now."
    kinds = {f["kind"] for f in flag_agent_claims(text, patched=False, tests_ran=False, tests_passed=False, ran=False)}
    assert kinds == {"claims_tests_passed", "claims_patched"}
    assert flag_agent_claims(text, patched=True, tests_ran=True, tests_passed=True, ran=False) == []
    assert flag_agent_claims("I ran the build.", patched=False, tests_ran=False, tests_passed=False, ran=True) == []


def test_the_embedded_model_is_refused_up_front(calc_repo: Path) -> None:
    before = snapshot(calc_repo)
    proc = papayu("agent", GOAL, "--json", cwd=calc_repo, env={"PAPAYU_LLM_PROVIDER": "local"})
    assert_error(proc, "ERR_LLM_NO_TOOLS")
    assert "fix" in proc.stdout + proc.stderr
    assert snapshot(calc_repo) == before


def test_a_server_that_rejects_tools_ends_the_run(calc_repo: Path, llm: ScriptedLLM) -> None:
    before = snapshot(calc_repo)
    llm.script = [Reply(400, {"error": {"message": "tools are not supported by this model"}})]
    proc = agent(calc_repo, llm, "-y")
    assert_error(proc, "ERR_LLM_NO_TOOLS")
    assert len(llm.requests) == 1 and snapshot(calc_repo) == before


def test_get_logs_reads_only_a_configured_source_masked(calc_repo: Path, llm: ScriptedLLM) -> None:
    (calc_repo / "app.log").write_text("start\nconnecting with password=hunter2hunter2\nfailed: add\n")
    git(calc_repo, "config", "papayu.logs.app", "app.log")
    llm.script = [
        tool_calls(("g", "get_logs", {"source": "app", "last_n": 2}), ("h", "get_logs", {"source": "build"})),
        chat("Read the log; nothing to change."),
    ]
    proc = agent(calc_repo, llm, "-y")
    assert proc.returncode == 0, proc.stderr
    log = result_of(llm, "g")
    assert "failed: add" in log and "hunter2hunter2" not in log and "start" not in log
    assert "ERR_AGENT_BAD_ARGUMENTS" in result_of(llm, "h") and "app" in result_of(llm, "h")


def test_onto_lands_on_the_named_branch_from_a_detached_head(calc_repo: Path, llm: ScriptedLLM) -> None:
    git(calc_repo, "checkout", "-q", "--detach")
    llm.script = [tool_calls(("p", "apply_patch", {"diff": FIX})), chat("add() adds now.")]
    proc = agent(calc_repo, llm, "-y", "--onto", "main")
    assert proc.returncode == 0, proc.stderr
    assert json.loads(proc.stdout)["apply"]["state"] == "landed"
    assert git(calc_repo, "show", "main:calc.py") == CALC.replace("a - b", "a + b")


def test_the_masked_conversation_is_stored_with_the_plan(calc_repo: Path, llm: ScriptedLLM) -> None:
    secret = "ghp_agentconversation0123456789abcdef"
    (calc_repo / "big.txt").write_text("line\n" * 3000)
    git(calc_repo, "add", "big.txt")
    git(calc_repo, "commit", "-qm", "big")
    llm.script = [
        tool_calls(("b", "read_file", {"path": "big.txt"}), ("u", "read_file", {"path": "util.py"})),
        chat(f"Nothing to change; token {secret} was in my notes."),
    ]
    proc = agent(calc_repo, llm, "-y")
    assert proc.returncode == 0, proc.stderr
    plan = plan_record(calc_repo, json.loads(proc.stdout)["agent"]["plan_id"])
    conversation = plan["extra"]["agent"]["conversation"]
    assert [m["role"] for m in conversation] == ["user", "assistant", "tool", "tool", "assistant"]
    assert [m.get("tool_call_id") for m in conversation if m["role"] == "tool"] == ["b", "u"]
    assert "more characters]" in conversation[2]["content"] and len(conversation[2]["content"]) < 4100
    assert "X = 1" in conversation[3]["content"]
    assert secret not in json.dumps(plan) and "***" in conversation[-1]["content"]
