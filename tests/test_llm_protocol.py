"""Every protocol path of the LLM layer against a scripted OpenAI-compatible server.

Real CLI in a subprocess, real git repos, real HTTP on 127.0.0.1:0; the server only
replays scripted answers and records what papayu sent.
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import llm_server
import pytest
from helpers import assert_error, git, make_repo, papayu, sha, snapshot, stored_plans, trace_record
from llm_server import Reply, ScriptedLLM, chat, ollama, shown_files

CALC = "def add(a, b):\n    return a - b\n"
TEST = "from calc import add\n\n\ndef test_add():\n    assert add(2, 3) == 5\n"
FIXED = "def add(a, b):\n    return a + b\n"
CHECK = 'python -c "import calc; assert calc.add(2, 3) == 5"'
GOAL = "fix the failing test tests/test_calc.py"
GOOD_PATCH = "--- a/calc.py\n+++ b/calc.py\n@@ -1,2 +1,2 @@\n def add(a, b):\n-    return a - b\n+    return a + b\n"
BAD_PATCH = "--- a/calc.py\n+++ b/calc.py\n@@ -1,2 +1,2 @@\n def plus(x, y):\n-    return x - y\n+    return x + y\n"


def plan_answer(**extra: Any) -> dict[str, Any]:
    return llm_server.plan_answer(**{"commands_to_run": ["pytest -q"], **extra})


def patch_answer(patch: str = GOOD_PATCH) -> Any:
    def reply(body: dict[str, Any]) -> Reply:
        base = shown_files(body)["calc.py"]
        return chat(
            {
                "summary": "add() now adds",
                "actions": [{"kind": "PATCH_FILE", "path": "calc.py", "patch": patch, "base_sha256": base}],
            }
        )

    return reply


@pytest.fixture
def calc_repo(tmp_path: Path) -> Path:
    return make_repo(tmp_path / "repo", {"calc.py": CALC, "tests/test_calc.py": TEST})


def run_plan(repo: Path, llm: ScriptedLLM, *args: str, **env: str) -> Any:
    return papayu("-v", "plan", GOAL, "--json", *args, cwd=repo, env=llm.env(**env))


def test_strict_plan_sends_deterministic_request_with_schema_and_file_hashes(calc_repo: Path, llm: ScriptedLLM) -> None:
    llm.script = [chat(plan_answer())]
    assert papayu("memory", "set", "project.default_test_command", "pytest -q", cwd=calc_repo).returncode == 0
    proc = run_plan(calc_repo, llm)
    assert proc.returncode == 0, proc.stderr
    out = json.loads(proc.stdout)
    body = llm.requests[0]
    assert llm.paths == ["/v1/chat/completions"]
    assert (body["model"], body["temperature"], body["top_p"], body["max_tokens"]) == ("test-model", 0, 1, 16384)
    assert body["response_format"]["type"] == "json_schema"
    assert body["response_format"]["json_schema"]["strict"] is True
    assert body["response_format"]["json_schema"]["name"] == "papayu_plan_v2"
    schema = body["response_format"]["json_schema"]["schema"]
    assert schema["additionalProperties"] is False and set(schema["required"]) == set(schema["properties"])
    assert shown_files(body)["calc.py"] == sha(CALC)  # full-blob sha256 in the FILE header
    assert "ONE valid JSON object" in llm.system(0)
    assert "ENGINEERING_MEMORY (trusted by user" in llm.system(0) and "pytest -q" in llm.system(0)
    stored = stored_plans(calc_repo)[0]
    assert stored["id"] == out["plan_id"] and stored["files"]["calc.py"] == sha(CALC)
    assert stored["base_commit"] == git(calc_repo, "rev-parse", "HEAD").strip()
    assert stored["response"]["summary"] == "add() subtracts instead of adding"
    assert trace_record(calc_repo, out["trace_id"])["protocol_attempts"] == [2]
    assert out["next"] == f"git papayu apply {out['plan_id']}"


def test_rejected_response_format_falls_back_down_the_ladder(calc_repo: Path, llm: ScriptedLLM) -> None:
    rejected = Reply(400, {"error": {"message": "Unsupported parameter: response_format.type json_schema"}})
    llm.script = [
        rejected,
        Reply(422, {"detail": "response_format: json_object not supported"}),
        chat("Here is the plan:\n```json\n" + json.dumps(plan_answer()) + "\n```"),
    ]
    proc = run_plan(calc_repo, llm)
    assert proc.returncode == 0, proc.stderr
    kinds = [b.get("response_format", {}).get("type") for b in llm.requests]
    assert kinds == ["json_schema", "json_object", None]
    assert proc.stderr.count("LLM_RESPONSE_FORMAT_FALLBACK") == 2


def test_invalid_json_gets_one_repair_with_the_errors_and_hints(calc_repo: Path, llm: ScriptedLLM) -> None:
    llm.script = [chat('{"summary": "oops", "actions": [}'), chat(plan_answer())]
    proc = run_plan(calc_repo, llm)
    assert proc.returncode == 0, proc.stderr
    assert len(llm.requests) == 2 and "LLM_RESPONSE_REPAIR" in proc.stderr
    repair = llm.last_user(1)
    assert "ERR_JSON_INVALID" in repair and "Fix: Return exactly one valid JSON object" in repair
    assert llm.requests[1]["messages"][-2]["role"] == "assistant"  # the rejected answer is shown back


def test_repair_that_fails_again_ends_in_a_clear_error(calc_repo: Path, llm: ScriptedLLM) -> None:
    bad = {"summary": "x", "actions": [{"kind": "CREATE_FILE", "path": "../evil.py", "content": "x"}]}
    llm.script = [chat(bad), chat(bad), chat(plan_answer())]
    proc = run_plan(calc_repo, llm)
    assert proc.returncode == 1
    errors = json.loads(proc.stdout)["errors"]
    assert errors[0]["code"] == "ERR_LLM_INVALID_RESPONSE" and "ERR_PATH_TRAVERSAL" in errors[0]["reason"]
    assert len(llm.requests) == 2 and stored_plans(calc_repo) == []
    traces = list((calc_repo / ".git" / "papayu" / "traces").glob("*.json"))
    assert [json.loads(t.read_text())["error_code"] for t in traces] == ["ERR_PATH_TRAVERSAL"]


def test_429_is_retried_with_backoff(calc_repo: Path, llm: ScriptedLLM) -> None:
    llm.script = [
        Reply(429, {"error": "slow down"}, headers={"Retry-After": "0"}),
        Reply(503, {"error": "busy"}),
        chat(plan_answer()),
    ]
    proc = run_plan(calc_repo, llm)
    assert proc.returncode == 0, proc.stderr
    assert len(llm.requests) == 3 and proc.stderr.count("LLM_RETRY") == 2


def test_persistent_429_ends_in_rate_limited(calc_repo: Path, llm: ScriptedLLM) -> None:
    llm.script = [Reply(429, {"error": "slow down"})] * 3
    proc = run_plan(calc_repo, llm, PAPAYU_LLM_RETRIES="2")
    assert_error(proc, "ERR_LLM_RATE_LIMITED", first=True)
    assert len(llm.requests) == 3


def test_timeout_ends_in_err_llm_timeout(calc_repo: Path, llm: ScriptedLLM) -> None:
    llm.script = [Reply(200, {}, delay=3.0)]
    proc = run_plan(calc_repo, llm, PAPAYU_LLM_TIMEOUT_SEC="0.5")
    assert_error(proc, "ERR_LLM_TIMEOUT", first=True)
    assert "LLM_REQUEST_TIMEOUT" in proc.stderr and len(llm.requests) == 1


def test_connection_refused_ends_in_err_llm_connect(calc_repo: Path) -> None:
    import socket

    with socket.socket() as sock:  # a port nobody listens on
        sock.bind(("127.0.0.1", 0))
        port = sock.getsockname()[1]
    proc = papayu(
        "plan",
        GOAL,
        "--json",
        cwd=calc_repo,
        env={
            "PAPAYU_LLM_BASE_URL": f"http://127.0.0.1:{port}/v1",
            "PAPAYU_LLM_MODEL": "m",
            "PAPAYU_LLM_RETRIES": "1",
            "PAPAYU_LLM_BACKOFF_SEC": "0.01",
        },
    )
    assert_error(proc, "ERR_LLM_CONNECT", first=True)


def test_two_context_rounds_then_plan_and_a_third_is_refused(calc_repo: Path, llm: ScriptedLLM) -> None:
    def ask(path: str) -> Any:
        return chat(
            plan_answer(
                summary="need more",
                context_requests=[
                    {
                        "type": "read_file",
                        "path": path,
                        "start_line": None,
                        "end_line": None,
                        "query": None,
                        "glob": None,
                        "source": None,
                        "last_n": None,
                    }
                ],
            )
        )

    (calc_repo / "notes.md").write_text("# notes\n")
    git(calc_repo, "add", "notes.md")
    git(calc_repo, "commit", "-qm", "notes")
    llm.script = [ask("notes.md"), ask("README.md"), ask("calc.py")]
    proc = run_plan(calc_repo, llm)
    assert proc.returncode == 0, proc.stderr
    assert len(llm.requests) == 3  # no fourth call
    assert "FULFILLED_CONTEXT (round 1 of 2)" in llm.last_user(1)
    assert f"FILE[notes.md] (sha256={sha('# notes' + chr(10))})" in llm.last_user(1)
    assert "last context round" in llm.last_user(2)
    out = json.loads(proc.stdout)
    assert any("refused" in w for w in out["warnings"])
    assert trace_record(calc_repo, out["trace_id"])["context_requests_refused"] == 1
    assert stored_plans(calc_repo)[0]["files"]["notes.md"] == sha("# notes\n")


def test_memory_patch_applied_only_when_asked(calc_repo: Path, llm: ScriptedLLM) -> None:
    answer = plan_answer(memory_patch={"project.default_test_command": "pytest -q"})
    llm.script = [chat(answer), chat(answer)]
    proc = run_plan(calc_repo, llm)
    assert proc.returncode == 0 and not (calc_repo / ".papa-yu" / "project.json").exists()
    assert any("memory_patch not applied" in w for w in json.loads(proc.stdout)["warnings"])
    proc = papayu("plan", "remember: tests run with pytest -q", "--json", cwd=calc_repo, env=llm.env())
    assert proc.returncode == 0, proc.stderr
    project = json.loads((calc_repo / ".papa-yu" / "project.json").read_text())
    assert project["project"]["default_test_command"] == "pytest -q"


def test_unknown_memory_keys_are_dropped_not_repaired(calc_repo: Path, llm: ScriptedLLM) -> None:
    llm.script = [chat(plan_answer(memory_patch={"project.evil": "rm -rf /"}))]
    proc = run_plan(calc_repo, llm, "--accept-memory")
    assert proc.returncode == 0, proc.stderr
    assert len(llm.requests) == 1
    assert "project.evil" not in json.dumps(stored_plans(calc_repo)[0]["response"])


def test_apply_round_v2_repair_then_single_v1_fallback_lands(calc_repo: Path, llm: ScriptedLLM) -> None:
    llm.script = [
        chat(plan_answer()),
        patch_answer(BAD_PATCH),
        patch_answer(BAD_PATCH),
        chat({"summary": "add() adds (v1)", "actions": [{"kind": "UPDATE_FILE", "path": "calc.py", "content": FIXED}]}),
    ]
    plan_id = json.loads(run_plan(calc_repo, llm).stdout)["plan_id"]
    proc = papayu("-v", "apply", plan_id, "--check", CHECK, "--json", cwd=calc_repo, env=llm.env())
    assert proc.returncode == 0, proc.stderr
    assert (calc_repo / "calc.py").read_text() == FIXED
    assert "ERR_PATCH_APPLY_FAILED" in llm.last_user(2)  # repair carries the apply failure
    assert llm.requests[3]["response_format"]["json_schema"]["name"] == "papayu_apply_v1"
    assert "protocol v1" in llm.system(3) and "PROTOCOL_FALLBACK" in proc.stderr
    stored = json.loads((calc_repo / ".git" / "papayu" / "plans" / f"{plan_id}.json").read_text())
    fields = trace_record(calc_repo, stored["trace_id"])
    assert fields["protocol_attempts"] == [2, 1] and fields["protocol_fallback_reason"] == "ERR_PATCH_APPLY_FAILED"
    assert (fields["protocol_fallback_stage"], fields["protocol_repair_attempt"]) == ("apply", 1)


def test_v1_fallback_failing_too_is_an_error_never_a_loop(calc_repo: Path, llm: ScriptedLLM) -> None:
    bad_v1 = chat({"summary": "v1", "actions": [{"kind": "UPDATE_FILE", "path": "nope.py", "content": "x"}]})
    llm.script = [
        chat(plan_answer()),
        patch_answer(BAD_PATCH),
        patch_answer(BAD_PATCH),
        bad_v1,
        bad_v1,
        patch_answer(),
        patch_answer(),
    ]
    plan_id = json.loads(run_plan(calc_repo, llm).stdout)["plan_id"]
    before = snapshot(calc_repo)
    proc = papayu("apply", plan_id, "--check", CHECK, "--json", cwd=calc_repo, env=llm.env())
    assert proc.returncode == 1
    assert len(llm.requests) == 5  # plan + v2 + repair + v1 + repair
    assert json.loads(proc.stdout)["errors"][0]["code"] == "ERR_LLM_INVALID_RESPONSE"
    assert snapshot(calc_repo) == before


def test_apply_round_of_a_stored_plan_honours_onto_from_a_detached_head(calc_repo: Path, llm: ScriptedLLM) -> None:
    """The APPLY round's early check of each answer targets --onto, like the transaction after it."""
    llm.script = [chat(plan_answer()), patch_answer()]
    plan_id = json.loads(run_plan(calc_repo, llm).stdout)["plan_id"]
    git(calc_repo, "checkout", "-q", "--detach")
    proc = papayu("apply", plan_id, "--onto", "main", "--check", CHECK, "--json", cwd=calc_repo, env=llm.env())
    assert proc.returncode == 0, proc.stdout + proc.stderr
    assert len(llm.requests) == 2 and json.loads(proc.stdout)["state"] == "landed"
    assert git(calc_repo, "show", "main:calc.py") == FIXED


