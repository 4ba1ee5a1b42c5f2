"""Shared test helpers: real git repositories, the papayu CLI (in a subprocess or in-process),
plan files, the user-state snapshot, processes, error-code assertions.

Fixtures live in conftest.py; the scripted servers in llm_server.py and forge_server.py
(re-exported here for convenience).
"""

from __future__ import annotations

import hashlib
import json
import os
import re
import select
import stat
import subprocess
import sys
import time
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parent.parent
GOLDEN_UPSTREAM = ROOT / "tests" / "golden" / "upstream"


# --- git repositories ------------------------------------------------------------------------


def git(cwd: Path, *args: str, check: bool = True) -> str:
    proc = subprocess.run(["git", *args], cwd=cwd, capture_output=True, text=True)
    if check and proc.returncode != 0:
        raise AssertionError(f"git {' '.join(args)} failed: {proc.stderr}")
    return proc.stdout


def make_repo(path: Path, files: dict[str, str | bytes] | None = None) -> Path:
    path.mkdir(parents=True, exist_ok=True)
    git(path, "init", "-q", "-b", "main")
    for name, content in (files or {"README.md": "# sample\n"}).items():
        target = path / name
        target.parent.mkdir(parents=True, exist_ok=True)
        target.write_bytes(content.encode() if isinstance(content, str) else content)
    git(path, "add", "-A")
    git(path, "commit", "-q", "-m", "initial")
    return path


def write(directory: Path, rel: str, data: Any) -> str:
    """``data`` (text as is, anything else as JSON) at ``directory/rel``, parents created; returns ``rel``."""
    path = directory / rel
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text(data if isinstance(data, str) else json.dumps(data), encoding="utf-8")
    return rel


def blob(repo: Path, rev_path: str) -> bytes:
    """Exact bytes of `git cat-file blob REV:PATH` (no newline translation)."""
    return subprocess.run(["git", "cat-file", "blob", rev_path], cwd=repo, capture_output=True, check=True).stdout


def object_ids(repo: Path) -> set[str]:
    """Every object in the repository (loose and packed)."""
    out = git(repo, "cat-file", "--batch-all-objects", "--batch-check=%(objectname)")
    return set(out.split())


def worktree_paths(repo: Path) -> list[str]:
    out = git(repo, "worktree", "list", "--porcelain")
    return [line[9:] for line in out.splitlines() if line.startswith("worktree ")]


# --- the user's state ------------------------------------------------------------------------


def worktree_files(repo: Path) -> dict[str, Any]:
    """Every work-tree file (untracked and ignored included) with its mode, or a symlink's target."""
    files: dict[str, Any] = {}
    for dirpath, dirnames, filenames in os.walk(repo):
        rel_dir = Path(dirpath).relative_to(repo)
        if rel_dir.parts[:1] == (".git",):
            dirnames[:] = []
            continue
        for name in sorted(filenames + [d for d in dirnames if (Path(dirpath) / d).is_symlink()]):
            full = Path(dirpath) / name
            info = full.lstat()
            key = str(rel_dir / name)
            if stat.S_ISLNK(info.st_mode):
                files[key] = ("link", os.readlink(full))
            else:
                files[key] = (oct(info.st_mode), full.read_bytes())
    return files


def snapshot(repo: Path) -> dict[str, Any]:
    """The user's state: every ref, HEAD, index bytes, every work-tree file (untracked and
    ignored included, with mode and symlink targets), the stash. `.git/papayu/` is ours."""
    git_dir = repo / ".git"
    return {
        "refs": git(repo, "for-each-ref", "--format=%(refname) %(objectname)"),
        "head": (git_dir / "HEAD").read_bytes(),
        "config": (git_dir / "config").read_bytes(),  # e.g. no extensions.worktreeConfig written
        "index": (git_dir / "index").read_bytes() if (git_dir / "index").exists() else b"",
        "stash": git(repo, "stash", "list", "--format=%H %gs", check=False),
        "files": worktree_files(repo),
    }


def user_view(snap: dict[str, Any]) -> dict[str, Any]:
    """``snap`` without papayu's own branches (refs/heads/papayu/*): what the user owns."""
    refs = "\n".join(
        line for line in snap["refs"].splitlines() if line.strip() and not line.startswith("refs/heads/papayu/")
    )
    return {**snap, "refs": refs}


# --- plans and papayu's records --------------------------------------------------------------


