"""The settings table (docs/REFERENCE.md, "Settings"): one family per concern, the environment
variable derived from the key by one rule, old names still read with a notice naming the new one,
unknown `papayu.*` keys said with the nearest real one, and the source that won reported.

Lookups run in this process against real repositories; the notices are checked end to end on the
real CLI's stderr."""

from __future__ import annotations

import json
import re
from pathlib import Path

import pygit2
import pytest
from helpers import git, papayu, write_plan

from papayu_git import settings
from papayu_git.check.command import resolve_command
from papayu_git.land_drivers import no_drivers_env
from papayu_git.objects import GitTree
from papayu_git.settings import SECTIONS, SETTINGS, Origin, env_name, setting_name

KEY = re.compile(r"papayu(\.[a-z][a-zA-Z0-9]*)+")


@pytest.fixture
def told() -> list[str]:
    """The notices settings gives, as the CLI's sink would print them."""
    said: list[str] = []
    settings.notices_to(said.append)
    return said


def test_the_rule_derives_each_environment_variable_and_name_from_the_key() -> None:
    assert env_name("papayu.check.timeoutSec") == "PAPAYU_CHECK_TIMEOUT_SEC"
    assert env_name("papayu.check.tmpMB") == "PAPAYU_CHECK_TMP_MB"
    assert env_name("papayu.protocol.fallbackToV1") == "PAPAYU_PROTOCOL_FALLBACK_TO_V1"
    assert setting_name("papayu.forge.ciTimeoutSec") == "forge_ci_timeout_sec"
    for setting in SETTINGS:
        assert KEY.fullmatch(setting.key), setting.key
        assert setting.env == env_name(setting.key) and setting.name == setting_name(setting.key)
        assert setting.env == "PAPAYU_" + setting.name.upper()
    for attribute in ("key", "env", "name"):
        values = [getattr(s, attribute).lower() for s in SETTINGS]
        assert len(values) == len(set(values)), f"two settings share a {attribute}"


def test_one_family_per_concern_and_no_key_is_both_a_value_and_a_section() -> None:
    keys = [s.key for s in SETTINGS if s.git] + [p.prefix + "x" for p in SECTIONS]
    for key in keys:
        assert not any(other.startswith(key + ".") for other in keys), f"{key} is a value and a section"
    families = {k.split(".")[1] for k in keys if k.count(".") >= 2}
    loose = [k.split(".")[1] for k in keys if k.count(".") == 1]
    for name in loose:  # papayu.checkCommand beside papayu.check.*, papayu.protocolVersion beside protocolX
        first = re.match(r"[a-z]+", name)
        assert first, name
        assert not any(f.startswith(first.group()) or first.group().startswith(f) for f in families), name
        assert sum(n.startswith(first.group()) for n in loose) == 1, f"{name}: a family without its section"


def test_an_old_name_is_never_a_current_one() -> None:
    current = {s.key.lower() for s in SETTINGS} | {s.env for s in SETTINGS}
    old = [name for s in SETTINGS for name in s.old]
    assert len(old) == len(set(old))
    assert not current & {n.lower() if "." in n else n for n in old}


def test_an_old_environment_variable_works_and_names_the_new_one(
    repo: Path, monkeypatch: pytest.MonkeyPatch, told: list[str]
) -> None:
    monkeypatch.setenv("PAPAYU_SANDBOX", "off")
    monkeypatch.setenv("PAPAYU_CHECKS_TIMEOUT_SEC", "12")
    assert settings.resolve("check_sandbox", str(repo)) == ("off", "PAPAYU_SANDBOX", Origin.ENV)
    assert settings.get_int("forge_ci_timeout_sec", str(repo)) == 12
    settings.get("check_sandbox", str(repo))  # read again: said once
    assert told == [
        "PAPAYU_SANDBOX is deprecated: use PAPAYU_CHECK_SANDBOX (it was read this time)",
        "PAPAYU_CHECKS_TIMEOUT_SEC is deprecated: use PAPAYU_FORGE_CI_TIMEOUT_SEC (it was read this time)",
    ]


