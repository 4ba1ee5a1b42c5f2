"""The SSRF-safe page fetch of online research (docs/DESIGN.md, "Online research").

A URL the web (a search result, a redirect) hands papayu is fetched only when it is http(s), at
most MAX_URL_LEN long, carries no user:password, and every address its host resolves to is a
public one: no loopback, private, link-local, multicast, reserved or unspecified address. The
check runs after DNS resolution, and the connection goes to the very IP that was checked (the
URL's host stays in the Host header and in TLS's SNI and certificate check), so a name that
resolves differently a moment later (DNS rebinding) cannot slip past it. Redirects are followed
by hand, at most MAX_REDIRECTS, each one checked again. Only text content types are read, and
reading stops at the byte cap. An IPv6 address that carries an IPv4 one to its destination
(IPv4-mapped, 6to4, Teredo, NAT64) is judged by that IPv4 address too: 2002:7f00:1:: is 127.0.0.1.
A fetch ends by its deadline whatever the server does: httpx's timeouts bound each read, so a page
that sends a byte a second would hold the fetch for hours; at the deadline papayu shuts the
connection's socket down (Cutoff). Name resolution counts too: getaddrinfo has no timeout of its
own (a DNS server that never answers holds it for resolv.conf's timeout times attempts, per
name), so it runs in a thread the fetch stops waiting for at the deadline. PAPAYU_ONLINE_ALLOW_HOSTS exempts named host[:port] from the
address rule only (intranet docs, tests on 127.0.0.1); every other rule still holds.
"""

from __future__ import annotations

import ipaddress
import socket
import threading
import time
from collections.abc import Callable, Collection, Iterator
from dataclasses import dataclass
from typing import Any
from urllib.parse import urljoin, urlsplit, urlunsplit

from papayu_git import output
from papayu_git.errors import PapayuError

MAX_URL_LEN = 2048
MAX_REDIRECTS = 5
TEXT_TYPES = frozenset({"text/html", "text/plain", "application/xhtml+xml", "text/markdown", "text/x-markdown"})
HTML_TYPES = frozenset({"text/html", "application/xhtml+xml"})
REDIRECTS = frozenset({301, 302, 303, 307, 308})

Resolver = Callable[..., list[tuple[Any, ...]]]


@dataclass(frozen=True)
class Page:
    url: str  # the URL asked for
    final_url: str  # after redirects
    content_type: str
    text: str  # readable text (HTML reduced to its main content)
    size: int  # bytes read


def blocked(reason: str, url: str = "") -> PapayuError:
    return PapayuError("ERR_FETCH_BLOCKED", reason, path=trace_url(url) if url else "")


def trace_url(url: str) -> str:
    """What a trace keeps of a URL: origin and path, no query string, fragment or credentials."""
    parts = urlsplit(url)
    host = parts.hostname or ""
    if ":" in host:
        host = f"[{host}]"
    netloc = f"{host}:{parts.port}" if _port_or_none(parts) else host
    return urlunsplit((parts.scheme, netloc, parts.path, "", ""))


def _port_or_none(parts: Any) -> int | None:
    try:
        return int(parts.port) if parts.port else None
    except ValueError:
        return None


_NAT64 = ipaddress.IPv6Network("64:ff9b::/96")


def _carried(ip: ipaddress.IPv6Address) -> Iterator[tuple[str, ipaddress.IPv4Address]]:
    """The IPv4 addresses a packet to ``ip`` ends up at, and how: 6to4 (2002::/16), Teredo
    (2001::/32: its server and its client), NAT64's well-known prefix."""
    if ip.sixtofour is not None:
        yield "6to4", ip.sixtofour
    if ip.teredo is not None:
        server, client = ip.teredo
        yield "Teredo", server
        yield "Teredo", client
    if ip in _NAT64:
        yield "NAT64", ipaddress.IPv4Address(int(ip) & 0xFFFFFFFF)


def address_problem(ip: ipaddress.IPv4Address | ipaddress.IPv6Address) -> str:
    """Why papayu will not connect to ``ip`` ('' when it may)."""
    if isinstance(ip, ipaddress.IPv6Address):
        if ip.ipv4_mapped is not None:
            return address_problem(ip.ipv4_mapped)
        for how, inner in _carried(ip):
            problem = address_problem(inner)
            if problem:
                return f"{how} address {ip} carrying {problem}"
    for attr, what in (
        ("is_unspecified", "unspecified"),
        ("is_loopback", "loopback"),
        ("is_link_local", "link-local"),
        ("is_multicast", "multicast"),
        ("is_reserved", "reserved"),
        ("is_private", "private"),  # last: Python counts several of the above as private too
    ):
        if getattr(ip, attr):
            return f"{what} address {ip}"
    return "" if ip.is_global else f"non-public address {ip}"


def parse_allow_hosts(text: str) -> frozenset[str]:
    return frozenset(h.strip().lower().strip("[]") for h in text.split(",") if h.strip())


