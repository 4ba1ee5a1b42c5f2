"""Online research: the SSRF-safe fetch, the search providers, the plan-flow triggers, the CLI.

Every stand-in is local: a small http.server on 127.0.0.1 plays Tavily, SearXNG and the web
pages, ScriptedLLM plays the model, and the resolver is injected where a test needs a name that
resolves to some address (no DNS is used).
"""

from __future__ import annotations

import json
import socket
import threading
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path
from typing import Any
from urllib.parse import parse_qs, urlsplit

import pytest
from helpers import make_repo, papayu, trace_record
from llm_server import ScriptedLLM, chat, plan_answer

from papayu_git.errors import PapayuError
from papayu_git.webfetch import check_url, fetch, trace_url

GOAL = "fix the failing test tests/test_calc.py"
CALC = "def add(a, b):\n    return a - b\n"
TEST = "from calc import add\n\n\ndef test_add():\n    assert add(2, 3) == 5\n"
KEY = "tvly-TESTKEY-0123456789abcdef"
ARTICLE = (
    "<html><head><title>{title}</title></head><body><nav>Home | About</nav><article><h1>{title}</h1>"
    "<p>The calc library changed: add() must return a + b; subtraction belongs to sub(). "
    "This page explains the {title} in enough words for an extractor to keep it.</p></article>"
    "<footer>Copyright</footer></body></html>"
)

Route = tuple[int, dict[str, str], bytes]


class Web:
    """Tavily (POST /tavily), SearXNG (GET /search) and pages, on 127.0.0.1:0; records requests."""

    def __init__(self) -> None:
        self.routes: dict[str, Route] = {}
        self.requests: list[dict[str, Any]] = []
        owner = self

        class Handler(BaseHTTPRequestHandler):
            def log_message(self, *args: Any) -> None:
                pass

            def _record(self, body: bytes = b"") -> None:
                owner.requests.append(
                    {"method": self.command, "path": self.path, "headers": dict(self.headers), "body": body}
                )

            def do_GET(self) -> None:
                self._record()
                path = urlsplit(self.path).path
                if path == "/search":
                    query = parse_qs(urlsplit(self.path).query)
                    assert query.get("format") == ["json"]
                    self._send(200, {"content-type": "application/json"}, json.dumps(owner.results()).encode())
                    return
                status, headers, body = owner.routes.get(path, (404, {"content-type": "text/plain"}, b"nope"))
                self._send(status, headers, body)

            def do_POST(self) -> None:
                length = int(self.headers.get("content-length", "0"))
                self._record(self.rfile.read(length))
                self._send(200, {"content-type": "application/json"}, json.dumps(owner.results()).encode())

            def _send(self, status: int, headers: dict[str, str], body: bytes) -> None:
                try:
                    self.send_response(status)
                    for k, v in headers.items():
                        self.send_header(k, v)
                    if "content-length" not in {k.lower() for k in headers} and not headers.get("x-no-length"):
                        self.send_header("content-length", str(len(body)))
                    self.end_headers()
                    self.wfile.write(body)
                except (BrokenPipeError, ConnectionResetError):
                    pass

        self.server = ThreadingHTTPServer(("127.0.0.1", 0), Handler)
        self.port = self.server.server_address[1]
        self.root = f"http://127.0.0.1:{self.port}"
        self.result_paths = ["/a", "/b"]
        threading.Thread(target=self.server.serve_forever, daemon=True).start()

    def page(self, path: str, title: str) -> str:
        self.routes[path] = (200, {"content-type": "text/html; charset=utf-8"}, ARTICLE.format(title=title).encode())
        return self.root + path

    def results(self) -> dict[str, Any]:
        return {"results": [{"url": self.root + p, "title": p, "content": "snippet"} for p in self.result_paths]}

    def searches(self) -> list[dict[str, Any]]:
        return [r for r in self.requests if r["path"].startswith("/search") or r["method"] == "POST"]

    def close(self) -> None:
        self.server.shutdown()
        self.server.server_close()


