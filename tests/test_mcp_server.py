"""`git papayu mcp`: the SDK's real stdio client drives `python -m papayu_git mcp` in a real repository."""

from __future__ import annotations

import json
import os
import sys
import time
from collections.abc import Awaitable, Callable
from pathlib import Path
from typing import Any

import anyio
from helpers import git, make_repo, processes_with, snapshot, user_view, wait_gone
from mcp import ClientSession, StdioServerParameters, stdio_client

Body = Callable[[ClientSession], Awaitable[Any]]


def serve(repo: Path, body: Body, *extra: str, cwd: Path | None = None) -> Any:
    """Run ``body`` against a server started in ``repo`` (or in ``cwd`` with ``--repo``)."""

    async def main() -> Any:
        params = StdioServerParameters(
            command=sys.executable,
            args=["-m", "papayu_git", "mcp", *extra],
            cwd=str(cwd or repo),
            env=dict(os.environ),
        )
        with (repo.parent / "mcp-server.log").open("a") as errlog:
            async with stdio_client(params, errlog=errlog) as (read, write), ClientSession(read, write) as session:
                await session.initialize()
                return await body(session)

    return anyio.run(main)


async def call(session: ClientSession, name: str, **arguments: Any) -> tuple[bool, dict[str, Any]]:
    result: Any = await session.call_tool(name, arguments)
    data = result.structured_content
    assert data == json.loads(result.content[0].text)  # the same JSON as text
    return bool(result.is_error), data


def codes(data: dict[str, Any]) -> list[str]:
    return [e["code"] for e in data.get("errors") or []] + ([data["error"]["code"]] if data.get("error") else [])


TOKEN = "api_key = 'ghp_" + "b" * 36 + "'\n"


def create(path: str, content: str = "new\n") -> dict[str, Any]:
    return {"actions": [{"kind": "CREATE_FILE", "path": path, "content": content}], "summary": f"add {path}"}


def test_tools_are_listed_with_annotations(repo: Path) -> None:
    async def body(session: ClientSession) -> Any:
        return (await session.list_tools()).tools

    tools = {t.name: t for t in serve(repo, body)}
    assert set(tools) == {
        "validate_plan",
        "apply_plan",
        "best_of",
        "land_plan",
        "drop_plan",
        "list_plans",
        "show_plan",
        "read_file",
        "list_files",
        "search_in_repo",
    }
    for name in ("apply_plan", "best_of", "land_plan", "drop_plan"):
        annotations = tools[name].annotations
        assert annotations is not None and annotations.destructive_hint and not annotations.read_only_hint
    for name in ("validate_plan", "list_plans", "show_plan", "read_file", "list_files", "search_in_repo"):
        annotations = tools[name].annotations
        assert annotations is not None and annotations.read_only_hint, name
    schema = tools["apply_plan"].input_schema
    assert schema["required"] == ["plan"] and "allow_deletions" in schema["properties"]
    assert "ctx" not in schema["properties"]


def test_read_tools_follow_the_context_rules(tmp_path: Path) -> None:
    repo = make_repo(
        tmp_path / "repo",
        {
            "README.md": "# sample\n",
            "src/app.py": "TOKEN = 'ghp_" + "a" * 36 + "'\nprint('hello')\n",
            ".env": "SECRET=1\n",
        },
    )
    (repo / "uncommitted.txt").write_text("not on the tip\n")

    async def body(session: ClientSession) -> Any:
        return (
            await call(session, "read_file", path="src/app.py", start_line=2, end_line=2),
            await call(session, "read_file", path="src/app.py"),
            await call(session, "read_file", path=".env"),
            await call(session, "read_file", path="../outside"),
            await call(session, "list_files"),
            await call(session, "list_files", root="src", glob="*.py"),
            await call(session, "search_in_repo", query="hello"),
            await call(session, "search_in_repo", query="SECRET"),
        )

    part, whole, protected, outside, listed, py, found, secret = serve(repo, body)
    assert not part[0] and "print('hello')" in part[1]["text"]
    assert not whole[0] and "ghp_" + "a" * 36 not in whole[1]["text"] and "***" in whole[1]["text"]
    assert protected[0] and codes(protected[1]) == ["ERR_PROTECTED_PATH"]
    assert protected[1]["errors"][0]["hint"]
    assert outside[0] and codes(outside[1]) == ["ERR_PATH_TRAVERSAL"]
    assert not listed[0] and "README.md" in listed[1]["text"] and ".env" not in listed[1]["text"]
    assert "uncommitted.txt" not in listed[1]["text"]  # the tip of the branch, not the work tree
    assert "src/app.py" in py[1]["text"] and "README.md" not in py[1]["text"]
    assert not found[0] and "src/app.py:2" in found[1]["text"]
    assert ".env" not in secret[1]["text"]


