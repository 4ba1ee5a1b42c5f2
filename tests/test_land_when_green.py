"""`git papayu land ID --when-green` against scripted GitHub, GitLab and Gitea (tests/forges.py):
the checks the target branch requires decide, the pull request is merged on the forge with its
head pinned, the local branch follows the forge's result, the protected target is never pushed,
and every refusal leaves everything local as it was. The remotes are real git over http on the
forge's own host and port: no API URL is configured anywhere here, papayu derives it."""

from __future__ import annotations

import json
import subprocess
import time
from collections.abc import Iterator
from pathlib import Path

import pytest
from forge_server import BRANCH, PLAN_ID, ForgeServer, Kept
from forges import FORGES, Gitea, GitHub, GitLab, ScriptedForge, kept_on, make_green
from helpers import assert_error, git, papayu, run_papayu_bg, snapshot

FAST = ("--interval", "0.1")


@pytest.fixture(params=sorted(FORGES))
def forge(request: pytest.FixtureRequest, tmp_path: Path) -> Iterator[ScriptedForge]:
    with FORGES[request.param](tmp_path) as scripted:
        yield scripted
    assert not scripted.server.errors, scripted.server.errors[0]  # the scripted server's own failure


def opened(forge: ScriptedForge, tmp_path: Path, *contexts: str) -> Kept:
    """main pushed, then protected (requiring ``contexts``), the plan pushed and its PR opened."""
    kept = kept_on(forge, tmp_path)
    forge.protect("main", *contexts)
    proc = papayu("pr", PLAN_ID, "--forge", forge.kind, "--json", cwd=kept.repo, env=forge.env())
    assert proc.returncode == 0, proc.stderr
    assert json.loads(proc.stdout)["number"] == 1
    return kept


def land(kept: Kept, forge: ScriptedForge, *extra: str, env: dict[str, str] | None = None):
    return papayu("land", PLAN_ID, "--when-green", *FAST, *extra, cwd=kept.repo, env={**forge.env(), **(env or {})})


def local(kept: Kept, ref: str = "main") -> str:
    return git(kept.repo, "rev-parse", "--verify", "-q", ref, check=False).strip()


def untouched(kept: Kept, forge: ScriptedForge, before: dict[str, object]) -> None:
    """Nothing landed anywhere: local repository as before, the forge's main and PR as before."""
    assert snapshot(kept.repo) == before
    assert forge.bare.tip("main") == kept.base and forge.pulls[1].state == "open"
    assert "refs/heads/main" not in forge.bare.pushes()


def test_required_checks_decide_and_the_pull_request_merges_on_the_forge(forge: ScriptedForge, tmp_path: Path) -> None:
    kept = opened(forge, tmp_path, "ci/test")
    unrelated = "ci/lint"
    forge.status(kept.sha, unrelated, "success")  # green, but not what main requires
    before = snapshot(kept.repo)
    proc = land(kept, forge, "--timeout", "1.5", "--json")
    error = json.loads(proc.stdout)["errors"][0]
    assert error["code"] == "ERR_CHECKS_TIMEOUT"
    waited_for = "pipeline (not reported)" if forge.kind == "gitlab" else "ci/test (not reported)"
    assert waited_for in error["reason"] and f"not required, ignored: {unrelated}" in error["reason"]
    untouched(kept, forge, before)

    make_green(forge, kept.sha, "ci/test")
    proc = land(kept, forge, "--timeout", "30", "--json")
    assert proc.returncode == 0, proc.stderr
    out = json.loads(proc.stdout)
    assert (out["state"], out["forge"]["action"], out["forge"]["number"]) == ("landed", "merged", 1)
    forge_main = forge.bare.tip("main")
    assert forge.pulls[1].state == "merged" and forge.pulls[1].merge_sha == forge_main
    assert forge.bare.tree(forge_main or "") == forge.bare.tree(kept.sha)  # the checked tree, nothing else
    assert local(kept) == forge_main and out["commit"] == forge_main  # the local branch is the forge's
    # GitHub's rebase writes new commits; Gitea fast-forwards (its first allowed method), GitLab's ff project too
    assert (forge_main == kept.sha) is (forge.kind != "github")
    assert (kept.repo / "src" / "calc.py").read_text() == "x = 1\n"
    assert local(kept, BRANCH) == "" and forge.bare.tip(BRANCH) is None  # both papayu branches gone
    assert forge.bare.pushes() == [f"refs/heads/{BRANCH}"]  # `pr`'s push; main was never pushed
    assert git(kept.repo, "for-each-ref", "refs/papayu/").strip() == ""  # the scratch ref is gone
    assert local(kept, "origin/main") == forge_main  # `git status` does not call main ahead


