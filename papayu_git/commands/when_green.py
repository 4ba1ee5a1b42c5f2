"""`git papayu land ID --when-green`: wait for the checks the target branch requires, green on
exactly the pushed commit, then land it (docs/DESIGN.md, "Hooks and PRs").

With a pull request (`pr` opened one) and `papayu.forge.land=merge`, the default, the forge
merges it, head pinned to the checked commit, and the local branch then fast-forwards to the
forge's result: the target branch is never pushed, so a protected one stays the forge's to
move. With `papayu.forge.land=local`, or without a pull request, the commit lands by a local
fast-forward and the pull request is closed with a comment naming it. A merge done on the
forge whose local landing was then refused (uncommitted edits) is recorded: running the
command again takes the forge's result without merging twice.
"""

from __future__ import annotations

import time
from dataclasses import dataclass
from enum import StrEnum
from typing import Any

from papayu_git import output, settings
from papayu_git.checked import verdict
from papayu_git.commands.pr import Generated, load_generated, pick_remote, record_pr
from papayu_git.errors import PapayuError
from papayu_git.forge import (
    Api,
    Forge,
    close_with_comment,
    connect,
    delete_branch,
    merge_pull,
    read_pull,
    resolve_forge,
    wait_mergeable,
    wait_until_green,
)
from papayu_git.forge.remote_refs import fetch_branch, note_remote_tip, remote_heads, remote_url
from papayu_git.git import run_git, scrubbed_env
from papayu_git.landing import Target, checked_out_in, resolve_target
from papayu_git.objects import generated_branches
from papayu_git.report import report
from papayu_git.transaction import ApplyResult, land_branch

MERGEABLE_WAIT_SEC = 60.0  # how long the forge may take to compute a fresh pull request's mergeability


class LandMode(StrEnum):
    MERGE = "merge"
    LOCAL = "local"


@dataclass(frozen=True)
class WhenGreen:
    """`--when-green`'s options (the deadline and poll interval, the remote and forge type)."""

    timeout: float
    interval: float
    remote: str | None = None
    forge: str | None = None


@dataclass(frozen=True)
class Plan:
    """What the wait and the landing are about, resolved before anything waits."""

    gen: Generated
    remote: str
    forge: Forge
    base: str  # the pull request's target on the forge, the local branch that lands
    number: int | None  # the pull request, if `pr` opened one
    mode: LandMode
    parent: str  # the tip the checked commit was built on

    @property
    def merging(self) -> bool:
        return self.mode is LandMode.MERGE and self.number is not None


def land_mode(cwd: str) -> LandMode:
    value = settings.get("forge_land", cwd).strip().lower() or LandMode.MERGE.value
    if value not in {m.value for m in LandMode}:
        raise PapayuError(
            "ERR_USAGE", f"papayu.forge.land is {value!r}", hint="Set papayu.forge.land to merge or local."
        )
    return LandMode(value)


def required_setting(cwd: str) -> tuple[str, ...]:
    return tuple(n.strip() for n in settings.get("forge_required_checks", cwd).split(",") if n.strip())


def resolve(plan_id: str, onto: str | None, when: WhenGreen, force: bool) -> Plan:
    """The kept commit (refused if red or changed, unless --force), its remote, forge, target
    and pull request; the merge's preconditions checked before any wait."""
    gen = load_generated(plan_id, landing=True)
    problem = verdict(gen.plan_id, gen.plan, gen.sha, unchecked_ok=True).problem
    if problem is not None and not force:
        raise problem
    remote = pick_remote(gen, when.remote)
    cwd = str(gen.root)
    forge = resolve_forge(remote_url(gen.root, remote), when.forge or gen.record.get("forge"), cwd=cwd)
    record = gen.record
    number = record.get("number") if record.get("head") in (None, gen.branch) else None
    base = str(record.get("base") or onto or gen.target() or "main")
    parent = run_git(["rev-parse", f"{gen.sha}^"], cwd=gen.root).stdout.strip()
    found = Plan(gen, remote, forge, base, int(number) if number else None, land_mode(cwd), parent)
    if found.merging:
        if onto and onto.removeprefix("refs/heads/") != base:
            raise PapayuError(
                "ERR_USAGE",
                f"pull request #{number} merges into {base}, not {onto}",
                hint="Drop --onto, or land locally with papayu.forge.land=local.",
            )
        if not forge.token:
            raise PapayuError(
                "ERR_FORGE_AUTH",
                f"merging pull request #{number} on the forge needs a token",
                hint=f"Set {forge.token_names}, or land locally: git -c papayu.forge.land=local papayu land "
                f"{gen.plan_id} --when-green.",
            )
    return found


