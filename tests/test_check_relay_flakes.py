"""A live service relayed into the check (papayu.check.localPorts) is shared by every run of it,
so a plan's run can change it and make the base's flake re-run fail too (docs/DESIGN.md, "A
verdict per test"). With ports relayed, no test is excused as flaky: a test that passed on the
tip and fails on the plan is a regression, and the verdict says why.

A real HTTP service with state on 127.0.0.1, relayed into the real sandboxed pytest; the tip's
test reads the state; the attacking plan's code flips it at import.
"""

from __future__ import annotations

import sys
import threading
from collections.abc import Iterator
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path
from typing import Any

import pytest
from helpers import apply_json, git, make_repo, sha, write_plan

from papayu_git.check import sandbox

pytestmark = pytest.mark.skipif(
    sandbox.unavailable_reason() is not None, reason=f"bwrap does not work here: {sandbox.unavailable_reason()}"
)

PYTEST = f"{sys.executable} -m pytest -q -p no:cacheprovider"
CALC = "def add(a, b):\n    return a + b\n"
PYPROJECT = "[tool.pytest.ini_options]\npythonpath = ['.']\n"


class FlagService:
    """GET /flag answers the flag; POST /flag sets it to the body. Every request is recorded."""

    def __init__(self) -> None:
        self.flag = b"ok"
        self.seen: list[str] = []
        owner = self

        class Handler(BaseHTTPRequestHandler):
            def log_message(self, *args: Any) -> None:
                pass

            def do_GET(self) -> None:
                owner.seen.append(f"GET {owner.flag.decode()}")
                self._answer(owner.flag)

            def do_POST(self) -> None:
                owner.flag = self.rfile.read(int(self.headers.get("content-length", "0")))
                owner.seen.append(f"POST {owner.flag.decode()}")
                self._answer(b"set")

            def _answer(self, body: bytes) -> None:
                self.send_response(200)
                self.send_header("content-length", str(len(body)))
                self.end_headers()
                self.wfile.write(body)

        self.server = ThreadingHTTPServer(("127.0.0.1", 0), Handler)
        self.port = self.server.server_address[1]
        threading.Thread(target=self.server.serve_forever, daemon=True).start()

    def close(self) -> None:
        self.server.shutdown()
        self.server.server_close()


@pytest.fixture
def service() -> Iterator[FlagService]:
    server = FlagService()
    yield server
    server.close()


def tip_tests(port: int) -> str:
    return (
        "import urllib.request\n\nfrom calc import add\n\n\n"
        "def test_add():\n    assert add(2, 3) == 5\n\n\n"
        "def test_the_service_flag_is_ok():\n"
        f"    assert urllib.request.urlopen('http://127.0.0.1:{port}/flag', timeout=5).read() == b'ok'\n"
    )


@pytest.fixture
def service_repo(tmp_path: Path, service: FlagService) -> Path:
    repo = make_repo(
        tmp_path / "repo", {"calc.py": CALC, "tests/test_calc.py": tip_tests(service.port), "pyproject.toml": PYPROJECT}
    )
    git(repo, "config", "papayu.check.command", PYTEST)
    git(repo, "config", "papayu.check.localPorts", str(service.port))
    return repo


def calc_plan(tmp_path: Path, new_calc: str, name: str) -> Path:
    diff = "--- a/calc.py\n+++ b/calc.py\n@@ -1,2 +1,{} @@\n{}".format(
        new_calc.count("\n"), "".join(f"+{line}\n" for line in new_calc.splitlines())
    )
    diff = diff.replace("@@\n", "@@\n-def add(a, b):\n-    return a + b\n", 1)
    action = {"kind": "PATCH_FILE", "path": "calc.py", "patch": diff, "base_sha256": sha(CALC)}
    return write_plan(tmp_path, [action], name=name)


def flipping_calc(port: int) -> str:
    """The plan's code: importing it flips the live service's flag."""
    return (
        "import urllib.request\n\n"
        f"urllib.request.urlopen(urllib.request.Request('http://127.0.0.1:{port}/flag', data=b'broken'), timeout=5)\n\n\n"
        "def add(a, b):\n    return a + b\n"
    )


def test_a_plan_that_breaks_the_shared_service_is_a_regression_not_a_flake(
    service_repo: Path, service: FlagService, tmp_path: Path
) -> None:
    data = apply_json(service_repo, calc_plan(tmp_path, flipping_calc(service.port), "flip.json"))
    assert "POST broken" in service.seen  # the plan's code ran, in the sandbox, through the relay
    assert service.seen[0] == "GET ok"  # the base run on the tip read the flag first
    assert data["state"] == "rolled_back", data
    assert data["error"]["code"] == "ERR_CHECK_REGRESSION"
    verdict = data["check"]["verdict"]
    assert verdict["broken"] == ["tests/test_calc.py::test_the_service_flag_is_ok"] and verdict["flaky"] == []
    assert any("papayu.check.localPorts" in line and "flak" in line for line in verdict["lines"]), verdict
    assert "papayu.check.localPorts" in data["error"]["reason"]
    assert service.seen.count("GET broken") == 1  # no base re-run asked the service again
    assert git(service_repo, "log", "--format=%s", "-1").strip() == "initial"
    assert (service_repo / "calc.py").read_text() == CALC


def test_a_plan_that_leaves_the_service_alone_still_lands(
    service_repo: Path, service: FlagService, tmp_path: Path
) -> None:
    honest = CALC + "\n\ndef sub(a, b):\n    return a - b\n"
    data = apply_json(service_repo, calc_plan(tmp_path, honest, "honest.json"))
    assert data["state"] == "landed", data
    assert data["check"]["verdict"]["passed"] == 2
    assert service.seen == ["GET ok", "GET ok"]  # the base run and the plan's run, both through the relay
    assert (service_repo / "calc.py").read_text() == honest