def sha(data: bytes | str) -> str:
    return hashlib.sha256(data.encode() if isinstance(data, str) else data).hexdigest()


def write_plan(
    directory: Path,
    actions: list[dict[str, Any]],
    summary: str = "papayu test plan",
    name: str = "plan.json",
    **extra: Any,
) -> Path:
    path = directory / name
    path.write_text(json.dumps({"actions": actions, "summary": summary, **extra}), encoding="utf-8")
    return path


def patch_action(path: str, old: bytes, diff: str) -> dict[str, Any]:
    return {"kind": "PATCH_FILE", "path": path, "patch": diff, "base_sha256": sha(old)}


def papayu_dir(repo: Path) -> Path:
    return repo / ".git" / "papayu"


def stored_plans(repo: Path) -> list[dict[str, Any]]:
    """Every stored plan record, oldest first."""
    directory = papayu_dir(repo) / "plans"
    return [json.loads(p.read_text()) for p in sorted(directory.glob("*.json"))] if directory.is_dir() else []


def plan_record(repo: Path, plan_id: str) -> dict[str, Any]:
    return json.loads((papayu_dir(repo) / "plans" / f"{plan_id}.json").read_text())


def trace_record(repo: Path, trace_id: str) -> dict[str, Any]:
    return json.loads((papayu_dir(repo) / "traces" / f"{trace_id}.json").read_text())


def checkout_pool(repo: Path) -> Path:
    """The repository's pool of check checkouts (in the test's HOME: the user's cache)."""
    from papayu_git.locks import checkout_pool as pool_of

    return pool_of(papayu_dir(repo))


def checkout_file(repo: Path, name: str) -> Path | None:
    """``name`` in the work tree of a pooled check checkout (where a check may write)."""
    found = sorted(checkout_pool(repo).glob(f"slot-*/work/{name}"))
    return found[0] if found else None


# --- running papayu ---------------------------------------------------------------------------


def papayu(
    *args: str,
    cwd: Path | None = None,
    input: str | None = None,
    env: dict[str, str] | None = None,
    timeout: float = 120,
) -> subprocess.CompletedProcess[str]:
    """Run the real CLI in a subprocess (`python -m papayu_git`): for exit codes, signals,
    start-up, environment isolation, stdin and the sandbox."""
    return subprocess.run(
        [sys.executable, "-m", "papayu_git", *args],
        cwd=cwd,
        input=input,
        capture_output=True,
        text=True,
        timeout=timeout,
        env={**os.environ, **(env or {})},
    )


@dataclass
class CliResult:
    """What ``cli`` returns: the fields of a ``subprocess.CompletedProcess`` the tests read."""

    args: list[str]
    returncode: int
    stdout: str
    stderr: str
    exception: BaseException | None = field(default=None, repr=False)


def cli(*args: str, cwd: Path | None = None, input: str | None = None, env: dict[str, str] | None = None) -> CliResult:
    """Run the CLI in this process through click's CliRunner, the way the console script does
    (``cli.main`` in standalone mode: usage errors exit 2, commands map their errors to 1/3).

    The working directory and ``os.environ`` are restored afterwards (``-C`` and ``-v``
    change them), and the git-config cache is cleared before and after. An exception that
    escapes the command is re-raised: in a subprocess it would be a traceback and exit 1.
    """
    from click.testing import CliRunner

    from papayu_git import settings
    from papayu_git.cli import _prog_name
    from papayu_git.cli import cli as group

    saved_cwd, saved_env = os.getcwd(), dict(os.environ)
    settings._git_config.cache_clear()
    try:
        if cwd is not None:
            os.chdir(cwd)
        result = CliRunner(env=env).invoke(
            group, list(args), input=input, prog_name=_prog_name(), catch_exceptions=False
        )
    finally:
        os.chdir(saved_cwd)
        os.environ.clear()
        os.environ.update(saved_env)
        settings._git_config.cache_clear()
    return CliResult(list(args), result.exit_code, result.stdout, result.stderr, result.exception)


def run_papayu_bg(args: list[str], cwd: Path, env: dict[str, str] | None = None) -> subprocess.Popen[str]:
    return subprocess.Popen(
        [sys.executable, "-m", "papayu_git", *args],
        cwd=cwd,
        text=True,
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        env={**os.environ, **(env or {})},
    )


