"""Forge detection from remote URLs, compare URLs and the combination of check states (pure parts)."""

from __future__ import annotations

from pathlib import Path

import pytest
from helpers import git, make_repo

from papayu_git.errors import PapayuError
from papayu_git.forge import (
    ChecksState,
    ForgeKind,
    RemoteRepo,
    combine,
    compare_url,
    guess_kind,
    parse_remote_url,
    resolve_forge,
)


@pytest.mark.parametrize(
    ("url", "host", "path"),
    [
        ("https://github.com/acme/widget.git", "github.com", "acme/widget"),
        ("https://github.com/acme/widget", "github.com", "acme/widget"),
        ("git@github.com:acme/widget.git", "github.com", "acme/widget"),
        ("ssh://git@gitlab.example.com:2222/group/sub/proj.git", "gitlab.example.com", "group/sub/proj"),
        ("https://user:pw@codeberg.org/acme/widget.git", "codeberg.org", "acme/widget"),
        ("git://127.0.0.1:9418/acme/widget.git", "127.0.0.1", "acme/widget"),
        ("file:///srv/git/acme/widget.git", "", "acme/widget"),
        ("/srv/git/acme/widget.git", "", "acme/widget"),
    ],
)
def test_parse_remote_url(url: str, host: str, path: str) -> None:
    assert parse_remote_url(url) == RemoteRepo(host, path)


def test_parse_remote_url_needs_owner_and_name() -> None:
    with pytest.raises(PapayuError) as info:
        parse_remote_url("https://example.com/widget.git")
    assert info.value.code == "ERR_FORGE_UNKNOWN"


@pytest.mark.parametrize(
    ("host", "kind"),
    [
        ("github.com", ForgeKind.GITHUB),
        ("github.acme.corp", ForgeKind.GITHUB),
        ("gitlab.com", ForgeKind.GITLAB),
        ("gitlab.acme.io", ForgeKind.GITLAB),
        ("gitea.com", ForgeKind.GITEA),
        ("codeberg.org", ForgeKind.GITEA),
        ("git.acme.io", None),
        ("", None),
    ],
)
def test_guess_kind_from_the_host(host: str, kind: ForgeKind | None) -> None:
    assert guess_kind(RemoteRepo(host, "a/b")) is kind


def test_resolve_forge_defaults_and_overrides(monkeypatch: pytest.MonkeyPatch) -> None:
    for name in ("GH_TOKEN", "GITHUB_TOKEN", "GITLAB_TOKEN", "GITEA_TOKEN"):
        monkeypatch.delenv(name, raising=False)
    gh = resolve_forge("git@github.com:acme/widget.git", None)
    assert (gh.kind, gh.api_url, gh.web_url, gh.token) == (
        ForgeKind.GITHUB,
        "https://api.github.com",
        "https://github.com",
        None,
    )
    monkeypatch.setenv("GITHUB_TOKEN", "abc")
    assert resolve_forge("https://github.com/a/b", None).token == "abc"
    monkeypatch.setenv("GH_TOKEN", "first")
    assert resolve_forge("https://github.com/a/b", None).token == "first"
    gl = resolve_forge("https://gitlab.acme.io/g/s/p.git", None)
    assert (gl.api_url, gl.gitlab_project) == ("https://gitlab.acme.io/api/v4", "g%2Fs%2Fp")
    assert "abc" not in repr(resolve_forge("https://github.com/a/b", None))
    monkeypatch.setenv("PAPAYU_FORGE_API_URL", "http://127.0.0.1:1/api/v1/")
    local = resolve_forge("file:///srv/acme/widget.git", "gitea")
    assert (local.api_url, local.web_url) == ("http://127.0.0.1:1/api/v1", "http://127.0.0.1:1")
    with pytest.raises(PapayuError) as info:
        resolve_forge("https://git.acme.io/a/b.git", None)
    assert info.value.code == "ERR_FORGE_UNKNOWN"


def test_compare_urls_per_forge() -> None:
    gh = resolve_forge("https://github.com/acme/widget.git", None)
    assert compare_url(gh, "main", "papayu/1") == "https://github.com/acme/widget/compare/main...papayu/1?expand=1"
    gl = resolve_forge("https://gitlab.com/grp/widget.git", None)
    assert compare_url(gl, "main", "papayu/1") == (
        "https://gitlab.com/grp/widget/-/merge_requests/new?merge_request%5Bsource_branch%5D=papayu%2F1"
        "&merge_request%5Btarget_branch%5D=main"
    )
    gt = resolve_forge("https://codeberg.org/acme/widget.git", None)
    assert compare_url(gt, "main", "papayu/1") == "https://codeberg.org/acme/widget/compare/main...papayu/1"