def test_a_connection_reset_while_taking_the_forges_result_is_asked_again(forge: ScriptedForge, tmp_path: Path) -> None:
    """git's 'Connection reset by peer' on the fetch after the merge: a broken connection, not a
    forge that is down; asked again, the plan lands and the local branch is the forge's."""
    kept = opened(forge, tmp_path, "ci/test")
    make_green(forge, kept.sha, "ci/test")
    forge.server.reset_git = 2  # two tries of three fail
    proc = land(kept, forge, "--timeout", "30")
    assert proc.returncode == 0, proc.stderr
    assert forge.server.reset_git == 0 and forge.pulls[1].state == "merged"
    assert local(kept) == forge.bare.tip("main")


def test_an_unrelated_red_check_blocks_nothing_a_required_red_one_lands_nothing(tmp_path: Path) -> None:
    for kind, required, red in (("github", "ci/test", "ci/test"), ("gitea", "ci/*", "ci/unit")):
        with FORGES[kind](tmp_path / kind) as forge:
            kept = opened(forge, tmp_path / kind, required)
            forge.status(kept.sha, "docs/spelling", "failure")  # not required: ignored
            forge.status(kept.sha, red, "failure")
            before = snapshot(kept.repo)
            proc = land(kept, forge, "--timeout", "20")
            assert_error(proc, "ERR_CHECKS_RED")
            assert f": {red}" in proc.stderr and "docs/spelling" not in proc.stderr.split("ERR_CHECKS_RED")[1]
            untouched(kept, forge, before)
            forge.status(kept.sha, red, "success")
            proc = land(kept, forge, "--timeout", "20")
            assert proc.returncode == 0, proc.stderr
            assert forge.pulls[1].state == "merged" and local(kept) == forge.bare.tip("main")


def test_the_local_mode_fast_forwards_here_and_closes_the_pull_request(forge: ScriptedForge, tmp_path: Path) -> None:
    kept = opened(forge, tmp_path, "ci/test")
    make_green(forge, kept.sha, "ci/test")
    proc = land(kept, forge, "--timeout", "20", env={"PAPAYU_FORGE_LAND": "local"})
    assert proc.returncode == 0, proc.stderr
    assert local(kept) == kept.sha and forge.bare.tip("main") == kept.base  # the forge's main is the user's to push
    assert forge.pulls[1].state == "closed" and kept.sha in forge.pulls[1].comments[0]
    assert "papayu.forge.land=local" in forge.pulls[1].comments[0]
    assert f"closed pull request #1 with a comment naming {kept.sha[:12]}" in proc.stdout
    assert forge.bare.pushes() == [f"refs/heads/{BRANCH}"]


@pytest.mark.slow
def test_an_outage_mid_wait_is_waited_out(forge: ScriptedForge, tmp_path: Path) -> None:
    """The forge goes down after the first polls and comes back OUTAGE seconds later (longer than
    the old ~1.5 s of retries); the wait goes on and lands once the checks are green."""
    outage = 4.0
    kept = opened(forge, tmp_path, "ci/test")
    proc = run_papayu_bg(
        ["land", PLAN_ID, "--when-green", "--interval", "0.2", "--timeout", "60", "--json"],
        cwd=kept.repo,
        env={**forge.env(), "PAPAYU_LOG": "1"},
    )
    _wait_for_polls(forge, kept.sha, 2)
    forge.server.stop()
    time.sleep(outage)
    make_green(forge, kept.sha, "ci/test")
    forge.server.start()
    back = time.monotonic()
    out, err = proc.communicate(timeout=120)
    after_restart = time.monotonic() - back
    assert proc.returncode == 0, err
    assert json.loads(out)["forge"]["action"] == "merged"
    assert "FORGE_UNAVAILABLE" in err and "the forge answers again after" in err
    assert local(kept) == forge.bare.tip("main") and forge.pulls[1].state == "merged"
    print(f"{forge.kind}: outage {outage:.1f}s: landed {after_restart:.1f}s after the forge came back")


