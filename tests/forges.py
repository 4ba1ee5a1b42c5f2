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

import os
import re
import subprocess
import tempfile
from collections import defaultdict
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, ClassVar
from urllib.parse import unquote

from forge_server import NO_BODY, Answer, ForgeServer, Kept, Recorded, keep_plan
from helpers import git, make_repo

TOKEN = "tok_" + "f0rg3" * 4
_HOOK = """#!/bin/sh
while read old new ref; do
    echo "$old $new $ref" >> "$GIT_DIR/papayu-push-log"
    if grep -qx "$ref" "$GIT_DIR/papayu-protected" 2>/dev/null; then
        echo "protected branch: $ref may not be pushed" >&2
        exit 1
    fi
done
"""


class Bare:
    """The forge's repository: real git, the forge's merges done the way the forge does them."""

    def __init__(self, directory: Path) -> None:
        self.dir = directory
        directory.parent.mkdir(parents=True, exist_ok=True)
        subprocess.run(["git", "init", "-q", "--bare", str(directory)], check=True)
        self.git("config", "http.receivepack", "true")
        hook = directory / "hooks" / "pre-receive"
        hook.write_text(_HOOK)
        hook.chmod(0o755)

    def git(self, *args: str, env: dict[str, str] | None = None, check: bool = True) -> str:
        proc = subprocess.run(
            ["git", *args], cwd=self.dir, capture_output=True, text=True, env={**os.environ, **(env or {})}
        )
        if check and proc.returncode != 0:
            raise RuntimeError(f"git {' '.join(args)}: {proc.stderr}")
        return proc.stdout.strip()

    def tip(self, branch: str) -> str | None:
        return self.git("rev-parse", "--verify", "-q", f"refs/heads/{branch}", check=False) or None

    def protect(self, branch: str) -> None:
        with open(self.dir / "papayu-protected", "a") as f:
            f.write(f"refs/heads/{branch}\n")

    def pushes(self) -> list[str]:
        """The refs every push tried to update (the pre-receive hook's log)."""
        log = self.dir / "papayu-push-log"
        return [line.split()[2] for line in log.read_text().splitlines()] if log.exists() else []

    def update(self, branch: str, new: str, old: str) -> bool:
        proc = subprocess.run(
            ["git", "update-ref", f"refs/heads/{branch}", new, old], cwd=self.dir, capture_output=True
        )
        return proc.returncode == 0

    def delete(self, branch: str) -> bool:
        return self.tip(branch) is not None and not self.git("update-ref", "-d", f"refs/heads/{branch}")

    def ancestor(self, a: str, b: str) -> bool:
        return subprocess.run(["git", "merge-base", "--is-ancestor", a, b], cwd=self.dir).returncode == 0

    def tree(self, rev: str) -> str:
        return self.git("rev-parse", f"{rev}^{{tree}}")

    def three_way(self, base: str, ours: str, theirs: str) -> str | None:
        """The merged tree, None on a conflict (read-tree's 3-way merge in a scratch index)."""
        with tempfile.TemporaryDirectory() as scratch:
            env = {"GIT_INDEX_FILE": str(Path(scratch) / "index")}
            self.git("read-tree", "-m", "-i", "--aggressive", base, ours, theirs, env=env)
            proc = subprocess.run(
                ["git", "write-tree"], cwd=self.dir, capture_output=True, text=True, env={**os.environ, **env}
            )
            return proc.stdout.strip() if proc.returncode == 0 else None

    def commit(self, tree: str, parents: list[str], message: str, committer: str) -> str:
        args = ["commit-tree", tree, *[x for p in parents for x in ("-p", p)], "-m", message]
        return self.git(*args, env={"GIT_COMMITTER_NAME": committer, "GIT_COMMITTER_EMAIL": "forge@example.com"})

    def merged(self, style: str, base: str, head: str, *, title: str, committer: str) -> str | None:
        """The new tip of ``base`` after merging ``head`` the forge's way; None on a conflict or
        on a fast-forward that is not one. ``rebase`` rewrites every commit (GitHub);
        ``rebase-noop`` keeps a head already on the tip (Gitea's rebase, a git rebase);
        ``rebase_merge`` is GitLab's semi-linear merge commit, ``rebase-merge`` Gitea's."""
        tip = self.tip(base)
        assert tip is not None
        on_tip = self.ancestor(tip, head)
        if style in ("ff", "fast-forward-only"):
            return head if on_tip else None
        if style == "rebase_merge":
            return self._merge_commit(tip, head, title, committer) if on_tip else None
        if style in ("rebase", "rebase-noop", "rebase-merge"):
            rebased = head if on_tip and style != "rebase" else self._rebase(tip, head, committer)
            if rebased is None or style != "rebase-merge":
                return rebased
            return self._merge_commit(tip, rebased, title, committer)
        tree = self.three_way(self.git("merge-base", tip, head), tip, head)
        if tree is None:
            return None
        return self.commit(tree, [tip] if style == "squash" else [tip, head], title, committer)

    def _rebase(self, tip: str, head: str, committer: str) -> str | None:
        on = tip
        for c in self.git("rev-list", "--reverse", f"{tip}..{head}").split():
            tree = self.three_way(f"{c}^", on, c)
            if tree is None:
                return None
            on = self.commit(tree, [on], self.git("log", "-1", "--format=%B", c), committer)
        return on

    def _merge_commit(self, tip: str, head: str, title: str, committer: str) -> str:
        return self.commit(self.tree(head), [tip, head], title, committer)


