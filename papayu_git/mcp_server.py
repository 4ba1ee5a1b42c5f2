"""`git papayu mcp`: the commands as Model Context Protocol tools over stdio (docs/DESIGN.md, "MCP server").

Every tool that changes or reports on plans runs the CLI itself in a child process
(`python -m papayu_git -C ROOT <command> --json`), so each guarantee of the CLI holds as it is:
the locks of parallel applies, the sandboxed check, the rollback on SIGTERM, the masking of
its JSON output. Cancelling a request sends that child SIGTERM: the CLI kills the check's
process group and rolls the transaction back, exactly as on Ctrl-C. The read tools
(read_file, list_files, search_in_repo) are the agent's (agent_tools.Tools, the context
rules) over the tip of the current branch, run in a worker thread.

Nothing here asks a question, and the client (a model) decides nothing a human decides on a
terminal (mcp_policy.py): the check resolves as the CLI's does without --check; `check`,
`no_check`, `allow_test_edits` and `allow_deletions` are refused (ERR_MCP_NOT_ALLOWED) unless the
operator allowed each in config. A plan that deletes files is then refused
(ERR_DELETE_NOT_CONFIRMED), one that edits existing tests stops at review (ERR_TEST_EDITS_HELD),
as in the CLI without a terminal, and land_plan refuses such plans: a human lands them.
"""

from __future__ import annotations

import json
import signal
import subprocess
import sys
import tempfile
import time
from collections.abc import Awaitable, Callable
from pathlib import Path
from typing import Annotated, Any, Literal

import anyio
from mcp.server.mcpserver import Context, MCPServer
from mcp.types import CallToolResult, TextContent, ToolAnnotations
from pydantic import Field

from papayu_git import __version__, plans
from papayu_git.errors import ERROR_CODES, PapayuError, ValidationFailed
from papayu_git.git import find_toplevel
from papayu_git.mcp_policy import land_refusals, refused_arguments
from papayu_git.secrets import mask, mask_data

HEARTBEAT_SEC = 1.0
TERMINATE_GRACE_SEC = 30.0  # the CLI rolls back within this after SIGTERM, else SIGKILL
_MCP_HINTS = {  # the CLI's hints name its flags; over MCP the arguments and the operator's settings
    "ERR_DELETE_NOT_CONFIRMED": "A human applies a plan that deletes files with the CLI; or the operator "
    "allows deletions over MCP (git config papayu.mcp.allowDeletions true) and you pass allow_deletions: true.",
    "ERR_TEST_EDITS_HELD": "A human reads the test changes and lands the plan with the CLI ('git papayu land "
    "ID'); land_plan refuses it unless the operator set papayu.mcp.allowTestEdits.",
    "ERR_BRANCH_MOVED": "Apply the plan again, or pass rebase: true to re-apply on the new tip.",
    **dict.fromkeys(
        ("ERR_JUDGE_EDITS_HELD", "ERR_TESTS_REMOVED_HELD", "ERR_RUNNER_REACH_HELD"),
        "A human reads what the reason names and lands the plan with the CLI ('git papayu land ID'); land_plan "
        "refuses it unless the operator set papayu.mcp.allowTestEdits.",
    ),
}

READ_ONLY = ToolAnnotations(read_only_hint=True, destructive_hint=False, open_world_hint=False)
DESTRUCTIVE = ToolAnnotations(read_only_hint=False, destructive_hint=True, open_world_hint=False)


def error_dict(exc: PapayuError) -> dict[str, Any]:
    data = exc.to_dict()
    data.setdefault("hint", ERROR_CODES.get(exc.code, ("", ""))[1])
    return data


def tool_result(data: dict[str, Any], is_error: bool) -> CallToolResult:
    """Structured content plus the same JSON as text for clients that read only text. Masked;
    ensure_ascii escapes control and direction-changing characters of model text."""
    data = _mcp_hints(mask_data(data))
    text = json.dumps(data, ensure_ascii=True, indent=1)
    return CallToolResult(content=[TextContent(type="text", text=text)], structured_content=data, is_error=is_error)