def _allowed(host: str, port: int, allow_hosts: Collection[str]) -> bool:
    return host in allow_hosts or f"{host}:{port}" in allow_hosts


def check_url(
    url: str,
    allow_hosts: Collection[str] = (),
    resolver: Resolver = socket.getaddrinfo,
    *,
    deadline: float | None = None,
) -> str:
    """The IP to connect to for ``url``, after every rule held; else ERR_FETCH_BLOCKED with the
    reason. A name not resolved by ``deadline`` (time.monotonic()) is refused then."""
    if len(url) > MAX_URL_LEN:
        raise blocked(f"URL longer than {MAX_URL_LEN} characters")
    parts = urlsplit(url)
    scheme = parts.scheme.lower()
    if scheme not in ("http", "https"):
        raise blocked(f"scheme {scheme or '(none)'!r} is not http or https", url if scheme else "")
    if parts.username is not None or parts.password is not None or "@" in parts.netloc:
        raise blocked("credentials in the URL", url)
    host = (parts.hostname or "").lower().rstrip(".")
    if not host:
        raise blocked("no host in the URL", url)
    port = _port_or_none(parts)
    if parts.port is None and ":" in parts.netloc.rsplit("]", 1)[-1]:
        raise blocked("unreadable port", url)
    port = port or (443 if scheme == "https" else 80)
    try:
        literal: ipaddress.IPv4Address | ipaddress.IPv6Address | None = ipaddress.ip_address(host)
    except ValueError:
        literal = None
    if literal is not None:
        addresses = [literal]
    else:
        waited = time.monotonic()
        try:
            infos = resolve_by(resolver, host, port, deadline)
        except (OSError, UnicodeError) as exc:
            raise blocked(f"cannot resolve {host}: {exc}", url) from None
        if infos is None:
            took = time.monotonic() - waited
            raise blocked(f"deadline: {host} did not resolve in {took:.1f} s", url)
        addresses = []
        for info in infos:
            try:
                addresses.append(ipaddress.ip_address(str(info[4][0]).split("%", 1)[0]))
            except (ValueError, IndexError, TypeError):
                continue
        if not addresses:
            raise blocked(f"{host} resolves to no address", url)
    if not _allowed(host, port, allow_hosts):
        # every address must be public: a name with one private answer could be connected to it
        for ip in addresses:
            problem = address_problem(ip)
            if problem:
                raise blocked(f"{host} is a {problem}" if literal is None else problem, url)
    return str(addresses[0])


def resolve_by(resolver: Resolver, host: str, port: int, deadline: float | None) -> list[tuple[Any, ...]] | None:
    """``resolver``'s answer for ``host``, or None when it has none by ``deadline``. The lookup
    runs in a daemon thread: a late one is left to end on its own (getaddrinfo cannot be
    cancelled), and nothing waits for it, not even the interpreter's exit."""
    if deadline is None:
        return resolver(host, port, type=socket.SOCK_STREAM)
    answer: list[list[tuple[Any, ...]]] = []
    failure: list[BaseException] = []
    done = threading.Event()

    def lookup() -> None:
        try:
            answer.append(resolver(host, port, type=socket.SOCK_STREAM))
        except Exception as exc:  # handed to the caller, which decides what it means
            failure.append(exc)
        finally:
            done.set()

    output.start_thread(threading.Thread(target=lookup, name=f"resolve {host}", daemon=True))
    if not done.wait(max(0.0, deadline - time.monotonic())):
        return None
    if failure:
        raise failure[0]
    return answer[0]


def _media_type(value: str) -> str:
    return value.split(";", 1)[0].strip().lower()


def _charset(value: str) -> str | None:
    for part in value.split(";")[1:]:
        key, _, val = part.partition("=")
        if key.strip().lower() == "charset" and val.strip():
            return val.strip().strip('"')
    return None


def readable_text(data: bytes, media_type: str, charset: str | None) -> str:
    """Main-content text: trafilatura for HTML (boilerplate, encodings), decoding for plain text."""
    if media_type in HTML_TYPES:
        import trafilatura  # lazy: heavy, and only online research needs it

        text = trafilatura.extract(data, include_comments=False, include_tables=True, favor_recall=True)
        return (text or "").strip()
    try:
        return data.decode(charset or "utf-8", errors="replace").strip()
    except LookupError:
        return data.decode("utf-8", errors="replace").strip()


