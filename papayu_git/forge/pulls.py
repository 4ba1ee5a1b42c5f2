"""Pull (merge) requests: open or reuse one, read it, merge it with its head pinned, close it
with a comment, delete its branch (docs/DESIGN.md, "Hooks and PRs").

The merge takes the first method the repository allows in the order that leaves the target on
the checked tree with the least rewriting: fast-forward, rebase, then squash and merge commit.
It is sent once: a 405 or 409 is the forge's final answer, and an error without one (a 5xx, a
dropped connection) is settled by reading the pull request back, never by merging again.
"""

from __future__ import annotations

import time
from typing import Any, NamedTuple
from urllib.parse import quote

from papayu_git import output
from papayu_git.errors import PapayuError
from papayu_git.forge.http import Api, ForgeError, message_of
from papayu_git.forge.remote import ForgeKind
from papayu_git.secrets import safe_text

PUSHED_BRANCH_SETTLE_SEC = 15.0  # how long a forge may take to know a branch papayu just pushed


class PullRequest(NamedTuple):
    number: int
    url: str
    existing: bool  # the forge already had one for this branch: reused


class PullState(NamedTuple):
    number: int
    state: str  # open, closed or merged
    head_sha: str
    merge_sha: str | None  # the forge's merge commit, once merged (None on a GitLab fast-forward)
    mergeable: bool | None  # None: the forge is still computing it


class Merged(NamedTuple):
    method: str  # the forge's word: rebase, fast-forward-only, squash, merge, ff, …
    sha: str | None  # what the forge reported, if anything; the target branch itself is the truth


def _already_exists(response: Any) -> bool:
    # GitHub: 422 "A pull request already exists for o:b"; GitLab: 409 "Another open merge
    # request already exists for this source branch"; Gitea: 409 (older: 422) "pull request already exists".
    return response.status_code in (409, 422) and "already exist" in message_of(response).lower()


def _pulls(api: Api) -> str:
    if api.forge.kind is ForgeKind.GITLAB:
        return f"/projects/{api.forge.gitlab_project}/merge_requests"
    return f"/repos/{api.forge.repo.path}/pulls"


def open_pull_request(api: Api, *, head: str, base: str, title: str, body: str, draft: bool = False) -> PullRequest:
    """Create the PR/MR; when the forge says one already exists for ``head``, find and reuse it.
    The title and body leave the machine masked, their control characters escaped."""
    title, body = safe_text(title), safe_text(body, multiline=True)
    if api.forge.kind is ForgeKind.GITLAB:
        payload: dict[str, Any] = {
            "source_branch": head,
            "target_branch": base,
            "description": body,
            "title": f"Draft: {title}" if draft else title,
            "remove_source_branch": True,
        }
    else:
        payload = {"head": head, "base": base, "body": body, "title": title}
        if api.forge.kind is ForgeKind.GITHUB:
            payload["draft"] = draft
        elif draft:
            payload["title"] = f"WIP: {title}"  # Gitea marks WIP:-titled pulls as drafts
    settle = time.monotonic() + PUSHED_BRANCH_SETTLE_SEC
    while True:
        response = api.call("POST", _pulls(api), json=payload, passthrough=(404, 409, 422))
        if response.status_code in (200, 201):
            return _pull_from(api, response.json(), existing=False)
        if not _head_not_known_yet(api, response) or time.monotonic() > settle:
            break
        output.event("FORGE_BRANCH_NOT_KNOWN_YET", branch=head, status=response.status_code)
        time.sleep(0.5)
    if not _already_exists(response):
        raise api.error("POST", _pulls(api), response)
    found = _find_open_pull(api, head=head, base=base)
    if found is None:
        raise PapayuError(
            "ERR_FORGE_HTTP",
            f"the forge says a pull request for {head} exists, but none is open",
            hint="Open it in the forge's web UI.",
        )
    return found


def _head_not_known_yet(api: Api, response: Any) -> bool:
    """The branch was just pushed, but the forge's API indexes pushes asynchronously (Gitea's
    push queue: 404 for a head it has not recorded yet; GitHub: 422 on `head`): worth a few
    more tries, while the repository itself is there (a missing one is 404 too)."""
    if response.status_code == 422:
        data = response.json() if _is_json(response) else {}
        if not any(isinstance(e, dict) and e.get("field") == "head" for e in data.get("errors") or []):
            return False
    elif response.status_code != 404:
        return False
    where = (
        f"/projects/{api.forge.gitlab_project}"
        if api.forge.kind is ForgeKind.GITLAB
        else f"/repos/{api.forge.repo.path}"
    )
    return api.call("GET", where, passthrough=(404,)).status_code == 200