def failed(*errors: PapayuError) -> CallToolResult:
    return tool_result({"ok": False, "errors": [error_dict(e) for e in errors]}, True)


def _mcp_hints(data: dict[str, Any]) -> dict[str, Any]:
    for err in [*(data.get("errors") or []), data.get("error") or {}]:
        if isinstance(err, dict) and err.get("code") in _MCP_HINTS:
            err["hint"] = _MCP_HINTS[err["code"]]
    return data


class PapayuTools:
    def __init__(self, root: Path) -> None:
        self.root = root

    # --- the CLI in a child process -------------------------------------------------------------
    async def cli(
        self, args: list[str], stdin: bytes | None = None, ctx: Context[Any, Any] | None = None, what: str = ""
    ) -> tuple[int, dict[str, Any] | None, str]:
        """(exit code, its --json output or None, stderr). Progress every HEARTBEAT_SEC; on
        cancellation SIGTERM (the CLI rolls back), SIGKILL after TERMINATE_GRACE_SEC."""
        command = [sys.executable, "-m", "papayu_git", "-C", str(self.root), *args]
        process = await anyio.open_process(
            command,
            stdin=subprocess.PIPE if stdin is not None else subprocess.DEVNULL,
            stdout=subprocess.PIPE,
            stderr=subprocess.PIPE,
        )
        out, err = bytearray(), bytearray()

        async def drain(stream: Any, buf: bytearray) -> None:
            async for chunk in stream:
                buf.extend(chunk)

        started = time.monotonic()
        try:
            async with anyio.create_task_group() as group:
                group.start_soon(drain, process.stdout, out)
                group.start_soon(drain, process.stderr, err)
                if stdin is not None and process.stdin is not None:
                    await process.stdin.send(stdin)
                    await process.stdin.aclose()
                while process.returncode is None:
                    with anyio.move_on_after(HEARTBEAT_SEC):
                        await process.wait()
                    if process.returncode is None and ctx is not None:
                        elapsed = time.monotonic() - started
                        await ctx.report_progress(elapsed, None, f"{what}: running for {elapsed:.0f}s")
        except BaseException:
            with anyio.CancelScope(shield=True):
                await _terminate(process)
            raise
        await process.aclose()
        text = out.decode("utf-8", "replace")
        try:
            data = json.loads(text) if text.strip() else None
        except ValueError:
            data = None
        code = process.returncode if process.returncode is not None else -1
        return code, data if isinstance(data, dict) else None, err.decode("utf-8", "replace")

    async def cli_result(
        self, args: list[str], stdin: bytes | None = None, ctx: Context[Any, Any] | None = None, what: str = ""
    ) -> dict[str, Any] | CallToolResult:
        code, data, err = await self.cli(args, stdin, ctx, what)
        if data is None:
            tail = mask("\n".join(err.strip().splitlines()[-20:]))
            return failed(PapayuError("ERR_INTERNAL", f"`papayu {args[0]}` exited {code} without a result: {tail}"))
        if data.get("ok") is False and "errors" in data and "plan_id" not in data:
            return tool_result({"ok": False, "errors": data["errors"]}, True)
        return data

    # --- tools ---------------------------------------------------------------------------------
    async def validate_plan(self, plan: dict[str, Any] | list[Any], protocol: int | None = None) -> CallToolResult:
        with tempfile.TemporaryDirectory(prefix="papayu-mcp-") as tmp:
            path = Path(tmp) / "plan.json"
            path.write_text(json.dumps(plan), encoding="utf-8")
            args = ["validate", str(path), "--json", *(["--protocol", str(protocol)] if protocol else [])]
            data = await self.cli_result(args)
        if isinstance(data, CallToolResult):
            return data
        report = (data.get("files") or [{}])[0]
        errors, ok = report.get("errors") or [], bool(data.get("ok"))
        return tool_result(
            {"ok": ok, "kind": report.get("kind", ""), "errors": errors, "warnings": report.get("warnings") or []},
            not ok,
        )

    async def apply_plan(
        self,
        plan: dict[str, Any] | list[Any],
        ctx: Context[Any, Any],
        check: str | None = None,
        no_check: bool = False,
        review: bool = False,
        keep_failed: bool = False,
        onto: str | None = None,
        rebase: bool = False,
        allow_test_edits: bool = False,
        allow_deletions: bool = False,
    ) -> CallToolResult:
        asked = {"check": bool(check), "no_check": no_check, "allow_test_edits": allow_test_edits}
        refused = refused_arguments(self.root, {**asked, "allow_deletions": allow_deletions})
        if refused:
            return failed(*refused)
        args = ["apply", "-", "--json"]
        args += [f"--check={check}"] if check else []  # one token: a value starting with '-' stays a value
        args += [f"--onto={onto}"] if onto else []
        for flag, on in (
            ("--no-check", no_check),
            ("--review", review),
            ("--keep-failed", keep_failed),
            ("--rebase", rebase),
            ("--allow-test-edits", allow_test_edits),
            ("--yes", allow_deletions),  # without it the CLI (no terminal) refuses deletions
        ):
            args += [flag] if on else []
        data = await self.cli_result(args, json.dumps(plan).encode("utf-8"), ctx, "apply")
        if isinstance(data, CallToolResult):
            return data
        return tool_result(apply_summary(data), not data.get("ok", False))

    async def best_of(
        self,
        goal: str,
        ctx: Context[Any, Any],
        candidates: int,
        options: dict[str, Any],
        check: str | None = None,
        allow_test_edits: bool = False,
    ) -> CallToolResult:
        """`best-of N GOAL --review`, then the winner landed as land_plan lands: the operator's
        rules apply to the arguments and, judged on its commit, to the winner."""
        refused = refused_arguments(self.root, {"check": bool(check), "allow_test_edits": allow_test_edits})
        if refused:
            return failed(*refused)
        args = ["best-of", "--json", "--review", *([f"--check={check}"] if check else [])]
        args += ["--allow-test-edits"] if allow_test_edits else []
        args += ["--first-green"] if options["first_green"] else []
        args += [f"--budget-tokens={options['budget_tokens']}", f"--timeout={options['timeout_sec']}"]
        data = await self.cli_result([*args, "--", str(candidates), goal], ctx=ctx, what="best-of")
        if isinstance(data, CallToolResult):
            return data
        run, summary = data.get("run") or {}, {**best_of_summary(data), "landed": None}
        winner = next((r for r in run.get("candidates") or [] if r.get("index") == run.get("winner")), None)
        if winner is None or options["review"]:
            return tool_result(summary, not data.get("ok", False))
        refusals = await anyio.to_thread.run_sync(land_refusals, self.root, winner["plan_id"])
        if refusals:
            return tool_result({**summary, "ok": False, "errors": [error_dict(e) for e in refusals]}, True)
        landed = await self.cli_result(["land", f"{run['id']}:{winner['index']}", "--json"], what="land")
        if isinstance(landed, CallToolResult):
            return landed
        if landed.get("state") == "landed":  # what `show RUN` now says too
            summary["state"] = "landed"
            for row in summary["candidates"]:
                row["state"] = "landed" if row["index"] == winner["index"] else row["state"]
        return tool_result({**summary, "landed": apply_summary(landed)}, not landed.get("ok", False))

    async def land_plan(self, plan_id: str) -> CallToolResult:
        try:
            plans.check_id(plan_id, path="plan_id")
            refused = await anyio.to_thread.run_sync(land_refusals, self.root, plan_id)
        except PapayuError as exc:
            return failed(exc)
        return failed(*refused) if refused else await self._by_id("land", plan_id, apply_summary)

    async def drop_plan(self, plan_id: str) -> CallToolResult:
        return await self._by_id("drop", plan_id, lambda d: d)

    async def show_plan(self, plan_id: str) -> CallToolResult:
        return await self._by_id("show", plan_id, show_summary)

    async def list_plans(self) -> CallToolResult:
        data = await self.cli_result(["list", "--json"])
        return data if isinstance(data, CallToolResult) else tool_result(data, False)

    async def _by_id(self, command: str, plan_id: str, shape: Any) -> CallToolResult:
        try:  # a full id only: no prefix guessing, and never something the CLI would read as a flag
            plans.check_id(plan_id, path="plan_id")
        except PapayuError as exc:
            return failed(exc)
        data = await self.cli_result([command, plan_id, "--json"], what=command)
        if isinstance(data, CallToolResult):
            return data
        return tool_result(shape(data), not data.get("ok", False))

    # --- the context rules, in process -------------------------------------------------------------
    async def read_tool(self, name: str, args: dict[str, Any]) -> CallToolResult:
        return await anyio.to_thread.run_sync(self._read_tool, name, {k: v for k, v in args.items() if v is not None})

    def _read_tool(self, name: str, args: dict[str, Any]) -> CallToolResult:
        # Agent mode's tools load on the first read, not for a server that only applies plans
        # (docs/DESIGN.md, "Start-up and cost").
        from papayu_git.agent import DEFAULT_MAX_TOOL_OUTPUT
        from papayu_git.agent_tools import Tools, parse_arguments
        from papayu_git.agent_workspace import Workspace
        from papayu_git.housekeeping import open_checkout
        from papayu_git.llm.tools import agent_tools
        from papayu_git.paths import configured_protected
        from papayu_git.transaction import ApplyOptions

        try:
            repo, root, pdir = open_checkout(str(self.root))
            if repo.head_is_unborn:
                raise PapayuError("ERR_NO_COMMITS", "the current branch has no commit yet")
            workspace = Workspace(repo, str(repo.head.target), configured_protected(str(root)))
            tools = Tools(workspace, repo, root, pdir, "", ApplyOptions(), DEFAULT_MAX_TOOL_OUTPUT, agent_tools())
            parsed = parse_arguments(name, json.dumps(args), tools.schemas[name])
            text, truncated = tools.limit(tools.handlers[name](parsed))
        except ValidationFailed as exc:
            return failed(*exc.errors)
        except PapayuError as exc:
            return failed(exc)
        return tool_result({"ok": True, "text": text, "truncated": truncated}, False)