@pytest.fixture
def web() -> Any:
    server = Web()
    server.page("/a", "Calc notes")
    server.page("/b", "Calc changelog")
    yield server
    server.close()


@pytest.fixture
def llm() -> Any:
    server = ScriptedLLM([])
    yield server
    server.close()


@pytest.fixture
def repo(tmp_path: Path) -> Path:
    return make_repo(tmp_path / "repo", {"calc.py": CALC, "tests/test_calc.py": TEST})


def online_env(web: Web, llm: ScriptedLLM, **extra: str) -> dict[str, str]:
    online = {
        "PAPAYU_ONLINE_RESEARCH": "1",
        "PAPAYU_ONLINE_SEARCH_PROVIDER": "searxng",
        "PAPAYU_ONLINE_SEARXNG_URL": web.root,
        "PAPAYU_ONLINE_ALLOW_HOSTS": "127.0.0.1",
    }
    return llm.env(**{**online, **extra})


def summary(web: Web, *extra_sources: str) -> Any:
    sources = [{"url": web.root + "/a", "title": "Calc notes"}, *({"url": u, "title": "x"} for u in extra_sources)]
    return chat({"answer_md": "add() must return **a + b**.", "sources": sources, "confidence": "high"})


def user_texts(llm: ScriptedLLM, index: int) -> str:
    return "\n".join(m["content"] for m in llm.requests[index]["messages"] if m["role"] == "user")


def json_out(proc: Any) -> dict[str, Any]:
    return dict(json.loads(proc.stdout))


# --- the SSRF rules (webfetch, in process) ------------------------------------------------------


def resolver_to(address: str) -> Any:
    def resolve(host: str, port: int, **_: Any) -> list[tuple[Any, ...]]:
        family = socket.AF_INET6 if ":" in address else socket.AF_INET
        return [(family, socket.SOCK_STREAM, 6, "", (address, port))]

    return resolve


def refused(url: str, **kwargs: Any) -> str:
    with pytest.raises(PapayuError) as info:
        fetch(url, max_bytes=100_000, timeout_sec=5, **kwargs)
    assert info.value.code == "ERR_FETCH_BLOCKED"
    return info.value.reason


@pytest.mark.parametrize(
    ("url", "why"),
    [
        ("file:///etc/passwd", "scheme"),
        ("ftp://example.com/x", "scheme"),
        ("gopher://127.0.0.1:70/", "scheme"),
        ("http://[::1]/", "loopback"),
        ("http://127.0.0.1/", "loopback"),
        ("http://0.0.0.0/", "unspecified"),
        ("http://10.1.2.3/", "private"),
        ("http://192.168.0.1/", "private"),
        ("http://169.254.169.254/latest/meta-data/", "link-local"),
        ("http://224.0.0.1/", "multicast"),
        ("http://240.0.0.1/", "reserved"),
        ("http://[::ffff:127.0.0.1]/", "loopback"),
        ("http://[fe80::1]/", "link-local"),
        ("http://user:secret@93.184.216.34/", "credentials"),
        ("http://93.184.216.34@127.0.0.1/", "credentials"),
        ("http://example.com/" + "a" * 2100, "longer than"),
    ],
)
def test_fetch_refuses_by_url(url: str, why: str) -> None:
    assert why in refused(url, resolver=resolver_to("93.184.216.34"))


@pytest.mark.parametrize("address", ["10.0.0.1", "127.0.0.1", "::1", "172.16.5.4", "100.64.0.1"])
def test_a_name_resolving_to_a_private_address_is_refused(address: str) -> None:
    reason = refused("http://docs.example.test/page", resolver=resolver_to(address))
    assert "docs.example.test" in reason and address in reason


