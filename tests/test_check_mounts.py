"""What the check's sandbox mounts cannot be chosen by a plan, and shows no credential of any tool
(docs/DESIGN.md, "The check's environment"): a landed `venv/pyvenv.cfg` names no mount, a tool's
home gives its installation and not its token or socket, uv's credential store stays out of uv's
mounted data directory, no file of the credential table is seen whatever directory holds it,
/etc shows neither credential nor root-only files, /opt is not mounted whole, and an include
never covers a tracked file. Each attack runs through the real CLI in the real sandbox, next to
the honest setup that must keep working."""

from __future__ import annotations

import contextlib
import os
import socket
import subprocess
import sys
from pathlib import Path
from typing import Any

import pytest
from helpers import apply_json, git, make_repo, write_plan
from helpers import create_action as _create

from papayu_git.check import credential_files, sandbox
from papayu_git.check.credential_files import HOME_CREDENTIALS, holds_credentials

pytestmark = pytest.mark.skipif(
    sandbox.unavailable_reason() is not None, reason=f"bwrap does not work here: {sandbox.unavailable_reason()}"
)

PY = sys.executable
KEY = "ssh-private-key-0123456789"


def _apply(
    repo: Path, tmp_path: Path, actions: list[dict[str, str]], check: str, env: dict[str, str] | None = None
) -> tuple[dict[str, Any], str]:
    """Apply ``actions`` with ``check``; the result and the plan's check logs without the command
    line (which names what the check looks for). The plans here write files that are no code (a
    venv's config, included files): --allow-test-edits lets the plan's own run, which has them,
    judge; its log is the second one."""
    plan = write_plan(tmp_path, actions, name=f"plan-{len(list(tmp_path.glob('plan-*.json')))}.json")
    flags = ("-y", "--allow-test-edits", "--check", check)
    data = apply_json(repo, plan, *flags, env={"PAPAYU_PROTOCOL_VERSION": "1", **(env or {})})
    assert data.get("check"), data
    logs = [data["check"]["log"], data["check"].get("own_log") or ""]
    log = "".join(Path(p).read_text(encoding="utf-8", errors="replace") for p in logs if p)
    return data, "".join(line for line in log.splitlines(keepends=True) if not line.startswith("$ "))


def _executable(path: Path, text: str) -> None:
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text(text)
    path.chmod(0o755)


def _files(base: Path, files: dict[str, str]) -> None:
    for rel, text in files.items():
        (base / rel).parent.mkdir(parents=True, exist_ok=True)
        (base / rel).write_text(text)


def _python_installation(prefix: Path, marker: str) -> None:
    """What a Python build looks like from outside: bin/python3 and lib/python3.X."""
    _executable(prefix / "bin/python3", "#!/bin/sh\nexit 0\n")
    _files(prefix, {"lib/python3.99/marker.txt": marker})


# --- a virtualenv's pyvenv.cfg -------------------------------------------------------------------


def test_a_landed_venv_pyvenv_cfg_never_mounts_a_directory_of_home(tmp_path: Path) -> None:
    home = Path(os.environ["HOME"])
    _files(home, {".ssh/id_ed25519": KEY})
    # A directory that looks like a Python installation and holds no file of the credential
    # table: only the rule on tracked environment directories keeps it out.
    _python_installation(home / "private", "private-notes-0123456789")
    repo = make_repo(tmp_path / "repo")
    cfg = f"home = {home}/private/bin\nbase-prefix = {home}/.ssh\nbase-exec-prefix = {home}/private\n"
    # Step 1: an ordinary file of an ordinary plan; it lands.
    data, _ = _apply(repo, tmp_path, [_create("venv/pyvenv.cfg", cfg)], "true")
    assert data["state"] == "landed" and (repo / "venv/pyvenv.cfg").read_text() == cfg, data
    # A tracked .venv/bin/python link into the same directory (as a landed commit could leave).
    (repo / ".venv/bin").mkdir(parents=True)
    os.symlink(home / "private/bin/python3", repo / ".venv/bin/python")
    _files(repo, {".venv/pyvenv.cfg": f"home = {home}/private/bin\n"})
    git(repo, "add", ".venv")
    git(repo, "commit", "-qm", "a tracked .venv")

    # Step 2: every later check; this one goes for what the cfg named.
    reads = f"{home}/.ssh/id_ed25519 {home}/private/lib/python3.99/marker.txt"
    check = f"for f in {reads}; do cat $f 2>/dev/null || echo unseen $f; done; ls -A {home}"
    data, log = _apply(repo, tmp_path, [_create("notes.txt", "n\n")], check)
    assert data["state"] == "landed", log
    assert KEY not in log and "private-notes" not in log, log
    assert f"unseen {home}/.ssh/id_ed25519" in log and f"unseen {home}/private/lib" in log, log

    # A plan deleting the tracked venv/ does not get the user's copy laid over its tree either.
    delete = [{"kind": "DELETE_FILE", "path": "venv/pyvenv.cfg"}]
    data, log = _apply(repo, tmp_path, delete, "cat venv/pyvenv.cfg 2>/dev/null || echo venv-gone")
    own = Path(data["check"]["own_log"]).read_text()  # the regression run has the tip's (tracked) file
    assert data["state"] == "landed" and "venv-gone" in own and "base-prefix" not in own, log


