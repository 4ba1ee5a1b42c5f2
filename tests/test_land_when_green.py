"""`git papayu land ID --when-green`: poll the forge's checks of the pushed commit, then land
with the same fast-forward rules as `land ID`; red or pending-past-timeout lands nothing."""

from __future__ import annotations

import json
from pathlib import Path

import pytest
from forge_server import BRANCH, PLAN_ID, ForgeServer, Kept, make_kept
from helpers import assert_error, git, papayu

FAST = ("--interval", "0.05")


@pytest.fixture
def pushed(tmp_path: Path) -> Kept:
    kept = make_kept(tmp_path)
    git(kept.repo, "push", "-q", "origin", f"{BRANCH}:{BRANCH}")
    return kept


def github(server: ForgeServer, sha: str, statuses: list[tuple[int, object]], runs: list[tuple[int, object]]) -> None:
    server.route("GET", f"/repos/acme/widget/commits/{sha}/status", *statuses)
    server.route("GET", f"/repos/acme/widget/commits/{sha}/check-runs", *runs)


def combined(state: str, *contexts: tuple[str, str]) -> tuple[int, object]:
    statuses = [{"state": s, "context": c, "target_url": "https://ci/1"} for c, s in contexts]
    return 200, {"state": state, "sha": "x", "total_count": len(statuses), "statuses": statuses}


def check_runs(*runs: tuple[str, str, str | None]) -> tuple[int, object]:
    items = [{"name": n, "status": st, "conclusion": c} for n, st, c in runs]
    return 200, {"total_count": len(items), "check_runs": items}


def main_tip(kept: Kept) -> str:
    return git(kept.repo, "rev-parse", "main").strip()


def branch_exists(kept: Kept) -> bool:
    return bool(git(kept.repo, "branch", "--list", BRANCH).strip())


def run_land(kept: Kept, server: ForgeServer, *extra: str, token: str = "GH_TOKEN", prefix: str = ""):
    return papayu(
        "land",
        PLAN_ID,
        "--when-green",
        *FAST,
        *extra,
        cwd=kept.repo,
        env={"PAPAYU_FORGE_API_URL": server.url + prefix, token: "t0ken-value"},
    )


def test_lands_after_github_status_and_check_runs_turn_green(pushed: Kept) -> None:
    with ForgeServer() as server:
        github(
            server,
            pushed.sha,
            [combined("pending", ("ci/lint", "pending")), combined("success", ("ci/lint", "success"))],
            [
                check_runs(("tests", "in_progress", None)),
                check_runs(("tests", "in_progress", None)),
                check_runs(("tests", "completed", "success"), ("docs", "completed", "skipped")),
            ],
        )
        proc = run_land(pushed, server, "--forge", "github", "--timeout", "20", "--json")
    assert proc.returncode == 0, proc.stderr
    assert json.loads(proc.stdout)["state"] == "landed"
    assert main_tip(pushed) == pushed.sha and not branch_exists(pushed)
    assert (pushed.repo / "src" / "calc.py").read_text() == "x = 1\n"  # checked-out main fast-forwarded
    polls = server.calls("GET", f"/repos/acme/widget/commits/{pushed.sha}/check-runs")
    assert len(polls) == 3 and polls[0].headers["authorization"] == "Bearer t0ken-value"
    assert polls[0].query == {"per_page": "100"}  # more than the default 30 check runs


def test_red_check_run_lands_nothing(pushed: Kept) -> None:
    with ForgeServer() as server:
        github(
            server,
            pushed.sha,
            [combined("success", ("ci/lint", "success"))],
            [check_runs(("tests", "completed", "failure"), ("build", "completed", "success"))],
        )
        proc = run_land(pushed, server, "--forge", "github", "--timeout", "20")
    assert proc.returncode == 1
    assert "ERR_CHECKS_RED" in proc.stderr and ": tests (" in proc.stderr and "build" not in proc.stderr
    assert main_tip(pushed) == pushed.base and branch_exists(pushed)


def test_pending_past_timeout_lands_nothing(pushed: Kept) -> None:
    with ForgeServer() as server:
        github(server, pushed.sha, [combined("pending")], [check_runs()])  # nothing reported: pending
        proc = run_land(pushed, server, "--forge", "github", "--timeout", "1.5", "--json")
    assert proc.returncode == 1
    assert json.loads(proc.stdout)["errors"][0]["code"] == "ERR_CHECKS_TIMEOUT"
    assert main_tip(pushed) == pushed.base and branch_exists(pushed)
    assert len(server.calls("GET", f"/repos/acme/widget/commits/{pushed.sha}/status")) >= 2