def test_apply_round_no_changes_lands_nothing(calc_repo: Path, llm: ScriptedLLM) -> None:
    llm.script = [chat(plan_answer()), chat({"summary": "NO_CHANGES: already correct", "actions": []})]
    plan_id = json.loads(run_plan(calc_repo, llm).stdout)["plan_id"]
    head = git(calc_repo, "rev-parse", "HEAD")
    proc = papayu("apply", plan_id, "--check", CHECK, "--json", cwd=calc_repo, env=llm.env())
    assert proc.returncode == 0, proc.stderr
    assert json.loads(proc.stdout)["state"] == "no_changes" and git(calc_repo, "rev-parse", "HEAD") == head


def test_fix_yes_plans_then_applies_with_one_model_session(calc_repo: Path, llm: ScriptedLLM) -> None:
    llm.script = [chat(plan_answer()), patch_answer()]
    proc = papayu("fix", GOAL, "-y", "--check", CHECK, "--json", cwd=calc_repo, env=llm.env())
    assert proc.returncode == 0, proc.stderr
    out = json.loads(proc.stdout)
    assert out["apply"]["state"] == "landed" and (calc_repo / "calc.py").read_text() == FIXED
    assert "Papayu-Plan: " + out["plan"]["plan_id"] in git(calc_repo, "log", "-1", "--format=%B")


