"""Runs `python -m llama_cpp.server` in this process, optionally tied to a parent's life.

`--watch-pid PID`: exit as soon as PID is gone (papayu was killed, even with -9), so the
embedded model never outlives the command that started it.
A crash leaves no core file: it would land in the user's repository (the server's working
directory) at the size of the model; the signal and the log say what papayu reports
(docs/DESIGN.md, "A model server that dies").
"""

from __future__ import annotations

import os
import resource
import runpy
import sys
import threading
import time


def _watch(pid: int) -> None:
    while True:
        try:
            os.kill(pid, 0)
        except ProcessLookupError:
            os._exit(0)
        except PermissionError:
            pass
        time.sleep(1.0)


def main(argv: list[str]) -> None:
    resource.setrlimit(resource.RLIMIT_CORE, (0, resource.getrlimit(resource.RLIMIT_CORE)[1]))
    if len(argv) >= 2 and argv[0] == "--watch-pid":
        threading.Thread(target=_watch, args=(int(argv[1]),), daemon=True).start()
        argv = argv[2:]
    sys.argv = ["llama_cpp.server", *argv]
    runpy.run_module("llama_cpp.server", run_name="__main__", alter_sys=True)


if __name__ == "__main__":
    main(sys.argv[1:])