def test_one_private_answer_among_public_ones_is_refused() -> None:
    def resolve(host: str, port: int, **_: Any) -> list[tuple[Any, ...]]:
        return [
            (socket.AF_INET, socket.SOCK_STREAM, 6, "", ("93.184.216.34", port)),
            (socket.AF_INET, socket.SOCK_STREAM, 6, "", ("10.0.0.1", port)),
        ]

    assert "10.0.0.1" in refused("https://mixed.example.test/", resolver=resolve)


def test_unresolvable_name_is_refused() -> None:
    def resolve(host: str, port: int, **_: Any) -> list[tuple[Any, ...]]:
        raise socket.gaierror("no such name")

    assert "cannot resolve" in refused("https://nowhere.example.test/", resolver=resolve)


def test_allow_hosts_exempts_the_address_rule_only(web: Web) -> None:
    allow = {f"127.0.0.1:{web.port}"}
    page = fetch(web.root + "/a?q=1", max_bytes=100_000, timeout_sec=5, allow_hosts=allow)
    assert "add() must return a + b" in page.text and "Copyright" not in page.text  # trafilatura: main content
    assert "credentials" in refused(f"http://u:p@127.0.0.1:{web.port}/a", allow_hosts=allow)
    assert "loopback" in refused(f"http://127.0.0.1:{web.port + 1 if web.port < 65535 else 1}/", allow_hosts=allow)


def test_connects_to_the_checked_address_with_the_host_header(web: Web) -> None:
    """The name resolves once, through the checker; the connection goes to that IP (no second lookup)."""
    calls: list[str] = []

    def resolve(host: str, port: int, **_: Any) -> list[tuple[Any, ...]]:
        calls.append(host)
        return [(socket.AF_INET, socket.SOCK_STREAM, 6, "", ("127.0.0.1", port))]

    page = fetch(
        f"http://docs.example.test:{web.port}/a",
        max_bytes=100_000,
        timeout_sec=5,
        allow_hosts={"docs.example.test"},
        resolver=resolve,
    )
    assert page.text and calls == ["docs.example.test"]
    assert web.requests[-1]["headers"]["Host"] == f"docs.example.test:{web.port}"


def test_redirects_are_checked_again(web: Web) -> None:
    allow = {f"127.0.0.1:{web.port}"}
    web.routes["/to-private"] = (302, {"location": "http://10.0.0.1/admin"}, b"")
    web.routes["/to-metadata"] = (301, {"location": "http://169.254.169.254/"}, b"")
    web.routes["/to-file"] = (302, {"location": "file:///etc/passwd"}, b"")
    web.routes["/to-a"] = (307, {"location": "/a"}, b"")
    web.routes["/loop"] = (302, {"location": "/loop"}, b"")
    assert "10.0.0.1" in refused(web.root + "/to-private", allow_hosts=allow)
    assert "link-local" in refused(web.root + "/to-metadata", allow_hosts=allow)
    assert "scheme" in refused(web.root + "/to-file", allow_hosts=allow)
    assert "more than 5 redirects" in refused(web.root + "/loop", allow_hosts=allow)
    page = fetch(web.root + "/to-a", max_bytes=100_000, timeout_sec=5, allow_hosts=allow)
    assert page.final_url == web.root + "/a"


def test_content_type_and_size_limits(web: Web) -> None:
    allow = {"127.0.0.1"}
    web.routes["/png"] = (200, {"content-type": "image/png"}, b"\x89PNG....")
    web.routes["/none"] = (200, {}, b"text")
    web.routes["/big"] = (200, {"content-type": "text/plain"}, b"x" * 5000)
    web.routes["/stream"] = (200, {"content-type": "text/plain", "x-no-length": "1"}, b"y" * 5000)
    web.routes["/small"] = (200, {"content-type": "text/plain; charset=utf-8"}, "ok – fine".encode())
    assert "image/png" in refused(web.root + "/png", allow_hosts=allow)
    assert "content type" in refused(web.root + "/none", allow_hosts=allow)
    for path in ("/big", "/stream"):
        with pytest.raises(PapayuError, match="larger than 1000 bytes"):
            fetch(web.root + path, max_bytes=1000, timeout_sec=5, allow_hosts=allow)
    assert fetch(web.root + "/small", max_bytes=1000, timeout_sec=5, allow_hosts=allow).text == "ok – fine"


