"""What the check sees and what bounds it, with real bwrap, real git and real processes: files
given by name, loopback ports relayed while the network stays off, failures blamed on the
environment with the setting that fixes them, the output cap, modification times for
incremental builds, deep trees, and no silent green when the check cannot be sandboxed."""

from __future__ import annotations

import json
import os
import socket
import sys
import threading
import time
from pathlib import Path

import pytest
from helpers import apply_json, checkout_pool, git, make_repo, write_plan

from papayu_git.check import mtimes, sandbox
from papayu_git.worktree import remove_tree

needs_bwrap = pytest.mark.skipif(
    sandbox.unavailable_reason() is not None, reason=f"bwrap does not work here: {sandbox.unavailable_reason()}"
)
PY = sys.executable


def _one_file_plan(tmp_path: Path, name: str = "p.json") -> Path:
    return write_plan(tmp_path, [{"kind": "CREATE_FILE", "path": f"{name}.txt", "content": "x\n"}], name=name)


@needs_bwrap
def test_an_included_ignored_file_is_visible_and_its_values_masked(tmp_path: Path) -> None:
    repo = make_repo(tmp_path / "repo", {".gitignore": ".env.test\n.env\n"})
    (repo / ".env.test").write_text("DB_PASSWORD=included-value-0123456\n")
    (repo / ".env").write_text("OTHER=not-included-0123\n")
    check = "echo size=$(wc -c < .env.test); cat .env.test; cat .env || echo 'no .env'"
    data = apply_json(repo, _one_file_plan(tmp_path), "--check", check, env={"PAPAYU_CHECK_INCLUDE": ".env.test"})
    assert data["_rc"] == 0 and data["state"] == "landed", data
    log = Path(data["check"]["log"]).read_text()
    assert "size=35" in log and "included-value-0123456" not in log  # seen, then masked
    assert "no .env" in log and "not-included" not in log


@needs_bwrap
def test_a_local_port_is_relayed_while_the_network_stays_off(tmp_path: Path) -> None:
    served: list[bytes] = []
    server = socket.socket()
    server.bind(("127.0.0.1", 0))
    server.listen(4)
    port = server.getsockname()[1]
    other = socket.socket()
    other.bind(("127.0.0.1", 0))
    other.listen(4)
    other_port = other.getsockname()[1]

    def serve() -> None:  # the base run on the tip and the plan's run each connect once
        while True:
            try:
                conn, _ = server.accept()
            except OSError:
                return
            served.append(conn.recv(100))
            conn.sendall(b"pong-from-host")
            conn.close()

    threading.Thread(target=serve, daemon=True).start()
    client = (
        "import socket,sys\n"
        "s=socket.create_connection(('127.0.0.1',int(sys.argv[1])),timeout=5);s.sendall(b'ping');"
        "print('got', s.recv(100).decode())\n"
        "try:\n socket.create_connection(('127.0.0.1',int(sys.argv[2])),timeout=2);print('OTHER REACHED')\n"
        "except OSError as e:\n print('other blocked', type(e).__name__)\n"
    )
    repo = make_repo(tmp_path / "repo", {"client.py": client})
    data = apply_json(
        repo,
        _one_file_plan(tmp_path),
        "--check",
        f"{PY} client.py {port} {other_port}",
        env={"PAPAYU_CHECK_LOCAL_PORTS": str(port)},
    )
    server.close()
    other.close()
    log = Path(data["check"]["log"]).read_text()
    assert data["state"] == "landed", log
    assert "got pong-from-host" in log and served and set(served) == {b"ping"}
    assert "other blocked" in log and "OTHER REACHED" not in log


@needs_bwrap
def test_a_refused_connection_is_blamed_on_the_environment_with_the_setting(tmp_path: Path) -> None:
    probe = socket.socket()
    probe.bind(("127.0.0.1", 0))
    port = probe.getsockname()[1]
    probe.close()  # nothing listens there
    repo = make_repo(tmp_path / "repo")
    check = f"{PY} -c \"import socket; socket.create_connection(('127.0.0.1', {port}), timeout=2)\""
    data = apply_json(repo, _one_file_plan(tmp_path), "--check", check)
    assert data["state"] == "rolled_back"
    error = data["error"]
    assert error["code"] == "ERR_CHECK_FAILED", data
    assert "environment" in error["reason"] and "papayu.check.localPorts" in error["reason"] + error["hint"]
    assert "doctor --check" in error["hint"]


