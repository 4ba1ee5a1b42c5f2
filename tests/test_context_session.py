"""ContextSession on real git repos: base blobs, refusals, requests, cache, rounds."""

from __future__ import annotations

import hashlib
import json
import subprocess
from pathlib import Path

import pytest
from helpers import git, make_repo, papayu

from papayu_git.context import BlockKind, ContextSession
from papayu_git.errors import PapayuError

SECRET = "sk-proj-THISMUSTNEVERLEAVE0123456789"


def blob_sha256(repo: Path, path: str) -> str:
    data = subprocess.run(["git", "cat-file", "blob", f"HEAD:{path}"], cwd=repo, capture_output=True, check=True).stdout
    return hashlib.sha256(data).hexdigest()


@pytest.fixture
def project(tmp_path: Path) -> Path:
    lines = "".join(f"line {i}\n" for i in range(1, 301))
    return make_repo(
        tmp_path / "proj",
        {
            "src/app.py": "def add(a, b):\n    return a + b\n",
            "src/long.txt": lines,
            "src/data.bin": bytes(range(256)) * 4,
            "src/latin1.txt": "caf\xe9\n".encode("latin-1"),
            ".env": f"OPENAI_API_KEY={SECRET}\n",
            ".env.example": "OPENAI_API_KEY=\n",
            "config/secrets/token.txt": f"{SECRET}\n",
            "keys/server.pem": f"{SECRET}\n",
            "README.md": "# proj\nneedle here\n",
            "requirements.txt": "requests\n",
        },
    )


def test_file_block_is_the_base_blob_with_its_full_sha256_even_when_the_tree_is_dirty(project: Path) -> None:
    (project / "src/app.py").write_text("def add(a, b):\n    return a - b  # local edit\n")
    session = ContextSession(project, "HEAD")
    text = session.render(session.fulfil([{"type": "read_file", "path": "src/app.py"}]))
    sha = blob_sha256(project, "src/app.py")
    assert f"FILE[src/app.py] (sha256={sha}):\n" in text
    assert "return a + b" in text and "local edit" not in text and "DIRTY" in text
    assert session.files_shown == {"src/app.py": sha}


def test_line_ranges_show_only_those_lines_and_the_sha_of_the_whole_blob(project: Path) -> None:
    session = ContextSession(project, "HEAD")
    (block,) = session.fulfil([{"type": "read_file", "path": "src/long.txt", "start_line": 10, "end_line": 12}])
    assert block.text == "...[lines 1-9 omitted]...\nline 10\nline 11\nline 12\n...[lines 13-300 omitted]..."
    assert block.sha256 == blob_sha256(project, "src/long.txt") and not block.dirty


def test_binary_and_non_utf8_files_are_described_not_dumped(project: Path) -> None:
    session = ContextSession(project, "HEAD")
    blocks = session.fulfil(
        [{"type": "read_file", "path": "src/data.bin"}, {"type": "read_file", "path": "src/latin1.txt"}]
    )
    assert all(b.binary and "content not shown" in b.text for b in blocks)
    session.render(blocks)
    assert session.files_shown == {}


@pytest.mark.parametrize(
    "path",
    [
        ".env",
        "config/secrets/token.txt",
        "keys/server.pem",
        "../outside.txt",
        "/etc/passwd",
        ".git/config",
        "src/../.env",
        "~/x",
        ".GIT/HEAD",
    ],
)
def test_forbidden_paths_are_refused_with_a_note_and_never_read(project: Path, path: str) -> None:
    session = ContextSession(project, "HEAD")
    blocks = session.fulfil([{"type": "read_file", "path": path}])
    text = session.render(blocks)
    assert [b.kind for b in blocks] == [BlockKind.NOTE] and "refused" in text
    assert SECRET not in text and "[core]" not in text and "root:" not in text
    assert session.cache_stats["read_misses"] == 0


