"""GitHub / GitLab / Gitea REST: open a pull (merge) request, read a commit's checks
(docs/DESIGN.md, "Hooks and PRs").

httpx is imported lazily; ``transport`` (httpx.Client(transport=…)) is the one seam.
Tokens come from the environment only (GH_TOKEN/GITHUB_TOKEN, GITLAB_TOKEN,
GITEA_TOKEN); they go into request headers and nowhere else.
"""

from __future__ import annotations

import os
import re
import time
from dataclasses import dataclass, field
from enum import StrEnum
from typing import TYPE_CHECKING, Any, NamedTuple
from urllib.parse import quote, urlsplit

from papayu_git import output, settings
from papayu_git.errors import PapayuError
from papayu_git.net import (
    RetryPolicy,
    credentials_stay_home,
    may_carry_credentials,
    retryable_status,
    send_with_retries,
)
from papayu_git.secrets import safe_text

if TYPE_CHECKING:
    import httpx


class ForgeKind(StrEnum):
    GITHUB = "github"
    GITLAB = "gitlab"
    GITEA = "gitea"


TOKEN_ENV: dict[ForgeKind, tuple[str, ...]] = {
    ForgeKind.GITHUB: ("GH_TOKEN", "GITHUB_TOKEN"),
    ForgeKind.GITLAB: ("GITLAB_TOKEN",),
    ForgeKind.GITEA: ("GITEA_TOKEN",),
}
_HOST_HINTS = (
    ("github", ForgeKind.GITHUB),
    ("gitlab", ForgeKind.GITLAB),
    ("gitea", ForgeKind.GITEA),
    ("codeberg", ForgeKind.GITEA),
    ("forgejo", ForgeKind.GITEA),
)
_API_SUFFIX = {ForgeKind.GITHUB: "/api/v3", ForgeKind.GITLAB: "/api/v4", ForgeKind.GITEA: "/api/v1"}
_SCP_LIKE = re.compile(r"^(?:[^@/]+@)?(?P<host>[^:/]+):(?P<path>(?!//).+)$")
# 5xx / 429 / connection errors are retried quietly (an EVENT line each), Retry-After honoured.
RETRY = RetryPolicy(retries=2, backoff_sec=0.5)
TIMEOUT_SEC = 30.0


class RemoteRepo(NamedTuple):
    host: str  # "" for local paths and file:// URLs
    path: str  # owner/name (GitLab: group/subgroup/project), without .git

    @property
    def owner(self) -> str:
        return self.path.rsplit("/", 1)[0]

    @property
    def name(self) -> str:
        return self.path.rsplit("/", 1)[-1]


def parse_remote_url(url: str) -> RemoteRepo:
    """https://, ssh://, git://, scp-like git@host:o/r.git, file:// and plain paths."""
    if "://" in url:
        parts = urlsplit(url)
        host = "" if parts.scheme == "file" else (parts.hostname or "")
        path = parts.path
    elif (m := _SCP_LIKE.match(url)) and not url.startswith(("/", ".")):
        host, path = m["host"], m["path"]
    else:
        host, path = "", url
    path = path.strip("/")
    path = path[:-4] if path.endswith(".git") else path
    if not host:  # a local repository: its last two path components name it
        path = "/".join(path.split("/")[-2:])
    if "/" not in path:
        raise PapayuError(
            "ERR_FORGE_UNKNOWN",
            f"cannot read owner/repository from remote URL {url!r}",
            hint="Use a remote URL like https://host/owner/repo.git.",
        )
    return RemoteRepo(host.lower(), path)


def guess_kind(remote: RemoteRepo) -> ForgeKind | None:
    for word, kind in _HOST_HINTS:
        if word in remote.host:
            return kind
    return None


@dataclass(frozen=True)
class Forge:
    kind: ForgeKind
    repo: RemoteRepo
    api_url: str
    web_url: str
    token: str | None = field(default=None, repr=False)

    @property
    def gitlab_project(self) -> str:
        return quote(self.repo.path, safe="")


def default_api_url(kind: ForgeKind, host: str) -> str:
    if kind is ForgeKind.GITHUB and host in ("github.com", "www.github.com"):
        return "https://api.github.com"
    return f"https://{host}{_API_SUFFIX[kind]}" if host else ""


def web_url_from_api(api_url: str) -> str:
    if not api_url:
        return ""
    if api_url.rstrip("/") == "https://api.github.com":
        return "https://github.com"
    return re.sub(r"/api/v\d+/?$", "", api_url.rstrip("/"))


