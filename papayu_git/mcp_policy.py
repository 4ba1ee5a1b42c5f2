"""What an MCP client may ask for: the operator decides, not the client (docs/DESIGN.md, "MCP server").

The client is a model. What the CLI leaves to the human at the terminal (which check runs, no check,
edits of existing tests, deletions) would let it approve its own plan: choose `true` as the check,
or have the test it broke rewritten. So each of these arguments is refused unless the operator
allowed it in config (settings `mcp_allow_*`, off by default), and land_plan refuses a kept plan
that needed one of them: a human lands it with the CLI.
"""

from __future__ import annotations

from pathlib import Path

from papayu_git import plans, settings
from papayu_git.bestof.runs import candidate_key
from papayu_git.checked import VerdictState, verdict
from papayu_git.errors import PapayuError
from papayu_git.git import papayu_dir
from papayu_git.objects import GitTree, TreeChanges, changed_paths, commit_of, generated_branches
from papayu_git.repository import open_repo
from papayu_git.testfiles import configured_test_patterns, edited_tests

# Verdicts that wait for a human (transaction/held.py): the MCP client is a model, not that human.
HELD_FOR_A_HUMAN = frozenset({"ERR_JUDGE_EDITS_HELD", "ERR_TESTS_REMOVED_HELD", "ERR_RUNNER_REACH_HELD"})

# apply_plan's argument -> the setting that lets a client pass it.
ARGUMENT_SETTINGS = {
    "check": "mcp_allow_check",
    "no_check": "mcp_allow_no_check",
    "allow_test_edits": "mcp_allow_test_edits",
    "allow_deletions": "mcp_allow_deletions",
}


def allowed(setting: str, root: Path) -> bool:
    return settings.get_bool(setting, str(root))


def refused_arguments(root: Path, asked: dict[str, bool]) -> list[PapayuError]:
    """ERR_MCP_NOT_ALLOWED for every argument of ``asked`` (name -> given) the operator did not allow."""
    settings.forget_cached_config()  # the server runs long: a permission taken back counts at once
    return [
        not_allowed(f"`{name}` from the client", ARGUMENT_SETTINGS[name], path=name)
        for name, given in asked.items()
        if given and not allowed(ARGUMENT_SETTINGS[name], root)
    ]


def not_allowed(what: str, setting: str, *, path: str, plan_id: str = "") -> PapayuError:
    spec = settings.by_name(setting)
    human = f"a human reviews it and lands it with the CLI ('git papayu show {plan_id}', 'git papayu land {plan_id}')"
    return PapayuError(
        "ERR_MCP_NOT_ALLOWED",
        f"{what} needs the operator's setting {spec.git_key} ({spec.env}), which is off",
        path=path,
        hint=(
            (human if plan_id else "leave the argument out; the check is the configured or detected one")
            + f". The operator may allow it: git config {spec.git_key} true."
        ),
    )


def land_refusals(root: Path, plan_id: str) -> list[PapayuError]:
    """Why land_plan may not land papayu/<plan_id>: it edits existing tests, deletes files, or no
    check passed on it, and the operator did not allow that. Judged on the kept commit itself."""
    settings.forget_cached_config()
    repo = open_repo(root)
    sha = generated_branches(repo).get(candidate_key(papayu_dir(repo), plan_id) or plan_id)
    if sha is None:
        return []  # the CLI says ERR_PLAN_NOT_FOUND
    try:
        plan: plans.StoredPlan | None = plans.load(papayu_dir(repo), plan_id)
    except PapayuError:
        plan = None
    commit = commit_of(repo, sha)
    base = GitTree(repo, commit.parents[0].tree)
    paths = changed_paths(repo, base.tree, commit.tree)
    if paths is None:  # a submodule, or a file turned directory (its files deleted): nothing a plan makes
        what = "landing a commit that changes a submodule or turns a file into a directory"
        return [not_allowed(what, "mcp_allow_deletions", path=plan_id, plan_id=plan_id)]
    after = GitTree(repo, commit.tree)
    changes = TreeChanges(
        writes={p: after.read_blob(p) or b"" for p in paths if after.entry_kind(p) is not None},
        delete_files=frozenset(p for p in paths if after.entry_kind(p) is None),
    )
    refusals = []
    tests = edited_tests(base, changes, configured_test_patterns(root)[0])
    if tests and not allowed("mcp_allow_test_edits", root):
        what = f"landing a plan that edits tests or how they run ({', '.join(tests[:5])})"
        refusals.append(not_allowed(what, "mcp_allow_test_edits", path=plan_id, plan_id=plan_id))
    if changes.delete_files and not allowed("mcp_allow_deletions", root):
        what = f"landing a plan that deletes {', '.join(sorted(changes.delete_files)[:5])}"
        refusals.append(not_allowed(what, "mcp_allow_deletions", path=plan_id, plan_id=plan_id))
    held = ((plan.extra.get("apply") or {}).get("error") or {}).get("code") if plan is not None else None
    if held in HELD_FOR_A_HUMAN and not allowed("mcp_allow_test_edits", root):
        what = f"landing a plan held for a human ({held}: what judges it changed, or its code reaches for the runner)"
        refusals.append(not_allowed(what, "mcp_allow_test_edits", path=plan_id, plan_id=plan_id))
    found = verdict(plan_id, plan, sha)
    if found.state in (VerdictState.NOT_CHECKED, VerdictState.SKIPPED) and not allowed("mcp_allow_no_check", root):
        what = "landing a plan no check passed on"
        refusals.append(not_allowed(what, "mcp_allow_no_check", path=plan_id, plan_id=plan_id))
    return refusals
