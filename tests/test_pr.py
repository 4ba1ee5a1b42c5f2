"""`git papayu pr ID`: push papayu/<id> (file:// and git daemon) and open a PR/MR through a
real local HTTP server that answers like GitHub, GitLab and Gitea."""

from __future__ import annotations

import json
import socket
import subprocess
import time
from pathlib import Path

import pytest
from forge_server import BRANCH, PLAN_ID, ForgeServer, Kept, make_kept
from helpers import assert_error, git, make_repo, papayu

from papayu_git import plans

TOKEN = "tok_" + "s3cr3t" * 4


@pytest.fixture
def kept(tmp_path: Path) -> Kept:
    return make_kept(tmp_path)


def forge_env(server: ForgeServer, token_var: str | None = "GH_TOKEN", prefix: str = "") -> dict[str, str]:
    env = {"PAPAYU_FORGE_API_URL": server.url + prefix}
    if token_var:
        env[token_var] = TOKEN
    return env


def remote_ref(bare: Path, branch: str = BRANCH) -> str:
    return git(bare, "rev-parse", "--verify", "-q", f"refs/heads/{branch}", check=False).strip()


def assert_no_token_leaked(proc: subprocess.CompletedProcess[str], repo: Path) -> None:
    assert TOKEN not in proc.stdout + proc.stderr
    stored = (repo / ".git" / "papayu" / "plans" / f"{PLAN_ID}.json").read_text()
    assert TOKEN not in stored


def test_pr_pushes_over_file_url_and_opens_a_github_pull_request(kept: Kept) -> None:
    with ForgeServer() as server:
        server.route(
            "POST",
            "/repos/acme/widget/pulls",
            (201, {"number": 7, "html_url": "https://github.example/acme/widget/pull/7", "state": "open"}),
        )
        proc = papayu("pr", PLAN_ID, "--forge", "github", "--draft", "--json", cwd=kept.repo, env=forge_env(server))
    assert proc.returncode == 0, proc.stderr
    out = json.loads(proc.stdout)
    assert (out["number"], out["url"], out["existing"]) == (7, "https://github.example/acme/widget/pull/7", False)
    assert remote_ref(kept.bare) == kept.sha
    [call] = server.requests
    assert call.headers["authorization"] == f"Bearer {TOKEN}"
    assert call.headers["accept"] == "application/vnd.github+json"
    body = call.body
    assert (body["head"], body["base"], body["draft"]) == (BRANCH, "main", True)
    assert body["title"] == "papayu: Fix the off-by-one in range_sum"
    for needle in (
        "## Summary",
        "Fix the off-by-one",
        "1. Change range(n) to range(n + 1) — in src/calc.py",
        "- callers relying on the old bound",
        "`pytest -q` passed (exit 0, 1.2s)",
        "Papayu-Trace: trace-42",
        f"Papayu-Plan: {PLAN_ID}",
        kept.sha,
    ):
        assert needle in body["body"], needle
    record = plans.load(kept.repo / ".git" / "papayu", PLAN_ID).extra["pr"]
    assert record == {
        "remote": "origin",
        "forge": "github",
        "base": "main",
        "head": BRANCH,
        "sha": kept.sha,
        "number": 7,
        "url": "https://github.example/acme/widget/pull/7",
        "existing": False,
    }
    assert_no_token_leaked(proc, kept.repo)


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


@pytest.fixture
def git_daemon(kept: Kept) -> str:
    base_path = kept.bare.parent.parent
    port = free_port()
    proc = subprocess.Popen(
        [
            "git",
            "daemon",
            "--reuseaddr",
            "--export-all",
            "--enable=receive-pack",
            f"--base-path={base_path}",
            "--listen=127.0.0.1",
            f"--port={port}",
            str(base_path),
        ],
        stdout=subprocess.DEVNULL,
        stderr=subprocess.PIPE,
    )
    deadline = time.monotonic() + 10
    while time.monotonic() < deadline:
        with socket.socket() as s:
            if s.connect_ex(("127.0.0.1", port)) == 0:
                break
        time.sleep(0.05)
    else:
        proc.kill()
        pytest.fail(f"git daemon did not start: {proc.stderr.read() if proc.stderr else ''}")
    yield f"git://127.0.0.1:{port}/acme/widget.git"
    proc.terminate()
    proc.wait(timeout=10)


