"""`git papayu validate` through the CLI: exit codes, lines, --json, detection. In-process (click's
runner) where only the output is under test; a subprocess for usage errors and the entry points."""

from __future__ import annotations

import json
import os
import re
import shutil
import subprocess
import sys
from pathlib import Path

import pytest
from helpers import GOLDEN_UPSTREAM, cli, make_repo, papayu, write

from papayu_git import plans

# FILE: ERR_CODE: reason (hint) -- reasons and hints may contain parentheses themselves.
LINE = re.compile(r"^(?P<file>[^:]+): (?P<code>ERR_[A-Z0-9_]+): (?P<reason>.+?) \((?P<hint>.+)\)$")
SHA = "a" * 64
GOOD = {"actions": [{"kind": "CREATE_FILE", "path": "hello.py", "content": "print('hi')\n"}], "summary": "add"}
BAD = {
    "actions": [
        {"kind": "CREATE_FILE", "path": "src/.GIT/config", "content": "x"},
        {"kind": "CREATE_FILE", "path": ".env", "content": "TOKEN=1"},
    ],
    "summary": "s",
}
PATCH = {
    "actions": [
        {
            "kind": "PATCH_FILE",
            "path": "a.py",
            "base_sha256": SHA,
            "patch": "--- a/a.py\n+++ b/a.py\n@@ -1 +1 @@\n-a\n+b\n",
        }
    ],
    "summary": "s",
}


def error_lines(stdout: str) -> list[dict[str, str]]:
    lines = [line for line in stdout.splitlines() if ": ERR_" in line]
    matches = [LINE.match(line) for line in lines]
    assert all(matches), lines
    return [m.groupdict() for m in matches if m]


def test_valid_file_exits_0(tmp_path: Path) -> None:
    name = write(tmp_path, "good.json", GOOD)
    proc = cli("validate", name, cwd=tmp_path)
    assert proc.returncode == 0, proc.stderr
    assert proc.stdout.strip() == "good.json: ok (response)"


def test_each_problem_prints_file_code_reason_hint_and_exits_1(tmp_path: Path) -> None:
    names = [
        write(tmp_path, "good.json", GOOD),
        write(tmp_path, "bad.json", BAD),
        write(tmp_path, "prose.txt", "I think you should edit the file."),
    ]
    proc = cli("validate", *names, cwd=tmp_path)
    assert proc.returncode == 1
    found = [(e["file"], e["code"]) for e in error_lines(proc.stdout)]
    assert found == [
        ("bad.json", "ERR_PATH_GIT_DIR"),
        ("bad.json", "ERR_PROTECTED_PATH"),
        ("prose.txt", "ERR_JSON_INVALID"),
    ]
    assert "good.json: ok (response)" in proc.stdout
    assert all(e["hint"] for e in error_lines(proc.stdout))


def test_missing_file_is_a_failure_not_a_crash(tmp_path: Path) -> None:
    proc = cli("validate", "nope.json", cwd=tmp_path)
    assert proc.returncode == 1
    assert [e["code"] for e in error_lines(proc.stdout)] == ["ERR_FILE_NOT_FOUND"]


@pytest.mark.parametrize(
    "args",
    [
        ["validate"],
        ["validate", "--protocol", "3", "x.json"],
        ["validate", "--mode", "deploy", "x.json"],
        ["validate", "--bogus", "x"],
        ["no-such-command"],
    ],
)
def test_usage_errors_exit_2(tmp_path: Path, args: list[str]) -> None:
    proc = papayu(*args, cwd=tmp_path)
    assert proc.returncode == 2, (proc.stdout, proc.stderr)
    assert "Usage:" in proc.stderr


def test_json_output(tmp_path: Path) -> None:
    names = [write(tmp_path, "good.json", GOOD), write(tmp_path, "bad.json", BAD)]
    proc = cli("validate", "--json", *names, cwd=tmp_path)
    assert proc.returncode == 1
    out = json.loads(proc.stdout)
    assert out["ok"] is False
    assert [(f["file"], f["kind"], f["ok"]) for f in out["files"]] == [
        ("good.json", "response", True),
        ("bad.json", "response", False),
    ]
    assert [e["code"] for e in out["files"][1]["errors"]] == ["ERR_PATH_GIT_DIR", "ERR_PROTECTED_PATH"]
    assert out["files"][1]["errors"][0]["path"] == "src/.GIT/config"
    assert all(e["hint"] for e in out["files"][1]["errors"])
    assert json.loads(cli("validate", "--json", names[0], cwd=tmp_path).stdout)["ok"] is True