def land_when_green(plan_id: str, onto: str | None, when: WhenGreen, force: bool, as_json: bool) -> int:
    plan = resolve(plan_id, onto, when, force)
    deadline = time.monotonic() + when.timeout
    merged = plan.gen.record.get("merged") if plan.merging else None
    if plan.merging and not merged:
        merged = _merged_on_forge(plan)
    if not merged:
        _ensure_pushed(plan)
        if plan.merging:
            _ensure_bases(plan)
        wait_until_green(
            plan.forge,
            plan.gen.sha,
            base=plan.base,
            pull=plan.number,
            timeout=when.timeout,
            interval=when.interval,
            configured=required_setting(str(plan.gen.root)),
        )
        ensure_still_at(plan.gen)
    if plan.merging:
        result, said = _merge_and_follow(plan, merged, deadline, force=force)
    else:
        result, said = _land_locally(plan, onto, force)
    if as_json:
        output.emit_json({**result.to_dict(), "forge": said})
    else:
        report(result, False)
        for line in said.get("lines", []):
            output.result(line)
    return 0


# --- before the wait ------------------------------------------------------------------------


def _merged_on_forge(plan: Plan) -> dict[str, Any] | None:
    """A pull request merged already at the checked commit (by hand, or by a run whose local
    landing was refused) is followed, not merged again; a closed one is refused."""
    assert plan.number is not None
    with connect(plan.forge) as api:
        pull = read_pull(api, plan.number)
    if pull.state == "merged" and pull.head_sha in ("", plan.gen.sha):
        return {"method": "merged on the forge", "number": plan.number, "commit": pull.merge_sha}
    if pull.state != "open":
        raise PapayuError(
            "ERR_FORGE_MERGE_REFUSED",
            f"pull request #{plan.number} is {pull.state} on the forge",
            hint=f"Reopen it, or land locally: git -c papayu.forge.land=local papayu land {plan.gen.plan_id} "
            "--when-green.",
        )
    return None


def _ensure_pushed(plan: Plan) -> None:
    gen = plan.gen
    remote_sha = remote_heads(gen.root, plan.remote, [gen.branch]).get(gen.branch)
    if remote_sha != gen.sha:
        where = f"is at {remote_sha[:12]}" if remote_sha else "does not exist"
        raise PapayuError(
            "ERR_PR_NOT_PUSHED",
            f"{gen.branch} on {plan.remote} {where}; the local commit is {gen.sha[:12]}",
            path=gen.branch,
            hint=f"Run 'git papayu pr {gen.plan_id}' to push it, then wait for CI.",
        )