def apply_summary(data: dict[str, Any]) -> dict[str, Any]:
    """The transaction's result (ApplyResult.to_dict) in the shape docs/FEATURES.md documents ("MCP server")."""
    check = data.get("check") or None
    return {
        "ok": bool(data.get("ok")),
        "plan_id": data.get("plan_id", ""),
        "state": data.get("state", ""),
        "branch": data.get("branch", ""),
        "commit": data.get("commit"),
        "target": data.get("target", ""),
        "landed_by": data.get("landed_by", ""),
        "branch_kept": data.get("branch_kept", False),
        "check": (
            {k: check.get(k) for k in ("command", "source", "passed", "tail", "exit_code", "duration_sec", "log")}
            if check
            else None
        ),
        "sandbox": check.get("sandbox") if check else None,
        "error": data.get("error"),
        "test_edits": data.get("test_edits") or [],
        "warnings": data.get("warnings") or [],
    }


def best_of_summary(data: dict[str, Any]) -> dict[str, Any]:
    """A best-of run's matrix (docs/FEATURES.md, "MCP server"): each candidate, its state and why it lost."""
    run = data.get("run") or {}
    keys = ("index", "model", "plan_id", "state", "code", "fixed", "broken", "files", "added", "deleted", "lost")
    return {
        "ok": bool(data.get("ok")),
        "run": run.get("id", ""),
        "state": run.get("state", ""),
        "winner": run.get("winner"),
        "candidates": [{k: row.get(k) for k in keys} for row in run.get("candidates") or []],
        "error": data.get("error"),
    }


