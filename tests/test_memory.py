"""Engineering memory (docs/DESIGN.md, "Memory"): whitelist, types, files, git config overrides, CLI, MEMORY block."""

from __future__ import annotations

import json
import os
from pathlib import Path

import pytest
from helpers import assert_error, cli, git

from papayu_git import memory, settings


def _prefs() -> Path:
    return Path(os.environ["XDG_CONFIG_HOME"]) / "papayu-git" / "preferences.json"


def test_whitelist_drops_unknown_keys_and_rejects_wrong_types() -> None:
    accepted, unknown, wrong = memory.check_memory_patch(
        {
            "project.default_test_command": "pytest -q",
            "user.ask_budget": "2",
            "project.src_roots": "src",
            "user.risk_tolerance": "reckless",
            "user.ask_budget_extra": 1,
            "env.PATH": "/tmp",
            "user.ask_budget2": True,
        }
    )
    assert accepted == {"project.default_test_command": "pytest -q"}
    assert sorted(e.path for e in unknown) == [
        "memory_patch.env.PATH",
        "memory_patch.user.ask_budget2",
        "memory_patch.user.ask_budget_extra",
    ]
    assert {e.code for e in wrong} == {"ERR_MEMORY_TYPE"}
    assert sorted(e.path for e in wrong) == [
        "memory_patch.project.src_roots",
        "memory_patch.user.ask_budget",
        "memory_patch.user.risk_tolerance",
    ]


def test_bool_is_not_an_integer_and_range_is_checked() -> None:
    assert memory.check_memory_patch({"user.ask_budget": True})[0] == {}
    assert memory.check_memory_patch({"user.ask_budget": 3})[0] == {}
    assert memory.check_memory_patch({"user.ask_budget": 2})[0] == {"user.ask_budget": 2}


def test_patch_applied_only_on_explicit_request(repo: Path) -> None:
    patch = {"project.default_test_command": "pytest -x", "user.preferred_style": "brief", "user.evil": "x"}
    assert memory.apply_memory_patch(repo, patch, "fix the failing test", accept_flag=False) == []
    assert not memory.project_path(repo).exists() and not _prefs().exists()
    assert memory.apply_memory_patch(repo, patch, "Запомни: тесты запускать pytest -x", False) == [
        "project.default_test_command",
        "user.preferred_style",
    ]
    assert json.loads(memory.project_path(repo).read_text())["project"] == {"default_test_command": "pytest -x"}
    assert json.loads(_prefs().read_text())["user"] == {"preferred_style": "brief"}


def test_accept_flag_applies_and_negation_does_not_count(repo: Path) -> None:
    assert not memory.asks_to_remember("don't remember this, just fix it")
    assert memory.asks_to_remember("please remember that we use poetry")
    assert memory.apply_memory_patch(repo, {"project.package_manager": "poetry"}, "fix it", True) == [
        "project.package_manager"
    ]
    assert memory.memory_value(repo, "project.package_manager") == "poetry"


def test_git_config_overrides_file_with_documented_key(repo: Path) -> None:
    memory.set_values(repo, {"project.default_test_command": "pytest -q", "project.test_roots": ["tests"]})
    assert memory.git_config_key("project.default_test_command") == "papayu.project.defaultTestCommand"
    git(repo, "config", "papayu.project.defaultTestCommand", "make check")
    git(repo, "config", "papayu.user.askBudget", "0")
    settings._git_config.cache_clear()
    loaded = memory.load_memory(repo)
    assert loaded["project"]["default_test_command"].value == "make check"
    assert loaded["project"]["default_test_command"].source == "git config papayu.project.defaultTestCommand"
    assert loaded["project"]["test_roots"].value == ["tests"]
    assert loaded["user"]["ask_budget"].value == 0


def test_memory_block_is_the_seed_format_and_bounded(repo: Path) -> None:
    assert memory.build_memory_block(repo) == ""
    memory.set_values(
        repo, {"user.preferred_style": "brief", "project.src_roots": ["src"], "project.ci_notes": "x" * 40000}
    )
    block = memory.build_memory_block(repo)
    lines = block.splitlines()
    assert lines[0] == "ENGINEERING_MEMORY (trusted by user; update only when user requests):"
    data = json.loads(lines[1])
    assert data["user"] == {"preferred_style": "brief"} and data["project"]["src_roots"] == ["src"]
    assert data["project"]["ci_notes"].startswith("xxxx") and len(block.encode()) <= memory.MEMORY_BLOCK_LIMIT
    assert lines[-1].startswith("Use ENGINEERING_MEMORY as defaults.")


