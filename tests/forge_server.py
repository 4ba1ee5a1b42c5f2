"""A real local HTTP server playing a forge's REST API (records requests, answers from a script),
and a repository with a kept plan plus a bare remote, for the `pr` / `land --when-green` tests."""

from __future__ import annotations

import base64
import json
import os
import re
import socket
import struct
import subprocess
import threading
import traceback
from collections import defaultdict
from collections.abc import Callable
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path
from typing import Any, NamedTuple
from urllib.parse import parse_qs, unquote, urlsplit

from helpers import git, make_repo

from papayu_git import plans
from papayu_git.plans import StoredPlan

PLAN_ID = "20260101-000000-abc123"
BRANCH = f"papayu/{PLAN_ID}"
RESPONSE = {
    "summary": "Fix the off-by-one in range_sum",
    "plan": [{"step": "Change range(n) to range(n + 1)", "details": "in src/calc.py"}],
    "risks": ["callers relying on the old bound"],
    "actions": [{"kind": "CREATE_FILE", "path": "src/calc.py", "content": "x = 1\n"}],
}


NO_BODY = object()  # an answer with an empty body (Gitea's merge answers 200 with nothing)


class Recorded(NamedTuple):
    method: str
    path: str  # raw path, percent-escapes kept (GitLab's acme%2Fwidget)
    query: dict[str, str]
    headers: dict[str, str]
    body: Any


Answer = tuple[Any, ...]  # (status, payload[, headers])
App = Callable[[Recorded], "Answer | None"]