def _is_json(response: Any) -> bool:
    try:
        return isinstance(response.json(), dict)
    except ValueError:
        return False


def _pull_from(api: Api, data: dict[str, Any], *, existing: bool) -> PullRequest:
    if api.forge.kind is ForgeKind.GITLAB:
        return PullRequest(int(data["iid"]), str(data.get("web_url", "")), existing)
    return PullRequest(int(data["number"]), str(data.get("html_url", "")), existing)


def _find_open_pull(api: Api, *, head: str, base: str) -> PullRequest | None:
    forge = api.forge
    if forge.kind is ForgeKind.GITLAB:
        params: dict[str, Any] = {"source_branch": head, "target_branch": base, "state": "opened"}
    elif forge.kind is ForgeKind.GITHUB:
        params = {"head": f"{forge.repo.owner}:{head}", "base": base, "state": "open"}
    else:
        params = {"state": "open", "limit": 50}
    items = api.json("GET", _pulls(api), params=params)
    if forge.kind is ForgeKind.GITEA:  # Gitea's list has no head filter
        items = [
            p for p in items if (p.get("head") or {}).get("ref") == head and (p.get("base") or {}).get("ref") == base
        ]
    return _pull_from(api, items[0], existing=True) if items else None


# --- reading and merging ------------------------------------------------------------------

_GITLAB_UNSETTLED = frozenset({"unchecked", "checking", "preparing", "approvals_syncing", "cannot_be_merged_recheck"})


def read_pull(api: Api, number: int) -> PullState:
    data = api.json("GET", f"{_pulls(api)}/{number}")
    if api.forge.kind is ForgeKind.GITLAB:
        state = {"opened": "open", "locked": "open"}.get(str(data.get("state")), str(data.get("state")))
        detailed = str(data.get("detailed_merge_status") or data.get("merge_status") or "")
        mergeable = None if detailed in _GITLAB_UNSETTLED else detailed in ("mergeable", "can_be_merged")
        merge_sha = data.get("merge_commit_sha") or data.get("squash_commit_sha")
        return PullState(number, state, str(data.get("sha") or ""), merge_sha, mergeable)
    merged = bool(data.get("merged"))
    state = "merged" if merged else str(data.get("state") or "")
    head = str((data.get("head") or {}).get("sha") or "")
    # GitHub fills merge_commit_sha with a test merge while the pull request is open: only a merged one counts
    merge_sha = (data.get("merge_commit_sha") or None) if merged else None
    return PullState(number, state, head, merge_sha, data.get("mergeable"))


def merge_methods(api: Api) -> list[str]:
    """The repository's allowed methods, the one that rewrites least first. GitLab merges the
    way the project is set up (merge_method), so it has one."""
    forge = api.forge
    if forge.kind is ForgeKind.GITLAB:
        project = api.json("GET", f"/projects/{forge.gitlab_project}")
        return [str(project.get("merge_method") or "merge")]
    repo = api.json("GET", f"/repos/{forge.repo.path}")
    if forge.kind is ForgeKind.GITEA:
        allowed = {
            "fast-forward-only": repo.get("allow_fast_forward_only_merge"),
            "rebase": repo.get("allow_rebase"),
            "rebase-merge": repo.get("allow_rebase_explicit"),
            "squash": repo.get("allow_squash_merge"),
            "merge": repo.get("allow_merge_commits"),
        }
    else:  # GitHub shows these fields only to a token that may push; unknown ones are tried
        allowed = {
            "rebase": repo.get("allow_rebase_merge"),
            "squash": repo.get("allow_squash_merge"),
            "merge": repo.get("allow_merge_commit"),
        }
    return [method for method, ok in allowed.items() if ok is not False]


def wait_mergeable(api: Api, number: int, *, until: float, poll: float = 1.0) -> PullState:
    """The forges compute mergeability after a push, asynchronously (GitHub's null, Gitea's
    false while checking, GitLab's checking): give them until ``until`` (monotonic)."""
    while True:
        pull = read_pull(api, number)
        if pull.mergeable or pull.state != "open" or time.monotonic() + poll > until:
            return pull
        time.sleep(poll)