def test_trace_url_keeps_origin_and_path_only() -> None:
    assert trace_url("https://u:p@example.com:8443/a/b?token=s3cret#frag") == "https://example.com:8443/a/b"
    assert check_url("https://93.184.216.34/x", resolver=resolver_to("10.0.0.1")) == "93.184.216.34"


# --- the `research` command ---------------------------------------------------------------------


def test_research_is_off_by_default(repo: Path, web: Web, llm: ScriptedLLM) -> None:
    env = online_env(web, llm)
    del env["PAPAYU_ONLINE_RESEARCH"]
    proc = papayu("research", "calc add", "--json", cwd=repo, env=env)
    assert proc.returncode != 0 and "ERR_ONLINE_DISABLED" in proc.stdout + proc.stderr
    assert web.requests == [] and llm.requests == []


def test_research_command_end_to_end(repo: Path, web: Web, llm: ScriptedLLM) -> None:
    web.result_paths = ["/a", "/missing", "/b"]
    llm.script = [summary(web, "https://invented.example/not-fetched")]
    proc = papayu(
        "research", "calc add semantics", cwd=repo, env=online_env(web, llm, PAPAYU_ONLINE_MODEL="summarizer")
    )
    assert proc.returncode == 0, proc.stderr
    assert llm.requests[0]["model"] == "summarizer"
    assert "add() must return **a + b**." in proc.stdout
    assert f"[1] {web.root}/a Calc notes" in proc.stdout and "invented.example" not in proc.stdout
    assert "--use-research" in proc.stdout
    prompt = user_texts(llm, 0)
    assert "calc add semantics" in prompt and "Copyright" not in prompt and "PAGE[2]" in prompt
    stored = list((repo / ".git/papayu/research").glob("*.json"))
    assert len(stored) == 1
    record = json.loads(stored[0].read_text())
    assert record["stats"]["pages_ok"] == 2 and record["stats"]["pages_failed"] == 1
    assert record["stats"]["sources_dropped"] == 1 and record["stats"]["cache_hit"] is False
    # the same query again: search results come from the cache
    llm.script = [summary(web)]
    proc = papayu("research", "calc add semantics", "--json", cwd=repo, env=online_env(web, llm))
    assert proc.returncode == 0, proc.stderr
    assert json_out(proc)["stats"]["cache_hit"] is True
    assert len(web.searches()) == 1


def test_tavily_key_is_sent_and_never_written(repo: Path, web: Web, llm: ScriptedLLM) -> None:
    llm.script = [summary(web)]
    env = online_env(
        web,
        llm,
        PAPAYU_ONLINE_SEARCH_PROVIDER="tavily",
        PAPAYU_ONLINE_TAVILY_URL=web.root + "/tavily",
        PAPAYU_ONLINE_TAVILY_API_KEY=KEY,
    )
    proc = papayu("-v", "research", "calc add", "--json", cwd=repo, env=env)
    assert proc.returncode == 0, proc.stderr
    (post,) = [r for r in web.requests if r["method"] == "POST"]
    assert post["headers"]["Authorization"] == f"Bearer {KEY}"
    assert json.loads(post["body"])["query"] == "calc add"
    assert all("Authorization" not in r["headers"] for r in web.requests if r["method"] == "GET")
    assert KEY not in proc.stdout + proc.stderr
    for path in (repo / ".git/papayu").rglob("*"):
        if path.is_file():
            assert KEY not in path.read_text(errors="replace"), path


