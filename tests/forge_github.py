"""Scripted GitHub (tests/forges.py): protection, combined status, check runs, the merge API."""

from __future__ import annotations

from collections import defaultdict
from pathlib import Path
from typing import Any

from forge_base import Pull, ScriptedForge
from forge_server import NO_BODY, Answer, Recorded

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
