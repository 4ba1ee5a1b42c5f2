"""Opt-in: the whole PR flow against a live forge (README: "PR-based apply against a live forge").

Runs only when LIVE_FORGE_KIND (gitea), LIVE_FORGE_URL (its web root, e.g.
http://127.0.0.1:3000) and LIVE_FORGE_TOKEN (a token that may create repositories) are
set; LIVE_FORGE_RESTART, a shell command that restarts the forge, adds the outage test.
Each test creates a repository of its own on the forge, protects its main (requiring `ci/test`)
and deletes it at the end.
"""

from __future__ import annotations

import json
import os
import subprocess
import time
import uuid
from collections.abc import Iterator
from pathlib import Path
from typing import Any, NamedTuple

import pytest
from forge_server import BRANCH, PLAN_ID, keep_plan
from helpers import git, make_repo, papayu, run_papayu_bg

# Read at import (the tests run with a hermetic environment).
LIVE = {name: os.environ.get(f"LIVE_FORGE_{name}", "") for name in ("KIND", "URL", "TOKEN", "RESTART")}
pytestmark = pytest.mark.skipif(
    not (LIVE["KIND"] and LIVE["URL"] and LIVE["TOKEN"]),
    reason="set LIVE_FORGE_KIND, LIVE_FORGE_URL and LIVE_FORGE_TOKEN to run against a live forge",
)


class Live(NamedTuple):
    repo: Path
    owner: str
    name: str
    sha: str
    base: str

    def api(self, method: str, path: str, **kwargs: Any) -> Any:
        return api(method, f"/repos/{self.owner}/{self.name}{path}", **kwargs)


def api(method: str, path: str, **kwargs: Any) -> Any:
    import httpx

    response = httpx.request(
        method,
        f"{LIVE['URL'].rstrip('/')}/api/v1{path}",
        headers={"Authorization": f"token {LIVE['TOKEN']}"},
        timeout=30,
        **kwargs,
    )
    assert response.status_code < 400, f"{method} {path}: {response.status_code} {response.text}"
    return response.json() if response.content else None


@pytest.fixture
def live(tmp_path: Path) -> Iterator[Live]:
    if LIVE["KIND"] != "gitea":
        pytest.skip("the live setup is written for Gitea (and Forgejo)")
    owner = api("GET", "/user")["login"]
    name = f"papayu-live-{uuid.uuid4().hex[:8]}"
    api("POST", "/user/repos", json={"name": name, "auto_init": False, "private": True})
    try:
        repo = make_repo(tmp_path / "work", {"README.md": "# live\n", "src/other.py": "y = 2\n"})
        git(repo, "remote", "add", "origin", f"{LIVE['URL'].rstrip('/')}/{owner}/{name}.git")
        # git's own credential for the remote, as a user would configure it (never in the URL)
        git(repo, "config", "http.extraHeader", f"Authorization: token {LIVE['TOKEN']}")
        git(repo, "push", "-q", "origin", "main")
        api(
            "POST",
            f"/repos/{owner}/{name}/branch_protections",
            json={"rule_name": "main", "enable_push": False, "enable_status_check": True,
                  "status_check_contexts": ["ci/test"]},
        )  # fmt: skip
        yield Live(repo, owner, name, keep_plan(repo), git(repo, "rev-parse", "main").strip())
    finally:
        api("DELETE", f"/repos/{owner}/{name}")


def env() -> dict[str, str]:
    return {"GITEA_TOKEN": LIVE["TOKEN"]}


def status(live: Live, context: str, state: str) -> None:
    live.api("POST", f"/statuses/{live.sha}", json={"context": context, "state": state})


def forge_main(live: Live) -> str:
    return git(live.repo, "ls-remote", "origin", "refs/heads/main").split()[0]


