"""`git papayu land ID`: fast-forward your branch with a kept `papayu/<id>` (docs/DESIGN.md, "Landing")."""

from __future__ import annotations

import click

from papayu_git import settings
from papayu_git.bestof import matrix, runs
from papayu_git.bestof.runs import candidate_key, names_a_run
from papayu_git.commands.drop import resolve_generated
from papayu_git.commands.when_green import WhenGreen, land_when_green
from papayu_git.error_handler import handle_errors
from papayu_git.errors import PapayuError
from papayu_git.housekeeping import open_checkout
from papayu_git.report import report
from papayu_git.transaction import land_branch


def run(
    plan_id: str,
    onto: str | None = None,
    as_json: bool = False,
    when_green: WhenGreen | None = None,
    force: bool = False,
) -> int:
    if names_a_run(plan_id) and when_green is None:  # a best-of run's candidate (docs/DESIGN.md, "Best of N")
        return land_run(plan_id, onto, force, as_json)
    if when_green is not None:
        return land_when_green(plan_id, onto, when_green, force, as_json)
    repo, _root, pdir = open_checkout()
    resolved = resolve_generated(repo, pdir, plan_id)
    key = candidate_key(pdir, resolved)  # a best-of candidate is kept on papayu/<run>/<i>
    result = land_branch(repo, pdir, resolved, onto, force=force, branch=key)
    report(result, as_json)
    return 0


def land_run(arg: str, onto: str | None, force: bool, as_json: bool) -> int:
    """`land RUN[:N]`: the run's winner, or its candidate N, as `land ID` lands a kept plan."""
    repo, _root, pdir = open_checkout()
    run_id, number = runs.resolve(pdir, arg)
    record = runs.current(repo, pdir, runs.load(pdir, run_id))
    number = number or record.get("winner")
    if not number:
        raise PapayuError(
            "ERR_RUN_NOT_FOUND",
            f"run {run_id} has no winner; name a candidate: {run_id}:N",
            hint=f"'git papayu show {run_id}' lists them.",
        )
    row = runs.candidate(record, int(number))
    result = land_branch(
        repo, pdir, str(row["plan_id"]), onto, force=force, branch=runs.branch_key(run_id, int(number))
    )
    row.update(state=matrix.LANDED, kept=False)
    record.update(state="landed", landed=result.to_dict())
    runs.save(pdir, record)
    report(result, as_json)
    return 0


@click.command("land")
@click.argument("plan_id", metavar="ID")
@click.option("--onto", metavar="BRANCH", help="Land on BRANCH (default: the branch the plan was applied to).")
@click.option(
    "--when-green",
    is_flag=True,
    help="Wait until the checks the target branch requires are green on the pushed papayu/ID commit "
    "(after 'git papayu pr ID'), then merge its pull request on the forge (papayu.forge.land=local: land locally).",
)
@click.option(
    "--timeout",
    type=float,
    metavar="SEC",
    help="--when-green: give up after SEC seconds (default PAPAYU_FORGE_CI_TIMEOUT_SEC, 3600); an outage of the forge meanwhile is waited out.",
)
@click.option(
    "--interval",
    type=float,
    metavar="SEC",
    help="--when-green: seconds between polls (default PAPAYU_FORGE_CI_INTERVAL_SEC, 30).",
)
@click.option("--remote", metavar="R", help="--when-green: the remote 'pr' pushed to (default: the recorded one).")
@click.option(
    "--forge",
    "forge_kind",
    type=click.Choice(["github", "gitlab", "gitea"]),
    help="--when-green: forge type (default: the recorded one, else guessed from the remote).",
)
@click.option(
    "--force",
    is_flag=True,
    help="Land even if papayu/ID is not the commit whose check passed: "
    "bypasses ERR_NOT_CHECKED (no check ran), ERR_CHECK_NOT_PASSED (the check failed or timed "
    "out) and ERR_BRANCH_CHANGED_SINCE_CHECK (amended since), with a warning.",
)
@click.option("--json", "as_json", is_flag=True, help="Machine-readable output.")
def command(
    plan_id: str,
    onto: str | None,
    when_green: bool,
    timeout: float | None,
    interval: float | None,
    remote: str | None,
    forge_kind: str | None,
    force: bool,
    as_json: bool,
) -> None:
    """Land a reviewed plan: fast-forward the target branch to papayu/ID.

    Only what was checked lands: papayu/ID must be the very commit whose
    recorded check passed. A branch changed since its check
    (ERR_BRANCH_CHANGED_SINCE_CHECK), a red one kept with --keep-failed
    (ERR_CHECK_NOT_PASSED) or one no check ran on (ERR_NOT_CHECKED) is refused
    unless --force. With --when-green the forge's green checks of exactly that
    commit count as its check; a locally red or changed branch still needs --force.

    Same rules as apply: a checked-out branch moves like `git merge --ff-only`
    (refused with ERR_DIRTY_WORKTREE if a touched file has uncommitted edits,
    ERR_OPERATION_IN_PROGRESS during a merge or rebase), otherwise a
    compare-and-swap; ERR_BRANCH_MOVED if the branch moved. Undo the landing
    on your checked-out branch with `git reset --keep ORIG_HEAD`.

    With --when-green the checks the target branch requires (its protection;
    papayu.forge.requiredChecks) are polled on the pushed commit first: red
    (ERR_CHECKS_RED) or still pending at the timeout (ERR_CHECKS_TIMEOUT) lands
    nothing, and so does a forge still down then (ERR_FORGE_UNREACHABLE). Green,
    the pull request is merged on the forge with its head pinned to that commit
    (fast-forward or rebase where allowed) and your branch follows the forge's
    result; the target branch is never pushed. papayu.forge.land=local lands
    locally instead and closes the pull request with a comment.
    """
    with handle_errors(as_json):
        wait = (
            WhenGreen(
                timeout if timeout is not None else float(settings.get_int("forge_ci_timeout_sec")),
                interval if interval is not None else float(settings.get_int("forge_ci_interval_sec")),
                remote,
                forge_kind,
            )
            if when_green
            else None
        )
        raise SystemExit(run(plan_id, onto, as_json, wait, force))