@dataclass
class Pull:
    number: int
    head: str
    base: str
    title: str
    body: str
    draft: bool = False
    state: str = "open"  # open, closed, merged
    merge_sha: str | None = None
    method: str = ""
    comments: list[str] = field(default_factory=list)
    checking: int = 1  # reads that still see the mergeability being computed


class ScriptedForge:
    """One repository on one scripted forge. ``sub``: the sub-path the forge is served under."""

    kind = ""
    api_prefix = ""
    token_var = ""

    def __init__(self, tmp_path: Path, *, sub: str = "", repo: str = "acme/widget", token: str = TOKEN) -> None:
        self.repo = repo
        self.sub = sub.strip("/")
        self.token = token
        self.root = tmp_path / "forge-git"
        self.bare = Bare(self.root / (f"{self.sub}/" if self.sub else "") / f"{repo}.git")
        self.server = ForgeServer(self.handle, git_root=self.root)
        self.pulls: dict[int, Pull] = {}
        self.statuses: dict[str, list[dict[str, Any]]] = defaultdict(list)
        self.required: list[str] = []  # the contexts the protected target requires
        self.on_merge: Callable[[Pull], None] | None = None  # runs as a merge request arrives

    def __enter__(self) -> ScriptedForge:
        self.server.start()
        return self

    def __exit__(self, *exc: object) -> None:
        self.server.stop()

    # --- what a test sets up ------------------------------------------------------------

    @property
    def remote_url(self) -> str:
        return f"{self.server.url}{self._sub()}/{self.repo}.git"

    @property
    def api_url(self) -> str:
        return f"{self.server.url}{self._sub()}{self.api_prefix}"

    def _sub(self) -> str:
        return f"/{self.sub}" if self.sub else ""

    def env(self, token: str | None = None) -> dict[str, str]:
        return {self.token_var: token or self.token}

    def protect(self, branch: str, *contexts: str) -> None:
        """The target may not be pushed, and a merge into it needs ``contexts`` green."""
        self.bare.protect(branch)
        self.required = list(contexts)

    def status(self, sha: str, context: str, state: str) -> None:
        self.statuses[sha].append({"context": context, "state": state, "id": len(self.statuses[sha]) + 1})

    def latest_statuses(self, sha: str) -> list[dict[str, Any]]:
        latest: dict[str, dict[str, Any]] = {}
        for s in self.statuses.get(sha, []):
            latest[s["context"]] = s
        return sorted(latest.values(), key=lambda s: -s["id"])

    # --- serving ------------------------------------------------------------------------

    def handle(self, request: Recorded) -> Answer | None:
        prefix = f"{self._sub()}{self.api_prefix}"
        if not request.path.startswith(prefix + "/"):
            return None
        path = request.path[len(prefix) :]
        if not self.authorised(request):
            return self.unauthorised()
        for method, pattern, name in self.ROUTES:
            m = re.fullmatch(pattern, path)
            if m and method == request.method:
                if not self.knows(unquote(m.groupdict().get("repo", self.repo))):
                    return self.not_found()
                answer: Answer = getattr(self, name)(request, **{k: unquote(v) for k, v in m.groupdict().items()})
                return answer
        return self.not_found()

    ROUTES: ClassVar[tuple[tuple[str, str, str], ...]] = ()

    def knows(self, repo: str) -> bool:
        return repo == self.repo

    def authorised(self, request: Recorded) -> bool:
        raise NotImplementedError

    def unauthorised(self) -> Answer:
        return 401, {"message": "Unauthorized"}

    def not_found(self) -> Answer:
        return 404, {"message": "Not Found"}

    def new_pull(self, head: str, base: str, title: str, body: str, draft: bool) -> Pull | Answer:
        for pull in self.pulls.values():
            if pull.head == head and pull.base == base and pull.state == "open":
                return self.exists(pull)
        if self.bare.tip(head) is None or self.bare.tip(base) is None:
            return 422, {"message": "Validation Failed", "errors": [{"message": "head or base does not exist"}]}
        pull = Pull(len(self.pulls) + 1, head, base, title, body, draft)
        self.pulls[pull.number] = pull
        return pull

    def exists(self, pull: Pull) -> Answer:
        raise NotImplementedError

    def head_sha(self, pull: Pull) -> str:
        return self.bare.tip(pull.head) or self.bare.git("rev-parse", f"refs/pull/{pull.number}/head", check=False)

    def arrived(self, request: Recorded, n: str) -> Pull | None:
        """A merge request came in: what a concurrent user does then happens first (``on_merge``)."""
        pull = self.pulls.get(int(n))
        if pull is not None and self.on_merge is not None:
            self.on_merge(pull)
        return pull

    def merge(self, pull: Pull, style: str, sha: str, committer: str) -> str | None:
        """Do the merge in the bare repository; the new base tip, None if it could not be done."""
        head = self.head_sha(pull)
        # GitHub keeps refs/pull/N/head after the branch is deleted; here too.
        self.bare.git("update-ref", f"refs/pull/{pull.number}/head", head)
        tip = self.bare.tip(pull.base)
        assert tip is not None
        new = self.bare.merged(style, pull.base, head, title=f"Merge #{pull.number}: {pull.title}", committer=committer)
        if new is None or not self.bare.update(pull.base, new, tip):
            return None
        pull.state, pull.merge_sha, pull.method = "merged", new, style
        return new


