"""Where papayu may send a credential (docs/DESIGN.md, "Providers").

A key travels only over https, or over plain http to this machine (a loopback address or
``localhost``): anything else can be read on the way. And a credential meant for one origin
never follows a redirect to another one.
"""

from __future__ import annotations

import ipaddress
from collections.abc import Callable, Iterable
from typing import TYPE_CHECKING
from urllib.parse import urlsplit

if TYPE_CHECKING:
    import httpx


def is_loopback(host: str) -> bool:
    host = host.strip("[]").rstrip(".").lower()
    if host == "localhost" or host.endswith(".localhost"):
        return True
    try:
        return ipaddress.ip_address(host).is_loopback
    except ValueError:
        return False


def may_carry_credentials(url: str) -> bool:
    """True when a secret sent to ``url`` cannot be read on the wire."""
    parts = urlsplit(url)
    scheme = parts.scheme.lower()
    return scheme == "https" or (scheme == "http" and is_loopback(parts.hostname or ""))


def origin(url: str) -> tuple[str, str, int | None]:
    parts = urlsplit(url)
    scheme = parts.scheme.lower()
    try:
        port = parts.port or {"http": 80, "https": 443}.get(scheme)
    except ValueError:
        port = None
    return scheme, (parts.hostname or "").lower(), port


def credentials_stay_home(trusted_url: str, headers: Iterable[str]) -> Callable[["httpx.Request"], None]:
    """An httpx request hook: ``headers`` (the credential ones) are removed from any request,
    redirects included, that does not go to the origin of ``trusted_url`` over a safe transport."""
    home = origin(trusted_url)
    names = tuple(headers)

    def hook(request: "httpx.Request") -> None:
        url = str(request.url)
        if origin(url) != home or not may_carry_credentials(url):
            for name in names:
                request.headers.pop(name, None)

    return hook
