"""Over MCP the operator decides, not the client (docs/DESIGN.md, "MCP server").

The SDK's real stdio client drives `python -m papayu_git mcp` in a real repository: the client's
`check`, `no_check`, `allow_test_edits` and `allow_deletions` are refused unless the operator
allowed each in config, and land_plan lands no plan a human has to decide on.
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest
from helpers import git, make_repo, papayu, patch_action, snapshot, user_view
from mcp import ClientSession
from test_mcp_server import call, codes, create, serve

SECRET = "OPENAI_API_KEY=sk-" + "q" * 40 + "\n"
TEST = "def test_a():\n    assert True\n"
SETTINGS = {
    "check": "papayu.mcp.allowCheck",
    "no_check": "papayu.mcp.allowNoCheck",
    "allow_test_edits": "papayu.mcp.allowTestEdits",
    "allow_deletions": "papayu.mcp.allowDeletions",
}
LOOSEN = "--- a/tests/test_a.py\n+++ b/tests/test_a.py\n@@ -1,2 +1,2 @@\n def test_a():\n-    assert True\n+    pass\n"
EDIT_TEST = {"actions": [patch_action("tests/test_a.py", TEST.encode(), LOOSEN)], "summary": "loosen a test"}
DELETE = {"actions": [{"kind": "DELETE_FILE", "path": "old.txt"}], "summary": "remove old.txt"}


@pytest.fixture
def repo(tmp_path: Path) -> Path:
    repo = make_repo(tmp_path / "repo", {"old.txt": "old\n", "tests/test_a.py": TEST, ".env": SECRET})
    git(repo, "config", "papayu.check.command", "true")  # the operator's check
    return repo


def assert_refused(result: tuple[bool, dict[str, Any]], argument: str) -> None:
    is_error, data = result
    assert is_error and codes(data) == ["ERR_MCP_NOT_ALLOWED"], data
    [error] = data["errors"]
    assert error["path"] == argument and SETTINGS[argument] in error["reason"], error
    assert SETTINGS[argument] in error["hint"]


def test_each_operator_argument_is_refused_naming_its_setting(repo: Path) -> None:
    before = snapshot(repo)

    async def body(session: ClientSession) -> Any:
        return (
            await call(session, "apply_plan", plan=create("a.txt"), check="true"),
            await call(session, "apply_plan", plan=create("a.txt"), check="base64 ../../../../../.env"),
            await call(session, "apply_plan", plan=create("a.txt"), no_check=True),
            await call(session, "apply_plan", plan=EDIT_TEST, allow_test_edits=True),
            await call(session, "apply_plan", plan=DELETE, allow_deletions=True),
            await call(session, "apply_plan", plan=create("a.txt"), check="true", no_check=True),
            await call(session, "list_plans"),
        )

    check, leak, no_check, tests, deletions, both, listed = serve(repo, body)
    assert_refused(check, "check")
    assert_refused(leak, "check")
    assert "sk-" + "q" * 40 not in json.dumps(leak[1])
    assert_refused(no_check, "no_check")
    assert_refused(tests, "allow_test_edits")
    assert_refused(deletions, "allow_deletions")
    assert [e["path"] for e in both[1]["errors"]] == ["check", "no_check"]
    assert listed[1]["plans"] == []  # refused before anything was stored
    assert snapshot(repo) == before


def test_without_arguments_the_check_is_the_operators(repo: Path) -> None:
    git(repo, "config", "papayu.check.command", "echo operator-check; exit 3")

    async def body(session: ClientSession) -> Any:
        return await call(session, "apply_plan", plan=create("a.txt"))

    is_error, data = serve(repo, body)
    assert is_error and data["state"] == "rolled_back" and codes(data) == ["ERR_CHECK_FAILED"]
    assert data["check"]["source"] == "git config papayu.check.command" and "operator-check" in data["check"]["tail"]
    assert not (repo / "a.txt").exists()


def test_with_the_operators_settings_each_argument_works(repo: Path) -> None:
    for key in SETTINGS.values():
        git(repo, "config", key, "true")

    async def body(session: ClientSession) -> Any:
        return (
            await call(session, "apply_plan", plan=create("a.txt"), check="test ! -e b.txt"),
            await call(session, "apply_plan", plan=create("b.txt"), no_check=True),
            await call(session, "apply_plan", plan=EDIT_TEST, allow_test_edits=True),
            await call(session, "apply_plan", plan=DELETE, allow_deletions=True),
        )

    check, no_check, tests, deletions = serve(repo, body)
    assert check[1]["state"] == "landed" and check[1]["check"]["source"] == "--check", check
    assert no_check[1]["state"] == "landed" and no_check[1]["check"] is None, no_check
    assert tests[1]["state"] == "landed" and tests[1]["test_edits"] == ["tests/test_a.py"], tests
    assert deletions[1]["state"] == "landed" and not (repo / "old.txt").exists(), deletions
    assert (repo / "tests/test_a.py").read_text().endswith("pass\n")


def test_an_environment_variable_of_the_operator_allows_too(repo: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("PAPAYU_MCP_ALLOW_CHECK", "1")  # the server's environment, which no client sets

    async def body(session: ClientSession) -> Any:
        return await call(session, "apply_plan", plan=create("a.txt"), check="true")

    is_error, data = serve(repo, body)
    assert not is_error and data["state"] == "landed", data


def test_a_permission_taken_back_counts_at_once(repo: Path) -> None:
    git(repo, "config", SETTINGS["check"], "true")

    async def body(session: ClientSession) -> Any:
        first = await call(session, "apply_plan", plan=create("a.txt"), check="true")
        git(repo, "config", "--unset", SETTINGS["check"])
        return first, await call(session, "apply_plan", plan=create("b.txt"), check="true")

    first, second = serve(repo, body)
    assert first[1]["state"] == "landed", first
    assert_refused(second, "check")
    assert not (repo / "b.txt").exists()


def test_land_plan_refuses_a_plan_held_for_test_edits(repo: Path) -> None:
    async def body(session: ClientSession) -> Any:
        held = await call(session, "apply_plan", plan=EDIT_TEST)
        return held, await call(session, "land_plan", plan_id=held[1]["plan_id"])

    held, refused = serve(repo, body)
    assert held[0] and held[1]["state"] == "review" and codes(held[1]) == ["ERR_TEST_EDITS_HELD"]
    assert "papayu.mcp.allowTestEdits" in held[1]["error"]["hint"]  # no more "then land_plan"
    plan_id = held[1]["plan_id"]
    assert refused[0] and codes(refused[1]) == ["ERR_MCP_NOT_ALLOWED"]
    [error] = refused[1]["errors"]
    assert "tests/test_a.py" in error["reason"] and "papayu.mcp.allowTestEdits" in error["reason"]
    assert f"git papayu land {plan_id}" in error["hint"]
    assert (repo / "tests/test_a.py").read_text() == TEST
    assert git(repo, "branch", "--list", f"papayu/{plan_id}").strip()  # kept for the human
    proc = papayu("land", plan_id, cwd=repo)  # who lands it with the CLI
    assert proc.returncode == 0, proc.stderr
    assert (repo / "tests/test_a.py").read_text().endswith("pass\n")


def test_land_plan_refuses_what_the_client_could_not_have_applied(repo: Path) -> None:
    """Kept by a human's CLI (`--review`): a deletion, and a commit no check ran on."""
    plans = repo.parent / "plans"
    plans.mkdir()
    (plans / "delete.json").write_text(json.dumps(DELETE))
    (plans / "unchecked.json").write_text(json.dumps(create("a.txt")))
    deleting = json.loads(papayu("apply", str(plans / "delete.json"), "-y", "--review", "--json", cwd=repo).stdout)
    kept = papayu("apply", str(plans / "unchecked.json"), "--review", "--no-check", "--json", cwd=repo)
    unchecked = json.loads(kept.stdout)
    before = user_view(snapshot(repo))

    async def body(session: ClientSession) -> Any:
        return (
            await call(session, "land_plan", plan_id=deleting["plan_id"]),
            await call(session, "land_plan", plan_id=unchecked["plan_id"]),
        )

    deleted, no_check = serve(repo, body)
    assert deleted[0] and codes(deleted[1]) == ["ERR_MCP_NOT_ALLOWED"]
    reason = deleted[1]["errors"][0]["reason"]
    assert "old.txt" in reason and "papayu.mcp.allowDeletions" in reason
    assert no_check[0] and codes(no_check[1]) == ["ERR_MCP_NOT_ALLOWED"]
    assert "papayu.mcp.allowNoCheck" in no_check[1]["errors"][0]["reason"]
    assert user_view(snapshot(repo)) == before and (repo / "old.txt").exists()

    git(repo, "config", SETTINGS["allow_deletions"], "true")  # the operator allows deletions
    landed = serve(repo, lambda session: call(session, "land_plan", plan_id=deleting["plan_id"]))
    assert not landed[0] and landed[1]["state"] == "landed" and not (repo / "old.txt").exists(), landed


REACHING = {
    "actions": [{"kind": "CREATE_FILE", "path": "lib.py", "content": "import os\n\n\ndef stop():\n    os._exit(0)\n"}],
    "summary": "a way out",
}


def test_land_plan_refuses_a_plan_held_because_its_code_reaches_for_the_runner(repo: Path) -> None:
    async def body(session: ClientSession) -> Any:
        held = await call(session, "apply_plan", plan=REACHING)
        return held, await call(session, "land_plan", plan_id=held[1]["plan_id"])

    held, refused = serve(repo, body)
    assert held[1]["state"] == "review" and codes(held[1]) == ["ERR_RUNNER_REACH_HELD"], held
    assert "lib.py:5" in held[1]["error"]["reason"] and "papayu.mcp.allowTestEdits" in held[1]["error"]["hint"]
    assert refused[0] and codes(refused[1]) == ["ERR_MCP_NOT_ALLOWED"], refused
    assert "ERR_RUNNER_REACH_HELD" in refused[1]["errors"][0]["reason"]
    assert not (repo / "lib.py").exists()
    proc = papayu("land", held[1]["plan_id"], cwd=repo)  # the human, with the CLI
    assert proc.returncode == 0, proc.stderr
    assert (repo / "lib.py").is_file()