# --- GitHub ----------------------------------------------------------------------------------

_REPO = r"/repos/(?P<repo>[^/]+/[^/]+)"


class GitHub(ScriptedForge):
    kind = "github"
    api_prefix = "/api/v3"  # GitHub Enterprise's API path: the remote's host and port, then this
    token_var = "GH_TOKEN"

    def __init__(self, tmp_path: Path, **kwargs: Any) -> None:
        super().__init__(tmp_path, **kwargs)
        self.check_runs: dict[str, list[dict[str, Any]]] = defaultdict(list)
        self.required_apps: dict[str, int] = {}
        self.allowed = {"merge": True, "squash": True, "rebase": True}
        self.show_protection = True  # False: a token that may not see the protection
        self.required_reviews = 0

    ROUTES = (
        ("GET", rf"{_REPO}", "get_repo"),
        ("POST", rf"{_REPO}/pulls", "create_pull"),
        ("GET", rf"{_REPO}/pulls", "list_pulls"),
        ("GET", rf"{_REPO}/pulls/(?P<n>\d+)", "get_pull"),
        ("PATCH", rf"{_REPO}/pulls/(?P<n>\d+)", "edit_pull"),
        ("PUT", rf"{_REPO}/pulls/(?P<n>\d+)/merge", "merge_pull"),
        ("POST", rf"{_REPO}/issues/(?P<n>\d+)/comments", "comment"),
        ("GET", rf"{_REPO}/branches/(?P<branch>.+)", "get_branch"),
        ("GET", rf"{_REPO}/rules/branches/(?P<branch>.+)", "get_rules"),
        ("GET", rf"{_REPO}/commits/(?P<sha>[0-9a-f]+)/status", "combined_status"),
        ("GET", rf"{_REPO}/commits/(?P<sha>[0-9a-f]+)/check-runs", "list_check_runs"),
        ("POST", rf"{_REPO}/statuses/(?P<sha>[0-9a-f]+)", "create_status"),
        ("DELETE", rf"{_REPO}/git/refs/heads/(?P<branch>.+)", "delete_ref"),
    )

    def authorised(self, request: Recorded) -> bool:
        return request.headers.get("authorization") in (f"Bearer {self.token}", f"token {self.token}")

    def unauthorised(self) -> Answer:
        return 401, {"message": "Bad credentials", "documentation_url": "https://docs.github.com/rest"}

    def check_run(self, sha: str, name: str, status: str, conclusion: str | None = None, app_id: int = 15368) -> None:
        runs = self.check_runs[sha]
        runs.append({"id": len(runs) + 1, "name": name, "status": status, "conclusion": conclusion,
                     "head_sha": sha, "app": {"id": app_id}})  # fmt: skip

    def get_repo(self, request: Recorded, repo: str) -> Answer:
        return 200, {
            "full_name": repo,
            "default_branch": "main",
            "allow_merge_commit": self.allowed["merge"],
            "allow_squash_merge": self.allowed["squash"],
            "allow_rebase_merge": self.allowed["rebase"],
        }

    def pull_json(self, pull: Pull) -> dict[str, Any]:
        mergeable = None if pull.checking > 0 else True
        pull.checking -= 1
        return {
            "number": pull.number,
            "html_url": f"{self.server.url}/{self.repo}/pull/{pull.number}",
            "state": "closed" if pull.state != "open" else "open",
            "merged": pull.state == "merged",
            "merge_commit_sha": pull.merge_sha,
            "draft": pull.draft,
            "mergeable": mergeable,
            "head": {"ref": pull.head, "sha": self.head_sha(pull)},
            "base": {"ref": pull.base, "sha": self.bare.tip(pull.base)},
        }

    def create_pull(self, request: Recorded, repo: str) -> Answer:
        b = request.body
        made = self.new_pull(b["head"], b["base"], b["title"], b.get("body", ""), bool(b.get("draft")))
        return (201, self.pull_json(made)) if isinstance(made, Pull) else made

    def exists(self, pull: Pull) -> Answer:
        message = f"A pull request already exists for {self.repo.split('/')[0]}:{pull.head}."
        return 422, {"message": "Validation Failed", "errors": [{"resource": "PullRequest", "message": message}]}

    def list_pulls(self, request: Recorded, repo: str) -> Answer:
        q = request.query
        head = q.get("head", "").split(":")[-1]
        found = [
            self.pull_json(p)
            for p in self.pulls.values()
            if (not head or p.head == head) and p.base == q.get("base", p.base) and p.state == "open"
        ]
        return 200, found

    def get_pull(self, request: Recorded, repo: str, n: str) -> Answer:
        pull = self.pulls.get(int(n))
        return (200, self.pull_json(pull)) if pull else self.not_found()

    def edit_pull(self, request: Recorded, repo: str, n: str) -> Answer:
        pull = self.pulls[int(n)]
        if request.body.get("state") == "closed" and pull.state == "open":
            pull.state = "closed"
        return 200, self.pull_json(pull)

    def comment(self, request: Recorded, repo: str, n: str) -> Answer:
        self.pulls[int(n)].comments.append(request.body["body"])
        return 201, {"id": 1, "body": request.body["body"]}

    def get_branch(self, request: Recorded, repo: str, branch: str) -> Answer:
        tip = self.bare.tip(branch)
        if tip is None:
            return 404, {"message": "Branch not found"}
        protected = (self.bare.dir / "papayu-protected").exists() and f"refs/heads/{branch}" in (
            self.bare.dir / "papayu-protected"
        ).read_text().split()
        data: dict[str, Any] = {"name": branch, "commit": {"sha": tip}, "protected": protected}
        if protected and self.show_protection:
            checks = [{"context": c, "app_id": self.required_apps.get(c)} for c in self.required]
            data["protection"] = {
                "enabled": True,
                "required_status_checks": {"enforcement_level": "everyone", "contexts": self.required,
                                           "checks": checks},
            }  # fmt: skip
        return 200, data

    def get_rules(self, request: Recorded, repo: str, branch: str) -> Answer:
        return 200, []

    def combined_status(self, request: Recorded, repo: str, sha: str) -> Answer:
        statuses = self.latest_statuses(sha)
        states = {s["state"] for s in statuses}
        state = (
            "failure"
            if states & {"failure", "error"}
            else "pending"
            if "pending" in states or not states
            else "success"
        )
        return 200, {"state": state, "sha": sha, "total_count": len(statuses), "statuses": statuses}

    def list_check_runs(self, request: Recorded, repo: str, sha: str) -> Answer:
        runs = self.check_runs.get(sha, [])
        per_page, page = int(request.query.get("per_page", 30)), int(request.query.get("page", 1))
        return 200, {"total_count": len(runs), "check_runs": runs[(page - 1) * per_page : page * per_page]}

    def create_status(self, request: Recorded, repo: str, sha: str) -> Answer:
        self.status(sha, request.body.get("context", "default"), request.body["state"])
        return 201, self.statuses[sha][-1]

    def delete_ref(self, request: Recorded, repo: str, branch: str) -> Answer:
        return (204, NO_BODY) if self.bare.delete(branch) else (422, {"message": "Reference does not exist"})

    def required_ok(self, sha: str) -> str | None:
        """GitHub's rule: each required context green as a status or a (the named app's) check run."""
        statuses = {s["context"]: s["state"] for s in self.latest_statuses(sha)}
        runs: dict[str, dict[str, Any]] = {}
        for run in self.check_runs.get(sha, []):
            if self.required_apps.get(run["name"]) in (None, run["app"]["id"]):
                runs[run["name"]] = run
        for context in self.required:
            run = runs.get(context)
            run_ok = run is not None and run["status"] == "completed" and run["conclusion"] in (
                "success", "neutral", "skipped")  # fmt: skip
            if statuses.get(context) != "success" and not run_ok:
                return f'Required status check "{context}" is expected.'
        return None

    def merge_pull(self, request: Recorded, repo: str, n: str) -> Answer:
        pull = self.arrived(request, n)
        if pull is None:
            return self.not_found()
        method = request.body.get("merge_method", "merge")
        if pull.state != "open":
            return 405, {"message": "Pull Request is not mergeable"}
        if request.body.get("sha") and request.body["sha"] != self.head_sha(pull):
            return 409, {"message": "Head branch was modified. Review and try the merge again."}
        if not self.allowed.get(method):
            return 405, {"message": f"{method.capitalize()} merges are not allowed on this repository."}
        if self.required_reviews:
            return 405, {"message": f"At least {self.required_reviews} approving review is required by reviewers "
                                    "with write access."}  # fmt: skip
        if (problem := self.required_ok(self.head_sha(pull))) is not None:
            return 405, {"message": problem}
        new = self.merge(pull, method, request.body.get("sha", ""), "GitHub")
        if new is None:
            return 405, {"message": "Pull Request is not mergeable"}
        return 200, {"sha": new, "merged": True, "message": "Pull Request successfully merged"}