def test_absolute_path_inside_the_repo_is_made_relative(project: Path) -> None:
    session = ContextSession(project, "HEAD")
    (block,) = session.fulfil([{"type": "read_file", "path": str(project / "src/app.py")}])
    assert block.kind is BlockKind.FILE and block.path == "src/app.py"


def test_env_example_is_not_protected(project: Path) -> None:
    session = ContextSession(project, "HEAD")
    (block,) = session.fulfil([{"type": "read_file", "path": ".env.example"}])
    assert block.kind is BlockKind.FILE


def test_search_honours_glob_case_and_max_results_and_skips_protected_files(project: Path) -> None:
    session = ContextSession(project, "HEAD")
    (hits,) = session.fulfil([{"type": "search", "query": "NEEDLE", "case_sensitive": False}])
    assert hits.text == "README.md:2: needle here"
    (none,) = session.fulfil([{"type": "search", "query": "NEEDLE"}])
    assert "no matches" in none.text
    session = ContextSession(project, "HEAD")
    (limited,) = session.fulfil([{"type": "search", "query": "line", "glob": "*.txt", "max_results": 3}])
    assert limited.text.splitlines() == ["src/long.txt:1: line 1", "src/long.txt:2: line 2", "src/long.txt:3: line 3"]
    (secret,) = session.fulfil([{"type": "search", "query": "sk-proj"}])
    assert SECRET not in session.render([secret]) and "no matches" in secret.text


def test_logs_come_from_configured_sources_keyed_by_source_and_last_n(project: Path) -> None:
    (project / "app.log").write_text("".join(f"event {i}\n" for i in range(1000)) + f"token {SECRET}\n")
    git(project, "config", "papayu.logs.runtime", "app.log")
    session = ContextSession(project, "HEAD")
    first = session.fulfil(
        [
            {"type": "logs", "source": "runtime", "last_n": 3},
            {"type": "logs", "source": "runtime", "last_n": 3},
            {"type": "logs", "source": "runtime", "last_n": 2},
            {"type": "logs", "source": "build"},
        ]
    )
    assert first[0].text == "event 998\nevent 999\ntoken ***" and first[1].text == "event 999\ntoken ***"
    assert first[2].kind is BlockKind.NOTE and "runtime" in first[2].text
    stats = session.cache_stats
    assert (stats["logs_hits"], stats["logs_misses"]) == (1, 3)


def test_cache_stats_have_the_upstream_keys_and_count_hits_and_misses(project: Path) -> None:
    session = ContextSession(project, "HEAD")
    session.base_context("fix it")
    session.fulfil([{"type": "env"}, {"type": "read_file", "path": "src/app.py"}, {"type": "search", "query": "add"}])
    session.fulfil([{"type": "read_file", "path": "src/app.py"}, {"type": "search", "query": "add"}])
    golden = json.loads((Path(__file__).parent / "golden/upstream/v1/006_context_diet_applied.json").read_text())
    assert set(session.cache_stats) == set(golden["context"]["cache_stats"])
    assert session.cache_stats == {
        "env_hits": 1,
        "env_misses": 1,
        "logs_hits": 0,
        "logs_misses": 0,
        "read_hits": 1,
        "read_misses": 1,
        "search_hits": 1,
        "search_misses": 1,
        "hit_rate": 0.5,
    }
    session.render([])
    assert set(session.context_stats) == set(golden["context"]["context_stats"])


def test_a_third_round_of_requests_is_refused(project: Path) -> None:
    session = ContextSession(project, "HEAD")
    session.fulfil([])
    session.fulfil([{"type": "env"}])
    with pytest.raises(PapayuError) as info:
        session.fulfil([{"type": "env"}])
    assert info.value.code == "ERR_CONTEXT_ROUNDS_EXCEEDED"


def test_malformed_requests_become_notes(project: Path) -> None:
    session = ContextSession(project, "HEAD")
    blocks = session.fulfil(
        [
            {"type": "read_file"},
            {"type": "nope"},
            "junk",
            {"type": "search", "query": "x", "max_results": "5"},
            {"type": "read_file", "path": "src/app.py", "start_line": 5, "end_line": 2},
        ]
    )
    assert [b.kind for b in blocks] == [BlockKind.NOTE] * 5
    assert all("ERR_CONTEXT_REQUEST_INVALID" in b.text for b in blocks)