class ForgeServer:
    """A real HTTP server on 127.0.0.1. ``route(METHOD, PATH, answer, ...)``: answers in order, the
    last one repeats; an answer may be a callable of the request. Unrouted requests go to ``app``
    (a scripted forge, tests/forges.py), and a smart-HTTP git request to ``git http-backend``
    over the bare repositories under ``git_root``. ``stop()`` / ``start()`` take it down and bring
    it back on the same port (an outage)."""

    def __init__(self, app: App | None = None, git_root: Path | None = None, git_password: str | None = None) -> None:
        self.requests: list[Recorded] = []
        self.app = app
        self.git_root = git_root
        self.git_password = git_password  # basic auth the git endpoints require, if any
        self.errors: list[str] = []  # tracebacks of requests the server could not answer (answered 500)
        self.reset_git = 0  # the next N git requests: the connection is reset instead of answered
        self._routes: dict[tuple[str, str], list[Any]] = defaultdict(list)
        self._calls: dict[tuple[str, str], int] = defaultdict(int)
        self._port = 0
        self.httpd: ThreadingHTTPServer | None = None
        self._bind()

    def _bind(self) -> None:
        server = self

        class Handler(BaseHTTPRequestHandler):  # HTTP/1.0: one connection per request, so stop() is an outage
            def log_message(self, *args: Any) -> None:
                pass

            def _serve(self) -> None:
                # An exception here would close the connection with no answer ("Empty reply from
                # server" in git's output): answer 500 with the traceback instead, and keep it.
                try:
                    self._serve_one()
                except Exception:
                    server.errors.append(traceback.format_exc())
                    data = server.errors[-1].encode()
                    try:
                        self.send_response(500)
                        self.send_header("Content-Length", str(len(data)))
                        self.end_headers()
                        self.wfile.write(data)
                    except OSError:
                        pass

            def _serve_one(self) -> None:
                split = urlsplit(self.path)
                raw = self._body()
                if server.git_root is not None and _GIT_PATH.search(split.path):
                    if server.reset_git > 0:  # a connection broken mid-way: git says "Connection reset"
                        server.reset_git -= 1
                        self.connection.setsockopt(socket.SOL_SOCKET, socket.SO_LINGER, struct.pack("ii", 1, 0))
                        self.connection.close()
                        self.close_connection = True
                        return
                    server._git(self, split.path, split.query, raw)
                    return
                try:
                    body = json.loads(raw) if raw else None
                except ValueError:
                    body = raw.decode("utf-8", "replace")
                query = {k: v[-1] for k, v in parse_qs(split.query).items()}
                request = Recorded(
                    self.command, split.path, query, {k.lower(): v for k, v in self.headers.items()}, body
                )
                server.requests.append(request)
                status, payload, *extra = server._answer(request)
                data = b"" if payload is NO_BODY else json.dumps(payload).encode()
                self.send_response(status)
                if payload is not NO_BODY:
                    self.send_header("Content-Type", "application/json")
                self.send_header("Content-Length", str(len(data)))
                for name, value in (extra[0] if extra else {}).items():
                    self.send_header(name, value)
                self.end_headers()
                self.wfile.write(data)

            def _body(self) -> bytes:
                if self.headers.get("Transfer-Encoding", "").lower() == "chunked":
                    chunks = []
                    while True:
                        size = int(self.rfile.readline().strip() or b"0", 16)
                        if size == 0:
                            self.rfile.readline()
                            return b"".join(chunks)
                        chunks.append(self.rfile.read(size))
                        self.rfile.readline()
                length = int(self.headers.get("Content-Length") or 0)
                return self.rfile.read(length) if length else b""

            do_GET = do_POST = do_PUT = do_PATCH = do_DELETE = _serve

        self.httpd = ThreadingHTTPServer(("127.0.0.1", self._port), Handler)
        self.httpd.daemon_threads = True
        self._port = self.httpd.server_address[1]
        self.thread = threading.Thread(target=self.httpd.serve_forever, daemon=True)

    @property
    def url(self) -> str:
        return f"http://127.0.0.1:{self._port}"

    def route(self, method: str, path: str, *answers: Any) -> None:
        self._routes[(method, path)] = list(answers)

    def _answer(self, request: Recorded) -> Answer:
        answers = self._routes.get((request.method, request.path))
        if answers:
            index = min(self._calls[(request.method, request.path)], len(answers) - 1)
            self._calls[(request.method, request.path)] += 1
            answer = answers[index]
            return answer(request) if callable(answer) else answer
        found = self.app(request) if self.app is not None else None
        return found if found is not None else (404, {"message": "Not Found"})

    def calls(self, method: str, path: str) -> list[Recorded]:
        return [r for r in self.requests if r.method == method and r.path == path]

    # --- git over smart HTTP ---------------------------------------------------------------

    def _git(self, handler: BaseHTTPRequestHandler, path: str, query: str, body: bytes) -> None:
        if self.git_password is not None and not _basic_ok(handler.headers.get("Authorization"), self.git_password):
            handler.send_response(401)
            handler.send_header("WWW-Authenticate", 'Basic realm="forge"')
            handler.send_header("Content-Length", "0")
            handler.end_headers()
            return
        env = {
            "PATH": os.environ.get("PATH", "/usr/bin:/bin"),
            "GIT_PROJECT_ROOT": str(self.git_root),
            "GIT_HTTP_EXPORT_ALL": "1",
            "PATH_INFO": unquote(path),
            "REQUEST_METHOD": handler.command,
            "QUERY_STRING": query,
            "CONTENT_TYPE": handler.headers.get("Content-Type", ""),
            "CONTENT_LENGTH": str(len(body)),
            "REMOTE_USER": "papayu-test",
            "REMOTE_ADDR": "127.0.0.1",
            "HTTP_CONTENT_ENCODING": handler.headers.get("Content-Encoding", ""),
            "GIT_PROTOCOL": handler.headers.get("Git-Protocol", ""),
            "HOME": os.environ.get("HOME", "/tmp"),
            "GIT_CONFIG_NOSYSTEM": "1",
        }
        proc = subprocess.run(["git", "http-backend"], input=body, capture_output=True, env=env, check=False)
        separator = b"\r\n\r\n" if b"\r\n\r\n" in proc.stdout else b"\n\n"
        head, _, payload = proc.stdout.partition(separator)
        status = 200
        headers: list[tuple[str, str]] = []
        for line in head.decode("latin-1").splitlines():
            name, _, value = line.partition(":")
            if name.lower() == "status":
                status = int(value.strip().split()[0])
            elif name:
                headers.append((name, value.strip()))
        handler.send_response(status)
        for name, value in headers:
            handler.send_header(name, value)
        handler.send_header("Content-Length", str(len(payload)))
        handler.end_headers()
        handler.wfile.write(payload)

    # --- up and down -----------------------------------------------------------------------

    def start(self) -> ForgeServer:
        if self.httpd is None:
            self._bind()
        assert self.httpd is not None
        self.thread.start()
        return self

    def stop(self) -> None:
        """Down: the port refuses connections until ``start()`` (the state is kept)."""
        if self.httpd is not None:
            if self.thread.is_alive():  # shutdown() of a server that never served would wait forever
                self.httpd.shutdown()
            self.httpd.server_close()
            self.httpd = None

    def __enter__(self) -> ForgeServer:
        return self.start()

    def __exit__(self, *exc: object) -> None:
        self.stop()