@needs_bwrap
def test_a_missing_ignored_file_names_papayu_check_include(tmp_path: Path) -> None:
    repo = make_repo(tmp_path / "repo", {".gitignore": "config/local.toml\n"})
    (repo / "config").mkdir()
    (repo / "config/local.toml").write_text("x = 1\n")
    data = apply_json(repo, _one_file_plan(tmp_path), "--check", f"{PY} -c \"open('config/local.toml')\"")
    error = data["error"]
    assert error["code"] == "ERR_CHECK_FAILED", data
    assert "papayu.check.include config/local.toml" in error["reason"] + error["hint"], error


@needs_bwrap
def test_output_is_capped_with_head_and_tail_kept_and_the_cut_said(tmp_path: Path) -> None:
    repo = make_repo(tmp_path / "repo")
    check = f"{PY} -c \"import sys; print('FIRST'); sys.stdout.write('x' * (6 << 20)); print(); print('LAST')\""
    data = apply_json(repo, _one_file_plan(tmp_path), "--check", check, env={"PAPAYU_CHECK_OUTPUT_MB": "1"})
    assert data["state"] == "landed", data
    log = Path(data["check"]["log"])
    assert log.stat().st_size < 1_200_000
    text = log.read_text()
    assert "FIRST" in text and text.rstrip().endswith("LAST") and "bytes of output cut" in text


@needs_bwrap
def test_nothing_the_check_writes_reaches_the_pool_or_the_users_environment(tmp_path: Path) -> None:
    repo = make_repo(tmp_path / "repo", {".gitignore": ".venv/\n"})
    (repo / ".venv").mkdir()
    (repo / ".venv" / "marker").write_text("user's\n")
    check = "echo hostile > .venv/marker && mkdir -p deep && echo x > deep/file && echo > planted && cat .venv/marker"
    data = apply_json(repo, _one_file_plan(tmp_path), "--check", check)
    assert data["state"] == "landed" and "hostile" in Path(data["check"]["log"]).read_text()
    assert (repo / ".venv" / "marker").read_text() == "user's\n"
    slot = next(checkout_pool(repo).glob("slot-*/work"))
    assert not (slot / "planted").exists() and not (slot / "deep").exists()


def test_mtimes_keep_the_users_for_identical_files_and_fresh_ones_for_changed(tmp_path: Path) -> None:
    repo = make_repo(tmp_path / "repo", {"same.rs": "a\n", "changed.rs": "b\n", "dirty.rs": "c\n"})
    old = time.time() - 3600
    for name in ("same.rs", "changed.rs", "dirty.rs"):
        os.utime(repo / name, (old, old))
    (repo / "dirty.rs").write_text("user's uncommitted edit\n")  # built by the user: their target/ is newer
    os.utime(repo / "dirty.rs", (old + 10, old + 10))
    work = tmp_path / "work"
    gitdir = tmp_path / "slot.git"
    git(repo, "clone", "-q", "--no-checkout", "--separate-git-dir", str(gitdir), str(repo), str(work))
    git(work, "checkout", "-q", "HEAD")
    (work / "changed.rs").write_text("plan's\n")
    git(work, "add", "changed.rs")
    for name in ("same.rs", "changed.rs", "dirty.rs"):
        os.utime(work / name, (old - 100, old - 100))
    before = time.time()
    exact = time.time_ns() - 3_600_000_000_000 + 116_439_853  # nanoseconds a float second cannot hold
    os.utime(repo / "same.rs", ns=(exact, exact))
    assert mtimes.sync(repo, work, gitdir) == 3
    # To the nanosecond: cargo compares a build script's `rerun-if-changed` files exactly.
    assert (work / "same.rs").stat().st_mtime_ns == (repo / "same.rs").stat().st_mtime_ns == exact
    assert (work / "changed.rs").stat().st_mtime >= before - 1
    assert (work / "dirty.rs").stat().st_mtime >= before - 1  # the plan's copy is not the user's build
    # The second time the identical file is left alone; the differing ones are made "now" again:
    # a file written a second ago is not newer than a build the user finished since.
    assert mtimes.sync(repo, work, gitdir) == 2