def _ensure_bases(plan: Plan) -> Target:
    """The merge keeps the checked tree only on the tip it was built on, on the forge and here;
    and the local fast-forward that follows must be able to go through."""
    gen = plan.gen
    forge_tip = remote_heads(gen.root, plan.remote, [plan.base]).get(plan.base)
    if forge_tip != plan.parent:
        raise PapayuError(
            "ERR_BRANCH_MOVED",
            f"{plan.base} on {plan.remote} is at {(forge_tip or 'nothing')[:12]}, but {gen.branch} was built on "
            f"{plan.parent[:12]}: merging it would land a tree no check ran on",
            path=f"{plan.remote}/{plan.base}",
            hint=f"Nothing landed. Take the new tip (git pull --ff-only) and re-plan: git papayu retry {gen.plan_id}.",
        )
    target = resolve_target(gen.repo, plan.base)
    if target.tip != plan.parent:
        raise PapayuError(
            "ERR_BRANCH_MOVED",
            f"your {plan.base} is at {target.tip[:12]}, but {gen.branch} was built on {plan.parent[:12]}: "
            f"after the forge's merge it could not follow",
            path=target.ref,
            hint=f"Nothing landed. Put {plan.base} back on {plan.parent[:12]}, or land locally with "
            "papayu.forge.land=local.",
        )
    _ensure_clean(plan, target)
    return target


def _ensure_clean(plan: Plan, target: Target) -> None:
    """Uncommitted edits (or ignored files) where the plan writes would stop the local landing
    after the forge merged: refuse first, as the landing itself would (ERR_DIRTY_WORKTREE)."""
    workdir = checked_out_in(plan.gen.repo, target.ref)
    if workdir is None:
        return
    paths = run_git(
        ["diff-tree", "-r", "--no-renames", "--name-only", "-z", plan.parent, plan.gen.sha], cwd=plan.gen.root
    ).stdout.split("\0")
    paths = [p for p in paths if p]
    env = scrubbed_env({"GIT_LITERAL_PATHSPECS": "1"})
    status = run_git(
        ["status", "--porcelain", "-z", "--ignored=matching", "--untracked-files=all", "--", *paths],
        cwd=workdir,
        env=env,
    ).stdout
    dirty = sorted({entry[3:] for entry in status.split("\0") if len(entry) > 3})
    if dirty:
        raise PapayuError(
            "ERR_DIRTY_WORKTREE",
            f"uncommitted changes in files the plan touches: {', '.join(dirty)}; nothing was merged on the forge",
            path=str(workdir),
        )


def ensure_still_at(gen: Generated) -> None:
    """The checks were about ``gen.sha``: land nothing if papayu/<id> moved meanwhile."""
    now = generated_branches(gen.repo).get(gen.plan_id)
    if now != gen.sha:
        raise PapayuError(
            "ERR_BRANCH_MOVED",
            f"{gen.branch} moved from {gen.sha[:12]} while the checks ran",
            path=gen.branch,
            hint="Push it again with 'git papayu pr ID', then land --when-green.",
        )


# --- the landing ------------------------------------------------------------------------------


def _merge_and_follow(
    plan: Plan, merged: dict[str, Any] | None, deadline: float, *, force: bool
) -> tuple[ApplyResult, dict[str, Any]]:
    gen = plan.gen
    assert plan.number is not None
    if not merged:
        _ensure_bases(plan)  # again: the wait may have lasted an hour
        with connect(plan.forge) as api:
            wait_mergeable(api, plan.number, until=min(deadline, time.monotonic() + MERGEABLE_WAIT_SEC))
            done = merge_pull(api, plan.number, gen.sha)
            sha = done.sha or _merge_sha(api, plan.number)
        merged = {"method": done.method, "number": plan.number, "commit": sha}
        record_pr(gen, {"merged": merged})
    try:
        result = _follow(plan, merged.get("commit"), force=force)
    except PapayuError as err:
        raise PapayuError(
            err.code,
            f"pull request #{plan.number} is merged on the forge, but your {plan.base} did not follow: {err.reason}",
            path=err.path,
            hint=f"{err.hint} Then 'git papayu land {gen.plan_id} --when-green' again takes the forge's result "
            "(it does not merge twice).",
        ) from None
    deleted = _delete_remote_branch(plan)
    record_pr(gen, {"merged": {**merged, "commit": result.commit}, "state": "merged"})
    lines = [
        f"merged pull request #{plan.number} on the forge ({merged['method']}); {plan.base} there and here is "
        f"{(result.commit or '')[:12]}",
        f"  the merge is the forge's: undo it there (a revert), not with 'git papayu undo {gen.plan_id}' alone",
    ]
    if deleted:
        lines.append(f"deleted {gen.branch} on {plan.remote}")
    return result, {"action": "merged", "number": plan.number, "method": merged["method"], "lines": lines}


