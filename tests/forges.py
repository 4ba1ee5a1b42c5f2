"""Scripted GitHub, GitLab and Gitea: each answers its own REST API, with its own semantics,
from state kept here, over a real bare repository served by `git http-backend` through the
same local server (forge_server.ForgeServer), so that push, ls-remote, fetch and the forge's
merges are real git.

What each forge does here, as its documentation and (Gitea) its source say:
- GitHub: branch protection `required_status_checks` {contexts, checks [{context, app_id}]} in
  `GET /branches/{b}`; combined status + check runs; `PUT /pulls/{n}/merge` {sha, merge_method}
  (rebase always makes new commits) answering 200 {sha, merged}, 405 (not mergeable, a required
  check, a method not allowed), 409 (head moved).
- GitLab: a project's merge_method (merge, rebase_merge, ff) and "pipelines must succeed";
  pipelines per sha; approvals; `PUT /merge_requests/{iid}/merge` {sha} answering 200 with the
  merge request, 405, 406 (not fast-forwardable), 409 (SHA does not match HEAD of source branch).
- Gitea: `POST /pulls/{n}/merge` {Do, head_commit_id} answering 200 with an empty body, 405
  ("Please try again later" while mergeability is computed, "Not all required status checks
  successful"), 409 ("head out of date"), 500 for a diverging fast-forward-only; a combined
  status of nothing is `state: ""`, `statuses: null`; `warning` counts as success; protection
  `status_check_contexts` are globs; `mergeable` is false while it is being computed;
  `GET /branch_protections` only for admins; no Checks API.
The target branch is protected by a real pre-receive hook, which also logs every push.
"""

from __future__ import annotations

from pathlib import Path

from forge_base import TOKEN, Bare, Pull, ScriptedForge
from forge_gitea import Gitea
from forge_github import GitHub
from forge_gitlab import GitLab
from forge_server import Kept, keep_plan
from helpers import git, make_repo

__all__ = ["FORGES", "TOKEN", "Bare", "GitHub", "GitLab", "Gitea", "Pull", "ScriptedForge", "kept_on", "make_green"]


def kept_on(forge: ScriptedForge, tmp_path: Path) -> Kept:
    """A repository whose origin is ``forge`` over http (main pushed there for real) and a kept
    plan on papayu/<id> (forge_server.keep_plan)."""
    repo = make_repo(tmp_path / "work", {"README.md": "# calc\n", "src/other.py": "y = 2\n"})
    git(repo, "remote", "add", "origin", forge.remote_url)
    git(repo, "push", "-q", "origin", "main")
    (forge.bare.dir / "papayu-push-log").unlink()
    base = git(repo, "rev-parse", "main").strip()
    return Kept(repo, forge.bare.dir, keep_plan(repo), base)


FORGES: dict[str, type[ScriptedForge]] = {"github": GitHub, "gitea": Gitea, "gitlab": GitLab}


def make_green(forge: ScriptedForge, sha: str, *contexts: str) -> None:
    """What the forge's CI reports when the required checks pass: statuses (GitHub, Gitea), a
    successful pipeline (GitLab)."""
    if isinstance(forge, GitLab):
        forge.pipeline(sha, "success")
        return
    for context in contexts:
        forge.status(sha, context, "success")