def _wait_for_polls(forge: ScriptedForge, sha: str, count: int, timeout: float = 30) -> None:
    deadline = time.monotonic() + timeout
    path = (
        f"{forge.api_prefix}/projects/acme%2Fwidget/pipelines"
        if forge.kind == "gitlab"
        else f"{forge.api_prefix}/repos/{forge.repo}/commits/{sha}/status"
    )
    while len(forge.server.calls("GET", path)) < count:
        assert time.monotonic() < deadline, "papayu never polled"
        time.sleep(0.05)


@pytest.mark.slow
def test_an_outage_past_the_deadline_ends_with_the_forges_error_and_loses_nothing(
    forge: ScriptedForge, tmp_path: Path
) -> None:
    kept = opened(forge, tmp_path, "ci/test")
    before = snapshot(kept.repo)
    proc = run_papayu_bg(
        ["land", PLAN_ID, "--when-green", "--interval", "0.2", "--timeout", "4", "--json"],
        cwd=kept.repo,
        env=forge.env(),
    )
    _wait_for_polls(forge, kept.sha, 1)
    forge.server.stop()
    out, _ = proc.communicate(timeout=120)
    forge.server.start()
    assert proc.returncode == 1
    error = json.loads(out)["errors"][0]
    assert error["code"] == "ERR_FORGE_UNREACHABLE" and "gave up at the 4s deadline" in error["reason"]
    assert f"{forge.api_url}/" in error["reason"]  # the full URL, port included
    untouched(kept, forge, before)


@pytest.mark.parametrize("kind", sorted(FORGES))
def test_a_wrong_token_ends_at_once_naming_the_forges_own_variable(kind: str, tmp_path: Path) -> None:
    with FORGES[kind](tmp_path) as forge:
        kept = opened(forge, tmp_path, "ci/test")
        before = snapshot(kept.repo)
        started = time.monotonic()
        proc = land(kept, forge, "--timeout", "60", "--json", env=forge.env(token="tok_wrong_" + "x" * 12))
    error = json.loads(proc.stdout)["errors"][0]
    assert error["code"] == "ERR_FORGE_AUTH" and time.monotonic() - started < 30
    assert forge.token_var in error["hint"]
    others = {"github": "GITLAB_TOKEN", "gitlab": "GITEA_TOKEN", "gitea": "GH_TOKEN"}[kind]
    assert others not in error["hint"] and "tok_wrong" not in proc.stdout + proc.stderr
    untouched(kept, forge, before)


def test_an_api_url_nothing_answers_is_said_at_once_not_waited_for(tmp_path: Path) -> None:
    with Gitea(tmp_path) as forge:
        kept = opened(forge, tmp_path, "ci/test")
        dead = ForgeServer()  # bound, then closed: nothing listens on its port
        dead.stop()
        started = time.monotonic()
        proc = land(kept, forge, "--timeout", "60",
                    env={"PAPAYU_FORGE_LAND": "local", "PAPAYU_FORGE_API_URL": f"{dead.url}/api/v1"})  # fmt: skip
    assert_error(proc, "ERR_FORGE_UNREACHABLE")
    assert time.monotonic() - started < 30 and f"{dead.url}/api/v1/repos/acme/widget/branches/main" in proc.stderr
    assert local(kept) == kept.base and forge.pulls[1].state == "open"


_PULL_OF_NOTHING = {
    "github": "/api/v3/repos/acme/nothing/pulls/1",
    "gitea": "/api/v1/repos/acme/nothing/pulls/1",
    "gitlab": "/api/v4/projects/acme%2Fnothing/merge_requests/1",
}