def test_pr_pushes_over_git_daemon_and_opens_a_gitlab_merge_request(kept: Kept, git_daemon: str) -> None:
    git(kept.repo, "remote", "add", "daemon", git_daemon)
    with ForgeServer() as server:
        server.route(
            "POST",
            "/api/v4/projects/acme%2Fwidget/merge_requests",
            (201, {"iid": 3, "web_url": "https://gitlab.example/acme/widget/-/merge_requests/3"}),
        )
        proc = papayu(
            "pr",
            PLAN_ID,
            "--remote",
            "daemon",
            "--forge",
            "gitlab",
            "--draft",
            cwd=kept.repo,
            env=forge_env(server, "GITLAB_TOKEN", "/api/v4"),
        )
    assert proc.returncode == 0, proc.stderr
    assert "opened pull request #3: https://gitlab.example/acme/widget/-/merge_requests/3" in proc.stdout
    assert remote_ref(kept.bare) == kept.sha
    [call] = server.requests
    assert call.headers["private-token"] == TOKEN and "authorization" not in call.headers
    assert call.body["source_branch"] == BRANCH and call.body["target_branch"] == "main"
    assert call.body["title"].startswith("Draft: papayu: ") and "Papayu-Trace: trace-42" in call.body["description"]
    assert_no_token_leaked(proc, kept.repo)


def test_pr_reuses_an_existing_github_pull_request_on_422(kept: Kept) -> None:
    with ForgeServer() as server:
        server.route(
            "POST",
            "/repos/acme/widget/pulls",
            (
                422,
                {
                    "message": "Validation Failed",
                    "documentation_url": "https://docs.github.com/rest",
                    "errors": [
                        {
                            "resource": "PullRequest",
                            "code": "custom",
                            "message": f"A pull request already exists for acme:{BRANCH}.",
                        }
                    ],
                },
            ),
        )
        server.route(
            "GET",
            "/repos/acme/widget/pulls",
            (200, [{"number": 5, "html_url": "https://gh/pull/5", "head": {"ref": BRANCH}, "base": {"ref": "main"}}]),
        )
        proc = papayu(
            "pr", PLAN_ID, "--forge", "github", "--json", cwd=kept.repo, env=forge_env(server, "GITHUB_TOKEN")
        )
    assert proc.returncode == 0, proc.stderr
    out = json.loads(proc.stdout)
    assert (out["number"], out["existing"]) == (5, True)
    [lookup] = server.calls("GET", "/repos/acme/widget/pulls")
    assert lookup.query == {"head": f"acme:{BRANCH}", "base": "main", "state": "open"}


def test_pr_reuses_an_existing_gitea_pull_on_409(kept: Kept) -> None:
    with ForgeServer() as server:
        server.route(
            "POST",
            "/api/v1/repos/acme/widget/pulls",
            (
                409,
                {
                    "message": "pull request already exists for these targets [id: 11, issue_id: 12, head_repo_id: 1, "
                    f"base_repo_id: 1, head_branch: {BRANCH}, base_branch: main]",
                    "url": "https://gitea/api/swagger",
                },
            ),
        )
        server.route(
            "GET",
            "/api/v1/repos/acme/widget/pulls",
            (
                200,
                [
                    {
                        "number": 2,
                        "html_url": "https://gitea/acme/widget/pulls/2",
                        "head": {"ref": "other"},
                        "base": {"ref": "main"},
                    },
                    {
                        "number": 9,
                        "html_url": "https://gitea/acme/widget/pulls/9",
                        "head": {"ref": BRANCH},
                        "base": {"ref": "main"},
                    },
                ],
            ),
        )
        proc = papayu("pr", PLAN_ID, "--forge", "gitea", cwd=kept.repo, env=forge_env(server, "GITEA_TOKEN", "/api/v1"))
    assert proc.returncode == 0, proc.stderr
    assert "reused the open pull request #9: https://gitea/acme/widget/pulls/9" in proc.stdout
    assert server.calls("POST", "/api/v1/repos/acme/widget/pulls")[0].headers["authorization"] == f"token {TOKEN}"


def test_pr_reuses_an_existing_gitlab_merge_request_on_409(kept: Kept) -> None:
    path = "/projects/acme%2Fwidget/merge_requests"
    with ForgeServer() as server:
        server.route(
            "POST", path, (409, {"message": ["Another open merge request already exists for this source branch: !4"]})
        )
        server.route("GET", path, (200, [{"iid": 4, "web_url": "https://gl/acme/widget/-/merge_requests/4"}]))
        proc = papayu(
            "pr", PLAN_ID, "--forge", "gitlab", "--json", cwd=kept.repo, env=forge_env(server, "GITLAB_TOKEN")
        )
    assert proc.returncode == 0, proc.stderr
    assert json.loads(proc.stdout)["number"] == 4
    assert server.calls("GET", path)[0].query == {"source_branch": BRANCH, "target_branch": "main", "state": "opened"}


