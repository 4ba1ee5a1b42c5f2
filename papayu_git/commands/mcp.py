"""`git papayu mcp`: serve papayu's commands as MCP tools over stdio (docs/DESIGN.md, "MCP server").

Named after the command; every import here is absolute, so this module never stands in
for the `mcp` package (the server itself is papayu_git/mcp_server.py, imported on run only:
`papayu mcp --help` loads no SDK).
"""

from __future__ import annotations

import click

from papayu_git.error_handler import handle_errors


@click.command("mcp")
@click.option(
    "--repo",
    metavar="PATH",
    type=click.Path(file_okay=False),
    help="Serve the repository at PATH (default: the one papayu starts in).",
)
def command(repo: str | None) -> None:
    """Run a Model Context Protocol server on stdin/stdout for MCP clients (Claude Code,
    Codex CLI, Cursor, ...): validate_plan, apply_plan, land_plan, drop_plan, list_plans,
    show_plan, read_file, list_files, search_in_repo.

    \b
    Every CLI guarantee holds: sandboxed check, no landing without a passing check,
    secrets masked. The client (a model) does not approve its own plan: the check
    is the configured or detected one, and its check, no_check, allow_test_edits
    and allow_deletions arguments are refused unless you allow each
    (papayu.mcp.allowCheck, .allowNoCheck, .allowTestEdits, .allowDeletions);
    land_plan refuses a plan that needed one of them. Cancelling apply_plan kills
    the check and rolls back.
    """
    with handle_errors():
        from papayu_git.mcp_server import serve

        raise SystemExit(serve(repo))