def test_a_tree_deeper_than_path_max_is_removed(tmp_path: Path) -> None:
    top = tmp_path / "deep"
    top.mkdir()
    fd = os.open(top, os.O_RDONLY)
    for _ in range(1500):  # 1500 * 51 characters: far past PATH_MAX and the recursion limit
        os.mkdir("d" * 50, dir_fd=fd)
        os.close(os.open("f", os.O_CREAT | os.O_WRONLY, dir_fd=fd))
        inner = os.open("d" * 50, os.O_RDONLY, dir_fd=fd)
        os.close(fd)
        fd = inner
    os.close(fd)
    remove_tree(top)
    assert not top.exists()


def test_an_unsandboxed_check_through_an_editable_install_does_not_land(tmp_path: Path) -> None:
    repo = make_repo(tmp_path / "repo", {".gitignore": ".venv/\n", "calc.py": "def add(a, b):\n    return a + b\n"})
    site = repo / ".venv/lib/python3.11/site-packages"
    site.mkdir(parents=True)
    (site / "__editable__.calc-0.1.pth").write_text(f"{repo}\n")  # what `pip install -e .` writes
    env = {"PAPAYU_CHECK_SANDBOX": "off"}
    data = apply_json(repo, _one_file_plan(tmp_path), "--check", "true", env=env)
    assert data["state"] == "review" and data["error"]["code"] == "ERR_CHECK_ENV_LINKED", data
    assert ".venv/lib/python3.11/site-packages/__editable__.calc-0.1.pth" in json.dumps(data["error"])
    assert git(repo, "log", "--format=%s", "-1").strip() == "initial"
    data = apply_json(
        repo,
        _one_file_plan(tmp_path, "q.json"),
        "--check",
        "true",
        env={**env, "PAPAYU_CHECK_ALLOW_USER_TREE_LINKS": "1"},
    )
    assert data["state"] == "landed", data


@needs_bwrap
def test_the_checks_processes_are_bounded_and_cannot_raise_the_bounds(tmp_path: Path) -> None:
    repo = make_repo(tmp_path / "repo")
    check = "ulimit -d; ulimit -c; ulimit -d unlimited 2>/dev/null && echo RAISED || echo kept"
    data = apply_json(repo, _one_file_plan(tmp_path), "--check", check, env={"PAPAYU_CHECK_MEMORY_MB": "700"})
    lines = Path(data["check"]["log"]).read_text().splitlines()
    assert lines[-3:] == [str(700 * 1024), "0", "kept"], lines


@needs_bwrap
def test_no_namespace_no_keyring_no_ptrace_inside_the_check(tmp_path: Path) -> None:
    probe = (
        "import ctypes, errno, os, platform\n"
        "libc = ctypes.CDLL(None, use_errno=True)\n"
        "nr = {'x86_64': {'keyctl': 250, 'ptrace': 101, 'bpf': 321}, 'aarch64': {'keyctl': 219, 'ptrace': 117,"
        " 'bpf': 280}}[platform.machine()]\n"
        "for name, number in nr.items():\n"
        "    rc = libc.syscall(number, 0, 0, 0, 0, 0)\n"
        "    print(name, rc, errno.errorcode.get(ctypes.get_errno(), ctypes.get_errno()))\n"
    )
    repo = make_repo(tmp_path / "repo", {"probe.py": probe})
    check = f"unshare -U true || echo userns-refused; unshare -m true || echo mount-ns-refused; {PY} probe.py"
    data = apply_json(repo, _one_file_plan(tmp_path), "--check", check)
    log = Path(data["check"]["log"]).read_text()
    assert data["state"] == "landed", log  # an ordinary check still passes
    assert "userns-refused" in log and "mount-ns-refused" in log
    for name in ("keyctl", "ptrace", "bpf"):
        assert f"{name} -1 EPERM" in log, log