@pytest.mark.slow
def test_a_missing_repository_a_dead_url_and_a_refused_login_are_named(forge: ScriptedForge, tmp_path: Path) -> None:
    """Merging asks the API first, landing locally asks git first: each failure is named by
    what failed, with the URL it failed on, never as "not pushed"."""
    local_mode = {"PAPAYU_FORGE_LAND": "local"}
    kept = opened(forge, tmp_path, "ci/test")
    before = snapshot(kept.repo)
    git(kept.repo, "remote", "set-url", "origin", forge.remote_url.replace("acme/widget", "acme/nothing"))
    proc = land(kept, forge, "--timeout", "20")
    assert_error(proc, "ERR_FORGE_NOT_FOUND")
    assert f"{forge.server.url}{_PULL_OF_NOTHING[forge.kind]} -> HTTP 404" in proc.stderr
    proc = land(kept, forge, "--timeout", "20", env=local_mode)
    assert_error(proc, "ERR_FORGE_NOT_FOUND")
    assert f"{forge.server.url}/acme/nothing.git" in proc.stderr and "not found" in proc.stderr
    forge.server.git_password = "s3cret-git-pass"  # the git endpoints now want a login papayu has not got
    git(kept.repo, "remote", "set-url", "origin", forge.remote_url)
    proc = land(kept, forge, "--timeout", "20")
    assert_error(proc, "ERR_REMOTE_AUTH")
    assert "could not read Username" in proc.stderr and forge.pulls[1].state == "open"
    forge.server.git_password = None
    forge.server.stop()  # nothing listens on its port now
    proc = land(kept, forge, "--timeout", "20")
    assert_error(proc, "ERR_FORGE_UNREACHABLE")
    assert f"{forge.server.url}{_PULL_OF_NOTHING[forge.kind].replace('nothing', 'widget')}: no answer" in proc.stderr
    proc = land(kept, forge, "--timeout", "20", env=local_mode)
    assert_error(proc, "ERR_REMOTE_UNREACHABLE")
    assert f"({forge.remote_url})" in proc.stderr and "ERR_PR_NOT_PUSHED" not in proc.stderr
    assert snapshot(kept.repo) == before


def test_an_api_that_does_not_know_the_repository_is_not_found(tmp_path: Path) -> None:
    with GitLab(tmp_path) as forge:
        kept = opened(forge, tmp_path, "ci/test")
        before = snapshot(kept.repo)
        proc = land(kept, forge, "--timeout", "20", env={"PAPAYU_FORGE_REPOSITORY": "acme/other"})
    assert_error(proc, "ERR_FORGE_NOT_FOUND")
    assert f"{forge.server.url}/api/v4/projects/acme%2Fother" in proc.stderr and "404 Project Not Found" in proc.stderr
    untouched(kept, forge, before)


def test_a_forge_under_a_sub_path_keeps_port_and_path_everywhere(tmp_path: Path) -> None:
    with Gitea(tmp_path, sub="git") as forge:
        kept = kept_on(forge, tmp_path)
        forge.protect("main", "ci/test")
        proc = papayu("pr", PLAN_ID, "--forge", "gitea", cwd=kept.repo)  # no token: push, print the link
        assert proc.returncode == 0, proc.stderr
        assert f"{forge.server.url}/git/acme/widget/compare/main...{BRANCH}" in proc.stdout
        proc = papayu("pr", PLAN_ID, "--forge", "gitea", "--json", cwd=kept.repo, env=forge.env())
        assert json.loads(proc.stdout)["number"] == 1, proc.stderr
        make_green(forge, kept.sha, "ci/test")
        proc = land(kept, forge, "--timeout", "20")
    assert proc.returncode == 0, proc.stderr
    assert forge.pulls[1].state == "merged" and local(kept) == forge.bare.tip("main")
    assert all(r.path.startswith(("/git/api/v1/", "/git/acme/")) for r in forge.server.requests)


def test_a_405_and_a_409_are_final_and_land_nothing(tmp_path: Path) -> None:
    with GitHub(tmp_path) as forge:
        kept = opened(forge, tmp_path, "ci/test")
        make_green(forge, kept.sha, "ci/test")
        assert isinstance(forge, GitHub)
        forge.required_reviews = 1
        before = snapshot(kept.repo)
        merge = "/api/v3/repos/acme/widget/pulls/1/merge"
        proc = land(kept, forge, "--timeout", "20")
        assert_error(proc, "ERR_FORGE_MERGE_REFUSED")
        assert "HTTP 405" in proc.stderr and "approving review" in proc.stderr
        assert len(forge.server.calls("PUT", merge)) == 1
        untouched(kept, forge, before)
        forge.required_reviews = 0
        # someone pushes to the PR's branch on the forge as the merge comes in
        forge.on_merge = lambda pull: forge.bare.git("update-ref", f"refs/heads/{BRANCH}", kept.base)
        proc = land(kept, forge, "--timeout", "20")
        assert_error(proc, "ERR_FORGE_MERGE_CONFLICT")
        assert "Head branch was modified" in proc.stderr
        assert len(forge.server.calls("PUT", merge)) == 2 and snapshot(kept.repo) == before