_GIT_PATH = re.compile(r"\.git/(info/refs|git-upload-pack|git-receive-pack|HEAD)$")


def _basic_ok(header: str | None, password: str) -> bool:
    if not header or not header.lower().startswith("basic "):
        return False
    try:
        _user, _, given = base64.b64decode(header[6:]).decode().partition(":")
    except ValueError:
        return False
    return given == password


# --- a repository with a kept plan (what `apply --review` leaves) and a bare remote ---------


class Kept(NamedTuple):
    repo: Path
    bare: Path
    sha: str
    base: str


def plumbing(repo: Path, *args: str, input_text: str | None = None, env: dict[str, str] | None = None) -> str:
    proc = subprocess.run(
        ["git", *args],
        cwd=repo,
        input=input_text,
        capture_output=True,
        text=True,
        env={**os.environ, **(env or {})},
        check=True,
    )
    return proc.stdout.strip()


def keep_plan(repo: Path, plan_id: str = PLAN_ID, path: str = "src/calc.py") -> str:
    """What `apply --review` leaves: a commit on papayu/<id> on top of main, and the plan record."""
    base = plumbing(repo, "rev-parse", "main")
    blob = plumbing(repo, "hash-object", "-w", "--stdin", input_text="x = 1\n")
    index = {"GIT_INDEX_FILE": str(repo / ".git" / "test-tmp-index")}
    plumbing(repo, "read-tree", "main", env=index)
    plumbing(repo, "update-index", "--add", "--cacheinfo", f"100644,{blob},{path}", env=index)
    tree = plumbing(repo, "write-tree", env=index)
    (repo / ".git" / "test-tmp-index").unlink()
    sha = plumbing(repo, "commit-tree", tree, "-p", base, "-m", str(RESPONSE["summary"]))
    git(repo, "update-ref", f"refs/heads/papayu/{plan_id}", sha)
    apply = {
        "state": "review",
        "branch": f"papayu/{plan_id}",
        "commit": sha,
        "target": "main",
        "trace_id": "trace-42",
        "check": {"command": "pytest -q", "passed": True, "exit_code": 0, "duration_sec": 1.25, "source": "--check"},
    }
    plans.save(
        repo / ".git" / "papayu",
        StoredPlan(
            id=plan_id,
            goal="fix range_sum",
            mode="apply",
            base_commit=base,
            branch="main",
            response=RESPONSE,
            trace_id="trace-41",
            extra={"apply": apply},
        ),
    )
    return sha


def make_kept(tmp_path: Path) -> Kept:
    repo = make_repo(tmp_path / "work", {"README.md": "# calc\n", "src/other.py": "y = 2\n"})
    bare = tmp_path / "forge" / "acme" / "widget.git"
    bare.parent.mkdir(parents=True)
    git(tmp_path, "init", "-q", "--bare", str(bare))
    git(repo, "remote", "add", "origin", bare.as_uri())
    git(repo, "push", "-q", "origin", "main")
    base = git(repo, "rev-parse", "main").strip()
    return Kept(repo, bare, keep_plan(repo), base)