def token_for(kind: ForgeKind) -> str | None:
    for name in TOKEN_ENV[kind]:
        if os.environ.get(name):
            return os.environ[name]
    return None


def resolve_forge(remote_url: str, kind: str | None, *, cwd: str | None = None) -> Forge:
    """The forge of ``remote_url``: --forge / papayu.forge.type, else guessed from the host name."""
    remote = parse_remote_url(remote_url)
    chosen = (kind or settings.get("forge_type", cwd) or "").strip().lower()
    if chosen and chosen not in {k.value for k in ForgeKind}:
        raise PapayuError(
            "ERR_FORGE_UNKNOWN",
            f"unknown forge type {chosen!r}",
            hint="Use github, gitlab or gitea (--forge, PAPAYU_FORGE_TYPE, papayu.forge.type).",
        )
    forge_kind = ForgeKind(chosen) if chosen else guess_kind(remote)
    if forge_kind is None:
        raise PapayuError("ERR_FORGE_UNKNOWN", f"cannot tell the forge of {remote_url!r}")
    api = settings.get("forge_api_url", cwd).rstrip("/") or default_api_url(forge_kind, remote.host)
    web = settings.get("forge_web_url", cwd).rstrip("/") or (
        f"https://{remote.host}" if remote.host else web_url_from_api(api)
    )
    return Forge(forge_kind, remote, api, web, token_for(forge_kind))


def compare_url(forge: Forge, base: str, head: str) -> str:
    """Where a person opens the pull request by hand (no token)."""
    if not forge.web_url:
        return ""
    root = f"{forge.web_url}/{forge.repo.path}"
    if forge.kind is ForgeKind.GITLAB:
        return (
            f"{root}/-/merge_requests/new?merge_request%5Bsource_branch%5D={quote(head, safe='')}"
            f"&merge_request%5Btarget_branch%5D={quote(base, safe='')}"
        )
    suffix = "?expand=1" if forge.kind is ForgeKind.GITHUB else ""
    return f"{root}/compare/{quote(base, safe='/')}...{quote(head, safe='/')}{suffix}"


# --- HTTP ---------------------------------------------------------------------


_TOKEN_HEADERS = ("Authorization", "PRIVATE-TOKEN")


def _headers(forge: Forge) -> dict[str, str]:
    headers = {"User-Agent": "papayu-git", "Accept": "application/json"}
    if forge.kind is ForgeKind.GITHUB:
        headers.update({"Accept": "application/vnd.github+json", "X-GitHub-Api-Version": "2022-11-28"})
    if forge.token:
        headers.update(
            {
                ForgeKind.GITHUB: {"Authorization": f"Bearer {forge.token}"},
                ForgeKind.GITLAB: {"PRIVATE-TOKEN": forge.token},
                ForgeKind.GITEA: {"Authorization": f"token {forge.token}"},
            }[forge.kind]
        )
    return headers


def client(forge: Forge, transport: httpx.BaseTransport | None = None) -> httpx.Client:
    import httpx

    if not forge.api_url:
        raise PapayuError(
            "ERR_FORGE_UNKNOWN",
            "no API URL for this forge",
            hint="Set PAPAYU_FORGE_API_URL or git config papayu.forge.apiUrl.",
        )
    if forge.token and not may_carry_credentials(forge.api_url):
        raise PapayuError(
            "ERR_FORGE_INSECURE_TOKEN",
            f"the forge token would cross plain http: {forge.api_url}",
            hint="Use an https:// API URL (plain http only to this machine).",
        )
    # Redirects are followed (renamed repositories), but the token never leaves the API's origin.
    hooks = {"request": [credentials_stay_home(forge.api_url, _TOKEN_HEADERS)]}
    return httpx.Client(
        base_url=forge.api_url,
        headers=_headers(forge),
        timeout=TIMEOUT_SEC,
        transport=transport,
        follow_redirects=True,
        event_hooks=hooks,
    )


def message_of(response: httpx.Response) -> str:
    """The forge's own error text (GitHub message+errors, GitLab message/error, Gitea message)."""
    try:
        data = response.json()
    except ValueError:
        return response.text.strip()[:300]
    if not isinstance(data, dict):
        return str(data)[:300]
    parts = [str(data.get("message") or data.get("error") or "")]
    for item in data.get("errors") or []:
        parts.append(str(item.get("message", item)) if isinstance(item, dict) else str(item))
    return "; ".join(p for p in parts if p)[:500]


