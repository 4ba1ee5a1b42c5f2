"""`git papayu drop ID`: delete a kept `papayu/<id>` branch."""

from __future__ import annotations

from pathlib import Path
from typing import TYPE_CHECKING

import click

from papayu_git import output, plans
from papayu_git.bestof import runs
from papayu_git.bestof.runs import candidate_key, names_a_run
from papayu_git.error_handler import handle_errors
from papayu_git.errors import PapayuError
from papayu_git.housekeeping import open_checkout
from papayu_git.objects import BRANCH_PREFIX, branch_name, delete_branch, generated_branches
from papayu_git.outcomes import ApplyState
from papayu_git.plans import update_outcome

if TYPE_CHECKING:
    import pygit2


def resolve_generated(repo: pygit2.Repository, pdir: Path, id_or_prefix: str) -> str:
    """A plan id (or unique prefix) of a stored plan or of a `papayu/<id>` branch; a best-of
    candidate's `RUN:N` (its one id, objects.plan_name) names its plan too."""
    name = id_or_prefix.removeprefix(BRANCH_PREFIX)
    if names_a_run(name):
        run_id, number = runs.resolve(pdir, name)
        if number is None:
            raise PapayuError(
                "ERR_PLAN_NOT_FOUND",
                f"{run_id} is a best-of run, not one plan",
                hint=f"Name one of its candidates: {run_id}:N ('git papayu show {run_id}' lists them).",
            )
        return str(runs.candidate(runs.load(pdir, run_id), number)["plan_id"])
    try:
        return plans.resolve_id(pdir, name)
    except PapayuError:
        matches = sorted(i for i in generated_branches(repo) if i.startswith(name) and plans.is_id(i))
        if len(matches) == 1 and plans.is_id_prefix(name):
            return matches[0]
        raise


def run(plan_id: str, as_json: bool = False) -> int:
    if names_a_run(plan_id):  # a best-of run or one of its candidates (docs/DESIGN.md, "Best of N")
        return drop_run(plan_id, as_json)
    repo, _root, pdir = open_checkout()
    resolved = resolve_generated(repo, pdir, plan_id)
    key = candidate_key(pdir, resolved) or resolved  # a best-of candidate is kept on papayu/<run>/<i>
    deleted = delete_branch(repo, key)
    if deleted:
        update_outcome(pdir, resolved, state=ApplyState.DROPPED)
    if as_json:
        output.emit_json({"ok": True, "plan_id": resolved, "branch_deleted": deleted})
    else:
        output.result(f"dropped {branch_name(key)}" if deleted else f"plan {resolved} has no branch; nothing to drop")
    return 0


def drop_run(arg: str, as_json: bool) -> int:
    """`drop RUN`: every kept candidate of the run; `drop RUN:N`: that one."""
    repo, _root, pdir = open_checkout()
    run_id, number = runs.resolve(pdir, arg)
    dropped = runs.drop(repo, pdir, run_id, None if number is None else [number])
    if as_json:
        output.emit_json({"ok": True, "run": run_id, "dropped": dropped})
    elif dropped:
        output.result(f"dropped {', '.join(f'papayu/{runs.branch_key(run_id, n)}' for n in dropped)}")
    else:
        output.result(f"run {run_id}: no candidate branch to drop")
    return 0


@click.command("drop")
@click.argument("plan_id", metavar="ID")
@click.option("--json", "as_json", is_flag=True, help="Machine-readable output.")
def command(plan_id: str, as_json: bool) -> None:
    """Delete the generated branch papayu/ID (the stored plan is kept). Your branch is not touched."""
    with handle_errors(as_json):
        raise SystemExit(run(plan_id, as_json))