def test_kind_is_detected_for_every_file_type(tmp_path: Path) -> None:
    repo = make_repo(tmp_path / "repo")
    golden = shutil.copy(GOLDEN_UPSTREAM / "v2" / "002_fix_bug_apply_patch.json", repo / "trace.json")
    plan = plans.StoredPlan(
        id=plans.new_id(),
        goal="g",
        mode="apply",
        protocol=1,
        files={"src/main.rs": SHA},
        response={"actions": [{"kind": "UPDATE_FILE", "path": "src/main.rs", "content": "x\n"}], "summary": "s"},
    )
    stored = plans.save(repo / ".git" / "papayu", plan)
    names = [
        write(repo, ".papa-yu/project.json", {"schema_version": 1, "project": {"default_test_command": "pytest"}}),
        write(repo, "prefs/preferences.json", {"schema_version": 1, "user": {"ask_budget": 1}}),
        write(repo, "response.json", GOOD),
        Path(golden).name,
        str(stored.relative_to(repo)),
    ]
    out = json.loads(cli("validate", "--json", *names, cwd=repo).stdout)
    assert [(f["kind"], f["ok"]) for f in out["files"]] == [
        ("project", True),
        ("preferences", True),
        ("response", True),
        ("golden", True),
        ("plan", True),
    ]


def test_invalid_files_of_each_kind(tmp_path: Path) -> None:
    repo = make_repo(tmp_path / "repo")
    trace = json.loads((GOLDEN_UPSTREAM / "v1" / "004_protected_path_block.json").read_text())
    trace["result"]["validation_outcome"] = "ok"
    plan = plans.StoredPlan(
        id="20260101-000000-0000f1",
        mode="apply",
        protocol=1,
        files={"src/main.rs": SHA},
        response={"actions": [{"kind": "UPDATE_FILE", "path": "src/other.rs", "content": "x\n"}], "summary": "s"},
    )
    names = [
        write(repo, ".papa-yu/project.json", {"project": {"src_roots": "src"}}),
        write(repo, "preferences.json", {"user": {"ask_budget": 5}}),
        write(repo, "mismatch.json", trace),
        write(
            repo, "broken_golden.json", {"protocol": {"schema_version": 9}, "request": {}, "context": {}, "result": {}}
        ),
        str(plans.save(repo / ".git" / "papayu", plan).relative_to(repo)),
    ]
    proc = cli("validate", *names, cwd=repo)
    assert proc.returncode == 1
    firsts = {}
    for e in error_lines(proc.stdout):
        firsts.setdefault(e["file"], e["code"])
    assert firsts == {
        names[0]: "ERR_PROJECT_INVALID",
        names[1]: "ERR_PREFERENCES_INVALID",
        names[2]: "ERR_GOLDEN_MISMATCH",
        names[3]: "ERR_GOLDEN_INVALID",
        names[4]: "ERR_UPDATE_WITHOUT_BASE",
    }


def test_all_upstream_golden_traces_validate(tmp_path: Path) -> None:
    files = sorted(str(p) for p in GOLDEN_UPSTREAM.glob("v*/*.json"))
    proc = cli("validate", *files, cwd=tmp_path)
    assert proc.returncode == 0, proc.stdout
    assert proc.stdout.count(": ok (golden)") == 12


def test_protocol_option_and_setting(tmp_path: Path) -> None:
    array = write(tmp_path, "array.json", GOOD["actions"])
    patch = write(tmp_path, "patch.json", PATCH)
    assert cli("validate", array, patch, cwd=tmp_path).returncode == 0  # an array is v1, default v2
    proc = cli("validate", "--protocol", "2", array, cwd=tmp_path)
    assert [e["code"] for e in error_lines(proc.stdout)] == ["ERR_SCHEMA"]
    proc = cli("validate", "--protocol", "1", patch, cwd=tmp_path)
    assert proc.returncode == 1 and error_lines(proc.stdout)[0]["code"] == "ERR_SCHEMA"
    proc = cli("validate", patch, cwd=tmp_path, env={"PAPAYU_PROTOCOL_VERSION": "1"})
    assert proc.returncode == 1