def test_validate_plan(repo: Path) -> None:
    async def body(session: ClientSession) -> Any:
        return (
            await call(session, "validate_plan", plan=create("a.txt")),
            await call(session, "validate_plan", plan={"actions": [{"kind": "CREATE_FILE", "path": "../x"}]}),
            await call(session, "validate_plan", plan=create(".env")),
            await session.call_tool("validate_plan", {"plan": create("a.txt"), "protocol": 3}),
        )

    good, bad, protected, unknown_protocol = serve(repo, body)
    assert unknown_protocol.is_error  # the input schema allows 1 or 2
    assert good == (False, {"ok": True, "kind": "response", "errors": [], "warnings": []})
    assert bad[0] and not bad[1]["ok"] and bad[1]["errors"]
    assert all(set(e) >= {"code", "path", "reason", "hint"} for e in bad[1]["errors"])
    assert protected[0] and "ERR_PROTECTED_PATH" in codes(protected[1])


def test_apply_lands_then_list_and_show(repo: Path) -> None:
    git(repo, "config", "papayu.check.command", "sleep 2.5")  # the operator's check, never the client's

    async def body(session: ClientSession) -> Any:
        beats: list[float] = []

        async def progress(value: float, total: float | None, message: str | None) -> None:
            beats.append(value)

        result: Any = await session.call_tool("apply_plan", {"plan": create("a.txt")}, progress_callback=progress)
        applied = result.structured_content
        return (
            result.is_error,
            applied,
            beats,
            await call(session, "list_plans"),
            await call(session, "show_plan", plan_id=applied["plan_id"]),
        )

    is_error, applied, beats, listed, shown = serve(repo, body)
    assert not is_error and applied["state"] == "landed", applied
    assert applied["check"]["command"] == "sleep 2.5" and applied["check"]["passed"] is True
    assert applied["check"]["source"] == "git config papayu.check.command" and "sandbox" in applied
    assert len(beats) >= 2  # a heartbeat every second while the check runs
    assert (repo / "a.txt").read_text() == "new\n"
    assert git(repo, "rev-parse", "HEAD").strip() == applied["commit"]
    assert [row["id"] for row in listed[1]["plans"]] == [applied["plan_id"]]
    assert listed[1]["plans"][0]["state"] == "landed"
    assert not shown[0] and shown[1]["state"] == "landed" and "+new" in shown[1]["diff"]
    assert shown[1]["check"]["passed"] is True


def test_a_red_check_rolls_back(repo: Path) -> None:
    git(repo, "config", "papayu.check.command", "echo broken; exit 3")
    before = snapshot(repo)

    async def body(session: ClientSession) -> Any:
        return await call(session, "apply_plan", plan=create("a.txt"))

    is_error, data = serve(repo, body)
    assert is_error and data["state"] == "rolled_back" and codes(data) == ["ERR_CHECK_FAILED"]
    assert data["check"]["passed"] is False and "broken" in data["check"]["tail"]
    assert data["error"]["hint"]
    assert snapshot(repo) == before


def test_review_then_land_and_drop(repo: Path) -> None:
    git(repo, "config", "papayu.check.command", "true")

    async def body(session: ClientSession) -> Any:
        reviewed = await call(session, "apply_plan", plan=create("a.txt"), review=True)
        landed = await call(session, "land_plan", plan_id=reviewed[1]["plan_id"])
        kept = await call(session, "apply_plan", plan=create("b.txt", TOKEN), review=True)
        shown = await call(session, "show_plan", plan_id=kept[1]["plan_id"])
        dropped = await call(session, "drop_plan", plan_id=kept[1]["plan_id"])
        return reviewed, landed, kept, shown, dropped

    reviewed, landed, kept, shown, dropped = serve(repo, body)
    assert shown[1]["state"] == "review" and "b.txt" in shown[1]["diff"]
    assert TOKEN.strip() not in json.dumps(shown[1]) and "***" in shown[1]["diff"]  # masked
    assert not reviewed[0] and reviewed[1]["state"] == "review" and reviewed[1]["branch"].startswith("papayu/")
    assert not landed[0] and landed[1]["state"] == "landed" and landed[1]["commit"] == reviewed[1]["commit"]
    assert (repo / "a.txt").exists() and not (repo / "b.txt").exists()
    assert dropped == (False, {"ok": True, "plan_id": kept[1]["plan_id"], "branch_deleted": True})
    assert git(repo, "branch", "--list", "papayu/*").strip() == ""


def test_bad_plans_and_plan_ids(repo: Path) -> None:
    before = snapshot(repo)

    async def body(session: ClientSession) -> Any:
        return (
            await call(session, "apply_plan", plan={"actions": "nope"}),
            await call(session, "land_plan", plan_id="--force"),
            await call(session, "show_plan", plan_id="2026"),
            await call(session, "drop_plan", plan_id="20990101-000000-abcdef"),
            await call(session, "land_plan", plan_id="20990101-000000-abcdef"),
        )

    bad, flag, prefix, unknown_drop, unknown_land = serve(repo, body)
    assert bad[0] and "ERR_SCHEMA" in codes(bad[1])
    assert flag[0] and codes(flag[1]) == ["ERR_PLAN_ID_INVALID"]
    assert prefix[0] and codes(prefix[1]) == ["ERR_PLAN_ID_INVALID"]  # full ids only over MCP
    assert unknown_drop[0] and codes(unknown_drop[1]) == ["ERR_PLAN_NOT_FOUND"]
    assert unknown_land[0] and codes(unknown_land[1]) == ["ERR_PLAN_NOT_FOUND"]
    assert user_view(snapshot(repo)) == user_view(before)