def test_live_gitea_required_checks_merge_and_protection(live: Live) -> None:
    proc = papayu("pr", PLAN_ID, "--forge", "gitea", "--json", cwd=live.repo, env=env())
    assert proc.returncode == 0, proc.stderr
    number = json.loads(proc.stdout)["number"]
    again = papayu("pr", PLAN_ID, "--forge", "gitea", "--json", cwd=live.repo, env=env())
    assert json.loads(again.stdout)["existing"] is True and json.loads(again.stdout)["number"] == number

    status(live, "ci/lint", "success")  # green, but not what main requires
    proc = papayu("land", PLAN_ID, "--when-green", "--interval", "0.5", "--timeout", "4", cwd=live.repo, env=env())
    assert proc.returncode == 1 and "ERR_CHECKS_TIMEOUT" in proc.stderr and "ci/test (not reported)" in proc.stderr
    assert live.api("GET", f"/pulls/{number}")["state"] == "open" and forge_main(live) == live.base

    pushed = subprocess.run(  # the protection is real: a direct push to main is refused
        ["git", "push", "origin", f"{BRANCH}:main"], cwd=live.repo, capture_output=True, text=True
    )
    assert pushed.returncode != 0 and forge_main(live) == live.base

    status(live, "ci/test", "warning")  # Gitea counts a warning as a success
    proc = papayu("land", PLAN_ID, "--when-green", "--interval", "0.5", "--timeout", "60", "--json",
                  cwd=live.repo, env=env())  # fmt: skip
    assert proc.returncode == 0, proc.stderr
    out = json.loads(proc.stdout)
    pull = live.api("GET", f"/pulls/{number}")
    assert out["forge"]["action"] == "merged" and pull["merged"] is True
    main = forge_main(live)
    assert git(live.repo, "rev-parse", "main").strip() == main
    assert git(live.repo, "rev-parse", f"{main}^{{tree}}") == git(live.repo, "rev-parse", f"{live.sha}^{{tree}}")
    assert git(live.repo, "ls-remote", "origin", f"refs/heads/{BRANCH}").strip() == ""  # deleted on the forge
    print(f"live gitea: merged #{number} by {out['forge']['method']} as {main[:12]} (checked {live.sha[:12]})")


def test_live_gitea_local_mode_lands_here_and_closes_the_pull_request(live: Live) -> None:
    proc = papayu("pr", PLAN_ID, "--forge", "gitea", "--json", cwd=live.repo, env=env())
    assert proc.returncode == 0, proc.stdout + proc.stderr
    number = json.loads(proc.stdout)["number"]
    status(live, "ci/test", "success")
    proc = papayu(
        "land", PLAN_ID, "--when-green", "--interval", "0.5", "--timeout", "60", cwd=live.repo,
        env={**env(), "PAPAYU_FORGE_LAND": "local"},
    )  # fmt: skip
    assert proc.returncode == 0, proc.stderr
    pull = live.api("GET", f"/pulls/{number}")
    comments = live.api("GET", f"/issues/{number}/comments")
    assert pull["state"] == "closed" and pull["merged"] is False and live.sha in comments[-1]["body"]
    assert git(live.repo, "rev-parse", "main").strip() == live.sha and forge_main(live) == live.base


@pytest.mark.skipif(not LIVE["RESTART"], reason="set LIVE_FORGE_RESTART to a command that restarts the forge")
def test_live_gitea_restart_mid_wait_is_waited_out(live: Live) -> None:
    proc = papayu("pr", PLAN_ID, "--forge", "gitea", "--json", cwd=live.repo, env=env())
    assert proc.returncode == 0, proc.stderr
    waiting = run_papayu_bg(
        ["land", PLAN_ID, "--when-green", "--interval", "0.5", "--timeout", "120", "--json"],
        cwd=live.repo,
        env={**env(), "PAPAYU_LOG": "1"},
    )
    time.sleep(2)
    started = time.monotonic()
    subprocess.run(LIVE["RESTART"], shell=True, check=True)
    restart = time.monotonic() - started
    status(live, "ci/test", "success")
    out, err = waiting.communicate(timeout=180)
    assert waiting.returncode == 0, err
    assert json.loads(out)["forge"]["action"] == "merged"
    print(f"live gitea restart took {restart:.1f}s; {err.count('FORGE_UNAVAILABLE')} polls found it down")
