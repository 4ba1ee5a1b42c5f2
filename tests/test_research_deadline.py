"""Online research ends on time and only at public addresses (docs/DESIGN.md, "Online research").

A page that sends one byte a second held a fetch far past its timeout, which httpx applies per
read; a DNS server that never answers held it before the deadline even started (getaddrinfo has
no timeout of its own); 6to4 and Teredo addresses carrying 127.0.0.1 or 169.254.169.254 passed the
address check. The slow servers here are real sockets on 127.0.0.1 (allowed by
PAPAYU_ONLINE_ALLOW_HOSTS' equivalent, allow_hosts) that drip their answer a byte at a time; the
silent DNS server is a real one too, the only one the system resolver knows inside a bubblewrap
sandbox of its own.
"""

from __future__ import annotations

import json
import re
import socket
import socketserver
import subprocess
import sys
import threading
import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from papayu_git import research
from papayu_git.check.sandbox import find_bwrap, unavailable_reason
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
    assert error.code == "ERR_FETCH_BLOCKED" and re.match(r"deadline: no complete page after [1-3]\.\d s", error.reason)
    assert "(limit 1.5 s)" in error.reason and error.path == slow.url()
    assert 1.4 < took < 4.0, took  # the drip would go on for minutes; room for a busy machine


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
    assert 1.9 < took < 4.5, took


def test_a_dripping_search_is_cut_at_its_timeout(drip: Drip, tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("PAPAYU_ONLINE_SEARCH_PROVIDER", "searxng")
    monkeypatch.setenv("PAPAYU_ONLINE_SEARXNG_URL", drip.url())
    monkeypatch.setenv("PAPAYU_ONLINE_TIMEOUT_SEC", "2")
    cfg = research.OnlineConfig.load(str(tmp_path))
    error, took = _refused_in(2.0, lambda: research.search("calc add", cfg, tmp_path))
    assert error.code == "ERR_SEARCH_FAILED" and "deadline" in error.reason
    assert 1.9 < took < 4.5, took


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


# --- name resolution counts against the deadline ------------------------------------------------

# Run in a sandbox whose resolv.conf names only 127.0.0.1, with a network namespace of its own
# where this script's UDP socket on port 53 is that server: it reads every question, answers none.
SILENT_DNS_CHILD = """
import json, socket, threading, time
from papayu_git.errors import PapayuError
from papayu_git.webfetch import fetch

server = socket.socket(socket.AF_INET, socket.SOCK_DGRAM)
try:
    server.bind(("127.0.0.1", 53))
except OSError as exc:
    print(json.dumps({"no_server": str(exc)}))
    raise SystemExit(0)
questions = []
threading.Thread(target=lambda: [questions.append(server.recvfrom(4096)) for _ in iter(int, 1)], daemon=True).start()

started = time.monotonic()
try:
    if SEARCH:  # the search request, through httpx (research._search_live)
        import os
        from papayu_git import research
        os.environ.update(PAPAYU_ONLINE_SEARCH_PROVIDER="searxng", PAPAYU_ONLINE_SEARXNG_URL="http://docs.example.test/")
        research._search_live("q", research.OnlineConfig.load(), time.monotonic() + 1.0)
    else:
        fetch("http://docs.example.test/page", max_bytes=1000, timeout_sec=1.0)
    reason = "fetched"
except PapayuError as exc:
    reason = exc.reason
took = time.monotonic() - started
asked = len(questions)

answered = threading.Event()
def lookup():
    try:
        socket.getaddrinfo("docs.example.test", 80)
    except OSError:
        pass
    answered.set()
threading.Thread(target=lookup, daemon=True).start()
print(json.dumps({"reason": reason, "took": took, "asked": asked, "answered": answered.wait(2.0)}))
"""


@pytest.mark.skipif(unavailable_reason() is not None, reason=f"bwrap does not work here: {unavailable_reason()}")
@pytest.mark.parametrize("search", [False, True], ids=["page-fetch", "search-request"])
def test_a_dns_server_that_never_answers_is_cut_at_the_fetch_deadline(tmp_path: Path, search: bool) -> None:
    resolv = tmp_path / "resolv.conf"
    resolv.write_text("nameserver 127.0.0.1\noptions timeout:30 attempts:1\n")  # one try: 30 s per name
    bwrap = find_bwrap()
    assert bwrap is not None
    argv = [bwrap, "--unshare-all", "--unshare-user", "--uid", "0", "--cap-add", "CAP_NET_BIND_SERVICE"]
    argv += ["--die-with-parent", "--ro-bind", "/", "/", "--dev", "/dev", "--proc", "/proc"]
    child = f"SEARCH = {search}\n{SILENT_DNS_CHILD}"
    argv += ["--ro-bind", str(resolv), "/etc/resolv.conf", "--", sys.executable, "-c", child]
    proc = subprocess.run(argv, capture_output=True, text=True, timeout=60)
    assert proc.returncode == 0, proc.stderr
    said = json.loads(proc.stdout.strip().splitlines()[-1])
    if "no_server" in said:
        pytest.skip(f"no DNS server on port 53 in a sandbox here: {said['no_server']}")
    # The system resolver asked the silent server; the fetch gave up at its deadline, while
    # getaddrinfo itself still had no answer two seconds later (it would wait 30).
    assert said["asked"] >= 1 and said["answered"] is False, said
    # The page fetch says how long the lookup had waited: what was left of the deadline when the
    # lookup began (under load less than the whole second), never the resolver's 30 s.
    expected = r"deadline: docs\.example\.test did not resolve in " + ("time" if search else r"(0\.[5-9]|1\.[0-9]) s")
    assert re.search(expected, said["reason"]), said
    assert 0.9 < said["took"] < 4.0, said  # far below the resolver's 30 s, with room for a busy machine


def test_a_late_resolver_counts_against_the_research_deadline(tmp_path: Path) -> None:
    # The resolver seam of fetch_pages: every lookup waits until the test ends (as getaddrinfo
    # does on a silent DNS server); nothing else is replaced.
    release = threading.Event()
    asked: list[str] = []

    def silent(host: str, port: int, **_: Any) -> list[tuple[Any, ...]]:
        asked.append(host)
        release.wait(30)
        raise socket.gaierror("late")

    cfg = research.replace(research.OnlineConfig.load(str(tmp_path)), max_pages=6, timeout_sec=30.0)
    results = [{"url": f"https://docs{n}.example.test/", "title": "", "snippet": ""} for n in range(6)]
    started = time.monotonic()
    try:
        pages, failures, early_stop = research.fetch_pages(results, cfg, resolver=silent, deadline=started + 1.5)
    finally:
        release.set()
    took = time.monotonic() - started
    assert pages == [] and early_stop is True and sorted(asked) == [f"docs{n}.example.test" for n in range(3)]
    said = [f["reason"].split(" in ")[0] for f in failures]
    assert said == [f"deadline: docs{n}.example.test did not resolve" for n in range(3)], failures
    assert 1.4 < took < 4.0, took  # the resolver waits 30 s