def test_deletions_and_test_edits_need_explicit_arguments(tmp_path: Path) -> None:
    """Once the operator allows deletions (tests/test_mcp_operator.py: refused otherwise)."""
    repo = make_repo(tmp_path / "repo", {"old.txt": "old\n", "tests/test_a.py": "def test_a():\n    pass\n"})
    git(repo, "config", "papayu.check.command", "true")
    git(repo, "config", "papayu.mcp.allowDeletions", "true")
    delete = {"actions": [{"kind": "DELETE_FILE", "path": "old.txt"}], "summary": "remove old.txt"}
    edit = {
        "actions": [{"kind": "DELETE_FILE", "path": "tests/test_a.py"}],
        "summary": "remove a test",
    }

    async def body(session: ClientSession) -> Any:
        return (
            await call(session, "apply_plan", plan=delete),
            await call(session, "apply_plan", plan=delete, allow_deletions=True),
            await call(session, "apply_plan", plan=edit, allow_deletions=True),
        )

    refused, deleted, held = serve(repo, body)
    assert refused[0] and "ERR_DELETE_NOT_CONFIRMED" in codes(refused[1])
    assert "allow_deletions" in json.dumps(refused[1])
    assert not deleted[0] and deleted[1]["state"] == "landed" and not (repo / "old.txt").exists()
    assert held[0] and held[1]["state"] == "review" and codes(held[1]) == ["ERR_TEST_EDITS_HELD"]
    assert held[1]["test_edits"] == ["tests/test_a.py"] and (repo / "tests/test_a.py").exists()


def test_cancelling_apply_kills_the_check_and_lands_nothing(repo: Path) -> None:
    marker = f"7{os.getpid()}.75"
    check = f"sleep 7''{marker[1:]}"  # quoted: only the check's own process carries the marker
    git(repo, "config", "papayu.check.command", check)
    before = snapshot(repo)

    async def body(session: ClientSession) -> Any:
        outcome: list[Any] = []
        with anyio.CancelScope() as scope:

            async def watch() -> None:
                deadline = time.monotonic() + 60
                while not processes_with(marker):
                    assert time.monotonic() < deadline
                    await anyio.sleep(0.05)
                scope.cancel()

            async with anyio.create_task_group() as group:
                group.start_soon(watch)
                outcome.append(await session.call_tool("apply_plan", {"plan": create("a.txt")}))
        survivors = await anyio.to_thread.run_sync(lambda: wait_gone(marker, timeout=30))
        await anyio.sleep(0.5)  # let the CLI finish its rollback
        return outcome, survivors, await call(session, "list_plans")

    outcome, survivors, listed = serve(repo, body)
    assert outcome == [] and survivors == []
    assert user_view(snapshot(repo)) == user_view(before)
    assert not (repo / "a.txt").exists()
    assert all(row["state"] != "landed" for row in listed[1]["plans"])
    assert git(repo, "branch", "--list", "papayu/*").strip() == ""


def test_concurrent_applies(repo: Path) -> None:
    """Parallel calls take the CLI's locks: without rebase one lands and the others are refused
    (ERR_BRANCH_MOVED, nothing half-done); with rebase every one lands."""
    git(repo, "config", "papayu.check.command", "sleep 1")

    async def body(session: ClientSession) -> Any:
        results: dict[str, Any] = {}

        async def apply(name: str, rebase: bool) -> None:
            results[name] = await call(session, "apply_plan", plan=create(name), rebase=rebase)

        for names, rebase in ((("a.txt", "b.txt", "c.txt"), False), (("d.txt", "e.txt", "f.txt"), True)):
            async with anyio.create_task_group() as group:
                for name in names:
                    group.start_soon(apply, name, rebase)
        return results

    results = serve(repo, body)
    for name, (is_error, data) in results.items():
        landed = data.get("state") == "landed"
        assert landed or (is_error and codes(data) == ["ERR_BRANCH_MOVED"]), data
        assert "rebase: true" in json.dumps(data) or landed
        assert (repo / name).exists() == landed
    assert [results[n][1].get("state") for n in ("a.txt", "b.txt", "c.txt")].count("landed") >= 1
    assert all(results[n][1]["state"] == "landed" for n in ("d.txt", "e.txt", "f.txt")), results
    assert git(repo, "status", "--porcelain").strip() == ""


def test_repo_option_serves_another_repository(tmp_path: Path) -> None:
    repo = make_repo(tmp_path / "repo", {"only-here.txt": "x\n"})
    elsewhere = tmp_path / "elsewhere"
    elsewhere.mkdir()

    async def body(session: ClientSession) -> Any:
        return await call(session, "list_files")

    is_error, data = serve(repo, body, "--repo", str(repo), cwd=elsewhere)
    assert not is_error and "only-here.txt" in data["text"]