def test_mode_option(tmp_path: Path) -> None:
    empty = write(tmp_path, "empty.json", {"actions": [], "summary": "looked at it"})
    declared = write(tmp_path, "declared.json", {"mode": "apply", "actions": [], "summary": "done"})
    assert cli("validate", empty, cwd=tmp_path).returncode == 0  # no actions: a PLAN answer
    assert cli("validate", "--mode", "plan", declared, cwd=tmp_path).returncode == 0
    for args in (["--mode", "apply", empty], [declared]):
        proc = cli("validate", *args, cwd=tmp_path)
        assert [e["code"] for e in error_lines(proc.stdout)] == ["ERR_EMPTY_APPLY"]


def test_v1_dropped_memory_keys_are_warned_on_stderr(tmp_path: Path) -> None:
    name = write(tmp_path, "mem.json", {**GOOD, "memory_patch": {"user.shell": "zsh"}})
    proc = cli("validate", "--protocol", "1", name, cwd=tmp_path)
    assert proc.returncode == 0
    assert "ERR_MEMORY_KEY_NOT_ALLOWED" in proc.stderr and "[dropped]" in proc.stderr
    assert cli("validate", name, cwd=tmp_path).returncode == 1  # v2 rejects it


def test_protected_paths_setting_is_honoured(tmp_path: Path) -> None:
    name = write(tmp_path, "db.json", {"actions": [{"kind": "DELETE_FILE", "path": "data/app.sqlite"}], "summary": "s"})
    assert cli("validate", name, cwd=tmp_path).returncode == 0
    proc = cli("validate", name, cwd=tmp_path, env={"PAPAYU_PROTECTED_PATHS": "*.sqlite"})
    assert [e["code"] for e in error_lines(proc.stdout)] == ["ERR_PROTECTED_PATH"]


# --- the three entry points ---------------------------------------------------------------------


def venv_env() -> dict[str, str]:
    return {**os.environ, "PATH": f"{Path(sys.executable).parent}{os.pathsep}{os.environ['PATH']}"}


@pytest.mark.parametrize(
    "argv",
    [
        ["git", "papayu", "-h"],
        ["git", "papayu", "--help"],
        ["papayu", "--help"],
        [sys.executable, "-m", "papayu_git", "--help"],
    ],
)
def test_help_works_through_every_entry_point(tmp_path: Path, argv: list[str]) -> None:
    proc = subprocess.run(argv, cwd=tmp_path, capture_output=True, text=True, env=venv_env(), timeout=60)
    assert proc.returncode == 0, proc.stderr
    assert "validate" in proc.stdout and "papayu" in proc.stdout


def test_git_papayu_runs_subcommands(tmp_path: Path) -> None:
    name = write(tmp_path, "bad.json", BAD)
    proc = subprocess.run(
        ["git", "papayu", "validate", name], cwd=tmp_path, capture_output=True, text=True, env=venv_env(), timeout=60
    )
    assert proc.returncode == 1 and "ERR_PATH_GIT_DIR" in proc.stdout
    version = subprocess.run(["papayu", "--version"], capture_output=True, text=True, env=venv_env())
    assert version.returncode == 0 and "papayu-git" in version.stdout


def test_a_closed_pipe_ends_quietly_without_a_crash_report(tmp_path: Path) -> None:
    files = []
    for i in range(400):
        f = tmp_path / f"plan{i}.json"
        f.write_text('{"actions": [], "summary": "NO_CHANGES: nothing"}')
        files.append(str(f))
    proc = subprocess.run(
        f"{sys.executable} -m papayu_git validate --json {' '.join(files)} | head -c 10",
        shell=True,
        capture_output=True,
        text=True,
        timeout=60,
    )
    assert "ERR_INTERNAL" not in proc.stderr
    assert "Traceback" not in proc.stderr
    assert len(proc.stdout) == 10
