"""Online research ends on time and only at public addresses (docs/DESIGN.md, "Online research").

A page that sends one byte a second held a fetch far past its timeout, which httpx applies per
read; 6to4 and Teredo addresses carrying 127.0.0.1 or 169.254.169.254 passed the address check.
The slow servers here are real sockets on 127.0.0.1 (allowed by PAPAYU_ONLINE_ALLOW_HOSTS'
equivalent, allow_hosts) that drip their answer a byte at a time.
"""

from __future__ import annotations

import socket
import socketserver
import threading
import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from papayu_git import research
from papayu_git.errors import PapayuError
from papayu_git.webfetch import check_url, fetch

HEAD = b"HTTP/1.1 200 OK\r\nContent-Type: text/plain\r\nContent-Length: 100000\r\n\r\n"
DRIP_SEC = 0.1


class Drip:
    """An HTTP server on 127.0.0.1:0 that answers every request a byte every DRIP_SEC: from the
    status line on (``head_too``) or after sending its headers at once."""

    def __init__(self, head_too: bool = False) -> None:
        owner = self
        self.stopped = threading.Event()

        class Handler(socketserver.BaseRequestHandler):
            def handle(self) -> None:
                self.request.recv(65536)
                try:
                    if not head_too:
                        self.request.sendall(HEAD)
                    for byte in HEAD if head_too else b"x" * 100000:
                        if owner.stopped.wait(DRIP_SEC):
                            return
                        self.request.sendall(bytes([byte]))
                except OSError:
                    return  # papayu hung up

        socketserver.ThreadingTCPServer.daemon_threads = True
        self.server = socketserver.ThreadingTCPServer(("127.0.0.1", 0), Handler)
        self.port = self.server.server_address[1]
        threading.Thread(target=self.server.serve_forever, daemon=True).start()

    def url(self, path: str = "/") -> str:
        return f"http://127.0.0.1:{self.port}{path}"

    def close(self) -> None:
        self.stopped.set()
        self.server.shutdown()
        self.server.server_close()


@pytest.fixture
def drip() -> Iterator[Drip]:
    server = Drip()
    yield server
    server.close()


@pytest.fixture
def drip_head() -> Iterator[Drip]:
    server = Drip(head_too=True)
    yield server
    server.close()


def _refused_in(seconds: float, work: Any) -> tuple[PapayuError, float]:
    started = time.monotonic()
    with pytest.raises(PapayuError) as info:
        work()
    return info.value, time.monotonic() - started


@pytest.mark.parametrize("server", ["drip", "drip_head"])
def test_a_dripping_page_is_cut_at_the_fetch_deadline(server: str, request: pytest.FixtureRequest) -> None:
    slow: Drip = request.getfixturevalue(server)
    error, took = _refused_in(
        1.5, lambda: fetch(slow.url(), max_bytes=1_000_000, timeout_sec=1.5, allow_hosts={"127.0.0.1"})
    )
    assert error.code == "ERR_FETCH_BLOCKED" and error.reason.startswith("deadline: no complete page after 1.")
    assert "(limit 1.5 s)" in error.reason and error.path == slow.url()
    assert 1.4 < took < 2.2, took


def test_the_research_deadline_cuts_fetches_under_way_and_starts_no_more(drip: Drip, tmp_path: Path) -> None:
    cfg = research.OnlineConfig.load(str(tmp_path))
    cfg = research.replace(cfg, max_pages=6, timeout_sec=30.0, allow_hosts=frozenset({"127.0.0.1"}))
    results = [{"url": drip.url(f"/{n}"), "title": "", "snippet": ""} for n in range(6)]
    started = time.monotonic()
    pages, failures, early_stop = research.fetch_pages(results, cfg, deadline=started + 2.0)
    took = time.monotonic() - started
    assert pages == [] and early_stop is True
    assert [f["url"] for f in failures] == [drip.url(f"/{n}") for n in range(3)]  # the second batch never began
    assert all(f["reason"].startswith("deadline: no complete page after") for f in failures)
    assert 1.9 < took < 2.8, took


def test_a_dripping_search_is_cut_at_its_timeout(drip: Drip, tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("PAPAYU_SEARCH_PROVIDER", "searxng")
    monkeypatch.setenv("PAPAYU_SEARXNG_URL", drip.url())
    monkeypatch.setenv("PAPAYU_ONLINE_TIMEOUT_SEC", "2")
    cfg = research.OnlineConfig.load(str(tmp_path))
    error, took = _refused_in(2.0, lambda: research.search("calc add", cfg, tmp_path))
    assert error.code == "ERR_SEARCH_FAILED" and "deadline" in error.reason
    assert 1.9 < took < 2.8, took


# 6to4 (2002:AABB:CCDD::/48 carries AA.BB.CC.DD), Teredo (2001:0:SERVER:flags:port:~CLIENT) and
# NAT64 (64:ff9b::/96) addresses reach the IPv4 address they carry.
CARRIERS = [
    ("2002:7f00:1::", "6to4", "loopback address 127.0.0.1"),
    ("2002:a9fe:a9fe::1", "6to4", "link-local address 169.254.169.254"),
    ("2002:a00:1::", "6to4", "private address 10.0.0.1"),
    ("2001:0:4136:e378:8000:63bf:80ff:fffe", "Teredo", "loopback address 127.0.0.1"),
    ("2001:0:4136:e378:8000:63bf:5601:5601", "Teredo", "link-local address 169.254.169.254"),
    ("2001:0:7f00:1::", "Teredo", "loopback address 127.0.0.1"),
    ("64:ff9b::a9fe:a9fe", "NAT64", "link-local address 169.254.169.254"),
]


def _resolving_to(address: str) -> Any:
    def resolve(host: str, port: int, **_: Any) -> list[tuple[Any, ...]]:
        return [(socket.AF_INET6, socket.SOCK_STREAM, 6, "", (address, port, 0, 0))]

    return resolve


@pytest.mark.parametrize(("address", "kind", "carried"), CARRIERS, ids=[c[0] for c in CARRIERS])
def test_addresses_carrying_a_forbidden_ipv4_are_refused(address: str, kind: str, carried: str) -> None:
    for url, resolver in (
        (f"http://[{address}]/", socket.getaddrinfo),
        ("https://docs.example.test/", _resolving_to(address)),
    ):
        with pytest.raises(PapayuError) as info:
            check_url(url, resolver=resolver)
        assert info.value.code == "ERR_FETCH_BLOCKED"
        assert f"{kind} address" in info.value.reason and carried in info.value.reason, info.value.reason


def test_a_6to4_address_carrying_a_public_ipv4_is_allowed() -> None:
    assert check_url("http://[2002:808:808::1]/") == "2002:808:808::1"