def test_combine_red_wins_nothing_reported_is_pending() -> None:
    G, R, P = ChecksState.GREEN, ChecksState.RED, ChecksState.PENDING
    assert combine([]).state is P
    assert combine([("a", G), ("b", G)]).state is G
    assert combine([("a", G), ("b", P)]).state is P
    assert combine([("a", P), ("b", R)]).state is R
    assert combine([("a", G), ("b", R), ("c", R)]).describe(R) == "b, c"


def test_a_forge_429_waits_what_retry_after_asks(monkeypatch: pytest.MonkeyPatch) -> None:
    """Api.call goes through the shared retry policy: a 429's Retry-After (not the forge's
    own 0.5 s backoff) decides the wait, then the call succeeds."""
    from forge_server import ForgeServer

    from papayu_git import forge, net

    waits: list[float] = []
    monkeypatch.setattr(net.time, "sleep", waits.append)
    with ForgeServer() as server:
        server.route(
            "GET",
            "/repos/acme/widget/commits/abc/status",
            (429, {"message": "slow down"}, {"Retry-After": "7"}),
            (200, {"statuses": []}),
        )
        hub = forge.Forge(ForgeKind.GITEA, RemoteRepo("127.0.0.1", "acme/widget"), server.url, server.url)
        with forge.connect(hub) as api:
            response = api.call("GET", "/repos/acme/widget/commits/abc/status")
    assert response.status_code == 200 and waits == [7.0]
    assert len(server.calls("GET", "/repos/acme/widget/commits/abc/status")) == 2


def test_a_forge_that_keeps_failing_ends_in_its_own_error_code(monkeypatch: pytest.MonkeyPatch) -> None:
    from forge_server import ForgeServer

    from papayu_git import forge, net

    waits: list[float] = []
    monkeypatch.setattr(net.time, "sleep", waits.append)
    with ForgeServer() as server:
        server.route("GET", "/repos/acme/widget/pulls", (503, {"message": "down"}))
        hub = forge.Forge(ForgeKind.GITEA, RemoteRepo("127.0.0.1", "acme/widget"), server.url, server.url)
        with forge.connect(hub) as api, pytest.raises(PapayuError) as err:
            api.call("GET", "/repos/acme/widget/pulls")
    assert err.value.code == "ERR_FORGE_HTTP" and waits == [0.5, 1.0]  # backoff doubles
    assert f"{server.url}/repos/acme/widget/pulls -> HTTP 503" in err.value.reason  # the full URL
    assert len(server.calls("GET", "/repos/acme/widget/pulls")) == 3


@pytest.mark.parametrize(
    ("url", "kind", "api", "web", "path"),
    [
        # the remote's scheme, port and sub-path are kept (a self-hosted forge on its own port)
        ("http://127.0.0.1:3931/owner/repo.git", "gitea", "http://127.0.0.1:3931/api/v1", "http://127.0.0.1:3931", "owner/repo"),
        ("http://u:pw@10.0.0.5:3000/git/owner/repo.git", "gitea", "http://10.0.0.5:3000/git/api/v1", "http://10.0.0.5:3000/git", "owner/repo"),
        ("https://ghe.acme.io:8443/tools/org/repo", "github", "https://ghe.acme.io:8443/tools/api/v3", "https://ghe.acme.io:8443/tools", "org/repo"),
        ("https://gitlab.acme.io/grp/sub/proj.git", "gitlab", "https://gitlab.acme.io/api/v4", "https://gitlab.acme.io", "grp/sub/proj"),
        # ssh and git:// name the host only: its port is not the web's
        ("ssh://git@gitea.acme.io:2222/owner/repo.git", "gitea", "https://gitea.acme.io/api/v1", "https://gitea.acme.io", "owner/repo"),
        ("git@github.com:owner/repo.git", "github", "https://api.github.com", "https://github.com", "owner/repo"),
    ],
)  # fmt: skip
def test_resolve_forge_keeps_scheme_port_and_sub_path(url: str, kind: str, api: str, web: str, path: str) -> None:
    found = resolve_forge(url, kind)
    assert (found.api_url, found.web_url, found.repo.path) == (api, web, path)
    assert "pw" not in repr(found)