def test_an_untracked_venv_brings_its_interpreter_but_never_home_or_a_credential_directory(tmp_path: Path) -> None:
    home = Path(os.environ["HOME"])
    _files(home, {".ssh/id_ed25519": KEY, "notes.txt": "home-notes-0123456789"})
    prefix = tmp_path / "python-build"  # a base interpreter nothing else mounts
    _python_installation(prefix, "interpreter-library-ok")
    _python_installation(home / ".ssh", "never")  # looks like Python, holds a key
    repo = make_repo(tmp_path / "repo", {".gitignore": ".venv/\n"})
    cfg = f"home = {prefix}/bin\nbase-prefix = {home}/.ssh\nbase-exec-prefix = {home}\n"
    _files(repo, {".venv/pyvenv.cfg": cfg})
    check = (
        f"cat {prefix}/lib/python3.99/marker.txt; cat .venv/pyvenv.cfg | head -1; "
        f"cat {home}/.ssh/id_ed25519 {home}/notes.txt 2>/dev/null || echo nothing-of-home"
    )
    data, log = _apply(repo, tmp_path, [_create("notes.txt", "n\n")], check)
    assert data["state"] == "landed", log
    assert "interpreter-library-ok" in log and f"home = {prefix}/bin" in log, log  # the user's venv, its interpreter
    assert "nothing-of-home" in log and KEY not in log and "home-notes" not in log, log


# --- tool homes on PATH ---------------------------------------------------------------------------


def _tool(bin_dir: Path, name: str, reads: str = "") -> None:
    """A program that says it ran and prints a file of its installation (relative to its bin)."""
    body = f'cat "$(dirname "$0")/{reads}"' if reads else "true"
    _executable(bin_dir / name, f'#!/bin/sh\nprintf "{name} ran: "\n{body}\n')


def _homes_beyond_installation(home: Path) -> tuple[list[Path], list[str]]:
    """Tool homes that are more than an installation (a token, credentials, workspaces, a GOPATH's
    own code, a version manager's git checkout): their PATH directories, and the files of them
    the check must not see."""
    _tool(home / ".fly/bin", "flyctl")
    _files(home, {".fly/config.yml": "access_token: fly-token-0123456789\n"})
    _tool(home / ".pulumi/bin", "pulumi", "../plugins/resource-demo/VERSION")
    _files(home, {".pulumi/credentials.json": '{"accessToken": "pul-0123456789"}', ".pulumi/workspaces/w.json": "{}"})
    _files(home, {".pulumi/plugins/resource-demo/VERSION": "plugin-1.0\n"})
    _tool(home / ".rd/bin", "rdctl")  # and its docker.sock, made by the test
    _tool(home / "gopath/bin", "gotool")
    _files(home, {"gopath/pkg/mod/cache/x": "", "gopath/src/private/main.go": "// gopath-private-0123\n"})
    root = home / ".envman"  # pyenv's layout: shims run its libexec/, which reads its version file
    _executable(root / "shims/managed", '#!/bin/sh\nexec "$(dirname "$0")/../libexec/envman" "$@"\n')
    _executable(root / "libexec/envman", '#!/bin/sh\nprintf "managed ran: "\ncat "$(dirname "$0")/../version"\n')
    _files(root, {"version": "3.99\n", "versions/3.99/README": "", ".git/config": "url = https://x:envman-0123@h/"})
    bins = [home / ".fly/bin", home / ".pulumi/bin", home / ".rd/bin", home / "gopath/bin", root / "shims"]
    secrets = [".fly/config.yml", ".pulumi/credentials.json", ".pulumi/workspaces/w.json"]
    return bins, [*secrets, "gopath/src/private/main.go", ".envman/.git/config"]


