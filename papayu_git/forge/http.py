"""One forge's REST API over httpx (docs/DESIGN.md, "Hooks and PRs").

httpx is imported lazily; ``transport`` (httpx.Client(transport=…)) is the one seam. Tokens
come from the environment only and go into request headers, never anywhere else, and never
follow a redirect off the API's origin. Every call runs under the shared retry policy
(net.RetryPolicy: 5xx, 429 and connection errors) unless it must not be repeated (a merge);
every failure is a `ForgeError` naming the full URL, masked, and whether waiting could help.
"""

from __future__ import annotations

from collections.abc import Iterator
from contextlib import contextmanager
from typing import TYPE_CHECKING, Any

from papayu_git import output
from papayu_git.errors import PapayuError
from papayu_git.forge.remote import Forge, ForgeKind, strip_userinfo
from papayu_git.net import (
    RetryPolicy,
    credentials_stay_home,
    may_carry_credentials,
    retryable_status,
    send_with_retries,
)
from papayu_git.secrets import mask

if TYPE_CHECKING:
    import httpx

# 5xx / 429 / connection errors are retried quietly (an EVENT line each), Retry-After honoured.
RETRY = RetryPolicy(retries=2, backoff_sec=0.5)
NO_RETRY = RetryPolicy(retries=0, backoff_sec=0.0)
TIMEOUT_SEC = 30.0
_TOKEN_HEADERS = ("Authorization", "PRIVATE-TOKEN")


class ForgeError(PapayuError):
    """A forge call that failed. ``status``: the HTTP status, None when no answer came
    (connection refused, name not resolved, timed out)."""

    def __init__(self, code: str, reason: str, *, status: int | None, hint: str | None = None) -> None:
        super().__init__(code, reason, hint=hint)
        self.status = status
        self.rate_limited = False

    @property
    def transient(self) -> bool:
        """Waiting may help: no answer, a server error, a rate limit. 401, 403 and 404 are final."""
        return self.status is None or self.rate_limited or retryable_status(self.status)


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


def ensure_usable(forge: Forge) -> None:
    """Refuse before anything leaves the machine: no API URL, or a token that would cross plain http."""
    if not forge.api_url:
        raise PapayuError(
            "ERR_FORGE_UNKNOWN",
            "no API URL for this forge",
            hint="Set PAPAYU_FORGE_API_URL or git config papayu.forge.apiUrl.",
        )
    if forge.token and not may_carry_credentials(forge.api_url):
        raise PapayuError(
            "ERR_FORGE_INSECURE_TOKEN",
            f"the forge token would cross plain http: {shown(forge.api_url)}",
            hint="Use an https:// API URL (plain http only to this machine).",
        )


def client(forge: Forge, transport: httpx.BaseTransport | None = None) -> httpx.Client:
    import httpx

    ensure_usable(forge)
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


def shown(url: str) -> str:
    """A URL as papayu prints it: no user or password, secrets masked."""
    return mask(strip_userinfo(url))


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


class Api:
    """The REST API of ``forge`` over the client ``http``."""

    def __init__(self, forge: Forge, http: httpx.Client) -> None:
        self.forge = forge
        self.http = http

    def url(self, path: str) -> str:
        """The full URL of ``path`` as httpx sends it (the base URL's path, then ``path``)."""
        return shown(str(self.http.base_url).rstrip("/") + "/" + path.lstrip("/"))

    def call(
        self,
        method: str,
        path: str,
        *,
        ok: tuple[int, ...] = (200, 201),
        passthrough: tuple[int, ...] = (),
        retry: bool = True,
        **kwargs: Any,
    ) -> httpx.Response:
        """One call; ``passthrough`` statuses are returned for the caller to read; ``retry``
        False for a call that must not be repeated blindly (a merge: the caller reads the
        result back instead)."""
        import httpx

        def on_retry(attempt: int, delay: float) -> None:
            output.event(
                "FORGE_RETRY", method=method, url=self.url(path), attempt=attempt + 1, delay_sec=round(delay, 3)
            )

        expected = (*ok, *passthrough)
        try:
            response = send_with_retries(
                RETRY if retry else NO_RETRY,
                lambda: self.http.request(method, path, **kwargs),
                on_retry=on_retry,
                retry_response=lambda r: r.status_code not in expected and retryable_status(r.status_code),
            )
        except httpx.TransportError as exc:
            raise ForgeError(
                "ERR_FORGE_UNREACHABLE",
                f"{method} {self.url(path)}: no answer ({type(exc).__name__}: {mask(str(exc)) or 'no detail'})",
                status=None,
                hint=f"Is the forge up at {shown(self.forge.api_url)}? Else set papayu.forge.apiUrl "
                "(PAPAYU_FORGE_API_URL).",
            ) from None
        if response.status_code in expected:
            return response
        raise self.error(method, path, response)

    def json(self, method: str, path: str, **kwargs: Any) -> Any:
        return self.call(method, path, **kwargs).json()

    def error(self, method: str, path: str, response: httpx.Response) -> ForgeError:
        status = response.status_code
        what = f"{method} {self.url(path)} -> HTTP {status}: {message_of(response)}"
        limited = status in (403, 429) and (
            response.headers.get("x-ratelimit-remaining") == "0" or "retry-after" in response.headers
        )
        if status in (401, 403) and not limited:
            err = ForgeError(
                "ERR_FORGE_AUTH",
                what,
                status=status,
                hint=f"Check {self.forge.token_names}: set, not expired, and allowed to use {self.forge.repo.path}.",
            )
        elif status == 404:
            err = ForgeError(
                "ERR_FORGE_NOT_FOUND",
                what,
                status=status,
                hint=f"Check that {self.forge.repo.path} exists at {shown(self.forge.web_url or self.forge.api_url)} "
                "and the token may read it; else set papayu.forge.repository (owner/name) or papayu.forge.apiUrl.",
            )
        else:
            err = ForgeError("ERR_FORGE_HTTP", what, status=status)
        err.rate_limited = limited
        return err


@contextmanager
def connect(forge: Forge, transport: httpx.BaseTransport | None = None) -> Iterator[Api]:
    with client(forge, transport) as http:
        yield Api(forge, http)