def wait_for_marker(proc: subprocess.Popen[str], marker: str = "PAPAYU_PAUSED", timeout: float = 60) -> str:
    """Read stderr until a line with the marker appears. Straight from the descriptor: a buffered
    readline after select() would leave a second line that came in the same chunk (the marker,
    right after the check line) in Python's buffer, where select() never sees it. What came
    after the marker is kept on ``proc`` for the next call."""
    assert proc.stderr is not None
    fd = proc.stderr.fileno()
    deadline = time.monotonic() + timeout
    text: str = getattr(proc, "_after_marker", "")
    while True:
        lines = text.split("\n")
        for index, line in enumerate(lines[:-1]):  # complete lines only
            if marker in line:
                proc._after_marker = "\n".join(lines[index + 1 :])  # type: ignore[attr-defined]
                return line + "\n"
        if time.monotonic() >= deadline:
            break
        ready, _, _ = select.select([fd], [], [], 0.5)
        if ready:
            chunk = os.read(fd, 65536)
            if not chunk and proc.poll() is not None:
                break
            text += chunk.decode("utf-8", "replace")
        elif proc.poll() is not None:
            break
    raise AssertionError(f"no {marker} from papayu; stderr so far: {text}")


def apply_json(repo: Path, plan: Path | str, *args: str, env: dict[str, str] | None = None) -> dict[str, Any]:
    """`papayu apply PLAN --json ARGS` (a subprocess): the JSON result, with the exit code
    under ``_rc`` and stderr under ``_stderr``."""
    proc = papayu("apply", str(plan), "--json", *args, cwd=repo, env=env)
    assert proc.stdout.strip(), f"no JSON on stdout (exit {proc.returncode}): {proc.stderr[-3000:]}"
    data = json.loads(proc.stdout)
    data["_rc"] = proc.returncode
    data["_stderr"] = proc.stderr
    return data


# --- error codes -----------------------------------------------------------------------------

_CODE = re.compile(r"\bERR_[A-Z0-9_]+\b")


def json_codes(data: dict[str, Any]) -> list[str]:
    """The codes of a --json result's ``errors``, in order."""
    return [e["code"] for e in data.get("errors", [])]


def _reported_codes(data: dict[str, Any]) -> list[str]:
    """Every code a --json result carries: ``errors``, ``error``, validate's ``files[].errors``."""
    found = json_codes(data)
    if isinstance(data.get("error"), dict) and "code" in data["error"]:
        found.append(data["error"]["code"])
    for item in data.get("files") or []:
        if isinstance(item, dict):
            found += [e["code"] for e in item.get("errors", [])]
    return found


def error_codes(proc: Any, stream: str = "stderr") -> list[str]:
    """Every ERR_ code a run reported: from its --json output when stdout is JSON, else
    the codes named on ``stream`` (human output: stderr, or stdout for validate's report)."""
    try:
        data = json.loads(proc.stdout)
    except ValueError:
        data = None
    if isinstance(data, dict):
        return _reported_codes(data)
    return _CODE.findall(getattr(proc, stream))


def assert_error(
    proc: Any, code: str, returncode: int = 1, *, first: bool = False, stream: str = "stderr"
) -> list[str]:
    """``proc`` failed with ``code`` and exit code ``returncode`` (1 unless given): a reported
    error, never the bug exit 3. The code is looked up in the --json result when stdout is
    one, else among the codes named on ``stream``; ``first``: it is the --json ``errors[0]``."""
    where = f"exit {proc.returncode}\nstdout: {proc.stdout}\nstderr: {proc.stderr}"
    assert proc.returncode != 3, f"papayu crashed (exit 3)\n{where}"
    assert proc.returncode == returncode, where
    if first:
        codes = json_codes(json.loads(proc.stdout))
        assert codes[:1] == [code], f"{code} is not the first of {codes}\n{where}"
        return codes
    codes = error_codes(proc, stream)
    assert code in codes, f"{code} not in {codes}\n{where}"
    return codes


def path_code(path: str, kind: str = "CREATE_FILE") -> str:
    """The code ``check_path`` refuses ``path`` with (a known code, with a hint)."""
    import pytest

    from papayu_git.errors import ERROR_CODES, PapayuError
    from papayu_git.paths import check_path

    with pytest.raises(PapayuError) as info:
        check_path(path, kind=kind)
    assert info.value.code in ERROR_CODES and info.value.hint
    return info.value.code


# --- processes -------------------------------------------------------------------------------