def test_tavily_key_is_not_sent_over_plain_http_elsewhere(repo: Path, web: Web, llm: ScriptedLLM) -> None:
    env = online_env(
        web,
        llm,
        PAPAYU_ONLINE_SEARCH_PROVIDER="tavily",
        PAPAYU_ONLINE_TAVILY_URL="http://93.184.216.34/search",
        PAPAYU_ONLINE_TAVILY_API_KEY=KEY,
    )
    proc = papayu("research", "calc add", "--json", cwd=repo, env=env)
    assert proc.returncode != 0 and "ERR_SEARCH_FAILED" in proc.stdout and "plain http" in proc.stdout


# --- the plan flow ------------------------------------------------------------------------------


def test_model_asks_and_auto_use_replans_with_online_context(repo: Path, web: Web, llm: ScriptedLLM) -> None:
    llm.script = [
        chat(plan_answer("NEEDS_ONLINE_RESEARCH: calc add semantics")),
        summary(web),
        chat(plan_answer("NEEDS_ONLINE_RESEARCH: again please")),  # cycle protection: no second research
    ]
    env = online_env(web, llm, PAPAYU_ONLINE_AUTO_USE_AS_CONTEXT="1")
    proc = papayu("plan", GOAL, "--json", cwd=repo, env=env)
    assert proc.returncode == 0, proc.stderr
    assert len(llm.requests) == 3 and len(web.searches()) == 1
    assert "ONLINE_CONTEXT[research" in user_texts(llm, 2) and "untrusted" in user_texts(llm, 2)
    assert web.root + "/a" in user_texts(llm, 2)
    assert "ONLINE_CONTEXT" not in user_texts(llm, 0)
    trace = trace_record(repo, json_out(proc)["trace_id"])
    assert trace["online_fallback_attempted"] is True and trace["online_fallback_executed"] is True
    assert trace["online_fallback_reason"] == "needs_online_research"
    assert trace["online_research"]["used_as_context"] is True and trace["online_research"]["pages_ok"] == 2
    assert trace["online_fallback_skipped"] == "cycle_protection"
    stats = json_out(papayu("stats", "--json", cwd=repo))
    assert stats["online"]["attempted"] == 1 and stats["online"]["used_as_context"] == 1


def test_without_auto_use_the_research_is_printed_and_use_research_replans(
    repo: Path, web: Web, llm: ScriptedLLM
) -> None:
    request = {"type": "search", "query": "ONLINE: calc add semantics"}
    llm.script = [chat(plan_answer(context_requests=[request])), summary(web)]
    proc = papayu("plan", GOAL, "--json", cwd=repo, env=online_env(web, llm))
    assert proc.returncode == 0, proc.stderr
    assert len(llm.requests) == 2  # no context round for the ONLINE: request: it is not a git grep
    assert "calc add semantics" in user_texts(llm, 1)
    assert "--use-research" in proc.stderr and "add() must return" in proc.stderr
    research_id = proc.stderr.split("--use-research ")[1].split()[0]
    trace = trace_record(repo, json_out(proc)["trace_id"])
    assert trace["online_fallback_reason"] == "context_request" and trace["online_fallback_executed"] is True
    assert "used_as_context" not in trace["online_research"]
    llm.script = [chat(plan_answer())]
    proc = papayu("plan", GOAL, "--json", "--use-research", research_id, cwd=repo, env=online_env(web, llm))
    assert proc.returncode == 0, proc.stderr
    assert f"ONLINE_CONTEXT[research {research_id}]" in user_texts(llm, 2)
    proc = papayu("plan", GOAL, "--json", "--use-research", "ffffff", cwd=repo, env=online_env(web, llm))
    assert proc.returncode != 0 and "ERR_RESEARCH_NOT_FOUND" in proc.stdout