def test_missing_file_and_directory_requests_are_explained(project: Path) -> None:
    (project / "untracked.py").write_text("x = 1\n")
    session = ContextSession(project, "HEAD")
    missing, untracked, directory = session.fulfil(
        [
            {"type": "read_file", "path": "nope.py"},
            {"type": "read_file", "path": "untracked.py"},
            {"type": "read_file", "path": "src"},
        ]
    )
    assert "not found in the base commit" in missing.text
    assert "only in the working tree" in untracked.text and "x = 1" not in untracked.text
    assert "src/app.py" in directory.text and directory.kind is BlockKind.NOTE


def test_env_names_dirty_files_without_their_content_and_the_package_manager(project: Path) -> None:
    (project / "src/app.py").write_text("DIRTY_CONTENT_MARKER = 1\n")
    (project / "new_file.py").write_text("UNTRACKED_MARKER = 1\n")
    session = ContextSession(project, "HEAD")
    env = session.base_context("just look")[0]
    assert env.kind is BlockKind.ENV
    assert "M src/app.py" in env.text and "?? new_file.py" in env.text
    assert "MARKER" not in env.text
    assert "pip (requirements.txt)" in env.text and "python: Python 3." in env.text
    assert "node:" not in env.text and "rust:" not in env.text


def test_context_command_prints_the_rendered_context_as_json(project: Path) -> None:
    log = project.parent / "fail.log"
    log.write_text(
        f'Traceback (most recent call last):\n  File "{project}/src/app.py", line 2, in add\nTypeError: boom\n'
    )
    proc = papayu("context", "fix the crash", "--from-file", str(log), "--json", cwd=project)
    assert proc.returncode == 0, proc.stderr
    data = json.loads(proc.stdout)
    assert data["files_shown"] == {"src/app.py": blob_sha256(project, "src/app.py")}
    assert [b["kind"] for b in data["blocks"]] == ["ENV", "FILE", "LOGS"]
    assert data["context_stats"]["context_files_count"] == 3


def test_user_protected_patterns_from_git_config_are_refused_too(project: Path) -> None:
    git(project, "config", "papayu.protectedPaths", "src/*.txt")
    session = ContextSession(project, "HEAD")
    (refused,) = session.fulfil([{"type": "read_file", "path": "src/long.txt"}])
    assert refused.kind is BlockKind.NOTE and "ERR_PROTECTED_PATH" in refused.text


def test_env_carries_project_memory_and_its_package_manager(project: Path) -> None:
    (project / ".papa-yu").mkdir()
    (project / ".papa-yu/project.json").write_text(
        json.dumps({"schema_version": 1, "project": {"default_test_command": "pytest -q", "package_manager": "uv"}})
    )
    env = ContextSession(project, "HEAD").base_context("look")[0]
    assert 'project_memory: {"default_test_command": "pytest -q", "package_manager": "uv"}' in env.text
    assert "package_managers: uv (project memory), pip (requirements.txt)" in env.text


def test_a_frame_brings_80_lines_either_side_of_its_line(tmp_path: Path) -> None:
    repo = make_repo(tmp_path / "long", {"mod.py": "".join(f"x{i} = {i}\n" for i in range(1, 401))})
    log = f'Traceback (most recent call last):\n  File "{repo}/mod.py", line 200, in <module>\nNameError: y\n'
    (block,) = [b for b in ContextSession(repo, "HEAD").base_context("fix", log) if b.kind is BlockKind.FILE]
    assert block.text.splitlines()[1] == "x120 = 120" and block.text.splitlines()[-2] == "x280 = 280"
    assert block.text.startswith("...[lines 1-119 omitted]...") and block.priority == 0


