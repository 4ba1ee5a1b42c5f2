"""`git papayu undo [ID]`: take a landing back, only while nothing came after it."""

from __future__ import annotations

import re
from pathlib import Path

import click

from papayu_git import output, plans
from papayu_git.commands.drop import resolve_generated
from papayu_git.error_handler import handle_errors
from papayu_git.errors import PapayuError
from papayu_git.git import NO_HOOKS, run_git, scrubbed_env
from papayu_git.housekeeping import open_checkout
from papayu_git.land_drivers import no_drivers_env
from papayu_git.landing import branch_tip, checked_out_in, stash_around
from papayu_git.objects import commit_of
from papayu_git.outcomes import ApplyState
from papayu_git.plans import plan_name, plan_subject, update_outcome


def newest_landed(pdir: Path) -> str:
    """The plan a bare `undo` takes back: the newest one that landed and was not undone since."""
    landed = [
        p
        for p in plans.list_plans(pdir)
        if (p.extra.get("apply") or {}).get("state") == ApplyState.LANDED and not p.extra["apply"].get("undone_to")
    ]
    if not landed:
        raise PapayuError(
            "ERR_PLAN_NOT_LANDED",
            "no plan has landed (or each landing was undone): nothing to undo",
            hint="`git papayu list` shows each plan's state.",
        )
    return max(landed, key=lambda p: (str(p.extra["apply"].get("at", "")), p.created_at, p.id)).id


def run(plan_id: str | None, as_json: bool = False) -> int:
    repo, _root, pdir = open_checkout()
    resolved = newest_landed(pdir) if plan_id is None else resolve_generated(repo, pdir, plan_id)
    outcome = plans.load(pdir, resolved).extra.get("apply") or {}
    commit, target = outcome.get("commit"), outcome.get("target")
    if outcome.get("state") != ApplyState.LANDED or not commit or not target:
        raise PapayuError(
            "ERR_PLAN_NOT_LANDED",
            f"plan {resolved} is {outcome.get('state') or 'not applied'}, not landed: nothing to undo",
            hint=f"See `git papayu show {resolved}`.",
        )
    ref = f"refs/heads/{target}"
    tip = branch_tip(repo, ref)
    if outcome.get("undone_to") and tip == outcome["undone_to"]:
        raise PapayuError("ERR_PLAN_NOT_LANDED", f"plan {resolved} was undone already ({target} is at {str(tip)[:12]})")
    if tip != commit:  # a later commit, a reset or a revert: undoing now would lose or repeat work
        raise PapayuError(
            "ERR_BRANCH_MOVED",
            f"{target} is at {str(tip)[:12]}, not at the landed {commit[:12]}: something came after the landing",
            path=target,
            hint=f"Revert it instead: git revert {commit[:12]}",
        )
    parent = str(commit_of(repo, commit).parent_ids[0])
    worktree = checked_out_in(repo, ref)
    if worktree is not None:  # like the undo papayu prints: your uncommitted changes are kept
        _reset_keep(worktree, parent, resolved)
    else:
        run_git([*NO_HOOKS, "update-ref", "-m", f"papayu undo {resolved}", ref, parent, commit], cwd=repo.path)
    update_outcome(pdir, resolved, undone_to=parent)
    if as_json:
        output.emit_json({"ok": True, "plan_id": resolved, "branch": target, "from": commit, "to": parent})
    else:
        name = plan_name(resolved, str(outcome.get("branch") or ""))
        output.result(
            f"undid {plan_subject(resolved, str(outcome.get('branch') or ''))}: {target} back at {parent[:12]} (was {commit[:12]})"
        )
        # Its branch went when it landed: apply commits it again on this tip and checks it again.
        output.result(f"  land it again: git papayu apply {name}")
    return 0


def _reset_keep(worktree: Path, parent: str, plan_id: str) -> None:
    """`git reset --keep PARENT` where the branch is checked out; a refusal said as the user would
    see it from that command (not papayu's own -c flags), with the way past it."""
    # The plan's files (and its .gitattributes) are read and rewritten: no filter driver runs.
    env = no_drivers_env(worktree, scrubbed_env())
    proc = run_git([*NO_HOOKS, "reset", "--keep", "-q", parent], cwd=worktree, check=False, env=env)
    if proc.returncode == 0:
        return
    said = proc.stderr.strip()
    dirty = sorted(set(_NOT_UPTODATE.findall(said)))
    if dirty:
        raise PapayuError(
            "ERR_DIRTY_WORKTREE",
            f"uncommitted changes in files the landing changed: {', '.join(dirty)}; nothing was undone",
            path=str(worktree),
            hint="commit them, or stash them around the undo: " + stash_around(dirty, f"git papayu undo {plan_id}"),
        )
    raise PapayuError(
        "ERR_GIT_COMMAND", f"`git reset --keep {parent[:12]}` in {worktree} exited {proc.returncode}: {said[-1500:]}"
    )


# `git reset --keep` names each file it would have to overwrite: "error: Entry 'a.py' not uptodate. Cannot merge."
_NOT_UPTODATE = re.compile(r"Entry '(.+?)' (?:not uptodate|would be overwritten)")


@click.command("undo")
@click.argument("plan_id", metavar="[ID]", required=False)
@click.option("--json", "as_json", is_flag=True, help="Machine-readable output.")
def command(plan_id: str | None, as_json: bool) -> None:
    """Take back the landing of plan ID (default: the newest plan that landed): its branch goes back
    to the commit before it (`git reset --keep` where it is checked out: uncommitted changes are
    kept). Refused (ERR_BRANCH_MOVED) when anything came after the landing; then `git revert` it."""
    with handle_errors(as_json):
        raise SystemExit(run(plan_id, as_json))
