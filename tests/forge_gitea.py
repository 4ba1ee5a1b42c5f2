"""Scripted Gitea (tests/forges.py): its merge API, protection globs, combined status, async mergeability."""

from __future__ import annotations

import re
from pathlib import Path
from typing import Any

from forge_base import Pull, ScriptedForge
from forge_server import NO_BODY, Answer, Recorded

_REPO = r"/repos/(?P<repo>[^/]+/[^/]+)"


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
        self.unindexed = 0  # POSTs of a pull request that 404 (Gitea records a push asynchronously)

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
        if self.unindexed > 0:  # the push queue has not recorded the pushed branch yet
            self.unindexed -= 1
            return 404, {"message": "not found", "url": f"{self.server.url}/api/swagger"}
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