def test_a_diverged_fast_forward_is_final_not_retried_as_a_server_error(tmp_path: Path) -> None:
    with Gitea(tmp_path) as forge:
        assert isinstance(forge, Gitea)
        forge.allowed = dict.fromkeys(forge.allowed, False) | {"fast-forward-only": True}
        kept = opened(forge, tmp_path, "ci/test")
        make_green(forge, kept.sha, "ci/test")
        other = forge.bare.commit(forge.bare.tree(kept.base), [kept.base], "someone else's", "Gitea")
        forge.on_merge = lambda pull: forge.bare.update("main", other, kept.base)  # main moves on the forge
        before = snapshot(kept.repo)
        proc = land(kept, forge, "--timeout", "20")
    assert_error(proc, "ERR_FORGE_MERGE_REFUSED")
    assert "HTTP 500" in proc.stderr and "FORGE_RETRY" not in proc.stderr
    assert len(forge.server.calls("POST", "/api/v1/repos/acme/widget/pulls/1/merge")) == 1
    assert snapshot(kept.repo) == before and forge.pulls[1].state == "open"


def test_gitea_mergeability_being_computed_is_waited_for_not_merged_into(tmp_path: Path) -> None:
    with Gitea(tmp_path) as forge:
        kept = opened(forge, tmp_path, "ci/test")
        make_green(forge, kept.sha, "ci/test")
        forge.pulls[1].checking = 3  # `mergeable: false` for three more reads (Gitea checks asynchronously)
        proc = land(kept, forge, "--timeout", "30")
    assert proc.returncode == 0, proc.stderr
    assert len(forge.server.calls("GET", "/api/v1/repos/acme/widget/pulls/1")) >= 4
    assert len(forge.server.calls("POST", "/api/v1/repos/acme/widget/pulls/1/merge")) == 1  # no 405 met
    assert forge.pulls[1].state == "merged"


def test_a_target_moved_on_the_forge_is_refused_before_the_wait(tmp_path: Path) -> None:
    with GitLab(tmp_path) as forge:
        kept = opened(forge, tmp_path, "ci/test")
        moved = forge.bare.commit(forge.bare.tree(kept.base), [kept.base], "elsewhere", "GitLab")
        forge.bare.update("main", moved, kept.base)
        before = snapshot(kept.repo)
        proc = land(kept, forge, "--timeout", "20")
    assert_error(proc, "ERR_BRANCH_MOVED")
    assert f"main on origin is at {moved[:12]}" in proc.stderr
    assert not forge.server.calls("GET", "/api/v4/projects/acme%2Fwidget/pipelines")  # no wait started
    assert snapshot(kept.repo) == before


def test_uncommitted_edits_where_the_plan_writes_stop_it_before_the_forge_merges(tmp_path: Path) -> None:
    with GitHub(tmp_path) as forge:
        kept = opened(forge, tmp_path, "ci/test")
        make_green(forge, kept.sha, "ci/test")
        (kept.repo / "src" / "calc.py").write_text("my local draft\n")  # untracked, where the plan creates it
        proc = land(kept, forge, "--timeout", "20")
    assert_error(proc, "ERR_DIRTY_WORKTREE")
    assert "nothing was merged on the forge" in proc.stderr and "src/calc.py" in proc.stderr
    assert forge.pulls[1].state == "open" and forge.bare.tip("main") == kept.base
    assert (kept.repo / "src" / "calc.py").read_text() == "my local draft\n" and local(kept) == kept.base