def request(
    http: httpx.Client,
    method: str,
    url: str,
    *,
    ok: tuple[int, ...] = (200, 201),
    passthrough: tuple[int, ...] = (),
    **kwargs: Any,
) -> httpx.Response:
    """One API call under the shared retry policy (net.RetryPolicy: 5xx, 429, connection errors);
    maps 401/403/404/other to ERR_FORGE_*."""
    import httpx

    def on_retry(attempt: int, delay: float) -> None:
        output.event("FORGE_RETRY", method=method, url=url, attempt=attempt + 1, delay_sec=round(delay, 3))

    expected = (*ok, *passthrough)
    try:
        response = send_with_retries(
            RETRY,
            lambda: http.request(method, url, **kwargs),
            on_retry=on_retry,
            retry_response=lambda r: r.status_code not in expected and retryable_status(r.status_code),
        )
    except httpx.TransportError as exc:
        raise PapayuError(
            "ERR_FORGE_HTTP",
            f"{method} {url}: {type(exc).__name__}: {exc}",
            hint="Is the forge reachable? Check PAPAYU_FORGE_API_URL.",
        ) from None
    if response.status_code in expected:
        return response
    raise _http_error(method, url, response)


def _http_error(method: str, url: str, response: httpx.Response) -> PapayuError:
    status = response.status_code
    code = {401: "ERR_FORGE_AUTH", 403: "ERR_FORGE_AUTH", 404: "ERR_FORGE_NOT_FOUND"}.get(status, "ERR_FORGE_HTTP")
    return PapayuError(code, f"{method} {url} -> HTTP {status}: {message_of(response)}")


# --- pull / merge requests -----------------------------------------------------


class PullRequest(NamedTuple):
    number: int
    url: str
    existing: bool  # the forge already had one for this branch: reused


def _already_exists(response: httpx.Response) -> bool:
    # GitHub: 422 "A pull request already exists for o:b"; GitLab: 409 "Another open merge
    # request already exists for this source branch"; Gitea: 409 (older: 422) "pull request already exists".
    return response.status_code in (409, 422) and "already exist" in message_of(response).lower()


def open_pull_request(
    forge: Forge,
    *,
    head: str,
    base: str,
    title: str,
    body: str,
    draft: bool = False,
    transport: httpx.BaseTransport | None = None,
) -> PullRequest:
    """Create the PR/MR; when the forge says one already exists for ``head``, find and reuse it.
    The title and body leave the machine masked, their control characters escaped."""
    title, body = safe_text(title), safe_text(body, multiline=True)
    with client(forge, transport) as http:
        if forge.kind is ForgeKind.GITLAB:
            url = f"/projects/{forge.gitlab_project}/merge_requests"
            payload: dict[str, Any] = {
                "source_branch": head,
                "target_branch": base,
                "description": body,
                "title": f"Draft: {title}" if draft else title,
                "remove_source_branch": True,
            }
        else:
            url = f"/repos/{forge.repo.path}/pulls"
            payload = {"head": head, "base": base, "body": body, "title": title}
            if forge.kind is ForgeKind.GITHUB:
                payload["draft"] = draft
            elif draft:
                payload["title"] = f"WIP: {title}"  # Gitea marks WIP:-titled pulls as drafts
        response = request(http, "POST", url, json=payload, passthrough=(409, 422))
        if response.status_code in (200, 201):
            return _pull_from(forge, response.json(), existing=False)
        if not _already_exists(response):
            raise _http_error("POST", url, response)
        found = _find_open_pull(forge, http, head=head, base=base)
        if found is None:
            raise PapayuError(
                "ERR_FORGE_HTTP",
                f"the forge says a pull request for {head} exists, but none is open",
                hint="Open it in the forge's web UI.",
            )
        return found


def _pull_from(forge: Forge, data: dict[str, Any], *, existing: bool) -> PullRequest:
    if forge.kind is ForgeKind.GITLAB:
        return PullRequest(int(data["iid"]), str(data.get("web_url", "")), existing)
    return PullRequest(int(data["number"]), str(data.get("html_url", "")), existing)


