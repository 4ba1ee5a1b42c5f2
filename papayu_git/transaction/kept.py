"""`land ID`: a kept `papayu/<id>` lands as the transaction would have landed it, only the commit
whose recorded check passed (checked.py) unless forced (docs/DESIGN.md, "Landing")."""

from __future__ import annotations

from pathlib import Path
from typing import TYPE_CHECKING

from papayu_git import output, plans
from papayu_git.errors import PapayuError
from papayu_git.landing import Target, land, resolve_target
from papayu_git.objects import (
    branch_name,
    commit_of,
    delete_branch,
    generated_branches,
)
from papayu_git.outcomes import ApplyState
from papayu_git.plans import StoredPlan, plan_name
from papayu_git.stages import Stopwatch
from papayu_git.transaction.values import ApplyResult

if TYPE_CHECKING:
    import pygit2


def land_branch(
    repo: pygit2.Repository,
    pdir: Path,
    plan_id: str,
    onto: str | None,
    *,
    force: bool = False,
    forge_green: str | None = None,
    branch: str = "",
    landing: str | None = None,
) -> ApplyResult:
    """`land ID`: fast-forward the target with a kept `papayu/<id>` (its parent must still be the tip).

    Only the commit whose recorded check passed lands (checked.py) unless ``force``;
    ``forge_green``: the commit the forge's checks found green (land --when-green), which
    counts as checked when it is exactly the commit being landed; ``branch``: the kept branch's
    name under papayu/ when it is not the plan id (a best-of candidate's `<run>/<i>`); ``landing``:
    what lands in the checked commit's place, the forge's merge of it (its tree, on the same tip)."""
    # `land` only: apply lands the commit it checked itself (docs/DESIGN.md, "Start-up and cost").
    from papayu_git import checked

    key = branch or plan_id
    plan: StoredPlan | None
    try:
        plan = plans.load(pdir, plan_id)
        recorded = (plan.extra.get("apply") or {}).get("target") or plan.branch
    except PapayuError:
        plan, recorded = None, ""
    commit = generated_branches(repo).get(key)
    if commit is None:
        raise checked.nothing_to_land(plan_id, plan)
    found = checked.verdict(plan_id, plan, commit, unchecked_ok=forge_green == commit)
    target = resolve_target(repo, onto or recorded or None)
    target = Target(target.branch, target.ref, str(commit_of(repo, commit).parents[0].id))
    warning = checked.enforce(found, force=force, doing="landing")
    watch = Stopwatch()
    try:
        with watch.stage("land"):
            how = land(repo, pdir, target, landing or commit, plan_id)
    except PapayuError as exc:
        if exc.code == "ERR_BRANCH_MOVED":  # a kept commit cannot be rebased: the plan is applied anew
            name = plan_name(plan_id, branch_name(key))
            exc.hint = f"'git papayu apply {name}' applies the plan again on the new tip, checked again."
        raise
    delete_branch(repo, key)
    plans.update_outcome(
        pdir,
        plan_id,
        state=ApplyState.LANDED,
        commit=landing or commit,
        **({"checked_as": commit} if landing and landing != commit else {}),
        target=target.branch,
        **checked.outcome_fields(found, forced=warning is not None),
        **({"forge_checked": True} if forge_green == commit else {}),
    )
    output.event(
        "APPLY_SUCCESS",
        plan_id=plan_id,
        branch=target.branch,
        commit=landing or commit,
        landed_by=how,
        **({"forced": True} if warning else {}),
    )
    return ApplyResult(
        plan_id,
        ApplyState.LANDED,
        branch_name(key),
        landing or commit,
        target.branch,
        found.check if found.checked_commit == commit else None,  # its own check: said before "landed"
        watch.timings,
        landed_by=how,
        warnings=(warning,) if warning else (),
    )