def _installation_prefixes(home: Path) -> list[Path]:
    """Go-, Node- and Python-like installation prefixes (mounted whole): their bin directories."""
    go = home / "sdk/go1.99"
    _tool(go / "bin", "gofake", "../src/runtime/marker")
    _files(go, {"src/runtime/marker": "go-src\n", "pkg/tool/x": "t", "VERSION": "go1.99\n", "go.env": ""})
    _files(
        go, {"api/x": "", "misc/x": "", "test/x": "", "doc/x": "", "README.md": "", "codereview.cfg": "", "LICENSE": ""}
    )
    node = home / "opt/node-v99"
    _tool(node / "bin", "nodefake", "../lib/node_modules/npm/marker")
    _files(node, {"lib/node_modules/npm/marker": "node-lib\n", "include/node/x.h": "", "share/man/x": ""})
    _files(node, {"CHANGELOG.md": "", "LICENSE": "", "README.md": ""})
    python = home / "opt/python-3.99"
    _tool(python / "bin", "pyfake", "../lib/python3.99/marker.txt")
    _python_installation(python, "python-lib\n")
    return [go / "bin", node / "bin", python / "bin"]


def test_a_tool_home_on_path_gives_its_installation_not_its_token_or_socket(tmp_path: Path) -> None:
    home = Path(os.environ["HOME"])
    bins, secrets = _homes_beyond_installation(home)
    bins += _installation_prefixes(home)
    docker = socket.socket(socket.AF_UNIX)  # Rancher Desktop's, beside its bin/
    docker.bind(str(home / ".rd/docker.sock"))
    docker.listen(4)
    docker.settimeout(0.1)
    connect = f"import socket; s = socket.socket(socket.AF_UNIX); s.connect({str(home / '.rd/docker.sock')!r})"
    check = "; ".join(
        [
            "flyctl; echo; pulumi; rdctl; echo; gofake; nodefake; pyfake; gotool; echo; managed",
            f"for f in {' '.join(secrets)}; do cat {home}/$f 2>/dev/null || echo unseen $f; done",
            f"{PY} -c {connect!r} 2>/dev/null && echo SOCKET-REACHED || echo no-socket",
        ]
    )
    path = os.pathsep.join([*map(str, bins), os.environ["PATH"]])
    repo = make_repo(tmp_path / "repo")
    try:
        data, log = _apply(repo, tmp_path, [_create("notes.txt", "n\n")], check, {"PATH": path})
        reached = 0
        with contextlib.suppress(OSError):
            while True:
                docker.accept()[0].close()
                reached += 1
    finally:
        docker.close()
    assert data["state"] == "landed", log
    for said in ("flyctl ran:", "pulumi ran: plugin-1.0", "rdctl ran:", "gofake ran: go-src", "nodefake ran: node-lib"):
        assert said in log, log
    assert "pyfake ran: python-lib" in log and "gotool ran:" in log and "managed ran: 3.99" in log, log
    assert all(f"unseen {rel}" in log for rel in secrets), log
    assert not any(v in log for v in ("fly-token", "pul-0123", "gopath-private", "envman-0123")), log
    assert "no-socket" in log and "SOCKET-REACHED" not in log and reached == 0, log


