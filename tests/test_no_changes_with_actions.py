"""A summary that says NO_CHANGES while the answer carries actions lands nothing: validation refuses
it (ERR_NO_CHANGES_WITH_ACTIONS), and an agent run cannot end 'NO_CHANGES' after changing files."""

from __future__ import annotations

import json
from pathlib import Path

import pytest
from helpers import assert_error, git, make_repo, papayu, plan_record, snapshot, user_view, write_plan
from llm_server import ScriptedLLM, chat, tool_calls

from papayu_git.errors import ERROR_CODES, ValidationFailed
from papayu_git.validate import validate_response

PLANTED = "--- /dev/null\n+++ b/tests/test_planted.py\n@@ -0,0 +1,2 @@\n+def test_planted():\n+    pass\n"


@pytest.mark.parametrize("protocol", [1, 2])
@pytest.mark.parametrize("mode", ["apply", "fix-plan"])
@pytest.mark.parametrize("summary", ["NO_CHANGES: already correct", "NO_CHANGES", "  no_changes - fine"])
def test_validation_refuses_no_changes_with_actions(protocol: int, mode: str, summary: str) -> None:
    response = {"actions": [{"kind": "CREATE_FILE", "path": "tests/test_x.py", "content": "x = 1\n"}]}
    with pytest.raises(ValidationFailed) as info:
        validate_response({**response, "summary": summary}, protocol=protocol, mode=mode)
    [error] = info.value.errors
    assert (error.code, error.path) == ("ERR_NO_CHANGES_WITH_ACTIONS", "summary")
    assert error.hint == ERROR_CODES["ERR_NO_CHANGES_WITH_ACTIONS"].hint and "NO_CHANGES:" in error.hint


@pytest.mark.parametrize("summary", ["NO_CHANGES_NEEDED_BUT_ADDED_A_FILE", "Add a file (was NO_CHANGES)"])
def test_other_summaries_with_actions_are_fine(summary: str) -> None:
    response = {"actions": [{"kind": "CREATE_FILE", "path": "a.txt", "content": "x\n"}], "summary": summary}
    assert len(validate_response(response).actions) == 1


def test_apply_refuses_it_and_lands_nothing(repo: Path, tmp_path: Path) -> None:
    before = snapshot(repo)
    plan = write_plan(tmp_path, [{"kind": "CREATE_FILE", "path": "a.txt", "content": "x\n"}], summary="NO_CHANGES:")
    proc = papayu("apply", str(plan), "-y", "--no-check", cwd=repo)
    assert_error(proc, "ERR_NO_CHANGES_WITH_ACTIONS")
    assert user_view(snapshot(repo)) == user_view(before) and not (repo / "a.txt").exists()


def test_an_agent_that_writes_a_file_then_ends_no_changes_lands_nothing(tmp_path: Path, llm: ScriptedLLM) -> None:
    repo = make_repo(tmp_path / "repo", {"calc.py": "def add(a, b):\n    return a + b\n"})
    before = user_view(snapshot(repo))
    llm.script = [tool_calls(("p", "apply_patch", {"diff": PLANTED})), chat("NO_CHANGES")]
    proc = papayu("agent", "check calc.py", "-y", "--check", "true", cwd=repo, env=llm.env())
    assert_error(proc, "ERR_NO_CHANGES_WITH_ACTIONS")
    assert "ended with 'NO_CHANGES' after changing tests/test_planted.py; nothing was committed" in proc.stderr
    assert user_view(snapshot(repo)) == before and not (repo / "tests").exists()
    assert "papayu/" not in git(repo, "branch", "--list")
    [record] = [json.loads(p.read_text()) for p in (repo / ".git/papayu/plans").glob("*.json")]
    plan = plan_record(repo, record["id"])
    assert plan["extra"]["agent"]["end"] == "error" and "apply" not in plan["extra"]
    assert plan["response"]["actions"] == []
