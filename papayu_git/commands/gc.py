"""`git papayu gc`: remove stale worktrees, locks and old generated branches (docs/DESIGN.md,
"The transaction and its guarantees")."""

from __future__ import annotations

import click

from papayu_git import output
from papayu_git.error_handler import handle_errors
from papayu_git.housekeeping import gc, open_checkout


def run(days: float = 14.0, as_json: bool = False) -> int:
    repo, root, pdir = open_checkout()
    report = gc(repo, root, pdir, days)
    if as_json:
        output.emit_json({"ok": True, **report._asdict()})
        return 0
    for label, items in (
        ("stale lock", report.locks),
        ("worktree", report.worktrees),
        ("branch", report.branches),
        ("check log", report.logs),
    ):
        for item in items:
            output.result(f"removed {label}: {item}")
    if not any(report):
        output.result("nothing to clean")
    return 0


@click.command("gc")
@click.option(
    "--days",
    type=float,
    default=14.0,
    show_default=True,
    help="Delete papayu/* branches and check logs older than this many days (0: all).",
)
@click.option("--json", "as_json", is_flag=True, help="Machine-readable output.")
def command(days: float, as_json: bool) -> None:
    """Clean up: locks of dead papayu processes (and what they left), every idle pooled
    worktree under .git/papayu/worktrees, papayu/* branches older than --days."""
    with handle_errors(as_json):
        raise SystemExit(run(days, as_json))