def test_an_old_git_config_key_works_and_names_the_new_one(repo: Path, told: list[str]) -> None:
    git(repo, "config", "papayu.prewarmBase", "false")
    git(repo, "config", "papayu.local.nCtx", "4096")  # one window, named twice before
    assert settings.resolve("check_prewarm_base", str(repo)).source == "git config papayu.prewarmBase"
    assert settings.get_bool("check_prewarm_base", str(repo)) is False
    assert settings.get_int("llm_context_tokens", str(repo)) == 4096
    assert told == [
        "papayu.prewarmBase is deprecated: use papayu.check.prewarmBase (it was read this time)",
        "papayu.local.nCtx is deprecated: use papayu.llm.contextTokens (it was read this time)",
    ]


def test_when_old_and_new_are_both_set_the_new_wins_and_the_notice_says_so(
    repo: Path, monkeypatch: pytest.MonkeyPatch, told: list[str]
) -> None:
    git(repo, "config", "papayu.checkTimeoutSec", "5")
    git(repo, "config", "papayu.check.timeoutSec", "7")
    monkeypatch.setenv("PAPAYU_CANDIDATES", "openai/a")
    monkeypatch.setenv("PAPAYU_CANDIDATES_MODELS", "openai/b")
    assert settings.resolve("check_timeout_sec", str(repo)) == (
        "7",
        "git config papayu.check.timeoutSec",
        Origin.GIT_CONFIG,
    )
    assert settings.get("candidates_models", str(repo)) == "openai/b"
    assert told == [
        "papayu.checkTimeoutSec is deprecated and ignored: papayu.check.timeoutSec is set and wins "
        "(use papayu.check.timeoutSec)",
        "PAPAYU_CANDIDATES is deprecated and ignored: PAPAYU_CANDIDATES_MODELS is set and wins "
        "(use PAPAYU_CANDIDATES_MODELS)",
    ]