def merge_pull(api: Api, number: int, sha: str, *, delete_branch: bool = True) -> Merged:
    """Merge pull request ``number`` with its head pinned to ``sha``; ERR_FORGE_MERGE_REFUSED
    (405, 422, a server error) or ERR_FORGE_MERGE_CONFLICT (409) otherwise."""
    methods = merge_methods(api)
    if not methods:
        raise PapayuError(
            "ERR_FORGE_MERGE_REFUSED",
            f"{api.forge.repo.path} allows no merge method papayu can use",
            hint="Allow rebase or fast-forward merges in the repository's settings, or set papayu.forge.land=local.",
        )
    last: ForgeError | None = None
    for method in methods:
        path, payload = _merge_request(api, number, sha, method, delete_branch)
        try:
            response = api.call(
                "PUT" if api.forge.kind is not ForgeKind.GITEA else "POST", path, json=payload, retry=False
            )
        except ForgeError as err:
            done = _merged_anyway(api, number, sha)
            if done is not None:
                return Merged(method, done)
            if _method_not_allowed(api, err):
                last = err
                continue  # GitHub hid which methods it allows: try the next one
            raise _final(err) from None
        data = response.json() if response.content else {}
        reported = data.get("sha") if api.forge.kind is ForgeKind.GITHUB else None
        if api.forge.kind is ForgeKind.GITLAB:
            reported = data.get("merge_commit_sha") or data.get("squash_commit_sha") or data.get("sha")
        output.event("FORGE_MERGED", number=number, method=method, sha=sha)
        return Merged(method, str(reported) if reported else None)
    assert last is not None
    raise _final(last)


def _merge_request(api: Api, number: int, sha: str, method: str, delete_branch: bool) -> tuple[str, dict[str, Any]]:
    path = f"{_pulls(api)}/{number}/merge"
    if api.forge.kind is ForgeKind.GITLAB:
        return path, {"sha": sha, "should_remove_source_branch": delete_branch}
    if api.forge.kind is ForgeKind.GITEA:
        return path, {"Do": method, "head_commit_id": sha, "delete_branch_after_merge": delete_branch}
    return path, {"sha": sha, "merge_method": method}


def _merged_anyway(api: Api, number: int, sha: str) -> str | None:
    """After a failed merge call: did the forge merge exactly ``sha`` all the same (a proxy's
    5xx after the work was done, a retried request)? Its merge sha, "" when it gave none."""
    try:
        pull = read_pull(api, number)
    except ForgeError:
        return None
    if pull.state == "merged" and pull.head_sha in ("", sha):
        return pull.merge_sha or ""
    return None


def _method_not_allowed(api: Api, err: ForgeError) -> bool:
    return api.forge.kind is ForgeKind.GITHUB and err.status == 405 and "are not allowed" in err.reason


def _final(err: ForgeError) -> PapayuError:
    if err.code in ("ERR_FORGE_AUTH", "ERR_FORGE_NOT_FOUND", "ERR_FORGE_UNREACHABLE"):
        return err
    if err.status == 409:
        return PapayuError(
            "ERR_FORGE_MERGE_CONFLICT",
            err.reason,
            hint="The pull request's head or target moved on the forge: nothing landed. Look at it on the forge; "
            "re-plan on the new tip if the target moved.",
        )
    return PapayuError("ERR_FORGE_MERGE_REFUSED", err.reason)


# --- after the landing -----------------------------------------------------------------------


def delete_branch(api: Api, branch: str) -> None:
    """Delete ``branch`` on the forge; one already gone counts as deleted."""
    forge = api.forge
    if forge.kind is ForgeKind.GITLAB:
        path = f"/projects/{forge.gitlab_project}/repository/branches/{quote(branch, safe='')}"
    elif forge.kind is ForgeKind.GITHUB:
        path = f"/repos/{forge.repo.path}/git/refs/heads/{quote(branch, safe='/')}"
    else:
        path = f"/repos/{forge.repo.path}/branches/{quote(branch, safe='/')}"
    api.call("DELETE", path, ok=(200, 204), passthrough=(404, 422))


def close_with_comment(api: Api, number: int, comment: str) -> None:
    """Say why on the pull request, then close it (papayu.forge.land=local)."""
    forge = api.forge
    comment = safe_text(comment, multiline=True)
    if forge.kind is ForgeKind.GITLAB:
        api.call("POST", f"{_pulls(api)}/{number}/notes", json={"body": comment})
        api.call("PUT", f"{_pulls(api)}/{number}", json={"state_event": "close"})
        return
    api.call("POST", f"/repos/{forge.repo.path}/issues/{number}/comments", json={"body": comment})
    api.call("PATCH", f"{_pulls(api)}/{number}", json={"state": "closed"})