def test_gitlab_latest_pipeline_decides(pushed: Kept) -> None:
    pipelines = "/api/v4/projects/acme%2Fwidget/pipelines"
    with ForgeServer() as server:
        server.route(
            "GET",
            pipelines,
            (200, [{"id": 11, "status": "failed", "sha": pushed.sha}]),
            (
                200,
                [{"id": 12, "status": "running", "sha": pushed.sha}, {"id": 11, "status": "failed", "sha": pushed.sha}],
            ),
            (
                200,
                [{"id": 12, "status": "success", "sha": pushed.sha}, {"id": 11, "status": "failed", "sha": pushed.sha}],
            ),
        )
        proc = run_land(pushed, server, "--forge", "gitlab", "--timeout", "20", token="GITLAB_TOKEN", prefix="/api/v4")
        # the first poll sees only the failed pipeline 11: red, nothing lands
        assert_error(proc, "ERR_CHECKS_RED")
        assert "pipeline 11" in proc.stderr
        assert main_tip(pushed) == pushed.base
        proc = run_land(pushed, server, "--forge", "gitlab", "--timeout", "20", token="GITLAB_TOKEN", prefix="/api/v4")
    assert proc.returncode == 0, proc.stderr
    assert main_tip(pushed) == pushed.sha
    assert server.calls("GET", pipelines)[0].query == {"sha": pushed.sha}
    assert server.calls("GET", pipelines)[0].headers["private-token"] == "t0ken-value"


def test_gitlab_commit_statuses_when_there_is_no_pipeline(pushed: Kept) -> None:
    base = "/api/v4/projects/acme%2Fwidget"
    with ForgeServer() as server:
        server.route("GET", f"{base}/pipelines", (200, []))
        server.route(
            "GET",
            f"{base}/repository/commits/{pushed.sha}/statuses",
            (200, [{"name": "external-ci", "status": "success"}]),
        )
        proc = run_land(pushed, server, "--forge", "gitlab", "--timeout", "20", token="GITLAB_TOKEN", prefix="/api/v4")
    assert proc.returncode == 0, proc.stderr
    assert main_tip(pushed) == pushed.sha


def test_gitea_failure_status_is_red(pushed: Kept) -> None:
    with ForgeServer() as server:
        server.route(
            "GET",
            f"/api/v1/repos/acme/widget/commits/{pushed.sha}/status",
            (
                200,
                {
                    "state": "failure",
                    "sha": pushed.sha,
                    "total_count": 1,
                    "statuses": [{"status": "failure", "state": "failure", "context": "woodpecker"}],
                },
            ),
        )
        proc = run_land(pushed, server, "--forge", "gitea", "--timeout", "20", token="GITEA_TOKEN", prefix="/api/v1")
    assert_error(proc, "ERR_CHECKS_RED")
    assert "woodpecker" in proc.stderr
    assert main_tip(pushed) == pushed.base


def test_green_checks_still_obey_the_landing_rules(pushed: Kept) -> None:
    (pushed.repo / "src").mkdir(exist_ok=True)
    (pushed.repo / "src" / "calc.py").write_text("my local draft\n")  # untracked file the plan creates
    with ForgeServer() as server:
        github(server, pushed.sha, [combined("success", ("ci", "success"))], [check_runs()])
        proc = run_land(pushed, server, "--forge", "github", "--timeout", "20")
    assert_error(proc, "ERR_DIRTY_WORKTREE")
    assert main_tip(pushed) == pushed.base
    assert (pushed.repo / "src" / "calc.py").read_text() == "my local draft\n"


def test_unpushed_branch_is_refused_before_polling(tmp_path: Path) -> None:
    kept = make_kept(tmp_path)
    with ForgeServer() as server:
        proc = run_land(kept, server, "--forge", "github", "--timeout", "20")
    assert_error(proc, "ERR_PR_NOT_PUSHED")
    assert server.requests == [] and main_tip(kept) == kept.base


def test_land_after_pr_uses_the_recorded_remote_and_forge(pushed: Kept) -> None:
    git(pushed.repo, "remote", "rename", "origin", "forge")
    with ForgeServer() as server:
        server.route("POST", "/api/v1/repos/acme/widget/pulls", (201, {"number": 1, "html_url": "https://g/1"}))
        server.route(
            "GET",
            f"/api/v1/repos/acme/widget/commits/{pushed.sha}/status",
            (200, {"state": "success", "total_count": 1, "statuses": [{"state": "success", "context": "ci"}]}),
        )
        env = {"PAPAYU_FORGE_API_URL": server.url + "/api/v1", "GITEA_TOKEN": "t0ken-value"}
        assert papayu("pr", PLAN_ID, "--remote", "forge", "--forge", "gitea", cwd=pushed.repo, env=env).returncode == 0
        proc = papayu("land", PLAN_ID, "--when-green", *FAST, cwd=pushed.repo, env=env)
    assert proc.returncode == 0, proc.stderr
    assert main_tip(pushed) == pushed.sha
