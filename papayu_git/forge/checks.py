"""The checks a target branch requires, and their state on one commit (docs/DESIGN.md,
"Hooks and PRs").

What is required comes from the forge: GitHub's branch protection (`contexts` and `checks`,
an app pinned where one is named) and its rulesets, Gitea's protection (`status_check_contexts`,
globs), GitLab's "pipelines must succeed" and a merge request's approvals; plus
`papayu.forge.requiredChecks`, which also stands in where the token may not read the
protection. Only required checks decide: an unrelated green status lands nothing, an unrelated
red one blocks nothing. A branch that requires none waits for every reported check, and for
at least one: the forge's CI is the check.
"""

from __future__ import annotations

import fnmatch
import re
from dataclasses import dataclass
from enum import StrEnum
from typing import Any, NamedTuple

from papayu_git.forge.http import Api
from papayu_git.forge.remote import ForgeKind


class ChecksState(StrEnum):
    GREEN = "green"
    RED = "red"
    PENDING = "pending"


class Checks(NamedTuple):
    state: ChecksState
    items: tuple[tuple[str, ChecksState], ...]  # (name, state) of each check that decides
    missing: tuple[str, ...] = ()  # required, not reported yet
    ignored: tuple[str, ...] = ()  # reported, not required

    def describe(self, state: ChecksState) -> str:
        names = [name for name, s in self.items if s is state]
        if state is ChecksState.PENDING:
            names += [f"{name} (not reported)" for name in self.missing]
        return ", ".join(names)


class Item(NamedTuple):
    """One status, check run or pipeline of a commit."""

    name: str
    state: ChecksState
    app_id: int | None = None  # GitHub: the app that reported a check run
    order: int = 0  # newer is larger: of two items with one name, the newer counts
    word: str = ""  # the forge's own word for the state


@dataclass(frozen=True)
class Required:
    names: tuple[str, ...] = ()  # contexts / check names (globs on Gitea)
    apps: tuple[tuple[str, int], ...] = ()  # GitHub: a check that must come from this app
    pipeline: bool = False  # GitLab: the commit's newest pipeline must succeed
    skipped_ok: bool = False  # GitLab: a skipped pipeline counts
    approvals: bool = False  # GitLab: the merge request needs approvals
    hidden: bool = False  # the forge would not show this token the branch's protection
    source: str = ""  # where the list comes from, for messages

    @property
    def anything(self) -> bool:
        return bool(self.names or self.pipeline or self.approvals)

    def describe(self) -> str:
        parts = list(self.names)
        parts += ["the pipeline"] if self.pipeline else []
        parts += ["approvals"] if self.approvals else []
        return ", ".join(parts) or "every reported check"


_GREEN_WORDS = frozenset({"success", "neutral", "skipped"})
_RED_WORDS = frozenset(
    {"failure", "error", "failed", "canceled", "cancelled", "timed_out", "action_required", "stale", "startup_failure"}
)
# Gitea counts a warning as a success (its CommitStatusState.Combine); elsewhere it is no state.
_GREEN_BY_FORGE = {ForgeKind.GITEA: frozenset({"warning"})}


def word_state(word: str | None, kind: ForgeKind | None = None) -> ChecksState:
    word = (word or "").lower()
    if word in _GREEN_WORDS or (kind is not None and word in _GREEN_BY_FORGE.get(kind, frozenset())):
        return ChecksState.GREEN
    return ChecksState.RED if word in _RED_WORDS else ChecksState.PENDING


def combine(items: list[tuple[str, ChecksState]]) -> Checks:
    """Any red is red; otherwise anything pending, or nothing reported yet, is pending."""
    states = {s for _, s in items}
    state = (
        ChecksState.RED
        if ChecksState.RED in states
        else ChecksState.PENDING
        if not items or ChecksState.PENDING in states
        else ChecksState.GREEN
    )
    return Checks(state, tuple(items))


# --- what the target branch requires -------------------------------------------------------