def test_fix_with_a_wrong_change_rolls_back_and_keeps_the_user_state(calc_repo: Path, llm: ScriptedLLM) -> None:
    wrong = GOOD_PATCH.replace("a + b", "a * b")
    llm.script = [chat(plan_answer()), patch_answer(wrong)]
    before = snapshot(calc_repo)
    proc = papayu("fix", GOAL, "-y", "--check", CHECK, cwd=calc_repo, env=llm.env())
    assert proc.returncode == 1 and "rolled back" in proc.stdout
    assert snapshot(calc_repo) == before


def test_confirmation_goal_applies_the_latest_plan(calc_repo: Path, llm: ScriptedLLM) -> None:
    llm.script = [chat(plan_answer()), patch_answer()]
    assert run_plan(calc_repo, llm).returncode == 0
    git(calc_repo, "config", "papayu.check.command", CHECK)
    proc = papayu("plan", "применяй", cwd=calc_repo, env=llm.env())
    assert proc.returncode == 0, proc.stderr
    assert (calc_repo / "calc.py").read_text() == FIXED


def test_behaviour_contract_flags_claimed_runs_and_unread_files(calc_repo: Path, llm: ScriptedLLM) -> None:
    llm.script = [chat(plan_answer(summary="I ran the tests and all tests passed; the bug is in utils/helpers.py"))]
    proc = papayu("plan", GOAL, cwd=calc_repo, env=llm.env())
    assert proc.returncode == 0, proc.stderr
    assert "claims something ran" in proc.stderr and "utils/helpers.py" in proc.stderr
    flags = stored_plans(calc_repo)[0]["extra"]["behaviour_flags"]
    assert {f["kind"] for f in flags} == {"claims_ran", "unread_file"}
    assert trace_record(calc_repo, stored_plans(calc_repo)[0]["trace_id"])["behaviour_flags"] == flags


