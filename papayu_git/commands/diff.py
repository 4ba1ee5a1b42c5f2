"""`git papayu diff ID [--stat] [--json]`: only the diff of a plan's commit, coloured on a terminal
and through the pager, as `git diff` would show it (docs/DESIGN.md, "Reading a plan")."""

from __future__ import annotations

import sys
from pathlib import Path
from typing import Any

import click

from papayu_git import output, plans
from papayu_git.commands.drop import resolve_generated
from papayu_git.diffs import numstat_files, plan_commit, plan_diff, render_diff
from papayu_git.error_handler import handle_errors
from papayu_git.errors import PapayuError
from papayu_git.housekeeping import open_checkout
from papayu_git.objects import commit_of


def recorded_commit(pdir: Path, plan_id: str) -> str | None:
    """The commit the plan's outcome records (a landed plan's, once its branch is gone)."""
    try:
        outcome = plans.load(pdir, plan_id).extra.get("apply")
    except PapayuError:  # a papayu/<id> branch whose record is gone: the branch alone
        return None
    commit = outcome.get("commit") if isinstance(outcome, dict) else None
    return commit if isinstance(commit, str) else None


def run(plan_id: str, stat: bool = False, as_json: bool = False) -> int:
    repo, _root, pdir = open_checkout()
    resolved = resolve_generated(repo, pdir, plan_id)
    recorded = recorded_commit(pdir, resolved)
    commit = plan_commit(repo, resolved, recorded)
    text = plan_diff(repo, resolved, recorded, ("--stat",) if stat else ("--patch",))
    if as_json:
        data: dict[str, Any] = {
            "ok": True,
            "plan_id": resolved,
            "commit": commit,
            "parent": str(commit_of(repo, commit).parents[0].id) if commit else None,
            "files": numstat_files(plan_diff(repo, resolved, recorded, ("--numstat", "-z"))),
        }
        if not stat:
            data["diff"] = text
        output.emit_json(data, verbatim=("diff",))
        return 0
    if commit is None:
        output.info(f"plan {resolved} has no commit yet: apply it to see its diff")
        return 0
    with output.paged():
        output.result(render_diff(text.rstrip("\n"), output.use_colour(sys.stdout)))
    return 0


@click.command("diff")
@click.argument("plan_id", metavar="ID")
@click.option("--stat", is_flag=True, help="Only the diffstat: the files and how many lines changed.")
@click.option("--json", "as_json", is_flag=True, help="Machine-readable output (commit, parent, files, plain diff).")
def command(plan_id: str, stat: bool, as_json: bool) -> None:
    """Print only the diff of a plan's commit (papayu/ID, or the landed commit) against its
    parent: coloured on a terminal and through your pager (GIT_PAGER, core.pager, PAGER)."""
    with handle_errors(as_json):
        raise SystemExit(run(plan_id, stat, as_json))