def test_a_failed_plan_triggers_research_and_one_replan(repo: Path, web: Web, llm: ScriptedLLM) -> None:
    llm.script = [chat("not json at all"), chat("still not json"), summary(web), chat(plan_answer())]
    env = online_env(web, llm, PAPAYU_ONLINE_AUTO_USE_AS_CONTEXT="1")
    proc = papayu("plan", GOAL, "--json", cwd=repo, env=env)
    assert proc.returncode == 0, proc.stderr
    assert GOAL in user_texts(llm, 2)  # the query is the goal
    assert "ONLINE_CONTEXT" in user_texts(llm, 3)
    trace = trace_record(repo, json_out(proc)["trace_id"])
    assert trace["online_fallback_reason"].startswith("ERR_LLM_INVALID_RESPONSE:")
    assert trace["online_replan"] is True


def test_a_failed_replan_does_not_research_again(repo: Path, web: Web, llm: ScriptedLLM) -> None:
    llm.script = [chat("x"), chat("x"), summary(web), chat("y"), chat("y")]
    env = online_env(web, llm, PAPAYU_ONLINE_AUTO_USE_AS_CONTEXT="1")
    proc = papayu("plan", GOAL, "--json", cwd=repo, env=env)
    assert proc.returncode != 0 and "ERR_LLM_INVALID_RESPONSE" in proc.stdout
    assert len(llm.requests) == 5 and len(web.searches()) == 1


def test_off_by_default_in_the_plan_flow(repo: Path, web: Web, llm: ScriptedLLM) -> None:
    llm.script = [chat(plan_answer("NEEDS_ONLINE_RESEARCH: calc add semantics"))]
    env = online_env(web, llm)
    del env["PAPAYU_ONLINE_RESEARCH"]
    proc = papayu("plan", GOAL, "--json", cwd=repo, env=env)
    assert proc.returncode == 0, proc.stderr
    assert web.requests == [] and len(llm.requests) == 1
    trace = trace_record(repo, json_out(proc)["trace_id"])
    assert trace["online_fallback_skipped"] == "disabled" and "online_fallback_attempted" not in trace


def test_a_failing_search_does_not_block_the_plan(repo: Path, web: Web, llm: ScriptedLLM) -> None:
    web.result_paths = []
    llm.script = [chat(plan_answer("NEEDS_ONLINE_RESEARCH: calc add semantics"))]
    proc = papayu("plan", GOAL, "--json", cwd=repo, env=online_env(web, llm, PAPAYU_ONLINE_AUTO_USE_AS_CONTEXT="1"))
    assert proc.returncode == 0, proc.stderr
    trace = trace_record(repo, json_out(proc)["trace_id"])
    assert trace["online_fallback_attempted"] is True and trace["online_fallback_executed"] is False
    assert "ERR_SEARCH_FAILED" in trace["online_research"]["error"]


def test_fetch_stops_early_and_the_cache_is_bounded(web: Web, tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    from papayu_git import research

    cfg = research.OnlineConfig.load(str(tmp_path))
    cfg = research.replace(cfg, max_pages=4, allow_hosts=frozenset({"127.0.0.1"}))
    results = [{"url": web.root + p, "title": p, "snippet": ""} for p in ("/a", "/b", "/a?2", "/b?2", "/a?3")]
    monkeypatch.setattr(research, "ENOUGH_TEXT_CHARS", 100)  # the first batch of 3 is enough text
    pages, failures, early_stop = research.fetch_pages(results, cfg)
    assert len(pages) == 3 and failures == [] and early_stop is True
    assert len([r for r in web.requests if r["path"].startswith(("/a", "/b"))]) == 3
    monkeypatch.setattr(research, "CACHE_MAX_ENTRIES", 3)
    for n in range(5):
        research._store_cache(tmp_path / "cache" / f"search-{n}.json", f"q{n}", [])
    assert sorted(p.name for p in (tmp_path / "cache").iterdir()) == ["search-2.json", "search-3.json", "search-4.json"]