class Cutoff:
    """Ends the requests it traces at a monotonic ``deadline`` by shutting their sockets down: a
    read blocked in another thread returns at once. Pass ``trace`` as httpx's "trace" extension
    (httpcore reports each new connection's stream through it)."""

    def __init__(self, deadline: float) -> None:
        self.deadline = deadline
        self.fired = False
        self._sockets: list[socket.socket] = []
        self._lock = threading.Lock()
        self._timer = threading.Timer(max(0.0, deadline - time.monotonic()), self._fire)
        self._timer.daemon = True

    def __enter__(self) -> Cutoff:
        output.start_thread(self._timer)
        return self

    def __exit__(self, *_: object) -> None:
        self._timer.cancel()

    def remaining(self) -> float:
        return max(0.001, self.deadline - time.monotonic())

    def trace(self, event: str, info: dict[str, Any]) -> None:
        if event not in ("connection.connect_tcp.complete", "connection.start_tls.complete"):
            return
        sock = info["return_value"].get_extra_info("socket")
        with self._lock:
            self._sockets.append(sock)
            if self.fired:
                _shut(sock)

    def _fire(self) -> None:
        with self._lock:
            self.fired = True
            for sock in self._sockets:
                _shut(sock)


def _shut(sock: socket.socket) -> None:
    try:  # the plain socket's shutdown: an SSLSocket's own would drop its SSL object under a reader
        socket.socket.shutdown(sock, socket.SHUT_RDWR)
    except OSError:
        pass  # closed already, or a socket TLS took over (the TLS one is shut down too)


def fetch(
    url: str,
    *,
    max_bytes: int,
    timeout_sec: float,
    allow_hosts: Collection[str] = (),
    resolver: Resolver = socket.getaddrinfo,
    transport: Any = None,
    deadline: float | None = None,
) -> Page:
    """GET ``url`` under every rule of this module, in at most ``timeout_sec`` in all (redirects
    included) and never past ``deadline`` (time.monotonic()). Any refusal, and any transport
    failure (reason "unreachable: …"), is ERR_FETCH_BLOCKED naming the URL as a trace keeps it."""
    import httpx  # lazy: `--help` must not pay for it

    started = time.monotonic()
    end = started + timeout_sec if deadline is None else min(started + timeout_sec, deadline)
    current = url
    # trust_env=False: no proxy from the environment (the connection must go to the checked address)
    # and no ~/.netrc credentials for whatever host a web page names.
    client = httpx.Client(follow_redirects=False, transport=transport, trust_env=False)
    with client as http, Cutoff(end) as cutoff:
        try:
            for _ in range(MAX_REDIRECTS + 1):
                ip = check_url(current, allow_hosts, resolver, deadline=end)
                response = http.send(_request(http, current, ip, cutoff), stream=True)
                try:
                    if response.status_code not in REDIRECTS:
                        return _read(url, current, response, max_bytes)
                    location = response.headers.get("location")
                    if not location:
                        raise blocked(f"redirect {response.status_code} without a Location", current)
                    current = urljoin(current, location.strip())
                finally:
                    response.close()
        except httpx.HTTPError as exc:
            if cutoff.fired or time.monotonic() >= end:
                took = time.monotonic() - started
                limit = end - started
                raise blocked(f"deadline: no complete page after {took:.1f} s (limit {limit:.1f} s)", current) from None
            raise blocked(f"unreachable: {type(exc).__name__}", current) from None
    raise blocked(f"more than {MAX_REDIRECTS} redirects", url)


def _request(http: Any, url: str, ip: str, cutoff: Cutoff) -> Any:
    """The GET of ``url`` sent to the checked ``ip``, its host in the Host header and TLS's SNI;
    each timeout no longer than what is left before the cutoff."""
    import httpx

    parts = urlsplit(url)
    host = parts.hostname or ""
    ip_host = f"[{ip}]" if ":" in ip else ip
    port = f":{parts.port}" if _port_or_none(parts) else ""
    target = urlunsplit((parts.scheme, ip_host + port, parts.path or "/", parts.query, ""))
    headers = {
        "Host": (f"[{host}]" if ":" in host else host) + port,
        "Accept": ", ".join(sorted(TEXT_TYPES)),
        "User-Agent": "papayu-git",
    }
    return http.build_request(
        "GET",
        target,
        headers=headers,
        timeout=httpx.Timeout(cutoff.remaining()),
        extensions={"sni_hostname": host, "trace": cutoff.trace},
    )


def _read(url: str, current: str, response: Any, max_bytes: int) -> Page:
    if response.status_code != 200:
        raise blocked(f"HTTP status {response.status_code}", current)
    content_type = response.headers.get("content-type", "")
    media = _media_type(content_type)
    if media not in TEXT_TYPES:
        raise blocked(f"content type {media or '(none)'} is not a text page", current)
    declared = response.headers.get("content-length", "")
    if declared.isdigit() and int(declared) > max_bytes:
        raise blocked(f"page larger than {max_bytes} bytes (Content-Length {declared})", current)
    chunks: list[bytes] = []
    size = 0
    for chunk in response.iter_bytes():  # decoded bytes: a compressed bomb stops here too
        size += len(chunk)
        if size > max_bytes:
            # half a page extracts badly and hides what was cut: refused, not guessed at
            raise blocked(f"page larger than {max_bytes} bytes", current)
        chunks.append(chunk)
    text = readable_text(b"".join(chunks), media, _charset(content_type))
    return Page(url, current, media, text, size)
