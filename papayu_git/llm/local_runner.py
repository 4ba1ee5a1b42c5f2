"""Serves the embedded model: llama.cpp's own server inside this process (xllamacpp's prebuilt
wheel), on 127.0.0.1 only (docs/DESIGN.md, "Providers").

`--watch-pid PID`: end as soon as PID (papayu, this process's parent) is gone, even after a
kill -9, so the embedded model never outlives the command that started it. Loading the model
holds Python's GIL for seconds, so no thread of this process could notice then: a forked watcher
does, and kills this process.
Before loading, the instruction sets the wheel's llama.cpp was compiled for are compared with the
CPU's: a missing one ends the start with CPU_LACKS_EXIT naming it, where llama.cpp would die of
SIGILL in the middle of an answer (docs/DESIGN.md, "A model server that dies").
A crash leaves no core file: it would land in the user's repository (the server's working
directory) at the size of the model; the signal and the log say what papayu reports.
"""

from __future__ import annotations

import argparse
import os
import re
import resource
import signal
import sys
import threading
import time

# The process exits with this when the CPU lacks an instruction set llama.cpp was built for (sysexits EX_CONFIG).
CPU_LACKS_EXIT = 78
_WATCH_SEC = 0.5
# ggml's names for the instruction sets it was compiled for (as `get_system_info()` lists them) ->
# the flag the kernel lists in /proc/cpuinfo. Names not here are build options (OPENMP, REPACK, …).
_CPU_FLAGS = {
    "SSE3": "pni",
    "SSSE3": "ssse3",
    "AVX": "avx",
    "AVX_VNNI": "avx_vnni",
    "AVX2": "avx2",
    "F16C": "f16c",
    "FMA": "fma",
    "BMI2": "bmi2",
    "AVX512": "avx512f",
    "AVX512_VBMI": "avx512vbmi",
    "AVX512_VNNI": "avx512_vnni",
    "AVX512_BF16": "avx512_bf16",
    "AMX_INT8": "amx_int8",
    "NEON": "asimd",
    "ARM_FMA": "asimd",
    "FP16_VA": "asimdhp",
    "DOTPROD": "asimddp",
    "MATMUL_INT8": "i8mm",
    "SVE": "sve",
    "SME": "sme",
}


def cpu_flags(cpuinfo: str = "/proc/cpuinfo") -> set[str] | None:
    """The CPU's instruction-set flags as the kernel lists them; None where it does not (not Linux)."""
    try:
        with open(cpuinfo, encoding="utf-8", errors="replace") as file:
            text = file.read()
    except OSError:
        return None
    found = re.search(r"^(?:flags|Features)\s*:(.*)$", text, re.M)
    return set(found.group(1).split()) if found else None


def lacking(system_info: str, flags: set[str] | None) -> list[str]:
    """The instruction sets llama.cpp was compiled for (``NAME = 1`` in its system info) that the CPU lacks."""
    if flags is None:
        return []
    built = re.findall(r"\b([A-Z0-9_]+) = 1\b", system_info)
    return [name for name in built if name in _CPU_FLAGS and _CPU_FLAGS[name] not in flags]


def _tie_to(parent: int, ready_fd: int | None) -> None:
    """End this process once ``parent`` is gone. A forked watcher kills it (no thread of this
    process runs while the model loads); without fork, a thread ends it after the load."""
    if not hasattr(os, "fork"):
        threading.Thread(target=_exit_when_gone, args=(parent,), daemon=True).start()
        return
    server = os.getpid()
    if os.fork() != 0:
        return
    if ready_fd is not None:
        os.close(ready_fd)  # the pipe's end is the server's: papayu sees it close when the server ends
    _die_with_parent()
    while os.getppid() == server:  # the watcher ends with the server, at the latest here
        if not _child_of(server, parent):
            os.kill(server, signal.SIGKILL)
            break
        time.sleep(_WATCH_SEC)
    os._exit(0)