@pytest.mark.parametrize(
    ("status", "payload", "code"),
    [
        (401, {"message": "Bad credentials", "documentation_url": "https://docs.github.com/rest"}, "ERR_FORGE_AUTH"),
        (404, {"message": "Not Found", "documentation_url": "https://docs.github.com/rest"}, "ERR_FORGE_NOT_FOUND"),
        (
            422,
            {
                "message": "Validation Failed",
                "errors": [{"resource": "PullRequest", "code": "custom", "message": "No commits between main and x"}],
            },
            "ERR_FORGE_HTTP",
        ),
    ],
)
def test_pr_maps_forge_errors_to_err_codes_without_printing_the_token(
    kept: Kept, status: int, payload: dict[str, object], code: str
) -> None:
    with ForgeServer() as server:
        server.route("POST", "/repos/acme/widget/pulls", (status, payload))
        proc = papayu("pr", PLAN_ID, "--forge", "github", cwd=kept.repo, env=forge_env(server))
    assert proc.returncode == 1
    assert code in proc.stderr and str(payload["message"]) in proc.stderr
    assert len(server.calls("POST", "/repos/acme/widget/pulls")) == 1  # a 404 of a missing repository: not retried
    assert not server.calls("GET", "/repos/acme/widget/pulls")
    assert remote_ref(kept.bare) == kept.sha  # the push itself happened
    assert "pr" not in plans.load(kept.repo / ".git" / "papayu", PLAN_ID).extra
    assert_no_token_leaked(proc, kept.repo)


def test_pr_retries_a_5xx_and_gives_up_after_three(kept: Kept) -> None:
    with ForgeServer() as server:
        server.route(
            "POST",
            "/repos/acme/widget/pulls",
            (502, {"message": "Bad Gateway"}),
            (201, {"number": 8, "html_url": "https://gh/pull/8"}),
        )
        proc = papayu("pr", PLAN_ID, "--forge", "github", "--json", cwd=kept.repo, env=forge_env(server))
        assert proc.returncode == 0, proc.stderr
        assert json.loads(proc.stdout)["number"] == 8
        assert len(server.calls("POST", "/repos/acme/widget/pulls")) == 2
    with ForgeServer() as server:
        server.route("POST", "/repos/acme/widget/pulls", (503, {"message": "Service Unavailable"}))
        proc = papayu("pr", PLAN_ID, "--forge", "github", cwd=kept.repo, env=forge_env(server))
        assert_error(proc, "ERR_FORGE_HTTP")
        assert "503" in proc.stderr
        assert len(server.calls("POST", "/repos/acme/widget/pulls")) == 3


def test_pr_without_a_token_pushes_and_prints_the_compare_url(kept: Kept, monkeypatch: pytest.MonkeyPatch) -> None:
    for name in ("GH_TOKEN", "GITHUB_TOKEN"):
        monkeypatch.delenv(name, raising=False)
    git(kept.repo, "remote", "set-url", "origin", "https://github.com/acme/widget.git")
    git(kept.repo, "remote", "set-url", "--push", "origin", kept.bare.as_uri())
    proc = papayu("pr", PLAN_ID, cwd=kept.repo)
    assert proc.returncode == 0, proc.stderr
    assert f"https://github.com/acme/widget/compare/main...{BRANCH}?expand=1" in proc.stdout
    assert "GH_TOKEN" in proc.stderr
    assert remote_ref(kept.bare) == kept.sha
    assert plans.load(kept.repo / ".git" / "papayu", PLAN_ID).extra["pr"]["number"] is None


def test_pr_refuses_an_unknown_forge_before_pushing(kept: Kept) -> None:
    proc = papayu("pr", PLAN_ID, "--json", cwd=kept.repo)
    assert proc.returncode == 1
    assert json.loads(proc.stdout)["errors"][0]["code"] == "ERR_FORGE_UNKNOWN"
    assert remote_ref(kept.bare) == ""


def test_pr_with_a_token_but_no_api_url_pushes_nothing(kept: Kept, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("GITEA_TOKEN", TOKEN)
    proc = papayu("pr", PLAN_ID, "--forge", "gitea", cwd=kept.repo)  # file:// remote: no host to derive from
    assert_error(proc, "ERR_FORGE_UNKNOWN")
    assert "PAPAYU_FORGE_API_URL" in proc.stderr
    assert remote_ref(kept.bare) == ""
    assert TOKEN not in proc.stderr


def test_pr_reports_a_missing_remote_and_a_missing_branch(kept: Kept) -> None:
    proc = papayu("pr", PLAN_ID, "--remote", "nope", "--forge", "github", cwd=kept.repo)
    assert_error(proc, "ERR_REMOTE_NOT_FOUND")
    git(kept.repo, "branch", "-D", BRANCH)
    proc = papayu("pr", PLAN_ID, "--forge", "github", cwd=kept.repo)
    assert_error(proc, "ERR_BRANCH_NOT_FOUND")


def test_pr_rejected_push_opens_nothing(kept: Kept, tmp_path: Path) -> None:
    other = make_repo(tmp_path / "other", {"z.txt": "z\n"})  # unrelated history on the same branch name
    git(other, "push", "-q", kept.bare.as_uri(), f"main:refs/heads/{BRANCH}")
    with ForgeServer() as server:
        server.route("POST", "/repos/acme/widget/pulls", (201, {"number": 1, "html_url": "x"}))
        proc = papayu("pr", PLAN_ID, "--forge", "github", cwd=kept.repo, env=forge_env(server))
    assert_error(proc, "ERR_PUSH_FAILED")
    assert server.requests == []
    assert remote_ref(kept.bare) == git(other, "rev-parse", "main").strip()