def test_a_merge_whose_local_landing_was_refused_is_taken_up_again_not_merged_twice(tmp_path: Path) -> None:
    with GitHub(tmp_path) as forge:
        kept = opened(forge, tmp_path, "ci/test")
        make_green(forge, kept.sha, "ci/test")
        draft = kept.repo / "src" / "calc.py"
        forge.on_merge = lambda pull: draft.write_text("typed while the forge merged\n")
        proc = land(kept, forge, "--timeout", "20")
        assert_error(proc, "ERR_DIRTY_WORKTREE")
        assert "pull request #1 is merged on the forge, but your main did not follow" in proc.stderr
        assert forge.pulls[1].state == "merged" and local(kept) == kept.base
        assert draft.read_text() == "typed while the forge merged\n"  # the user's edit is kept
        merged = forge.bare.tip("main") or ""
        later = forge.bare.commit(forge.bare.tree(merged), [merged], "someone's later merge", "GitHub")
        forge.bare.update("main", later, merged)
        draft.unlink()
        forge.on_merge = None
        proc = land(kept, forge, "--timeout", "20")
    assert proc.returncode == 0, proc.stderr
    assert len(forge.server.calls("PUT", "/api/v3/repos/acme/widget/pulls/1/merge")) == 1
    assert local(kept) == merged != later  # the forge's merge of the checked commit, not what came after
    assert forge.bare.tip(BRANCH) is None


def test_a_pull_request_merged_on_the_forge_already_is_followed_not_merged_again(tmp_path: Path) -> None:
    with Gitea(tmp_path) as forge:
        kept = opened(forge, tmp_path, "ci/test")
        forge.merge(forge.pulls[1], "merge", kept.sha, "Gitea")  # merged by hand on the forge: a merge commit
        proc = land(kept, forge, "--timeout", "20", "--json")
    assert proc.returncode == 0, proc.stderr
    assert not forge.server.calls("POST", "/api/v1/repos/acme/widget/pulls/1/merge")
    forge_main = forge.bare.tip("main")
    assert local(kept) == forge_main != kept.sha and git(kept.repo, "rev-parse", "main^2").strip() == kept.sha


def test_a_forge_merge_holding_more_than_the_checked_tree_is_not_taken(tmp_path: Path) -> None:
    with Gitea(tmp_path) as forge:
        kept = opened(forge, tmp_path, "ci/test")
        index = {"GIT_INDEX_FILE": str(tmp_path / "scratch-index")}
        forge.bare.git("read-tree", kept.base, env=index)  # main's tree, and one more file
        blob = subprocess.run(["git", "hash-object", "-w", "--stdin"], cwd=forge.bare.dir, input="z\n",
                              capture_output=True, text=True, check=True).stdout.strip()  # fmt: skip
        forge.bare.git("update-index", "--add", "--cacheinfo", f"100644,{blob},elsewhere.txt", env=index)
        pushed = forge.bare.commit(forge.bare.git("write-tree", env=index), [kept.base], "someone's push", "Gitea")
        forge.bare.update("main", pushed, kept.base)
        forge.merge(forge.pulls[1], "merge", kept.sha, "Gitea")  # merged by hand on top of it
        before = snapshot(kept.repo)
        proc = land(kept, forge, "--timeout", "20")
    assert_error(proc, "ERR_FORGE_MERGE_DIVERGED")
    assert "is merged on the forge, but your main did not follow" in proc.stderr
    assert "not the checked tree" in proc.stderr and snapshot(kept.repo) == before


def test_github_protection_a_token_may_not_read_needs_the_setting(tmp_path: Path) -> None:
    with GitHub(tmp_path) as forge:
        assert isinstance(forge, GitHub)
        forge.show_protection = False
        kept = opened(forge, tmp_path, "ci/test")
        forge.status(kept.sha, "ci/lint", "success")
        proc = land(kept, forge, "--timeout", "20")  # every reported check is green: the forge still refuses
        assert_error(proc, "ERR_FORGE_MERGE_REFUSED")
        assert "does not show this token the protection of main" in proc.stderr and "papayu.forge.requiredChecks" in (
            proc.stderr
        )
        assert 'Required status check "ci/test" is expected' in proc.stderr
        git(kept.repo, "config", "papayu.forge.requiredChecks", "ci/test")
        proc = land(kept, forge, "--timeout", "1.5")
        assert_error(proc, "ERR_CHECKS_TIMEOUT")
        assert "ci/test (not reported)" in proc.stderr
        forge.check_run(kept.sha, "ci/test", "completed", "success")
        proc = land(kept, forge, "--timeout", "20")
    assert proc.returncode == 0, proc.stderr
    assert forge.pulls[1].state == "merged"


