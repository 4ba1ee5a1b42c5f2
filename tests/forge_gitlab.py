"""Scripted GitLab (tests/forges.py): merge methods, pipelines, approvals, the merge API."""

from __future__ import annotations

from collections import defaultdict
from pathlib import Path
from typing import Any
from urllib.parse import unquote

from forge_base import Pull, ScriptedForge
from forge_server import NO_BODY, Answer, Recorded

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
