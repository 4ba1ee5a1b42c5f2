"""Fixtures only: a hermetic environment (temp HOME, no system git config, fixed dates), a
real git repository, the scripted LLM server. Helpers are in helpers.py."""

from __future__ import annotations

import os
from collections.abc import Iterator
from pathlib import Path

import pytest
from calc_project import CALC, PYPROJECT, PYTEST, TESTS
from helpers import git, make_repo
from llm_server import ScriptedLLM


@pytest.fixture(autouse=True)
def hermetic_env(tmp_path_factory: pytest.TempPathFactory, monkeypatch: pytest.MonkeyPatch) -> None:
    home = tmp_path_factory.mktemp("home")
    monkeypatch.setenv("HOME", str(home))
    monkeypatch.setenv("XDG_CONFIG_HOME", str(home / ".config"))
    monkeypatch.setenv("GIT_CONFIG_NOSYSTEM", "1")
    monkeypatch.setenv("GIT_AUTHOR_NAME", "Test Author")
    monkeypatch.setenv("GIT_AUTHOR_EMAIL", "author@example.com")
    monkeypatch.setenv("GIT_COMMITTER_NAME", "Test Committer")
    monkeypatch.setenv("GIT_COMMITTER_EMAIL", "committer@example.com")
    monkeypatch.setenv("GIT_AUTHOR_DATE", "2026-01-01T00:00:00Z")
    monkeypatch.setenv("GIT_COMMITTER_DATE", "2026-01-01T00:00:00Z")
    for name in list(os.environ):
        if name.startswith(("PAPAYU_", "GIT_DIR", "GIT_WORK_TREE", "GIT_INDEX_FILE")) or name in (
            "GH_TOKEN",
            "GITHUB_TOKEN",
            "GITLAB_TOKEN",
            "GITEA_TOKEN",
        ):  # forge tokens
            monkeypatch.delenv(name, raising=False)
    (home / ".gitconfig").write_text(
        "[user]\n\tname = Test User\n\temail = test@example.com\n"
        "[init]\n\tdefaultBranch = main\n[commit]\n\tgpgsign = false\n"
    )
    from papayu_git import settings

    settings._git_config.cache_clear()
    settings.notices_to(None)  # an in-process CLI installs its own; each test may be told anew
    settings.forget_notices()


@pytest.fixture
def repo(tmp_path: Path) -> Path:
    return make_repo(tmp_path / "repo")


@pytest.fixture
def llm() -> Iterator[ScriptedLLM]:
    """A scripted OpenAI-compatible server; set ``llm.script`` and pass ``llm.env()`` to papayu."""
    server = ScriptedLLM([])
    yield server
    server.close()


@pytest.fixture
def calc(tmp_path: Path) -> Path:
    """The calc project (calc_project.py) with pytest as its check: test_add fails on the tip."""
    repo = make_repo(tmp_path / "calc", {"calc.py": CALC, "tests/test_calc.py": TESTS, "pyproject.toml": PYPROJECT})
    git(repo, "config", "papayu.check.command", PYTEST)
    return repo


def pytest_collection_finish(session: pytest.Session) -> None:
    """On a worker of `--dist loadgroup`, every test of an xdist_group must carry the group in
    its id (that is how the scheduler keeps a group on one worker): a pytest and pytest-xdist
    pair that lose it would build each group's session fixtures once per worker, unnoticed."""
    if not getattr(session.config.option, "loadgroup", False):
        return
    lost = [item.nodeid for item in session.items if item.get_closest_marker("xdist_group") and "@" not in item.nodeid]
    if lost:
        pytest.exit(f"pytest-xdist's groups do not hold with this pytest ({lost[0]} has no @group): see pyproject.toml")


def pytest_collection_modifyitems(items: list[pytest.Item]) -> None:
    """The long tests first (the real local model, then those marked slow), each group in file
    order: `make test` spreads the suite over workers (pytest-xdist), and a long test picked up
    last would leave the other workers idle while it runs."""

    def weight(item: pytest.Item) -> int:
        return 0 if item.get_closest_marker("local_llm") else 1 if item.get_closest_marker("slow") else 2

    items.sort(key=weight)