def show_summary(data: dict[str, Any]) -> dict[str, Any]:
    plan = data.get("plan") or {}
    outcome = (plan.get("extra") or {}).get("apply") or {}
    return {
        "ok": True,
        "plan_id": plan.get("id", ""),
        "state": outcome.get("state", "not applied"),
        "plan": plan,
        "diff": data.get("diff", ""),
        "check": outcome.get("check"),
    }


async def _terminate(process: Any) -> None:
    if process.returncode is None:
        process.send_signal(signal.SIGTERM)  # the CLI's handler: kill the check, roll back
        with anyio.move_on_after(TERMINATE_GRACE_SEC):
            await process.wait()
        if process.returncode is None:
            process.kill()
            await process.wait()
    await process.aclose()


Plan = Annotated[
    dict[str, Any] | list[Any],
    Field(description="A model response (object, or a protocol v1 array of actions) or a stored plan record."),
]
Protocol = Annotated[
    Literal[1, 2] | None, Field(description="Protocol version of the response, 1 or 2 (default: detected).")
]
PlanId = Annotated[str, Field(description="A full plan id, YYYYMMDD-HHMMSS-xxxxxx (list_plans).")]


class Tools:
    """The MCP tools, one method each: its signature and docstring are the tool's input schema and
    description, which the client's model reads; each hands the call to PapayuTools."""

    def __init__(self, root: Path) -> None:
        self.papayu = PapayuTools(root)

    async def validate_plan(self, plan: Plan, protocol: Protocol = None) -> CallToolResult:
        """Validate a model response (or a stored plan record) without applying it: ok, or the errors."""
        return await self.papayu.validate_plan(plan, protocol)

    async def apply_plan(
        self,
        plan: Plan,
        ctx: Context[Any, Any],
        check: Annotated[
            str | None,
            Field(
                description="Check command instead of the configured or detected one; refused unless the "
                "operator set papayu.mcp.allowCheck."
            ),
        ] = None,
        no_check: Annotated[
            bool,
            Field(description="Land without running a check; refused unless the operator set papayu.mcp.allowNoCheck."),
        ] = False,
        review: Annotated[bool, Field(description="Stop after the commit and check; keep papayu/<id>.")] = False,
        keep_failed: Annotated[bool, Field(description="Keep papayu/<id> when the check fails.")] = False,
        onto: Annotated[str | None, Field(description="Land on this branch instead of the current one.")] = None,
        rebase: Annotated[bool, Field(description="If the branch moved, re-apply on its new tip.")] = False,
        allow_test_edits: Annotated[
            bool,
            Field(
                description="Land plans that modify or delete existing tests (else: review); refused unless "
                "the operator set papayu.mcp.allowTestEdits."
            ),
        ] = False,
        allow_deletions: Annotated[
            bool,
            Field(
                description="Allow the plan to delete files (else ERR_DELETE_NOT_CONFIRMED); refused unless "
                "the operator set papayu.mcp.allowDeletions."
            ),
        ] = False,
    ) -> CallToolResult:
        """Apply a plan (a model response or a plan record): commit it on papayu/<id>, run the check in a
        sandboxed worktree, land it on the branch if the check passes, else roll back. `review` stops
        after the check; `rebase` re-applies on a branch that moved meanwhile. The check is the
        configured or detected one. A plan deleting files is refused and one editing existing tests
        stops at review: a human decides those, unless the operator allowed the arguments that let
        you decide (check, no_check, allow_test_edits, allow_deletions). Progress every second."""
        return await self.papayu.apply_plan(
            plan, ctx, check, no_check, review, keep_failed, onto, rebase, allow_test_edits, allow_deletions
        )

    async def best_of(
        self,
        goal: Annotated[
            str, Field(description="What the plans should achieve, e.g. 'fix the failing test tests/x.py'.")
        ],
        ctx: Context[Any, Any],
        candidates: Annotated[int, Field(ge=1, le=16, description="How many plans to ask for.")] = 3,
        first_green: Annotated[bool, Field(description="Stop the others once one passes the gate.")] = False,
        budget_tokens: Annotated[int, Field(ge=0, description="Token bound for the run's model calls (0: none).")] = 0,
        timeout_sec: Annotated[float, Field(ge=0, description="Stop what still runs after this (0: none).")] = 0,
        review: Annotated[bool, Field(description="Rank and keep every candidate; land nothing.")] = False,
        check: Annotated[
            str | None, Field(description="Check command; refused unless the operator set papayu.mcp.allowCheck.")
        ] = None,
        allow_test_edits: Annotated[
            bool,
            Field(
                description="Candidates editing tests may win; refused unless the operator set papayu.mcp.allowTestEdits."
            ),
        ] = False,
    ) -> CallToolResult:
        """Ask the configured model(s) for several plans for GOAL on one tip, check them side by side in
        sandboxed checkouts, rank them (the gate first, then tests fixed, no flaky signal, the smaller change)
        and land the best green one, as land_plan would. Returns the score matrix: each candidate's state and
        why it lost. Progress every second."""
        bounds = {
            "first_green": first_green,
            "budget_tokens": budget_tokens,
            "timeout_sec": timeout_sec,
            "review": review,
        }
        return await self.papayu.best_of(goal, ctx, candidates, bounds, check, allow_test_edits)

    async def land_plan(self, plan_id: PlanId) -> CallToolResult:
        """Land a reviewed plan: fast-forward its branch to papayu/<id> (only the commit whose check passed).
        A plan that edits tests, deletes files or has no passed check is the operator's or a human's to land."""
        return await self.papayu.land_plan(plan_id)

    async def drop_plan(self, plan_id: PlanId) -> CallToolResult:
        """Delete the generated branch papayu/<id> (the stored plan is kept)."""
        return await self.papayu.drop_plan(plan_id)

    async def list_plans(self) -> CallToolResult:
        """Stored plans and papayu/* branches: id, state, target branch, summary."""
        return await self.papayu.list_plans()

    async def show_plan(self, plan_id: PlanId) -> CallToolResult:
        """A plan: its record, the diff of its commit and its check result."""
        return await self.papayu.show_plan(plan_id)

    async def read_file(self, path: str, start_line: int | None = None, end_line: int | None = None) -> CallToolResult:
        """Read a file at the tip of the current branch (protected paths refused, secrets masked)."""
        return await self.papayu.read_tool("read_file", {"path": path, "start_line": start_line, "end_line": end_line})

    async def list_files(self, root: str | None = None, glob: str | None = None) -> CallToolResult:
        """List files at the tip of the current branch (protected and .gitignore'd files left out)."""
        return await self.papayu.read_tool("list_files", {"root": root, "glob": glob})

    async def search_in_repo(self, query: str, glob: str | None = None) -> CallToolResult:
        """Search the tip of the current branch for a text (protected files left out, secrets masked)."""
        return await self.papayu.read_tool("search_in_repo", {"query": query, "glob": glob})


