"""`git papayu land ID`: fast-forward your branch with a kept `papayu/<id>` (SPEC §1, §4.5)."""

from __future__ import annotations

import click

from papayu_git.error_handler import handle_errors


def run(plan_id: str, onto: str | None = None, as_json: bool = False) -> int:
    from papayu_git.commands.apply import report
    from papayu_git.commands.drop import resolve_generated
    from papayu_git.housekeeping import open_checkout
    from papayu_git.transaction import land_branch

    repo, _root, pdir = open_checkout()
    result = land_branch(repo, pdir, resolve_generated(repo, pdir, plan_id), onto)
    report(result, as_json)
    return 0


@click.command("land")
@click.argument("plan_id", metavar="ID")
@click.option("--onto", metavar="BRANCH", help="Land on BRANCH (default: the branch the plan was applied to).")
@click.option("--json", "as_json", is_flag=True, help="Machine-readable output.")
def command(plan_id: str, onto: str | None, as_json: bool) -> None:
    """Land a reviewed plan: fast-forward the target branch to papayu/ID.

    Same rules as apply: a checked-out branch moves like `git merge --ff-only`
    (refused with ERR_DIRTY_WORKTREE if a touched file has uncommitted edits),
    otherwise a compare-and-swap; ERR_BRANCH_MOVED if the branch moved.
    """
    with handle_errors(as_json):
        raise SystemExit(run(plan_id, onto, as_json))
