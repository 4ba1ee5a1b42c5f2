"""A real local HTTP server playing a forge's REST API (records requests, answers from a script),
and a repository with a kept plan plus a bare remote, for the `pr` / `land --when-green` tests."""

from __future__ import annotations

import json
import os
import subprocess
import threading
from collections import defaultdict
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path
from typing import Any, NamedTuple
from urllib.parse import parse_qs, urlsplit

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


class Recorded(NamedTuple):
    method: str
    path: str  # raw path, percent-escapes kept (GitLab's acme%2Fwidget)
    query: dict[str, str]
    headers: dict[str, str]
    body: Any


class ForgeServer:
    """``route(METHOD, PATH, (status, payload[, headers]), ...)``: answers in order, the last one repeats."""

    def __init__(self) -> None:
        self.requests: list[Recorded] = []
        self._routes: dict[tuple[str, str], list[tuple[Any, ...]]] = defaultdict(list)
        self._calls: dict[tuple[str, str], int] = defaultdict(int)
        server = self

        class Handler(BaseHTTPRequestHandler):
            def log_message(self, *args: Any) -> None:
                pass

            def _serve(self) -> None:
                split = urlsplit(self.path)
                length = int(self.headers.get("Content-Length") or 0)
                raw = self.rfile.read(length) if length else b""
                body = json.loads(raw) if raw else None
                query = {k: v[-1] for k, v in parse_qs(split.query).items()}
                server.requests.append(
                    Recorded(self.command, split.path, query, {k.lower(): v for k, v in self.headers.items()}, body)
                )
                status, payload, *extra = server._answer(self.command, split.path)
                data = json.dumps(payload).encode()
                self.send_response(status)
                self.send_header("Content-Type", "application/json")
                self.send_header("Content-Length", str(len(data)))
                for name, value in (extra[0] if extra else {}).items():
                    self.send_header(name, value)
                self.end_headers()
                self.wfile.write(data)

            do_GET = do_POST = _serve

        self.httpd = ThreadingHTTPServer(("127.0.0.1", 0), Handler)
        self.thread = threading.Thread(target=self.httpd.serve_forever, daemon=True)

    @property
    def url(self) -> str:
        return f"http://127.0.0.1:{self.httpd.server_address[1]}"

    def route(self, method: str, path: str, *answers: tuple[Any, ...]) -> None:
        self._routes[(method, path)] = list(answers)

    def _answer(self, method: str, path: str) -> tuple[Any, ...]:
        answers = self._routes.get((method, path))
        if not answers:
            return 404, {"message": "Not Found"}
        index = min(self._calls[(method, path)], len(answers) - 1)
        self._calls[(method, path)] += 1
        return answers[index]

    def calls(self, method: str, path: str) -> list[Recorded]:
        return [r for r in self.requests if r.method == method and r.path == path]

    def __enter__(self) -> ForgeServer:
        self.thread.start()
        return self

    def __exit__(self, *exc: object) -> None:
        self.httpd.shutdown()
        self.httpd.server_close()


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