def test_github_a_check_pinned_to_an_app_counts_only_from_that_app(tmp_path: Path) -> None:
    with GitHub(tmp_path) as forge:
        assert isinstance(forge, GitHub)
        forge.required_apps = {"tests": 42}
        kept = opened(forge, tmp_path, "tests")
        forge.check_run(kept.sha, "tests", "completed", "success", app_id=7)  # same name, another app
        proc = land(kept, forge, "--timeout", "1.5")
        assert_error(proc, "ERR_CHECKS_TIMEOUT")
        forge.check_run(kept.sha, "tests", "in_progress", None, app_id=42)
        forge.check_run(kept.sha, "tests", "completed", "neutral", app_id=42)
        proc = land(kept, forge, "--timeout", "20")
    assert proc.returncode == 0, proc.stderr


def test_gitea_warning_is_green_and_nothing_reported_is_pending(tmp_path: Path) -> None:
    with Gitea(tmp_path) as forge:
        kept = opened(forge, tmp_path, "ci/{test,lint}")
        proc = land(kept, forge, "--timeout", "1")  # `statuses: null`, `state: ""`: nothing yet
        assert_error(proc, "ERR_CHECKS_TIMEOUT")
        assert "ci/{test,lint} (not reported)" in proc.stderr
        forge.status(kept.sha, "ci/test", "warning")
        forge.status(kept.sha, "ci/lint", "success")
        proc = land(kept, forge, "--timeout", "20")
    assert proc.returncode == 0, proc.stderr
    assert forge.pulls[1].state == "merged"


def test_gitlab_waits_for_the_newest_pipeline_and_the_approvals(tmp_path: Path) -> None:
    with GitLab(tmp_path) as forge:
        assert isinstance(forge, GitLab)
        forge.approvals_required = 1
        kept = opened(forge, tmp_path)
        forge.pipeline(kept.sha, "failed")
        forge.pipeline(kept.sha, "success")  # the retried pipeline is the newest
        proc = land(kept, forge, "--timeout", "1.5")
        assert_error(proc, "ERR_CHECKS_TIMEOUT")
        assert "approvals (1 more needed)" in proc.stderr
        forge.approved_by.append("reviewer")
        proc = land(kept, forge, "--timeout", "20")
    assert proc.returncode == 0, proc.stderr
    assert forge.pulls[1].state == "merged" and local(kept) == kept.sha


def test_an_undone_plan_says_there_is_nothing_to_land(tmp_path: Path) -> None:
    with Gitea(tmp_path) as forge:
        kept = opened(forge, tmp_path, "ci/test")
        assert papayu("land", PLAN_ID, cwd=kept.repo).returncode == 0  # landed here (its local check passed)
        assert papayu("undo", PLAN_ID, cwd=kept.repo).returncode == 0
        proc = land(kept, forge, "--timeout", "20")
    assert_error(proc, "ERR_NOTHING_TO_LAND")
    assert "it landed on main and was undone" in proc.stderr and "ERR_BRANCH_NOT_FOUND" not in proc.stderr
    assert not forge.server.calls("GET", "/api/v1/repos/acme/widget/pulls/1")  # the forge was not asked


def test_pr_waits_for_gitea_to_record_the_pushed_branch(tmp_path: Path) -> None:
    with Gitea(tmp_path) as forge:
        assert isinstance(forge, Gitea)
        forge.unindexed = 2  # seen live: Gitea 404s a pull request of a branch its push queue has not recorded
        kept = kept_on(forge, tmp_path)
        proc = papayu("pr", PLAN_ID, "--forge", "gitea", "--json", cwd=kept.repo, env=forge.env())
    assert proc.returncode == 0, proc.stderr
    assert json.loads(proc.stdout)["number"] == 1
    assert len(forge.server.calls("POST", "/api/v1/repos/acme/widget/pulls")) == 3


def test_pr_says_the_branch_was_pushed_when_the_api_fails_after(tmp_path: Path) -> None:
    with Gitea(tmp_path) as forge:
        kept = kept_on(forge, tmp_path)
        proc = papayu("pr", PLAN_ID, "--forge", "gitea", cwd=kept.repo, env=forge.env(token="tok_wrong_" + "y" * 12))
    assert_error(proc, "ERR_FORGE_AUTH")
    assert f"pushed {BRANCH} ({kept.sha[:12]}) to origin, but opening the pull request failed" in proc.stderr
    assert "GITEA_TOKEN" in proc.stderr and "GH_TOKEN" not in proc.stderr
    assert forge.bare.tip(BRANCH) == kept.sha