def test_the_repository_setting_splits_a_gitlab_sub_path(monkeypatch: pytest.MonkeyPatch) -> None:
    url = "https://host.example:8443/gitlab/grp/sub/proj.git"
    assert resolve_forge(url, "gitlab").api_url == "https://host.example:8443/api/v4"  # groups nest: no guess
    monkeypatch.setenv("PAPAYU_FORGE_REPOSITORY", "grp/sub/proj")
    found = resolve_forge(url, "gitlab")
    assert (found.api_url, found.gitlab_project) == ("https://host.example:8443/gitlab/api/v4", "grp%2Fsub%2Fproj")
    assert compare_url(found, "main", "papayu/1").startswith("https://host.example:8443/gitlab/grp/sub/proj/-/")
    monkeypatch.setenv("PAPAYU_FORGE_REPOSITORY", "other/name")  # a repository elsewhere: the URL's host, no prefix
    assert resolve_forge(url, "gitlab").repo.path == "other/name"


def test_the_old_checks_settings_still_work(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    from papayu_git import settings

    repo = make_repo(tmp_path / "r")
    assert settings.get("forge_ci_timeout_sec", str(repo)) == "3600"
    git(repo, "config", "papayu.checksTimeoutSec", "120")  # the old key
    settings.forget_cached_config()
    assert settings.get("forge_ci_timeout_sec", str(repo)) == "120"
    git(repo, "config", "papayu.forge.ciTimeoutSec", "60")  # the new key wins over the old one
    settings.forget_cached_config()
    assert settings.get("forge_ci_timeout_sec", str(repo)) == "60"
    monkeypatch.setenv("PAPAYU_CHECKS_TIMEOUT_SEC", "90")  # the environment wins over git config
    assert settings.get("forge_ci_timeout_sec", str(repo)) == "90"
    monkeypatch.setenv("PAPAYU_FORGE_CI_TIMEOUT_SEC", "30")  # and its new name over its old one
    assert settings.get("forge_ci_timeout_sec", str(repo)) == "30"


@pytest.mark.parametrize(
    ("required", "items", "state"),
    [
        (("ci/*",), [("ci/test", "success"), ("ci/lint", "warning")], "green"),  # Gitea: warning passes
        (("ci/{test,lint}",), [("ci/test", "success")], "green"),  # as Gitea counts: a glob any status matches
        (("ci/{test,lint}", "build"), [("ci/lint", "success")], "pending"),  # build not reported
        (("ci/[!x]*",), [("ci/test", "failure"), ("other", "success")], "red"),
        (("build",), [("ci/test", "failure"), ("build", "success")], "green"),  # unrelated red ignored
    ],
)
def test_gitea_required_contexts_are_globs(required: tuple[str, ...], items: list[tuple[str, str]], state: str) -> None:
    from papayu_git.forge.checks import Item, Required, evaluate, word_state

    reported = [Item(name, word_state(word, ForgeKind.GITEA), None, i) for i, (name, word) in enumerate(items)]
    assert evaluate(Required(required), reported, [], kind=ForgeKind.GITEA).state.value == state


def test_a_rate_limit_is_worth_waiting_for_a_refusal_is_not() -> None:
    from forge_server import ForgeServer

    from papayu_git import forge

    with ForgeServer() as server:
        server.route("GET", "/limited", (403, {"message": "API rate limit exceeded"}, {"x-ratelimit-remaining": "0"}))
        server.route("GET", "/refused", (403, {"message": "Resource not accessible by integration"}))
        server.route("GET", "/gone", (404, {"message": "Not Found"}))
        hub = forge.Forge(ForgeKind.GITHUB, RemoteRepo("127.0.0.1", "acme/widget"), server.url, server.url, "tok")
        found = {}
        with forge.connect(hub) as api:
            for path in ("/limited", "/refused", "/gone"):
                with pytest.raises(forge.ForgeError) as err:
                    api.call("GET", path, retry=False)
                found[path] = (err.value.code, err.value.transient)
    assert found == {
        "/limited": ("ERR_FORGE_HTTP", True),
        "/refused": ("ERR_FORGE_AUTH", False),
        "/gone": ("ERR_FORGE_NOT_FOUND", False),
    }