def test_uvs_credential_store_stays_out_of_its_mounted_data_directory(tmp_path: Path) -> None:
    uv = Path(sys.executable).parent / "uv"
    if not uv.is_file():
        pytest.skip("toolchain absent here: uv not found next to the interpreter")
    home = Path(os.environ["HOME"])
    token = "uv-index-token-0123456789"
    proc = subprocess.run([uv, "auth", "login", "example.com", "--token", token], capture_output=True, text=True)
    assert proc.returncode == 0, proc.stderr  # uv's plaintext store, where uv writes it
    store = home / ".local/share/uv/credentials/credentials.toml"
    assert token in store.read_text()
    _files(home, {".local/share/uv/python/.lock": "uv-python-cache-ok\n"})  # what the mount is for
    repo = make_repo(tmp_path / "repo")
    check = f"cat {home}/.local/share/uv/python/.lock; cat {store} 2>/dev/null | tr a-z A-Z"
    check += f"; echo store entries: $(ls -A {store.parent} | wc -l)"
    data, log = _apply(repo, tmp_path, [_create("notes.txt", "n\n")], check)
    assert data["state"] == "landed", log
    assert "uv-python-cache-ok" in log, log
    assert "store entries: 0" in log and token.upper() not in log and token not in log, log


def test_a_credential_store_behind_a_symlink_is_hidden_where_it_points(tmp_path: Path) -> None:
    home = Path(os.environ["HOME"])
    data_dir = home / ".local/share/uv"
    _files(data_dir, {"synced/credentials.toml": 'password = "linked-0123456789"\n', "python/.lock": "ok\n"})
    os.symlink(data_dir / "synced", data_dir / "credentials")  # a store kept elsewhere, linked in
    repo = make_repo(tmp_path / "repo")
    check = f"cat {data_dir}/python/.lock; cat {data_dir}/credentials/credentials.toml 2>/dev/null | rev; echo read"
    data, log = _apply(repo, tmp_path, [_create("notes.txt", "n\n")], check)
    assert data["state"] == "landed" and "ok\nread" in log, log  # the sandbox came up, the cache is there
    assert "linked-0123456789"[::-1] not in log, log


# --- the credential table, walked ----------------------------------------------------------------------


def test_no_file_of_the_credential_table_is_seen_whatever_directory_holds_it(tmp_path: Path) -> None:
    home = Path(os.environ["HOME"])
    on_path: list[str] = []
    for index, rel in enumerate(HOME_CREDENTIALS):
        target = home / rel.rstrip("/")
        secret = f"table-secret-{index:03d}\n"
        if rel.endswith("/"):
            _files(target, {"secret": secret, "bin/secret": secret})
        else:
            _files(home, {rel: secret})
        # The directory holding it, the directory itself and one inside it on PATH: a toolchain
        # mount each, were it not for the table.
        on_path += [str(target.parent), *([str(target), str(target / "bin")] if rel.endswith("/") else [])]
        assert holds_credentials(target.parent, home), rel
    _tool(home / ".config/honest-tool/bin", "honest")  # a tool's directory next to them
    path = os.pathsep.join([*dict.fromkeys(on_path), str(home / ".config/honest-tool/bin"), os.environ["PATH"]])
    entries = " ".join(rel.rstrip("/") for rel in HOME_CREDENTIALS)
    check = (
        f"honest; echo; cd {home} && for f in {entries}; do "
        '{ [ -f "$f" ] && [ -s "$f" ]; } || { [ -d "$f" ] && [ -n "$(ls -A "$f" 2>/dev/null)" ]; } && echo "LEAK $f"; '
        f"done; echo walked; grep -rl table-secret {home} 2>/dev/null | sed 's/^/LEAK /'; echo grepped"
    )
    repo = make_repo(tmp_path / "repo")
    data, log = _apply(repo, tmp_path, [_create("notes.txt", "n\n")], check, {"PATH": path})
    assert data["state"] == "landed", log
    assert "honest ran:" in log and "walked" in log and "grepped" in log, log
    assert "LEAK" not in log, log


# --- the system ---------------------------------------------------------------------------------------