def processes_with(marker: str) -> list[int]:
    """Live processes whose command line contains ``marker`` (the check's processes run in the
    sandbox's own pid namespace: their `$$` means nothing out here, a marker argument does)."""
    found = []
    for entry in os.listdir("/proc"):
        if not entry.isdigit() or int(entry) == os.getpid():
            continue
        try:
            cmdline = Path(f"/proc/{entry}/cmdline").read_bytes().replace(b"\0", b" ").decode("utf-8", "replace")
            state = Path(f"/proc/{entry}/stat").read_text().rsplit(")", 1)[-1].split()[0]
        except OSError:
            continue
        if marker in cmdline and state != "Z":
            found.append(int(entry))
    return found


def wait_gone(marker: str, timeout: float = 5.0) -> list[int]:
    """Wait until no process carries ``marker``; returns the survivors (empty when all are gone)."""
    deadline = time.monotonic() + timeout
    while processes_with(marker) and time.monotonic() < deadline:
        time.sleep(0.05)
    return processes_with(marker)


_SERVERS = {
    "forge_server": ("BRANCH", "PLAN_ID", "ForgeServer", "Kept", "make_kept"),
    "llm_server": ("Reply", "ScriptedLLM", "chat", "ollama", "shown_files"),
}


def __getattr__(name: str) -> Any:
    """The scripted servers stay modules of their own (they are servers, not helpers); their
    names are importable from here too, loaded on first use (forge_server imports this module)."""
    from importlib import import_module

    for module, names in _SERVERS.items():
        if name in names:
            return getattr(import_module(module), name)
    raise AttributeError(f"module {__name__!r} has no attribute {name!r}")


# Read when helpers is imported, before the hermetic fixture points HOME at a temp directory.
REAL_HOME = Path(os.path.expanduser("~"))


def rust_env() -> dict[str, str]:
    """Where rustup and cargo live: the user's, as their shell would find them (the tests run
    with a temporary HOME, where rustup would find no toolchain)."""
    env = {}
    for name, default in (("RUSTUP_HOME", ".rustup"), ("CARGO_HOME", ".cargo")):
        value = os.environ.get(name) or str(REAL_HOME / default)
        if Path(value).is_dir():
            env[name] = value
    return env


# --- plans and their results, as the judge and check tests write and read them -------------------


def update_action(path: str, content: str) -> dict[str, str]:
    return {"kind": "UPDATE_FILE", "path": path, "content": content}


def create_action(path: str, content: str) -> dict[str, str]:
    return {"kind": "CREATE_FILE", "path": path, "content": content}


def apply_why(data: dict[str, Any]) -> str:
    """What to show when an assertion on an apply fails: the result and the check's logs."""
    check = data.get("check") or {}
    logs = [Path(p).read_text(errors="replace")[-3000:] for p in (check.get("log"), check.get("own_log")) if p]
    return f"{data}\n\n" + "\n---\n".join(logs)


def head_of(repo: Path) -> str:
    return git(repo, "rev-parse", "HEAD").strip()


def apply_actions(
    repo: Path, name: str, actions: list[dict[str, str]], *args: str, env: dict[str, str] | None = None
) -> dict[str, Any]:
    """A protocol-1 plan of ``actions`` written beside ``repo`` and applied (`apply PLAN -y --json`)."""
    plan = write_plan(repo.parent, actions, summary=name, name=f"{name}.json")
    return apply_json(repo, plan, "-y", *args, env={"PAPAYU_PROTOCOL_VERSION": "1", **(env or {})})


def assert_stopped(repo: Path, data: dict[str, Any], head: str, state: str, code: str, *named: str) -> None:
    """Not landed: ``state`` (review, rolled_back) with ``code``, the user's branch and tree as
    they were, and the reason naming each of ``named``."""
    assert (data["state"], data["error"]["code"], data["_rc"]) == (state, code, 1), apply_why(data)
    assert head_of(repo) == head and git(repo, "status", "--porcelain") == ""
    for name in named:
        assert name in data["error"]["reason"], (name, data["error"]["reason"])


def assert_landed(repo: Path, data: dict[str, Any]) -> None:
    assert (data["state"], data["_rc"]) == ("landed", 0), apply_why(data)
    assert head_of(repo) == data["commit"]


def assert_untrusted(repo: Path, data: dict[str, Any], head: str, *named: str) -> None:
    """Not landed: the run not trusted, papayu's shield named with what it refused and where."""
    assert_stopped(repo, data, head, "rolled_back", "ERR_CHECK_RESULTS_UNTRUSTED", "papayu's shield", *named)
