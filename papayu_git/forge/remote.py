"""Which forge a git remote lives on, and where its API and web pages are
(docs/DESIGN.md, "Hooks and PRs").

A remote served over http(s) keeps its scheme, port and sub-path in the URLs papayu
derives from it: `http://127.0.0.1:3000/git/acme/widget.git` is a Gitea whose API is
`http://127.0.0.1:3000/git/api/v1` and whose repository is `acme/widget`. An ssh or git://
remote names only the host (its port is not the web's). `papayu.forge.repository` says
which part of the path is the repository when the rule guesses wrong (a GitLab served
under a sub-path), and `papayu.forge.apiUrl` / `papayu.forge.webUrl` replace either URL.
"""

from __future__ import annotations

import os
import re
from dataclasses import dataclass, field
from enum import StrEnum
from typing import NamedTuple
from urllib.parse import quote, urlsplit

from papayu_git import settings
from papayu_git.errors import PapayuError


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


class RemoteRepo(NamedTuple):
    host: str  # "" for local paths and file:// URLs
    path: str  # the repository: owner/name (GitLab: group/subgroup/project), without .git
    scheme: str = "https"  # of the web and API: the remote's own when it is http(s)
    port: int | None = None  # the remote's port when it is http(s)
    prefix: str = ""  # the sub-path a forge is served under ("git" in /git/owner/name.git)

    @property
    def owner(self) -> str:
        return self.path.rsplit("/", 1)[0]

    @property
    def name(self) -> str:
        return self.path.rsplit("/", 1)[-1]

    @property
    def base_url(self) -> str:
        """scheme://host[:port][/prefix], "" for a local remote."""
        if not self.host:
            return ""
        port = f":{self.port}" if self.port else ""
        prefix = f"/{self.prefix}" if self.prefix else ""
        return f"{self.scheme}://{self.host}{port}{prefix}"


def parse_remote_url(url: str) -> RemoteRepo:
    """https://, ssh://, git://, scp-like git@host:o/r.git, file:// and plain paths; ``path`` is
    the whole path (split into a sub-path and the repository by `locate`)."""
    scheme, port = "https", None
    if "://" in url:
        parts = urlsplit(url)
        host = "" if parts.scheme == "file" else (parts.hostname or "")
        path = parts.path
        if parts.scheme in ("http", "https"):
            scheme = parts.scheme
            try:
                port = parts.port
            except ValueError:
                port = None
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
            f"cannot read owner/repository from remote URL {strip_userinfo(url)!r}",
            hint="Use a remote URL like https://host/owner/repo.git, or set papayu.forge.repository (owner/name).",
        )
    return RemoteRepo(host.lower(), path, scheme, port)


def strip_userinfo(url: str) -> str:
    """The URL without a user or password (`https://user:pw@host/…` → `https://host/…`)."""
    return re.sub(r"^([a-z][a-z0-9+.-]*://)[^/@]*@", r"\1", url, flags=re.I)


def locate(remote: RemoteRepo, kind: ForgeKind, repository: str = "") -> RemoteRepo:
    """Split the remote's path into the forge's sub-path and the repository: ``repository``
    (papayu.forge.repository) when given, else owner/name on GitHub and Gitea, the whole path
    on GitLab (whose groups nest)."""
    whole = remote.path
    repository = repository.strip().strip("/")
    if repository.endswith(".git"):
        repository = repository[:-4]
    if repository:
        prefix = whole[: -len(repository)].strip("/") if whole.endswith(repository) else ""
        return remote._replace(path=repository, prefix=prefix)
    if kind is ForgeKind.GITLAB or not remote.host:
        return remote
    parts = whole.split("/")
    return remote._replace(path="/".join(parts[-2:]), prefix="/".join(parts[:-2]))


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

    @property
    def token_names(self) -> str:
        """The environment variables this forge's token is read from, for hints."""
        return " or ".join(TOKEN_ENV[self.kind])


def default_api_url(kind: ForgeKind, remote: RemoteRepo) -> str:
    if kind is ForgeKind.GITHUB and remote.host in ("github.com", "www.github.com"):
        return "https://api.github.com"
    return f"{remote.base_url}{_API_SUFFIX[kind]}" if remote.host else ""


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
        raise PapayuError(
            "ERR_FORGE_UNKNOWN",
            f"cannot tell the forge of {strip_userinfo(remote_url)!r}",
            hint="Pass --forge github|gitlab|gitea, or set papayu.forge.type.",
        )
    remote = locate(remote, forge_kind, settings.get("forge_repository", cwd))
    api = settings.get("forge_api_url", cwd).rstrip("/") or default_api_url(forge_kind, remote)
    web = settings.get("forge_web_url", cwd).rstrip("/") or remote.base_url or web_url_from_api(api)
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