def test_cache_and_diet_events_go_to_stderr(
    project: Path, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    monkeypatch.setenv("PAPAYU_LOG", "1")
    monkeypatch.setenv("PAPAYU_CONTEXT_MAX_TOTAL_CHARS", "3000")
    session = ContextSession(project, "HEAD")
    blocks = session.fulfil([{"type": "env"}, {"type": "env"}, {"type": "read_file", "path": "src/long.txt"}])
    text = session.render(blocks)
    err = capsys.readouterr().err
    assert session.last_diet is not None
    assert "CONTEXT_CACHE_MISS key=env" in err and "CONTEXT_CACHE_HIT key=env" in err
    assert "CONTEXT_CACHE_MISS key=read:src/long.txt:()" in err
    assert len(text) <= 3000 and [b.kind for b in session.last_diet.dropped] == [BlockKind.ENV]
    assert f"CONTEXT_DIET_APPLIED files=1 dropped=1 truncated=0 total_chars={len(text)}" in err


def test_a_session_started_in_a_subdirectory_reads_repo_paths(project: Path) -> None:
    session = ContextSession(project / "src", "HEAD")
    (block,) = session.fulfil([{"type": "read_file", "path": "src/app.py"}])
    assert block.kind is BlockKind.FILE and session.repo_root == project.resolve()


@pytest.mark.parametrize("base", ["no-such-branch", "HEAD:src"])
def test_a_base_that_is_not_a_commit_is_an_error(project: Path, base: str) -> None:
    with pytest.raises(PapayuError) as info:
        ContextSession(project, base)
    assert info.value.code == "ERR_GIT_COMMAND" and base in info.value.reason


def test_an_excerpt_is_not_sent_again_beside_the_whole_file(project: Path) -> None:
    session = ContextSession(project, "HEAD")
    log = f'Traceback (most recent call last):\n  File "{project}/src/long.txt", line 150, in x\nValueError\n'
    base = session.base_context("fix", log)
    text = session.render(base + session.fulfil([{"type": "read_file", "path": "src/long.txt"}]))
    assert text.count("FILE[src/long.txt]") == 1 and "omitted" not in text
    assert [b.priority for b in session.last_diet.blocks if b.kind is BlockKind.FILE] == [0]


def test_search_glob_alternatives_in_braces(tmp_path: Path) -> None:
    repo = make_repo(tmp_path / "web", {"src/a.ts": "token\n", "src/b.tsx": "token\n", "src/c.js": "token\n"})
    (block,) = ContextSession(repo, "HEAD").fulfil([{"type": "search", "query": "token", "glob": "*.{ts,tsx}"}])
    assert block.text.splitlines() == ["src/a.ts:1: token", "src/b.tsx:1: token"]


def test_a_line_range_past_the_end_says_so(project: Path) -> None:
    (block,) = ContextSession(project, "HEAD").fulfil(
        [{"type": "read_file", "path": "src/app.py", "start_line": 50, "end_line": 60}]
    )
    assert block.text == "...[the file has 2 lines; lines 50-60 are past its end]..."


def test_files_named_in_the_goal_are_shown_and_secrets_named_there_refused(project: Path) -> None:
    blocks = ContextSession(project, "HEAD").base_context("fix add() in src/app.py; keys/server.pem too")
    assert [b.path for b in blocks if b.kind is BlockKind.FILE] == ["src/app.py"]
    notes = [b.text for b in blocks if b.kind is BlockKind.NOTE]
    assert len(notes) == 1 and "ERR_PROTECTED_PATH" in notes[0] and SECRET not in notes[0]


def test_context_command_text_mode_prints_the_context_and_a_summary(project: Path) -> None:
    proc = papayu("context", "fix add() in src/app.py", cwd=project / "src")
    assert proc.returncode == 0, proc.stderr
    assert f"FILE[src/app.py] (sha256={blob_sha256(project, 'src/app.py')}):" in proc.stdout
    assert "context: 2 blocks" in proc.stderr and "ENV:" in proc.stdout