def test_questions_over_the_ask_budget_are_dropped(calc_repo: Path, llm: ScriptedLLM) -> None:
    llm.script = [chat(plan_answer(questions=["Python 3.11?", "Which test?", "Why?"]))]
    proc = run_plan(calc_repo, llm, PAPAYU_LLM_ASK_BUDGET="1")
    assert proc.returncode == 0, proc.stderr
    assert json.loads(proc.stdout)["questions"] == ["Python 3.11?"]
    assert "at most 1 question(s)" in llm.system(0)


def test_api_key_is_sent_but_never_stored(calc_repo: Path, llm: ScriptedLLM) -> None:
    key = "sk-papayutest-0123456789abcdef"
    llm.script = [chat(plan_answer(summary=f"echo {key}"))]
    proc = run_plan(calc_repo, llm, PAPAYU_LLM_API_KEY=key, PAPAYU_TRACE_RAW="1")
    assert proc.returncode == 0, proc.stderr
    assert llm.headers[0]["authorization"] == f"Bearer {key}"
    stored = "".join(p.read_text() for p in (calc_repo / ".git" / "papayu").rglob("*.json"))
    assert key not in stored and key not in proc.stderr


def test_ollama_native_api_sends_the_schema_as_format(calc_repo: Path, llm: ScriptedLLM) -> None:
    llm.script = [ollama(plan_answer())]
    proc = papayu(
        "plan",
        GOAL,
        "--json",
        cwd=calc_repo,
        env={"PAPAYU_LLM_PROVIDER": "ollama", "PAPAYU_LLM_BASE_URL": llm.root_url, "PAPAYU_LLM_MODEL": "qwen2.5-coder"},
    )
    assert proc.returncode == 0, proc.stderr
    body = llm.requests[0]
    assert llm.paths == ["/api/chat"] and body["stream"] is False and body["model"] == "qwen2.5-coder"
    assert body["options"]["temperature"] == 0 and body["format"]["type"] == "object"
    assert "summary" in body["format"]["properties"]