def required_checks(api: Api, base: str, pull: int | None, configured: tuple[str, ...]) -> Required:
    """What ``base`` requires on ``api``'s forge, with ``configured`` (papayu.forge.requiredChecks) added."""
    kind = api.forge.kind
    found = (
        _github_required(api, base)
        if kind is ForgeKind.GITHUB
        else _gitea_required(api, base)
        if kind is ForgeKind.GITEA
        else _gitlab_required(api, pull)
    )
    if not configured:
        return found
    names = tuple(dict.fromkeys((*found.names, *configured)))
    source = f"{found.source} and papayu.forge.requiredChecks" if found.anything else "papayu.forge.requiredChecks"
    return Required(names, found.apps, found.pipeline, found.skipped_ok, found.approvals, False, source)


def _github_required(api: Api, base: str) -> Required:
    repo = api.forge.repo.path
    branch = api.json("GET", f"/repos/{repo}/branches/{base}")
    names: list[str] = []
    apps: list[tuple[str, int]] = []
    hidden = bool(branch.get("protected")) and "protection" not in branch
    checks = ((branch.get("protection") or {}).get("required_status_checks")) or {}
    if checks.get("enforcement_level", "everyone") != "off":
        names += [str(c) for c in checks.get("contexts") or []]
        for check in checks.get("checks") or []:
            names.append(str(check.get("context")))
            if check.get("app_id") not in (None, -1):
                apps.append((str(check["context"]), int(check["app_id"])))
    # Rulesets (readable by anyone who may read the repository); an older server has none.
    rules = api.call("GET", f"/repos/{repo}/rules/branches/{base}", passthrough=(403, 404))
    for rule in rules.json() if rules.status_code == 200 else []:
        if rule.get("type") == "required_status_checks":
            for check in (rule.get("parameters") or {}).get("required_status_checks") or []:
                names.append(str(check.get("context")))
                if check.get("integration_id") not in (None, -1):
                    apps.append((str(check["context"]), int(check["integration_id"])))
    return Required(tuple(dict.fromkeys(names)), tuple(apps), hidden=hidden, source=f"the protection of {base}")


def _gitea_required(api: Api, base: str) -> Required:
    # The branch endpoint shows any reader the protection rule that applies to the branch
    # (/branch_protections is for repository admins only).
    branch = api.json("GET", f"/repos/{api.forge.repo.path}/branches/{base}")
    if not (branch.get("protected") and branch.get("enable_status_check")):
        return Required(source=f"the protection of {base}")
    contexts = tuple(str(c) for c in branch.get("status_check_contexts") or [])
    # Status checks on with no context named: every reported status must pass (and one must exist).
    return Required(contexts or ("*",), source=f"the protection of {base}")


def _gitlab_required(api: Api, pull: int | None) -> Required:
    project = api.json("GET", f"/projects/{api.forge.gitlab_project}")
    pipeline = bool(project.get("only_allow_merge_if_pipeline_succeeds"))
    approvals = False
    if pull is not None:
        found = api.call(
            "GET", f"/projects/{api.forge.gitlab_project}/merge_requests/{pull}/approvals", passthrough=(403, 404)
        )
        data = found.json() if found.status_code == 200 else {}
        approvals = int(data.get("approvals_required") or 0) > 0 or int(data.get("approvals_left") or 0) > 0
    return Required(
        pipeline=pipeline,
        skipped_ok=bool(project.get("allow_merge_on_skipped_pipeline")),
        approvals=approvals,
        source="the project's merge checks",
    )


# --- the state of one commit ---------------------------------------------------------------