# --- Gitea -----------------------------------------------------------------------------------


class Gitea(ScriptedForge):
    kind = "gitea"
    api_prefix = "/api/v1"
    token_var = "GITEA_TOKEN"

    def __init__(self, tmp_path: Path, *, admin: bool = False, **kwargs: Any) -> None:
        super().__init__(tmp_path, **kwargs)
        self.admin = admin  # may read /branch_protections
        self.allowed = {"merge": True, "rebase": True, "rebase-merge": True, "squash": True,
                        "fast-forward-only": True}  # fmt: skip
        self.enable_status_check = True

    ROUTES = (
        ("GET", rf"{_REPO}", "get_repo"),
        ("POST", rf"{_REPO}/pulls", "create_pull"),
        ("GET", rf"{_REPO}/pulls", "list_pulls"),
        ("GET", rf"{_REPO}/pulls/(?P<n>\d+)", "get_pull"),
        ("PATCH", rf"{_REPO}/pulls/(?P<n>\d+)", "edit_pull"),
        ("POST", rf"{_REPO}/pulls/(?P<n>\d+)/merge", "merge_pull"),
        ("POST", rf"{_REPO}/issues/(?P<n>\d+)/comments", "comment"),
        ("GET", rf"{_REPO}/branches/(?P<branch>.+)", "get_branch"),
        ("DELETE", rf"{_REPO}/branches/(?P<branch>.+)", "delete_branch"),
        ("GET", rf"{_REPO}/branch_protections", "list_protections"),
        ("GET", rf"{_REPO}/commits/(?P<sha>[0-9a-f]+)/status", "combined_status"),
        ("POST", rf"{_REPO}/statuses/(?P<sha>[0-9a-f]+)", "create_status"),
    )

    def authorised(self, request: Recorded) -> bool:
        return request.headers.get("authorization") == f"token {self.token}"

    def unauthorised(self) -> Answer:
        return 401, {"message": "user does not exist [uid: 0, name: ]", "url": f"{self.server.url}/api/swagger"}

    def not_found(self) -> Answer:
        return 404, {"errors": ["The target couldn't be found."], "message": "The target couldn't be found."}

    def get_repo(self, request: Recorded, repo: str) -> Answer:
        a = self.allowed
        return 200, {
            "full_name": repo,
            "default_branch": "main",
            "allow_merge_commits": a["merge"],
            "allow_rebase": a["rebase"],
            "allow_rebase_explicit": a["rebase-merge"],
            "allow_squash_merge": a["squash"],
            "allow_fast_forward_only_merge": a["fast-forward-only"],
        }

    def pull_json(self, pull: Pull) -> dict[str, Any]:
        checking = pull.checking > 0
        pull.checking -= 1
        return {
            "number": pull.number,
            "html_url": f"{self.server.url}{self._sub()}/{self.repo}/pulls/{pull.number}",
            "state": "closed" if pull.state != "open" else "open",
            "merged": pull.state == "merged",
            "merge_commit_sha": pull.merge_sha,
            "mergeable": pull.state == "open" and not checking and not pull.title.startswith("WIP:"),
            "head": {"ref": pull.head, "sha": self.head_sha(pull)},
            "base": {"ref": pull.base, "sha": self.bare.tip(pull.base)},
        }

    def create_pull(self, request: Recorded, repo: str) -> Answer:
        b = request.body
        made = self.new_pull(b["head"], b["base"], b["title"], b.get("body", ""), b["title"].startswith("WIP:"))
        return (201, self.pull_json(made)) if isinstance(made, Pull) else made

    def exists(self, pull: Pull) -> Answer:
        return 409, {"message": f"pull request already exists for these targets [id: {pull.number}, "
                                f"head_branch: {pull.head}, base_branch: {pull.base}]"}  # fmt: skip

    def list_pulls(self, request: Recorded, repo: str) -> Answer:
        state = request.query.get("state", "open")
        return 200, [self.pull_json(p) for p in self.pulls.values() if state == "all" or p.state == state]

    def get_pull(self, request: Recorded, repo: str, n: str) -> Answer:
        pull = self.pulls.get(int(n))
        return (200, self.pull_json(pull)) if pull else self.not_found()

    def edit_pull(self, request: Recorded, repo: str, n: str) -> Answer:
        pull = self.pulls[int(n)]
        if request.body.get("state") == "closed" and pull.state == "open":
            pull.state = "closed"
        return 201, self.pull_json(pull)

    def comment(self, request: Recorded, repo: str, n: str) -> Answer:
        self.pulls[int(n)].comments.append(request.body["body"])
        return 201, {"id": 1, "body": request.body["body"]}

    def protected(self, branch: str) -> bool:
        listed = self.bare.dir / "papayu-protected"
        return listed.exists() and f"refs/heads/{branch}" in listed.read_text().split()

    def get_branch(self, request: Recorded, repo: str, branch: str) -> Answer:
        tip = self.bare.tip(branch)
        if tip is None:
            return 404, {"message": "branch not found"}
        protected = self.protected(branch)
        return 200, {
            "name": branch,
            "commit": {"id": tip},
            "protected": protected,
            "enable_status_check": protected and self.enable_status_check,
            "status_check_contexts": self.required if protected else [],
            "required_approvals": 0,
            "user_can_push": not protected,
            "user_can_merge": True,
        }

    def delete_branch(self, request: Recorded, repo: str, branch: str) -> Answer:
        return (204, NO_BODY) if self.bare.delete(branch) else self.not_found()

    def list_protections(self, request: Recorded, repo: str) -> Answer:
        if not self.admin:
            return 403, {"message": "token does not have at least one of required scope(s)"}
        return 200, [{"rule_name": "main", "enable_status_check": True, "status_check_contexts": self.required}]

    def combined_status(self, request: Recorded, repo: str, sha: str) -> Answer:
        statuses = [{**s, "status": s["state"]} for s in self.latest_statuses(sha)]
        if not statuses:
            return 200, {"state": "", "sha": sha, "total_count": 0, "statuses": None}
        return 200, {"state": _gitea_combine([s["state"] for s in statuses]), "sha": sha,
                     "total_count": len(statuses), "statuses": statuses}  # fmt: skip

    def create_status(self, request: Recorded, repo: str, sha: str) -> Answer:
        self.status(sha, request.body.get("context", "default"), request.body["state"])
        return 201, self.statuses[sha][-1]

    def required_ok(self, sha: str) -> bool:
        """Gitea's MergeRequiredContextsCommitStatus: every required glob matched, all matched green."""
        statuses = self.latest_statuses(sha)
        if not statuses:
            return False
        if not self.required:
            return _gitea_combine([s["state"] for s in statuses]) == "success"
        matched = [s for s in statuses if any(_glob(g, s["context"]) for g in self.required)]
        every = all(any(_glob(g, s["context"]) for s in statuses) for g in self.required)
        return every and bool(matched) and _gitea_combine([s["state"] for s in matched]) == "success"

    def merge_pull(self, request: Recorded, repo: str, n: str) -> Answer:
        pull = self.arrived(request, n)
        if pull is None or pull.state == "closed":
            return self.not_found()
        if pull.state == "merged":
            return 405, {"message": "The PR is already merged"}
        if pull.checking > 0:
            return 405, {"message": "Please try again later"}
        style = request.body.get("Do") or "merge"
        if self.protected(pull.base) and self.enable_status_check and not self.required_ok(self.head_sha(pull)):
            return 405, {"message": "Not all required status checks successful"}
        if not self.allowed.get(style):
            return 405, {"message": f"{style} is not allowed an allowed merge style for this repository"}
        if request.body.get("head_commit_id") and request.body["head_commit_id"] != self.head_sha(pull):
            return 409, {"message": "head out of date"}
        new = self.merge(pull, "rebase-noop" if style == "rebase" else style, "", "Gitea")
        if new is None:  # a diverging fast-forward-only: Gitea has no answer for it but a 500
            return 500, {"message": "Diverging fast-forward", "url": f"{self.server.url}/api/swagger"}
        return 200, NO_BODY