def test_model_name_is_discovered_from_the_server_when_unset(calc_repo: Path, llm: ScriptedLLM) -> None:
    llm.script = [chat(plan_answer())]
    proc = papayu("plan", GOAL, cwd=calc_repo, env={"PAPAYU_LLM_BASE_URL": llm.base_url})
    assert proc.returncode == 0, proc.stderr
    assert llm.requests[0]["model"] == "discovered-model"


def test_local_provider_without_the_model_is_a_clear_error(calc_repo: Path) -> None:
    proc = papayu("plan", GOAL, "--json", cwd=calc_repo, env={"PAPAYU_LOCAL_MODEL": str(calc_repo / "none.gguf")})
    assert proc.returncode == 1
    assert json.loads(proc.stdout)["errors"][0]["code"] == "ERR_LLM_LOCAL_UNAVAILABLE"


def test_from_file_log_brings_the_traceback_files_and_acts_at_once(calc_repo: Path, llm: ScriptedLLM) -> None:
    log = calc_repo.parent / "pytest.log"
    log.write_text(
        'Traceback (most recent call last):\n  File "calc.py", line 2, in add\n'
        "    return a - b\nAssertionError: assert -1 == 5\n"
    )
    llm.script = [chat(plan_answer())]
    proc = papayu("plan", "it fails", "--from-file", str(log), "--json", cwd=calc_repo, env=llm.env())
    assert proc.returncode == 0, proc.stderr
    first = llm.last_user(0)
    assert f"FILE[calc.py] (sha256={sha(CALC)})" in first and "AssertionError: assert -1 == 5" in first
    assert "ORCHESTRATOR NOTE: act now (a stack trace and the code are in the context" in first