def test_invalid_project_file_is_skipped_in_block_but_reported_by_show(repo: Path) -> None:
    path = memory.project_path(repo)
    path.parent.mkdir()
    path.write_text('{"project": {"src_roots": "src", "build_command": "make"}}')
    assert json.loads(memory.build_memory_block(repo).splitlines()[1]) == {"project": {"build_command": "make"}}
    proc = cli("memory", "show", cwd=repo)
    assert_error(proc, "ERR_PROJECT_INVALID")


def test_cli_set_show_unset_roundtrip(repo: Path) -> None:
    sub = repo / "pkg"
    sub.mkdir()
    assert cli("memory", "set", "project.src_roots", '["src", "lib"]', cwd=sub).returncode == 0
    assert cli("memory", "set", "user.ask_budget", "2", cwd=sub).returncode == 0
    assert cli("memory", "set", "project.default_test_command", "pytest -q", cwd=repo).returncode == 0
    shown = json.loads(cli("memory", "show", "--json", cwd=repo).stdout)
    assert shown["project"] == {"default_test_command": "pytest -q", "src_roots": ["src", "lib"]}
    assert shown["user"] == {"ask_budget": 2}
    assert shown["sources"]["user.ask_budget"] == str(_prefs())
    assert cli("validate", str(memory.project_path(repo)), str(_prefs())).returncode == 0
    assert cli("memory", "unset", "project.src_roots", cwd=repo).returncode == 0
    assert json.loads(memory.project_path(repo).read_text())["project"] == {"default_test_command": "pytest -q"}
    assert "pytest -q" in cli("memory", "show", cwd=repo).stdout


@pytest.mark.parametrize(
    ("key", "value", "code"),
    [
        ("user.ask_budget", "two", "ERR_MEMORY_TYPE"),
        ("user.ask_budget", "7", "ERR_MEMORY_TYPE"),
        ("user.preferred_style", "loud", "ERR_MEMORY_TYPE"),
        ("project.secret_key", "x", "ERR_MEMORY_KEY_NOT_ALLOWED"),
    ],
)
def test_cli_set_rejects_bad_keys_and_values(repo: Path, key: str, value: str, code: str) -> None:
    proc = cli("memory", "set", key, value, "--json", cwd=repo)
    assert_error(proc, code, first=True)
    assert not memory.project_path(repo).exists() and not _prefs().exists()


def test_cli_refuses_to_write_through_symlink(repo: Path, tmp_path: Path) -> None:
    outside = tmp_path / "outside"
    outside.mkdir()
    (repo / ".papa-yu").symlink_to(outside)
    proc = cli("memory", "set", "project.ci_notes", "slow", "--json", cwd=repo)
    assert_error(proc, "ERR_PATH_THROUGH_SYMLINK", first=True)
    assert list(outside.iterdir()) == []


def test_user_memory_works_outside_a_repository(tmp_path: Path) -> None:
    assert cli("memory", "set", "user.default_language", "python", cwd=tmp_path).returncode == 0
    proc = cli("memory", "set", "project.ci_notes", "x", "--json", cwd=tmp_path)
    assert_error(proc, "ERR_NOT_A_GIT_REPO", first=True)
    assert json.loads(cli("memory", "show", "--json", cwd=tmp_path).stdout)["user"] == {"default_language": "python"}


def test_memory_block_limit_counts_bytes_of_non_ascii(repo: Path) -> None:
    memory.set_values(
        repo,
        {
            "project.ci_notes": "Тесты долго, по умолчанию smoke. " * 2000,
            "project.test_roots": [f"tests/части{i}" for i in range(2000)],
        },
    )
    block = memory.build_memory_block(repo)
    assert len(block.encode()) <= memory.MEMORY_BLOCK_LIMIT
    data = json.loads(block.splitlines()[1])
    assert data["project"]["ci_notes"].startswith("Тесты долго") and data["project"]["test_roots"][0] == "tests/части0"
