"""Where papayu may send a credential (docs/DESIGN.md, "Providers").

A key travels only over https, or over plain http to this machine (a loopback address or
``localhost``): anything else can be read on the way. And a credential meant for one origin
never follows a redirect to another one.

It also holds the one HTTP retry policy of model and forge calls (`RetryPolicy`, `send_with_retries`):
429, 5xx and connection errors are retried with exponential backoff, a server's Retry-After
(seconds or an HTTP-date) wins, every wait is capped at MAX_RETRY_AFTER_SEC. What a final
failure means (its ERR_* code) stays with each caller.
"""

from __future__ import annotations

import ipaddress
import math
import time
from collections.abc import Callable, Iterable
from dataclasses import dataclass
from datetime import UTC
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


def credentials_stay_home(trusted_url: str, headers: Iterable[str]) -> Callable[[httpx.Request], None]:
    """An httpx request hook: ``headers`` (the credential ones) are removed from any request,
    redirects included, that does not go to the origin of ``trusted_url`` over a safe transport."""
    home = origin(trusted_url)
    names = tuple(headers)

    def hook(request: httpx.Request) -> None:
        url = str(request.url)
        if origin(url) != home or not may_carry_credentials(url):
            for name in names:
                request.headers.pop(name, None)

    return hook


# --- retries ------------------------------------------------------------------------------

MAX_RETRY_AFTER_SEC = 30.0  # no wait is longer, whatever a server's Retry-After asks (docs/PROTOCOL.md)


def retry_after_sec(value: str | None, now: float | None = None) -> float | None:
    """Seconds a `Retry-After` header asks for: delta-seconds or an HTTP-date (RFC 9110);
    a date in the past is 0; None when absent or unreadable."""
    if not value or not value.strip():
        return None
    value = value.strip()
    try:
        seconds = float(value)
    except ValueError:
        from email.utils import parsedate_to_datetime

        try:
            when = parsedate_to_datetime(value)
        except (TypeError, ValueError, IndexError):
            return None
        if when.tzinfo is None:  # an HTTP-date is always GMT
            when = when.replace(tzinfo=UTC)
        seconds = when.timestamp() - (time.time() if now is None else now)
    return max(0.0, seconds) if math.isfinite(seconds) else None


def retryable_status(status: int) -> bool:
    """Rate limited or a server error: worth another try."""
    return status == 429 or status >= 500


@dataclass(frozen=True)
class RetryPolicy:
    retries: int  # tries after the first one
    backoff_sec: float  # the first wait; doubled for each further retry
    max_delay_sec: float = MAX_RETRY_AFTER_SEC

    def delay(self, attempt: int, retry_after: str | None = None) -> float:
        """The wait after failed try ``attempt`` (0-based): the server's Retry-After when it
        gives a readable one, else exponential backoff; capped, never negative."""
        asked = retry_after_sec(retry_after)
        delay = self.backoff_sec * (2**attempt) if asked is None else asked
        return max(0.0, min(delay, self.max_delay_sec))


def send_with_retries(
    policy: RetryPolicy,
    send: Callable[[], httpx.Response],
    *,
    on_retry: Callable[[int, float], None],
    retry_response: Callable[[httpx.Response], bool] = lambda r: retryable_status(r.status_code),
    no_retry: tuple[type[BaseException], ...] = (),
) -> httpx.Response:
    """Call ``send`` until it returns a response ``retry_response`` accepts, or the retries are
    spent (then the last response is returned, or the last connection error raised). Exceptions
    in ``no_retry`` (e.g. the model's timeout) propagate at once. ``on_retry(attempt, delay)``
    runs before each wait (the caller's EVENT line)."""
    import httpx

    for attempt in range(policy.retries + 1):
        last = attempt == policy.retries
        try:
            response = send()
        except no_retry:
            raise
        except httpx.TransportError:
            if last:
                raise
            delay = policy.delay(attempt)
        else:
            if last or not retry_response(response):
                return response
            delay = policy.delay(attempt, response.headers.get("retry-after"))
        on_retry(attempt, delay)
        time.sleep(delay)
    raise AssertionError("unreachable")