def test_vague_goal_without_logs_asks_within_the_budget(calc_repo: Path, llm: ScriptedLLM) -> None:
    llm.script = [chat(plan_answer(questions=["Which command fails, and what does it print?"]))]
    proc = papayu("plan", "it fails sometimes", "--json", cwd=calc_repo, env=llm.env(PAPAYU_LLM_ASK_BUDGET="1"))
    assert proc.returncode == 0, proc.stderr
    assert "ORCHESTRATOR NOTE: ask at most 1 question(s)" in llm.last_user(0)
    assert "logs or a stack trace" in llm.last_user(0)
    assert json.loads(proc.stdout)["questions"] == ["Which command fails, and what does it print?"]


def test_a_local_openai_url_without_a_model_uses_the_only_model_it_serves(tmp_path: Path) -> None:
    from llm_server import plan_answer

    repo = make_repo(tmp_path / "repo")
    server = ScriptedLLM([chat(json.dumps(plan_answer()))])
    try:
        # PAPAYU_LLM_PROVIDER=openai and a local URL: not gpt-4o-mini, but what the server serves.
        env = {**server.env(PAPAYU_LLM_PROVIDER="openai"), "PAPAYU_LLM_MODEL": ""}
        proc = papayu("plan", "add a note", cwd=repo, env=env)
        assert proc.returncode == 0, proc.stderr
        assert server.requests[0]["model"] == "discovered-model"
        # Several models: papayu does not guess; the error lists them.
        server.extras["/v1/models"] = Reply(200, {"data": [{"id": "small"}, {"id": "large"}]})
        proc = papayu("plan", "add a note", cwd=repo, env=env)
        assert proc.returncode != 0 and "ERR_LLM_CONFIG" in proc.stderr and "small, large" in proc.stderr
    finally:
        server.close()