def test_the_source_that_won_is_reported(repo: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    tree = _tree(repo)
    assert resolve_command(repo, tree, None) is None  # nothing to detect in a bare README repo
    git(repo, "config", "papayu.check.command", "make check")
    settings.forget_cached_config()  # read once per repository and process: this one changed it
    found = resolve_command(repo, tree, None)
    assert found and (found.command, found.source) == ("make check", "git config papayu.check.command")
    monkeypatch.setenv("PAPAYU_CHECK_COMMAND", "tox")
    found = resolve_command(repo, tree, None)
    assert found and (found.command, found.source) == ("tox", "PAPAYU_CHECK_COMMAND")
    found = resolve_command(repo, tree, "nox")
    assert found and (found.command, found.source) == ("nox", "--check")
    assert settings.resolve("llm_mode", str(repo)) == ("fix-plan", "default", Origin.DEFAULT)


def test_an_old_section_key_is_read_under_the_new_section(repo: Path, told: list[str]) -> None:
    git(repo, "config", "papayu.llm.price.ollama", "0.5,1")
    git(repo, "config", "papayu.llm.price.openai", "9,9")
    git(repo, "config", "papayu.llm.providerPrice.openai", "1,2")
    assert settings.section_items("papayu.llm.providerPrice.", str(repo)) == {"ollama": "0.5,1", "openai": "1,2"}
    assert sorted(told) == [
        "papayu.llm.price.ollama is deprecated: use papayu.llm.providerPrice.ollama (it was read this time)",
        "papayu.llm.price.openai is deprecated and ignored: papayu.llm.providerPrice.openai is set and wins "
        "(use papayu.llm.providerPrice.openai)",
    ]


@pytest.mark.parametrize(
    ("key", "said"),
    [
        ("papayu.check.comand", "did you mean papayu.check.command?"),
        ("papayu.check.timeout", "did you mean papayu.check.timeoutSec?"),
        ("papayu.forge.ciTimeout", "did you mean papayu.forge.ciTimeoutSec?"),
        ("papayu.llm.baseURI", "did you mean papayu.llm.baseUrl?"),
        ("papayu.frobnicate", "(docs/REFERENCE.md lists them)"),
    ],
)
def test_an_unknown_papayu_key_is_said_with_the_nearest_real_one(
    repo: Path, told: list[str], key: str, said: str
) -> None:
    git(repo, "config", key, "x")
    git(repo, "config", "papayu.logs.app", "/var/log/app.log")  # a family of keys the user names
    git(repo, "config", "papayu.project.defaultTestCommand", "make")  # engineering memory's
    settings.get("check_command", str(repo))
    assert told == [f"git config {key.lower()} is not a papayu setting and is ignored; {said}".replace("; (", " (")]


def test_the_cli_says_an_old_key_once_and_uses_it(repo: Path, tmp_path: Path) -> None:
    """The check of a real apply comes from the old key; its notice is one line on stderr, though
    the apply reads the setting more than once (tip, prewarm, check line)."""
    git(repo, "config", "papayu.checkCommand", "exit 4")
    git(repo, "config", "papayu.check.comand", "exit 0")  # misspelt: said, not used
    plan = write_plan(tmp_path, [{"kind": "CREATE_FILE", "path": "a.txt", "content": "a\n"}])
    proc = papayu("apply", str(plan), "--json", cwd=repo)
    data = json.loads(proc.stdout)
    assert data["check"]["source"] == "git config papayu.checkCommand" and data["check"]["exit_code"] == 4
    assert data["state"] == "rolled_back"
    warnings = [line for line in proc.stderr.splitlines() if line.startswith("warning: ")]
    assert (
        warnings.count("warning: papayu.checkCommand is deprecated: use papayu.check.command (it was read this time)")
        == 1
    )
    assert (
        "warning: git config papayu.check.comand is not a papayu setting and is ignored; "
        "did you mean papayu.check.command?"
    ) in warnings


def test_the_cli_prefers_the_new_environment_variable_and_says_the_old_is_ignored(repo: Path) -> None:
    proc = papayu("doctor", "--json", cwd=repo, env={"PAPAYU_SANDBOX": "nonsense", "PAPAYU_CHECK_SANDBOX": "off"})
    checks = {c["name"]: c for c in json.loads(proc.stdout)["checks"]}
    assert checks["sandbox setting"]["data"] == {
        "mode": "off",
        "source": "PAPAYU_CHECK_SANDBOX",
        "check_network": False,
    }
    assert (
        "warning: PAPAYU_SANDBOX is deprecated and ignored: PAPAYU_CHECK_SANDBOX is set and wins "
        "(use PAPAYU_CHECK_SANDBOX)"
    ) in proc.stderr.splitlines()


def _tree(repo: Path) -> GitTree:
    handle = pygit2.Repository(str(repo))
    return GitTree(handle, handle[handle.head.target].tree)


def test_a_notice_said_before_the_cli_listens_is_kept_for_it(repo: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("PAPAYU_TRACE", "0")
    assert settings.get_bool("trace_enabled", str(repo)) is False  # no sink yet: settings prints nothing
    said: list[str] = []
    settings.notices_to(said.append)
    assert said == ["PAPAYU_TRACE is deprecated: use PAPAYU_TRACE_ENABLED (it was read this time)"]
    settings.get("trace_enabled", str(repo))
    assert len(said) == 1


def test_config_keys_keep_a_subsections_case_and_are_read_again_once_old(repo: Path) -> None:
    """A filter driver's name is a subsection, case and all: the landing switches off exactly the
    drivers git would run, from the command's one read of `git config` while it is fresh, and
    from a new read after a check that took longer (land_drivers.py)."""
    git(repo, "config", "filter.LFS-Mixed.smudge", "run-me %f")
    settings.forget_cached_config()
    assert settings.git_config_keys("filter.", str(repo), within=60) == ["filter.LFS-Mixed.smudge"]
    env = no_drivers_env(repo, {})
    assert "'filter.LFS-Mixed.smudge'='' 'filter.LFS-Mixed.clean'=''" in env["GIT_CONFIG_PARAMETERS"]
    git(repo, "config", "filter.late.process", "run-me")
    assert settings.git_config_keys("filter.", str(repo), within=60) == ["filter.LFS-Mixed.smudge"]
    keys = settings.git_config_keys("filter.", str(repo), within=0)
    assert keys == ["filter.LFS-Mixed.smudge", "filter.late.process"]
    assert settings.git_config_value("filter.late.process", str(repo)) == "run-me"  # one read for all
