"""Hostile input is refused with an ERR code, never a crash (exit 3), and the user's state is kept:
plan-record ids, CLI ids, locks that are not papayu's, odd JSON (huge integers, lone surrogates,
duplicate keys), a repository without commits, a branch of a deleted worktree."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest
from helpers import assert_error, git, make_repo, object_ids, papayu, snapshot, write_plan
from llm_server import ScriptedLLM, chat

from papayu_git import locks, plans
from papayu_git.errors import PapayuError

ID = "20260101-120000-a1b2c3"
CREATE = {"kind": "CREATE_FILE", "path": "new.txt", "content": "new\n"}


@pytest.fixture
def user_repo(tmp_path: Path) -> Path:
    """A repository with uncommitted edits of package.json and yarn.lock (what the attacks aimed at)."""
    repo = make_repo(tmp_path / "repo", {"package.json": "{}\n", "yarn.lock": "# lock\n", "README.md": "x\n"})
    (repo / "package.json").write_text('{"edited": true}\n')
    (repo / "yarn.lock").write_text("# edited lock\n")
    git(repo, "add", "yarn.lock")
    return repo


def record(plan_id: Any, **fields: Any) -> dict[str, Any]:
    return {
        "papayu_plan": 1,
        "id": plan_id,
        "mode": "apply",
        "protocol": 1,
        "response": {"actions": [CREATE], "summary": "s"},
        **fields,
    }


def write_json(path: Path, data: Any) -> Path:
    path.write_text(json.dumps(data), encoding="utf-8")
    return path


def errors(proc: Any) -> list[str]:
    assert proc.returncode == 1, proc.stdout + proc.stderr
    return [e["code"] for e in json.loads(proc.stdout)["errors"]]


def validate_codes(repo: Path, plan: Path) -> list[str]:
    proc = papayu("validate", str(plan), "--json", cwd=repo)
    assert proc.returncode == 1, proc.stdout + proc.stderr
    return [e["code"] for f in json.loads(proc.stdout)["files"] for e in f["errors"]]


def assert_refused(repo: Path, args: list[str], code: str, before: dict[str, Any]) -> None:
    proc = papayu(*args, "--json", cwd=repo)
    assert code in errors(proc), proc.stdout
    assert snapshot(repo) == before


# --- plan-record ids --------------------------------------------------------------------------

BAD_IDS = [
    "../../../package",
    "../../../yarn",
    "../locks/../../../../yarn",
    "x",
    "",
    "20260101-120000-a1b2c3/..",
    "20260101-120000-A1B2C3",
    "-rf",
    5,
    None,
    ["a"],
]


@pytest.mark.parametrize("plan_id", BAD_IDS, ids=[repr(i) for i in BAD_IDS])
def test_a_record_with_a_malformed_id_is_refused_and_touches_nothing(
    user_repo: Path, tmp_path: Path, plan_id: Any
) -> None:
    before, objects = snapshot(user_repo), object_ids(user_repo)
    plan = write_json(tmp_path / "record.json", record(plan_id))
    assert_refused(user_repo, ["apply", str(plan), "--no-check"], "ERR_PLAN_ID_INVALID", before)
    assert object_ids(user_repo) == objects
    assert (user_repo / "package.json").read_text() == '{"edited": true}\n'
    assert (user_repo / "yarn.lock").read_text() == "# edited lock\n"
    assert validate_codes(user_repo, plan) == ["ERR_PLAN_ID_INVALID"]


def test_an_absolute_record_id_writes_nothing_outside_the_repository(user_repo: Path, tmp_path: Path) -> None:
    target = tmp_path / "outside" / "victim"
    target.parent.mkdir()
    before = snapshot(user_repo)
    plan = write_json(tmp_path / "record.json", record(str(target)))
    assert_refused(user_repo, ["apply", str(plan), "--no-check"], "ERR_PLAN_ID_INVALID", before)
    assert list(target.parent.iterdir()) == []


@pytest.mark.parametrize(
    "field, value",
    [("files", 5), ("files", {"a": 1}), ("extra", []), ("protocol", "2"), ("extra", {"apply": "landed"}), ("goal", 3)],
)
def test_a_record_with_a_field_of_the_wrong_type_is_refused(
    user_repo: Path, tmp_path: Path, field: str, value: Any
) -> None:
    before = snapshot(user_repo)
    plan = write_json(tmp_path / "record.json", record(ID, **{field: value}))
    assert_refused(user_repo, ["apply", str(plan), "--no-check"], "ERR_PLAN_RECORD_INVALID", before)
    assert validate_codes(user_repo, plan) == ["ERR_PLAN_RECORD_INVALID"]


def test_a_record_keeps_its_id_unless_another_plan_is_stored_under_it(user_repo: Path, tmp_path: Path) -> None:
    pdir = user_repo / ".git" / "papayu"
    git(user_repo, "commit", "-qam", "user edits")
    plan = write_json(tmp_path / "record.json", record(ID, extra={"apply": {"state": "review", "commit": "c" * 40}}))
    data = json.loads(papayu("apply", str(plan), "--no-check", "--json", cwd=user_repo).stdout)
    assert data["plan_id"] == ID and data["state"] == "landed"
    assert plans.load(pdir, ID).extra["apply"]["state"] == "landed"  # not the imported outcome
    other = record(ID, response={"actions": [{**CREATE, "path": "other.txt"}], "summary": "other"})
    data = json.loads(
        papayu("apply", str(write_json(tmp_path / "other.json", other)), "--no-check", "--json", cwd=user_repo).stdout
    )
    assert data["state"] == "landed" and data["plan_id"] != ID and plans.is_id(data["plan_id"])
    assert plans.load(pdir, ID).response["summary"] == "s"  # the first plan is still stored as it was


@pytest.mark.parametrize("command", [["apply"], ["show"], ["land"], ["drop"], ["pr"], ["trace", "show"]])
@pytest.mark.parametrize("given", ["../plans/x", "/etc/passwd", "*", "-", "", "a b", "2026" * 30])
def test_ids_on_the_command_line_are_checked(user_repo: Path, command: list[str], given: str) -> None:
    if command == ["apply"] and given == "-":
        return  # stdin
    before = snapshot(user_repo)
    proc = papayu(*command, given, cwd=user_repo, input="")
    assert proc.returncode in (1, 2), proc.stderr
    assert "ERR_INTERNAL" not in proc.stderr and snapshot(user_repo) == before


def test_a_branch_only_id_must_have_papayus_shape(user_repo: Path) -> None:
    git(user_repo, "branch", "papayu/feature")  # the user's own branch in papayu's namespace
    proc = papayu("drop", "feat", cwd=user_repo)
    assert_error(proc, "ERR_PLAN_NOT_FOUND")
    assert git(user_repo, "branch", "--list", "papayu/feature").strip()


def test_stored_records_named_or_shaped_oddly_are_skipped(user_repo: Path) -> None:
    directory = user_repo / ".git" / "papayu" / "plans"
    directory.mkdir(parents=True)
    write_json(directory / "evil.json", record("evil"))
    write_json(directory / f"{ID}.json", record("20260101-120000-ffffff"))  # id differs from its name
    (directory / "20260101-120000-eeeeee.json").write_text('{"papayu_plan": 1, "papayu_plan": 1}')
    proc = papayu("list", "--json", cwd=user_repo)
    assert proc.returncode == 0, proc.stderr
    assert [p["id"] for p in json.loads(proc.stdout)["plans"] if p["state"] != "branch only"] == []
    for given in (ID, "20260101-120000-eeeeee"):
        proc = papayu("apply", given, "--no-check", "--json", cwd=user_repo)
        assert errors(proc)[0] in ("ERR_PLAN_RECORD_INVALID", "ERR_JSON_DUPLICATE_KEY")


# --- locks ------------------------------------------------------------------------------------


def test_locks_refuse_paths_outside_papayus_lock_directories(tmp_path: Path) -> None:
    victim = tmp_path / "yarn.lock"
    victim.write_text("# the user's lock\n")
    for path in (
        victim,
        tmp_path / "papayu" / "locks" / ".." / ".." / "yarn.lock",
        tmp_path / "papayu" / "plans" / "x.lock",
        tmp_path / "papayu" / "locks" / "a b.lock",
    ):
        with pytest.raises(PapayuError) as info:
            locks.try_acquire(path, kind="test")
        assert info.value.code == "ERR_INTERNAL"
        with pytest.raises(PapayuError):
            locks.release(path)
    assert victim.read_text() == "# the user's lock\n"


@pytest.mark.parametrize(
    "body",
    [
        "",
        "not json",
        '{"pid": "1"}',
        '{"pid": 0, "start_time": ""}',
        '{"pid": 99999999999999999999, "start_time": ""}',
        "[1]",
    ],
)
def test_a_lock_file_papayu_did_not_write_is_never_removed(tmp_path: Path, body: str) -> None:
    lock = tmp_path / "papayu" / "locks" / "apply-x.lock"
    lock.parent.mkdir(parents=True)
    lock.write_text(body)
    assert not locks.try_acquire(lock, kind="test")
    assert locks.clear_stale(tmp_path / "papayu") == []
    with pytest.raises(PapayuError) as info, locks.held(lock, wait_sec=0):
        pass
    assert info.value.code == "ERR_LOCKED" and "not a lock papayu wrote" in info.value.reason
    assert lock.read_text() == body and sorted(p.name for p in lock.parent.iterdir()) == ["apply-x.lock"]


# --- odd JSON ---------------------------------------------------------------------------------

BIG = "1" * 5000
ODD_JSON = [
    ('{"actions": [%s], "summary": "s", "n": %s}' % (json.dumps(CREATE), BIG), "ERR_JSON_NUMBER_TOO_LARGE"),
    (
        '{"actions": [{"kind": "CREATE_FILE", "path": "a\\ud800.txt", "content": "x"}], "summary": "s"}',
        "ERR_JSON_INVALID_UNICODE",
    ),
    (
        '{"actions": [{"kind": "CREATE_FILE", "path": "a.txt", "content": "x\\udc00"}], "summary": "s"}',
        "ERR_JSON_INVALID_UNICODE",
    ),
    ('{"actions": [%s], "summary": "s\\ud83d"}' % json.dumps(CREATE), "ERR_JSON_INVALID_UNICODE"),
    (
        '{"actions": [%s], "summary": "harmless", "summary": "deletes everything"}' % json.dumps(CREATE),
        "ERR_JSON_DUPLICATE_KEY",
    ),
    (
        '{"actions": [{"kind": "CREATE_FILE", "path": "a.txt", "path": "b.txt", "content": "x"}], "summary": "s"}',
        "ERR_JSON_DUPLICATE_KEY",
    ),
]


@pytest.mark.parametrize("text, code", ODD_JSON, ids=[c + str(i) for i, (_, c) in enumerate(ODD_JSON)])
def test_odd_json_is_refused_by_validate_and_apply_without_leftovers(
    user_repo: Path, tmp_path: Path, text: str, code: str
) -> None:
    plan = tmp_path / "plan.json"
    plan.write_text(text, encoding="utf-8")
    assert validate_codes(user_repo, plan) == [code]
    before = snapshot(user_repo)
    assert_refused(user_repo, ["apply", str(plan), "--no-check"], code, before)
    assert list((user_repo / ".git" / "papayu").rglob("*.tmp*")) == []
    wrapped = json.loads(json.dumps(record(ID)))
    plan.write_text(json.dumps(wrapped)[:-1] + ', "response": ' + text + "}", encoding="utf-8")
    assert validate_codes(user_repo, plan)[0] in (code, "ERR_JSON_DUPLICATE_KEY")


def test_a_paired_surrogate_and_an_escaped_backslash_are_fine(user_repo: Path, tmp_path: Path) -> None:
    plan = tmp_path / "plan.json"
    plan.write_text(
        '{"actions": [{"kind": "CREATE_FILE", "path": "a.txt", "content": "\\ud83d\\ude00 \\\\ud800"}],'
        ' "summary": "s"}',
        encoding="utf-8",
    )
    git(user_repo, "commit", "-qam", "user edits")
    proc = papayu("apply", str(plan), "--no-check", cwd=user_repo)
    assert proc.returncode == 0, proc.stderr
    assert (user_repo / "a.txt").read_text(encoding="utf-8") == "\U0001f600 \\ud800"


def test_plans_save_leaves_no_tmp_file_when_the_write_fails(tmp_path: Path) -> None:
    pdir = tmp_path / "papayu"
    with pytest.raises(UnicodeEncodeError):
        plans.save(pdir, plans.StoredPlan(id=ID, goal="\udcff"))
    assert list(plans.plans_dir(pdir).iterdir()) == []
    with pytest.raises(PapayuError) as info:
        plans.save(pdir, plans.StoredPlan(id="../../x"))
    assert info.value.code == "ERR_PLAN_ID_INVALID" and list(tmp_path.iterdir()) == [pdir]


@pytest.mark.parametrize(
    "answer, code",
    [
        ('{"summary": "s", "actions": [], "plan": [], "n": %s}' % BIG, "ERR_JSON_NUMBER_TOO_LARGE"),
        ('{"summary": "s\\ud800", "actions": []}', "ERR_JSON_INVALID_UNICODE"),
        ('{"summary": "s", "summary": "t", "actions": []}', "ERR_JSON_DUPLICATE_KEY"),
    ],
)
def test_an_odd_model_answer_gets_the_repair_retry(tmp_path: Path, answer: str, code: str) -> None:
    repo = make_repo(tmp_path / "repo", {"calc.py": "def add(a, b):\n    return a - b\n"})
    server = ScriptedLLM(
        [
            chat(answer),
            chat(
                {
                    "summary": "add() subtracts",
                    "actions": [],
                    "questions": [],
                    "plan": [{"step": "fix", "details": "a + b"}],
                    "context_requests": [],
                    "risks": [],
                    "commands_to_run": [],
                    "memory_patch": {},
                }
            ),
        ]
    )
    try:
        proc = papayu("-v", "plan", "fix add in calc.py", "--json", cwd=repo, env=server.env())
        assert proc.returncode == 0, proc.stderr
        assert len(server.requests) == 2 and "LLM_RESPONSE_REPAIR" in proc.stderr
        assert code in server.requests[1]["messages"][-1]["content"]
    finally:
        server.close()


# --- odd git states ---------------------------------------------------------------------------


def test_a_repository_without_commits_is_a_clear_error(tmp_path: Path) -> None:
    repo = tmp_path / "empty"
    repo.mkdir()
    git(repo, "init", "-q", "-b", "main")
    (repo / "notes.txt").write_text("uncommitted\n")
    plan = write_plan(tmp_path, [CREATE])
    before = snapshot(repo)
    for args in (["apply", str(plan), "--no-check"], ["apply", str(plan), "--review"]):
        assert_refused(repo, args, "ERR_NO_COMMITS", before)
    proc = papayu(
        "plan",
        "fix it",
        "--json",
        cwd=repo,
        env={"PAPAYU_LLM_BASE_URL": "http://127.0.0.1:9/v1", "PAPAYU_LLM_MODEL": "m"},
    )
    assert errors(proc) == ["ERR_NO_COMMITS"] and snapshot(repo) == before
    assert papayu("validate", str(plan), cwd=repo).returncode == 0


def test_a_branch_checked_out_in_a_deleted_worktree_is_refused_then_lands_after_prune(
    user_repo: Path, tmp_path: Path
) -> None:
    import shutil

    git(user_repo, "worktree", "add", "-q", str(tmp_path / "wt"), "-b", "other")
    plan = write_plan(tmp_path, [CREATE])
    data = json.loads(papayu("apply", str(plan), "--onto", "other", "--review", "--json", cwd=user_repo).stdout)
    assert data["state"] == "review"
    shutil.rmtree(tmp_path / "wt")
    before = snapshot(user_repo)
    assert_refused(user_repo, ["land", data["plan_id"], "--force"], "ERR_WORKTREE_MISSING", before)
    plan2 = write_plan(tmp_path, [{**CREATE, "path": "two.txt"}], name="two.json")
    assert_refused(user_repo, ["apply", str(plan2), "--onto", "other", "--no-check"], "ERR_WORKTREE_MISSING", before)
    git(user_repo, "worktree", "prune")
    proc = papayu("land", data["plan_id"], "--force", cwd=user_repo)
    assert proc.returncode == 0, proc.stderr
    assert git(user_repo, "show", "other:new.txt") == "new\n"
    assert (user_repo / "package.json").read_text() == '{"edited": true}\n'
    assert (user_repo / "yarn.lock").read_text() == "# edited lock\n"
    assert git(user_repo, "diff", "--cached", "--name-only") == "yarn.lock\n"


@pytest.mark.parametrize("command", ["plan", "fix"])
def test_a_goal_that_is_not_utf8_is_refused_not_a_crash(tmp_path: Path, command: str) -> None:
    import os
    import subprocess
    import sys

    repo = make_repo(tmp_path / "repo")
    env = {**os.environ, "PAPAYU_LLM_BASE_URL": "http://127.0.0.1:9/v1", "PAPAYU_LLM_MODEL": "m"}
    proc = subprocess.run(
        [sys.executable.encode(), b"-m", b"papayu_git", command.encode(), b"fix \xff\xfe it"],
        cwd=repo,
        env=env,
        capture_output=True,
    )
    assert proc.returncode not in (0, 3), proc.stderr
    assert b"ERR_USAGE" in proc.stderr and b"not valid UTF-8" in proc.stderr
    assert not (repo / ".git" / "papayu" / "plans").exists() or not any((repo / ".git" / "papayu" / "plans").iterdir())
