"""Fixtures only: a hermetic environment (temp HOME, no system git config, fixed dates), a
real git repository, the scripted LLM server. Helpers are in helpers.py."""

from __future__ import annotations

import os
import signal
import sys
from collections.abc import Generator, Iterator
from pathlib import Path

import pytest
import tiers
from calc_project import CALC, PYPROJECT, PYTEST, TESTS
from helpers import git, make_repo
from llm_server import ScriptedLLM

# A suite started in the background by a non-interactive shell inherits SIGINT ignored, and so
# would every papayu it starts: the tests that press Ctrl-C would find it ignored. A handled
# signal is reset to its default in a child, so papayu gets Python's own Ctrl-C as a user does.
if signal.getsignal(signal.SIGINT) == signal.SIG_IGN:
    signal.signal(signal.SIGINT, signal.default_int_handler)


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


@pytest.hookimpl(wrapper=True)
def pytest_collection(session: pytest.Session) -> Generator[None, object, object]:
    """Collection keeps the test modules as pytest rewrote them (their asserts), even where
    PYTHONDONTWRITEBYTECODE is set (CI images): each worker of the next run reads them instead of
    rewriting every module again, seconds of CPU per process. Only while collecting: a module a
    test imports from its temporary repository still leaves no __pycache__ there."""
    saved, sys.dont_write_bytecode = sys.dont_write_bytecode, False
    try:
        return (yield)
    finally:
        sys.dont_write_bytecode = saved


def pytest_addoption(parser: pytest.Parser) -> None:
    parser.addoption(
        "--fast",
        action="store_true",
        help=f"the fast tier (make check): leave out the tests marked {', '.join(FAST_OUT)} (tests/tiers.py)",
    )
    parser.addoption(
        "--record-durations",
        metavar="PATH",
        help="write what each test took to PATH (make durations: tests/durations.json, the fast tier's budget)",
    )


def pytest_configure(config: pytest.Config) -> None:
    for name, meaning in tiers.MARKERS.items():
        config.addinivalue_line("markers", f"{name}: {meaning} (applied from what the test uses: tests/tiers.py)")


FAST_OUT = (*tiers.MARKERS, tiers.SLOW)


def _tier_markers(item: pytest.Item) -> None:
    """Mark ``item`` with what it uses (tests/tiers.py): its function, parameters and fixtures."""
    function = getattr(item, "function", None)
    if function is None:
        return
    callspec = getattr(item, "callspec", None)
    defs = item._fixtureinfo.name2fixturedefs if hasattr(item, "_fixtureinfo") else {}
    fixtures = [d.func for name in item.fixturenames for d in defs.get(name, ())]
    for kind in sorted(tiers.kinds_of([function, *(callspec.params.values() if callspec else ()), *fixtures])):
        if not item.get_closest_marker(kind):
            item.add_marker(kind)


def pytest_collection_modifyitems(config: pytest.Config, items: list[pytest.Item]) -> None:
    """Each test marked with what it uses (tests/tiers.py), the marked ones left out with --fast
    (`make check`); the long tests first (the real local model, then those marked slow), each
    group in file order: `make test` spreads the suite over workers (pytest-xdist), and a long
    test picked up last would leave the other workers idle while it runs."""

    def weight(item: pytest.Item) -> int:
        return 0 if item.get_closest_marker("local_llm") else 1 if item.get_closest_marker("slow") else 2

    for item in items:
        _tier_markers(item)
    unmarked = {tiers.test_id(i.nodeid): i for i in items if not any(i.get_closest_marker(k) for k in tiers.MARKERS)}
    for test in tiers.beyond_budget(unmarked, tiers.recorded()):
        unmarked[test].add_marker(tiers.SLOW)
    if config.getoption("fast"):
        left_out = [item for item in items if any(item.get_closest_marker(kind) for kind in FAST_OUT)]
        config.hook.pytest_deselected(items=left_out)
        items[:] = [item for item in items if not any(item.get_closest_marker(kind) for kind in FAST_OUT)]
    items.sort(key=weight)


_took: dict[str, float] = {}


def pytest_runtest_logreport(report: pytest.TestReport) -> None:
    """What each test took, setup and teardown included (pytest-xdist sends the workers' reports here)."""
    test = tiers.test_id(report.nodeid)
    _took[test] = _took.get(test, 0.0) + report.duration


def pytest_sessionfinish(session: pytest.Session) -> None:
    path = session.config.getoption("record_durations")
    if not path or hasattr(session.config, "workerinput") or session.config.getoption("fast"):
        return  # the whole suite's run is the one recorded, by the process that saw every report
    machine = f"{os.cpu_count()} cores, load {' '.join(f'{x:.2f}' for x in os.getloadavg())} at the end"
    tiers.record(Path(path), _took, machine)