def _glob(pattern: str, name: str) -> bool:
    """gobwas/glob as Gitea compiles it (no separator): * ? [..] [!..] {a,b}."""
    regex, i = "", 0
    while i < len(pattern):
        c = pattern[i]
        if c == "*":
            regex += ".*"
        elif c == "?":
            regex += "."
        elif c == "{":
            end = pattern.index("}", i)
            regex += "(?:" + "|".join(re.escape(alt) for alt in pattern[i + 1 : end].split(",")) + ")"
            i = end
        elif c == "[":
            end = pattern.index("]", i)
            regex += "[" + pattern[i + 1 : end].replace("!", "^", 1) + "]"
            i = end
        else:
            regex += re.escape(c)
        i += 1
    return re.fullmatch(regex, name) is not None


def _gitea_combine(states: list[str]) -> str:
    """Gitea's CommitStatusStates.Combine: error/failure fail, success/warning/skipped succeed."""
    if any(s in ("error", "failure") for s in states):
        return "failure"
    ok = sum(s in ("success", "warning", "skipped") for s in states)
    return "success" if ok and ok == len(states) else "pending"


# --- GitLab ----------------------------------------------------------------------------------

_PROJECT = r"/projects/(?P<repo>[^/]+)"


class GitLab(ScriptedForge):
    kind = "gitlab"
    api_prefix = "/api/v4"
    token_var = "GITLAB_TOKEN"

    def __init__(self, tmp_path: Path, **kwargs: Any) -> None:
        super().__init__(tmp_path, **kwargs)
        self.merge_method = "ff"  # merge, rebase_merge, ff
        self.pipeline_must_succeed = True
        self.skipped_ok = False
        self.pipelines: dict[str, list[dict[str, Any]]] = defaultdict(list)
        self.approvals_required = 0
        self.approved_by: list[str] = []

    ROUTES = (
        ("GET", rf"{_PROJECT}", "get_project"),
        ("POST", rf"{_PROJECT}/merge_requests", "create_mr"),
        ("GET", rf"{_PROJECT}/merge_requests", "list_mrs"),
        ("GET", rf"{_PROJECT}/merge_requests/(?P<n>\d+)", "get_mr"),
        ("PUT", rf"{_PROJECT}/merge_requests/(?P<n>\d+)", "edit_mr"),
        ("PUT", rf"{_PROJECT}/merge_requests/(?P<n>\d+)/merge", "merge_mr"),
        ("GET", rf"{_PROJECT}/merge_requests/(?P<n>\d+)/approvals", "approvals"),
        ("POST", rf"{_PROJECT}/merge_requests/(?P<n>\d+)/notes", "note"),
        ("GET", rf"{_PROJECT}/pipelines", "list_pipelines"),
        ("GET", rf"{_PROJECT}/repository/commits/(?P<sha>[0-9a-f]+)/statuses", "list_statuses"),
        ("POST", rf"{_PROJECT}/statuses/(?P<sha>[0-9a-f]+)", "create_status"),
        ("DELETE", rf"{_PROJECT}/repository/branches/(?P<branch>.+)", "delete_branch"),
    )

    def authorised(self, request: Recorded) -> bool:
        return request.headers.get("private-token") == self.token

    def unauthorised(self) -> Answer:
        return 401, {"message": "401 Unauthorized"}

    def not_found(self) -> Answer:
        return 404, {"message": "404 Project Not Found"}

    def pipeline(self, sha: str, status: str) -> int:
        """A new pipeline for ``sha`` (the newest decides), or the newest one's status changed."""
        pid = 100 + sum(len(v) for v in self.pipelines.values())
        self.pipelines[sha].append({"id": pid, "sha": sha, "ref": "", "status": status})
        return pid

    def get_project(self, request: Recorded, repo: str) -> Answer:
        return 200, {
            "path_with_namespace": repo,
            "default_branch": "main",
            "merge_method": self.merge_method,
            "only_allow_merge_if_pipeline_succeeds": self.pipeline_must_succeed,
            "allow_merge_on_skipped_pipeline": self.skipped_ok,
        }

    def detailed(self, pull: Pull) -> str:
        if pull.state != "open":
            return "not_open"
        if pull.checking > 0:
            pull.checking -= 1
            return "checking"
        if pull.draft:
            return "draft_status"
        if self.approvals_required > len(self.approved_by):
            return "not_approved"
        if self.pipeline_must_succeed and not self.pipeline_ok(self.head_sha(pull)):
            return "ci_must_pass"
        if self.merge_method != "merge" and not self.bare.ancestor(self.bare.tip(pull.base) or "", self.head_sha(pull)):
            return "need_rebase"
        return "mergeable"

    def mr_json(self, pull: Pull) -> dict[str, Any]:
        return {
            "iid": pull.number,
            "web_url": f"{self.server.url}/{self.repo}/-/merge_requests/{pull.number}",
            "state": {"open": "opened"}.get(pull.state, pull.state),
            "sha": self.head_sha(pull),
            "draft": pull.draft,
            "source_branch": pull.head,
            "target_branch": pull.base,
            "detailed_merge_status": self.detailed(pull),
            "merge_commit_sha": pull.merge_sha if pull.method != "ff" else None,
        }

    def create_mr(self, request: Recorded, repo: str) -> Answer:
        b = request.body
        title = b["title"]
        made = self.new_pull(b["source_branch"], b["target_branch"], title, b.get("description", ""),
                             title.startswith("Draft:"))  # fmt: skip
        return (201, self.mr_json(made)) if isinstance(made, Pull) else made

    def exists(self, pull: Pull) -> Answer:
        return 409, {"message": [f"Another open merge request already exists for this source branch: !{pull.number}"]}

    def list_mrs(self, request: Recorded, repo: str) -> Answer:
        q = request.query
        return 200, [
            self.mr_json(p)
            for p in self.pulls.values()
            if p.head == q.get("source_branch", p.head) and p.state == "open"
        ]

    def get_mr(self, request: Recorded, repo: str, n: str) -> Answer:
        pull = self.pulls.get(int(n))
        return (200, self.mr_json(pull)) if pull else (404, {"message": "404 Not found"})

    def edit_mr(self, request: Recorded, repo: str, n: str) -> Answer:
        pull = self.pulls[int(n)]
        if request.body.get("state_event") == "close" and pull.state == "open":
            pull.state = "closed"
        return 200, self.mr_json(pull)

    def approvals(self, request: Recorded, repo: str, n: str) -> Answer:
        left = max(0, self.approvals_required - len(self.approved_by))
        return 200, {"approvals_required": self.approvals_required, "approvals_left": left, "approved": left == 0,
                     "approved_by": [{"user": {"username": u}} for u in self.approved_by]}  # fmt: skip

    def note(self, request: Recorded, repo: str, n: str) -> Answer:
        self.pulls[int(n)].comments.append(request.body["body"])
        return 201, {"id": 1, "body": request.body["body"]}

    def list_pipelines(self, request: Recorded, repo: str) -> Answer:
        sha = request.query.get("sha", "")
        return 200, sorted(self.pipelines.get(sha, []), key=lambda p: -p["id"])

    def list_statuses(self, request: Recorded, repo: str, sha: str) -> Answer:
        return 200, [{"id": s["id"], "name": s["context"], "status": s["state"]} for s in self.statuses.get(sha, [])]

    def create_status(self, request: Recorded, repo: str, sha: str) -> Answer:
        self.status(sha, request.body.get("name", "default"), request.body["state"])
        return 201, self.statuses[sha][-1]

    def delete_branch(self, request: Recorded, repo: str, branch: str) -> Answer:
        return (204, NO_BODY) if self.bare.delete(branch) else (404, {"message": "404 Branch Not Found"})

    def pipeline_ok(self, sha: str) -> bool:
        runs = sorted(self.pipelines.get(sha, []), key=lambda p: -p["id"])
        return bool(runs) and (runs[0]["status"] == "success" or (self.skipped_ok and runs[0]["status"] == "skipped"))

    def merge_mr(self, request: Recorded, repo: str, n: str) -> Answer:
        pull = self.arrived(request, n)
        if pull is None:
            return 404, {"message": "404 Not found"}
        if request.body.get("sha") and request.body["sha"] != self.head_sha(pull):
            return 409, {"message": "SHA does not match HEAD of source branch"}
        status = self.detailed(pull)
        if status == "need_rebase" and self.merge_method == "ff":
            return 406, {"message": "Branch cannot be merged"}
        if status != "mergeable":
            return 405, {"message": "405 Method Not Allowed"}
        style = {"ff": "ff", "rebase_merge": "rebase_merge", "merge": "merge"}[self.merge_method]
        if self.merge(pull, style, "", "GitLab") is None:
            return 422, {"message": "Branch cannot be merged"}
        if request.body.get("should_remove_source_branch"):
            self.bare.delete(pull.head)
        return 200, self.mr_json(pull)

    def knows(self, repo: str) -> bool:
        return repo == self.repo or unquote(repo) == self.repo


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