def commit_items(api: Api, sha: str) -> tuple[list[Item], list[Item]]:
    """(statuses and check runs, pipelines) of ``sha``, the newest of each name only."""
    forge = api.forge
    if forge.kind is ForgeKind.GITLAB:
        project = f"/projects/{forge.gitlab_project}"
        pipelines = api.json("GET", f"{project}/pipelines", params={"sha": sha})
        statuses = api.json("GET", f"{project}/repository/commits/{sha}/statuses", params={"per_page": 100})
        return (
            _newest(Item(str(s.get("name") or "status"), word_state(s.get("status")), None, int(s.get("id") or 0))
                    for s in statuses),
            [Item(f"pipeline {p.get('id')}", word_state(p.get("status")), None, int(p.get("id") or 0),
                  str(p.get("status") or ""))
             for p in sorted(pipelines, key=lambda p: -int(p.get("id") or 0))],
        )  # fmt: skip
    page = {"per_page": 100} if forge.kind is ForgeKind.GITHUB else {"limit": 50}
    status = api.json("GET", f"/repos/{forge.repo.path}/commits/{sha}/status", params=page)
    items = [  # Gitea: `statuses` is null, `state` "", when nothing reported yet
        Item(str(s.get("context") or "status"), word_state(s.get("state") or s.get("status"), forge.kind), None, i)
        for i, s in enumerate(reversed(status.get("statuses") or []))
    ]
    if forge.kind is ForgeKind.GITHUB:
        items += [
            Item(
                str(run.get("name") or "check"),
                word_state(run.get("conclusion")) if run.get("status") == "completed" else ChecksState.PENDING,
                (run.get("app") or {}).get("id"),
                int(run.get("id") or 0),
            )
            for run in _github_check_runs(api, sha)
        ]
    return _newest(items), []


def _github_check_runs(api: Api, sha: str) -> list[dict[str, Any]]:
    runs: list[dict[str, Any]] = []
    page = 1
    while True:
        data = api.json(
            "GET", f"/repos/{api.forge.repo.path}/commits/{sha}/check-runs", params={"per_page": 100, "page": page}
        )
        batch = data.get("check_runs") or []
        runs += batch
        if not batch or len(runs) >= int(data.get("total_count") or 0) or page >= 10:
            return runs
        page += 1


def _newest(items: Any) -> list[Item]:
    newest: dict[tuple[str, int | None], Item] = {}
    for item in items:
        key = (item.name, item.app_id)
        if key not in newest or item.order > newest[key].order:
            newest[key] = item
    return list(newest.values())


def _matches(pattern: str, name: str, kind: ForgeKind) -> bool:
    if kind is not ForgeKind.GITEA:
        return pattern == name
    return any(fnmatch.fnmatchcase(name, p) for p in _braces(pattern))


def _braces(pattern: str) -> list[str]:
    """Gitea's globs know {a,b} alternatives, fnmatch does not: expand them."""
    m = re.search(r"\{([^{}]*)\}", pattern)
    if not m:
        return [pattern]
    return [x for alt in m[1].split(",") for x in _braces(pattern[: m.start()] + alt + pattern[m.end() :])]


def evaluate(
    required: Required, items: list[Item], pipelines: list[Item], *, kind: ForgeKind, approvals_left: int = 0
) -> Checks:
    """The state of the required checks among ``items``; without requirements, of every item."""
    if not required.anything:
        reported = items if kind is not ForgeKind.GITLAB or not pipelines else pipelines[:1]
        return combine([(i.name, i.state) for i in reported])
    apps = dict(required.apps)
    decided: list[tuple[str, ChecksState]] = []
    missing: list[str] = []
    used: set[str] = set()
    for name in required.names:
        hits = [i for i in items if _matches(name, i.name, kind) and (name not in apps or i.app_id == apps[name])]
        used.update(i.name for i in hits)
        if not hits:
            missing.append(name)
        decided += [(i.name, i.state) for i in hits]
    if required.pipeline:
        newest = pipelines[0] if pipelines else None
        if newest is None:
            missing.append("pipeline")
        elif newest.word == "skipped":  # final: counts only where the project says so
            decided.append((newest.name, ChecksState.GREEN if required.skipped_ok else ChecksState.RED))
        else:
            decided.append((newest.name, newest.state))
    if required.approvals:
        decided.append(
            (f"approvals ({approvals_left} more needed)", ChecksState.PENDING)
            if approvals_left > 0
            else ("approvals", ChecksState.GREEN)
        )
    checks = combine(decided)
    state = (
        ChecksState.RED
        if checks.state is ChecksState.RED
        else ChecksState.PENDING
        if missing or checks.state is ChecksState.PENDING or not decided
        else ChecksState.GREEN
    )
    ignored = tuple(sorted({i.name for i in items} - used))
    return Checks(state, checks.items, tuple(missing), ignored)


def approvals_left(api: Api, pull: int) -> int:
    data = api.json("GET", f"/projects/{api.forge.gitlab_project}/merge_requests/{pull}/approvals")
    return int(data.get("approvals_left") or 0)