# Every tool, and whether it may change the repository.
TOOLS: tuple[tuple[Callable[..., Awaitable[CallToolResult]], ToolAnnotations], ...] = (
    (Tools.validate_plan, READ_ONLY),
    (Tools.apply_plan, DESTRUCTIVE),
    (Tools.best_of, DESTRUCTIVE),
    (Tools.land_plan, DESTRUCTIVE),
    (Tools.drop_plan, DESTRUCTIVE),
    (Tools.list_plans, READ_ONLY),
    (Tools.show_plan, READ_ONLY),
    (Tools.read_file, READ_ONLY),
    (Tools.list_files, READ_ONLY),
    (Tools.search_in_repo, READ_ONLY),
)


def build_server(root: Path) -> MCPServer[Any]:
    server: MCPServer[Any] = MCPServer(
        name="papayu",
        version=__version__,
        instructions=(
            "papayu applies a model's fix plan as a commit on papayu/<id>, runs the project's check in a "
            "sandboxed worktree, and lands it on the branch only when the check passes (else rolls back)."
        ),
        log_level="WARNING",
    )
    tools = Tools(root)
    for method, hints in TOOLS:
        server.add_tool(getattr(tools, method.__name__), annotations=hints)
    return server


def serve(repo: str | None) -> int:
    root = find_toplevel(repo)
    anyio.run(build_server(root).run_stdio_async)
    return 0