def _exit_when_gone(parent: int) -> None:
    while _child_of(os.getpid(), parent):
        time.sleep(_WATCH_SEC)
    os._exit(0)


def _child_of(pid: int, parent: int) -> bool:
    """Whether ``pid``'s parent is still ``parent``: a dying parent hands its children over at
    once, even while nobody has collected its exit status (where /proc says no parent: whether
    ``parent`` still exists)."""
    try:
        with open(f"/proc/{pid}/stat", encoding="ascii", errors="replace") as stat:
            return int(stat.read().rsplit(")", 1)[1].split()[1]) == parent
    except (OSError, IndexError, ValueError):
        pass
    try:
        os.kill(parent, 0)
    except ProcessLookupError:
        return False
    except PermissionError:
        pass
    return True


def _die_with_parent() -> None:
    """Linux: the kernel kills the watcher the moment the server ends (prctl PR_SET_PDEATHSIG)."""
    try:
        import ctypes

        ctypes.CDLL(None, use_errno=True).prctl(1, signal.SIGKILL)
    except (OSError, AttributeError):
        pass  # elsewhere the watcher's loop notices within _WATCH_SEC


def _say_ready(address: str, ready_fd: int | None) -> None:
    if ready_fd is None:
        print(f"papayu: serving at {address}", flush=True)
        return
    os.write(ready_fd, f"{address}\n".encode())
    os.close(ready_fd)


def _parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(prog="python -m papayu_git.llm.local_runner")
    parser.add_argument("--ready-fd", type=int, help="where to write the server's URL once the model is loaded")
    parser.add_argument("--watch-pid", type=int)
    parser.add_argument("--model", required=True)
    parser.add_argument("--alias", required=True)
    parser.add_argument("--host", default="127.0.0.1")
    parser.add_argument("--port", type=int, required=True)
    parser.add_argument("--n-ctx", type=int, required=True)
    parser.add_argument("--threads", type=int, required=True)
    parser.add_argument("--cpuinfo", default="/proc/cpuinfo", help=argparse.SUPPRESS)
    return parser


def main(argv: list[str]) -> None:
    args = _parser().parse_args(argv)
    resource.setrlimit(resource.RLIMIT_CORE, (0, resource.getrlimit(resource.RLIMIT_CORE)[1]))
    if args.watch_pid:
        _tie_to(args.watch_pid, args.ready_fd)
    import xllamacpp

    missing = lacking(xllamacpp.get_system_info(), cpu_flags(args.cpuinfo))
    if missing:
        print(f"papayu: this CPU lacks {', '.join(missing)}, which this llama.cpp was built for", flush=True)
        sys.exit(CPU_LACKS_EXIT)
    params = xllamacpp.CommonParams()
    params.model.path = args.model
    params.model_alias = {args.alias}
    params.hostnames = [args.host]
    params.port = args.port
    params.n_ctx = args.n_ctx
    params.cpuparams.n_threads = args.threads
    params.cpuparams_batch.n_threads = args.threads
    params.cors_origins = ""  # no web page the user visits may read from the model
    params.ui = False
    try:
        server = xllamacpp.Server(params)  # returns once the model is loaded; it serves from its own threads
    except RuntimeError as exc:  # the log above says why (a file llama.cpp cannot load, a port taken)
        print(f"papayu: llama.cpp did not start: {exc}", flush=True)
        sys.exit(1)
    # llama.cpp's own handlers would stop its loop and leave this process waiting: an idle server
    # has nothing to save, so SIGTERM and Ctrl-C end it at once.
    for signum in (signal.SIGTERM, signal.SIGINT):
        signal.signal(signum, lambda *_: os._exit(0))
    _say_ready(server.listening_address, args.ready_fd)
    while server:  # held: the server stops when it is collected
        time.sleep(3600)


if __name__ == "__main__":
    main(sys.argv[1:])