def _merge_sha(api: Api, number: int) -> str | None:
    """The forge's merge commit when its merge answer did not say (Gitea answers with nothing)."""
    try:
        return read_pull(api, number).merge_sha
    except PapayuError:
        return None


def _follow(plan: Plan, merge_sha: str | None, *, force: bool) -> ApplyResult:
    """Bring the local target to the forge's result: its branch fetched into a scratch ref, the
    merge commit the forge named (the branch's tip if it named none, e.g. a GitLab fast-forward;
    later merges on the forge are not ours to take), checked to be the checked tree on the tip
    it was built on, then landed with the landing's own rules."""
    gen = plan.gen
    scratch = f"refs/papayu/forge/{gen.plan_id}"
    try:
        tip = fetch_branch(gen.root, plan.remote, plan.base, scratch)
        result = tip
        if merge_sha and merge_sha != tip:
            known = run_git(["merge-base", "--is-ancestor", merge_sha, tip], cwd=gen.root, check=False)
            result = merge_sha if known.returncode == 0 else tip
        _ensure_same_tree(plan, result)
        landed = land_branch(
            gen.repo, gen.pdir, gen.plan_id, plan.base, force=force, forge_green=gen.sha, landing=result
        )
        note_remote_tip(gen.root, plan.remote, plan.base, tip)
        return landed
    finally:
        run_git(["update-ref", "-d", scratch], cwd=gen.root, check=False)


def _ensure_same_tree(plan: Plan, result: str) -> None:
    gen = plan.gen
    trees = run_git(["rev-parse", f"{result}^{{tree}}", f"{gen.sha}^{{tree}}"], cwd=gen.root).stdout.split()
    descends = run_git(["merge-base", "--is-ancestor", plan.parent, result], cwd=gen.root, check=False)
    if trees[0] != trees[1] or descends.returncode != 0:
        raise PapayuError(
            "ERR_FORGE_MERGE_DIVERGED",
            f"pull request #{plan.number} is merged on the forge, but {plan.base} there is {result[:12]}, which is "
            f"not the checked tree of {gen.sha[:12]} on {plan.parent[:12]}; your {plan.base} was not moved",
            path=f"{plan.remote}/{plan.base}",
        )


def _delete_remote_branch(plan: Plan) -> bool:
    try:
        with connect(plan.forge) as api:
            delete_branch(api, plan.gen.branch)
    except PapayuError as err:
        output.warn(f"the merge stands, but {plan.gen.branch} stays on {plan.remote}: {err.reason}")
        return False
    return True


def _land_locally(plan: Plan, onto: str | None, force: bool) -> tuple[ApplyResult, dict[str, Any]]:
    gen = plan.gen
    result = land_branch(
        gen.repo, gen.pdir, gen.plan_id, onto or plan.base, force=force, forge_green=gen.sha, branch=""
    )
    said: dict[str, Any] = {"action": "local", "number": plan.number, "lines": []}
    if plan.number is None:
        return result, said
    comment = (
        f"Landed locally by papayu as {result.commit} on {result.target} (papayu.forge.land=local): "
        f"closing this pull request. The checks of {gen.sha} were green."
    )
    try:
        with connect(plan.forge) as api:
            close_with_comment(api, plan.number, comment)
    except PapayuError as err:
        output.warn(f"landed locally, but pull request #{plan.number} stays open: {err.reason}")
        return result, said
    record_pr(gen, {"state": "closed", "landed_locally": result.commit})
    said["lines"] = [f"closed pull request #{plan.number} with a comment naming {(result.commit or '')[:12]}"]
    said["closed"] = True
    return result, said