def test_etc_shows_no_credential_or_root_only_file_and_opt_is_not_mounted_whole(tmp_path: Path) -> None:
    hidden = [p for p in credential_files.system_hidden() if os.path.exists(p)]
    if not hidden:
        pytest.skip("this machine's /etc holds no credential or root-only file")
    honest = Path("/etc/passwd")
    sizes = " ".join(hidden)
    check = (
        f'for f in {sizes}; do if [ -d "$f" ]; then echo "$f entries=$(ls -A "$f" | wc -l)"; '
        'else echo "$f bytes=$(cat "$f" 2>/dev/null | wc -c)"; fi; done; '
        f"head -c 200 {honest}; echo; echo opt=$(ls -A /opt 2>/dev/null | wc -l)"
    )
    repo = make_repo(tmp_path / "repo")
    data, log = _apply(repo, tmp_path, [_create("notes.txt", "n\n")], check)
    assert data["state"] == "landed", log
    for path in hidden:
        assert f"{path} entries=0" in log or f"{path} bytes=0" in log, (path, log)
    assert honest.read_text()[:30] in log, log  # the rest of /etc is there
    assert "opt=0" in log, log  # /opt's own content is not (this machine's /opt holds things)


def test_the_etc_walk_finds_what_only_its_owner_reads(tmp_path: Path) -> None:
    files = {"public.conf": 0o644, "owner.conf": 0o600, "group.conf": 0o640, "sub/deep.key": 0o600}
    for rel, mode in files.items():
        _files(tmp_path, {rel: "x"})
        (tmp_path / rel).chmod(mode)
    (tmp_path / "private").mkdir(mode=0o700)
    (tmp_path / "private/inside").write_text("x")
    (tmp_path / "listable").mkdir(mode=0o711)
    os.symlink("/etc/shadow", tmp_path / "link")
    found = credential_files._not_world_readable(str(tmp_path))
    expected = {"owner.conf", "group.conf", "sub/deep.key", "private", "listable"}
    assert {str(Path(p).relative_to(tmp_path)) for p in found} == expected


# --- papayu.check.include ------------------------------------------------------------------------------


def test_an_include_never_covers_a_tracked_file(tmp_path: Path) -> None:
    repo = make_repo(
        tmp_path / "repo",
        {".gitignore": "config/local.toml\n", "config/x.py": "VALUE = 'user-committed'\n", "config/y.py": "Y = 1\n"},
    )
    _files(repo, {"config/local.toml": "setting from the user's local file\n", "config/cache/blob.txt": "cache\n"})
    check = "cat config/x.py; cat config/local.toml config/cache/blob.txt; cat config/y.py 2>/dev/null || echo y-gone"
    plan = [{"kind": "UPDATE_FILE", "path": "config/x.py", "content": "VALUE = 'plan-bytes'\n"}]
    plan.append({"kind": "DELETE_FILE", "path": "config/y.py"})
    for include in ("config", "config/x.py,config/local.toml,config/cache,config/y.py"):
        env = {"PAPAYU_CHECK_INCLUDE": include}
        data, log = _apply(repo, tmp_path, plan, check, env)
        # The plan's bytes were tested, not the user's, and its deletion stood; the ignored
        # files the user named are there; the log says what was left out.
        assert "VALUE = 'plan-bytes'" in log and "user-" not in log and "y-gone" in log, log
        assert "setting from the user's local file" in log and "cache" in log, log
        assert "[papayu] papayu.check.include: config" in log and "the plan's" in log, log
        assert data["state"] == "landed", log
        git(repo, "reset", "-q", "--hard", "HEAD~1")


def test_an_include_of_an_ignored_directory_is_given_whole(tmp_path: Path) -> None:
    repo = make_repo(tmp_path / "repo", {".gitignore": "fixtures/\n"})
    _files(repo, {"fixtures/a/b.json": '{"b": 1}\n', "fixtures/c.txt": "c\n"})
    check = "cat fixtures/a/b.json fixtures/c.txt"
    data, log = _apply(repo, tmp_path, [_create("notes.txt", "n\n")], check, {"PAPAYU_CHECK_INCLUDE": "fixtures"})
    assert data["state"] == "landed" and '{"b": 1}' in log and "c\n" in log, log
    assert "papayu.check.include" not in log, log