def _find_open_pull(forge: Forge, http: httpx.Client, *, head: str, base: str) -> PullRequest | None:
    if forge.kind is ForgeKind.GITLAB:
        items = request(
            http,
            "GET",
            f"/projects/{forge.gitlab_project}/merge_requests",
            params={"source_branch": head, "target_branch": base, "state": "opened"},
        ).json()
    elif forge.kind is ForgeKind.GITHUB:
        items = request(
            http,
            "GET",
            f"/repos/{forge.repo.path}/pulls",
            params={"head": f"{forge.repo.owner}:{head}", "base": base, "state": "open"},
        ).json()
    else:
        items = request(http, "GET", f"/repos/{forge.repo.path}/pulls", params={"state": "open", "limit": 50}).json()
        items = [
            p for p in items if (p.get("head") or {}).get("ref") == head and (p.get("base") or {}).get("ref") == base
        ]
    return _pull_from(forge, items[0], existing=True) if items else None


# --- combined status / checks (land --when-green) ----------------------------


class ChecksState(StrEnum):
    GREEN = "green"
    RED = "red"
    PENDING = "pending"


class Checks(NamedTuple):
    state: ChecksState
    items: tuple[tuple[str, ChecksState], ...]  # (name, state) of every status / check run / pipeline

    def describe(self, state: ChecksState) -> str:
        return ", ".join(name for name, s in self.items if s is state)


_GREEN_WORDS = frozenset({"success", "neutral", "skipped"})
_RED_WORDS = frozenset(
    {"failure", "error", "failed", "canceled", "cancelled", "timed_out", "action_required", "stale", "warning"}
)


def _word_state(word: str | None) -> ChecksState:
    word = (word or "").lower()
    if word in _GREEN_WORDS:
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


def commit_checks(forge: Forge, http: httpx.Client, sha: str) -> Checks:
    """GitHub: combined status + check runs; Gitea: combined status; GitLab: pipelines/statuses."""
    if forge.kind is ForgeKind.GITLAB:
        return combine(_gitlab_items(forge, http, sha))
    page = {"per_page": 100} if forge.kind is ForgeKind.GITHUB else {"limit": 50}
    status = request(http, "GET", f"/repos/{forge.repo.path}/commits/{sha}/status", params=page).json()
    items = [
        (str(s.get("context") or "status"), _word_state(s.get("state") or s.get("status")))
        for s in status.get("statuses") or []
    ]
    if forge.kind is ForgeKind.GITHUB:
        runs = request(http, "GET", f"/repos/{forge.repo.path}/commits/{sha}/check-runs", params=page).json()
        for run in runs.get("check_runs") or []:
            done = run.get("status") == "completed"
            items.append(
                (str(run.get("name") or "check"), _word_state(run.get("conclusion")) if done else ChecksState.PENDING)
            )
    return combine(items)


def _gitlab_items(forge: Forge, http: httpx.Client, sha: str) -> list[tuple[str, ChecksState]]:
    # The newest pipeline of the commit decides (a retried pipeline replaces a failed one);
    # without pipelines, external commit statuses do.
    project = f"/projects/{forge.gitlab_project}"
    pipelines = request(http, "GET", f"{project}/pipelines", params={"sha": sha}).json()
    if pipelines:
        latest = max(pipelines, key=lambda p: int(p.get("id", 0)))
        return [(f"pipeline {latest.get('id')}", _word_state(latest.get("status")))]
    statuses = request(http, "GET", f"{project}/repository/commits/{sha}/statuses").json()
    return [(str(s.get("name") or "status"), _word_state(s.get("status"))) for s in statuses]


def wait_until_green(
    forge: Forge, sha: str, *, timeout: float, interval: float, transport: httpx.BaseTransport | None = None
) -> Checks:
    """Poll until the checks of ``sha`` are green; ERR_CHECKS_RED / ERR_CHECKS_TIMEOUT otherwise."""
    deadline = time.monotonic() + timeout
    with output.progress(f"waiting for the checks of {sha[:12]}"), client(forge, transport) as http:
        while True:
            checks = commit_checks(forge, http, sha)
            output.event("CHECKS_POLLED", sha=sha, state=checks.state.value, checks=len(checks.items))
            if checks.state is ChecksState.GREEN:
                return checks
            if checks.state is ChecksState.RED:
                raise PapayuError(
                    "ERR_CHECKS_RED", f"checks failed for {sha[:12]}: {checks.describe(ChecksState.RED)}", path=sha
                )
            if time.monotonic() + interval > deadline:
                waiting = checks.describe(ChecksState.PENDING) or "no check reported yet"
                raise PapayuError(
                    "ERR_CHECKS_TIMEOUT", f"checks of {sha[:12]} still pending after {timeout:g}s: {waiting}", path=sha
                )
            time.sleep(interval)
