"""What papayu's helpers inside the check's Python processes share (docs/DESIGN.md, "A verdict
per test" and "The runtime shield"): their configuration, the stream to papayu, and this
process's shield.

Copied beside papayu's pytest plugin (as `papayu_in_process.py`) and imported by it and by the
unittest reporter (unittest_results.py), whichever loads first: pytest imports unittest before
its plugins, so in a pytest process the unittest reporter comes first. Standard library only,
Python 3.7 and later (the shield needs 3.8's audit hooks).

- The stream: the pipe this process inherited, or the FIFO the check's first process relays into
  it, checked to be that FIFO and moved to a descriptor number drawn at random, the inherited one
  closed (a process that guessed the number it was given finds nothing there).
- The shield (shield.py): installed once per process, by the first of papayu's helpers to ask,
  before any code of the checked tree runs; the other finds it installed.
"""

from __future__ import annotations

import importlib
import json
import os
import stat
import sys
from typing import Any

try:
    import resource
except ImportError:  # not on every platform
    resource = None  # type: ignore[assignment]

HERE = os.path.dirname(os.path.abspath(__file__))
CONFIG = os.path.join(HERE, "papayu_pytest_results.json")
FD_FLOOR = 256  # the stream moves to a descriptor at or above this, drawn at random
# papayu's own files in this directory: their frames act for papayu (shield.Shield's papayu_files).
PAPAYU_FILES = (
    "papayu_pytest_results.py",
    "papayu_pytest_inputs.py",
    "papayu_unittest_results.py",
    "papayu_in_process.py",
    "papayu_reporting_path.py",
    "sitecustomize.py",
)
_state: dict[str, Any] = {}  # "pipe" and "shield": this process's, once asked for


def config() -> dict[str, Any]:
    try:
        with open(CONFIG, encoding="utf-8") as handle:
            wanted = json.load(handle)
    except (OSError, ValueError):
        return {}
    return wanted if isinstance(wanted, dict) else {}


def pipe(wanted: dict[str, Any]) -> int | None:
    """The stream, opened once per process for both reporters (the inherited descriptor is gone
    once moved)."""
    if "pipe" not in _state:
        _state["pipe"] = _open_pipe(wanted)
    return _state["pipe"]


def _open_pipe(wanted: dict[str, Any]) -> int | None:
    """The pipe this process inherited, else the FIFO the check's first process relays into it
    (inside.py: a launcher such as tox or nox closed the pipe on the way)."""
    try:
        fd = int(wanted["fd"])
        info = os.fstat(fd)
        if stat.S_ISFIFO(info.st_mode) and info.st_ino == wanted.get("ino"):
            return _moved(fd)
    except (OSError, ValueError, KeyError, TypeError):
        pass
    path = wanted.get("fifo")
    if not isinstance(path, str) or not path:
        return None
    try:
        fd = os.open(path, os.O_WRONLY | os.O_NONBLOCK | os.O_NOFOLLOW | os.O_CLOEXEC)
    except OSError:  # no reader: not in a check
        return None
    if not stat.S_ISFIFO(os.fstat(fd).st_mode):
        os.close(fd)
        return None
    os.set_blocking(fd, True)
    return _moved(fd)


def _moved(fd: int) -> int:
    """The stream at a descriptor number nothing else knows (the inherited one is closed)."""
    try:
        ceiling = min(resource.getrlimit(resource.RLIMIT_NOFILE)[0], 65536) if resource is not None else 1024
    except (OSError, ValueError):
        ceiling = 1024
    for _ in range(32):
        target = FD_FLOOR + int.from_bytes(os.urandom(4), "big") % max(ceiling - FD_FLOOR, 1)  # no `secrets`: 7 ms
        try:
            os.fstat(target)
            continue  # in use
        except OSError:
            pass
        try:
            os.dup2(fd, target, inheritable=False)
        except OSError:
            break
        os.close(fd)
        return target
    return fd


def ancestors() -> list[int]:
    out: list[int] = []
    pid = os.getpid()
    for _ in range(64):
        try:
            with open("/proc/%d/stat" % pid, encoding="utf-8", errors="replace") as handle:
                pid = int(handle.read().rsplit(")", 1)[1].split()[1])
        except (OSError, ValueError, IndexError):
            return out or [os.getppid()]
        if pid <= 0:
            return out
        out.append(pid)
    return out


def beside(name: str) -> Any:
    """papayu's module ``name``, copied beside this one (first on the path: never a module of
    the checked tree that has its name)."""
    sys.path.insert(0, HERE)
    try:
        return importlib.import_module(name)
    finally:
        sys.path.remove(HERE)


def shield(wanted: dict[str, Any]) -> Any:
    """This process's shield: installed now when no helper of papayu's installed it yet (None
    where the check asks for none, or the interpreter has no audit hooks)."""
    if "shield" in _state:
        found = _state["shield"]
        if found is not None:
            found.learn_handing()  # libraries imported since (pytest's _pytest._code) hand back too
        return found
    asked = wanted.get("shield")
    if not isinstance(asked, dict) or not hasattr(sys, "addaudithook"):
        _state["shield"] = None
        return None
    made = beside("papayu_shield").Shield(
        str(asked.get("root") or os.getcwd()),
        str(asked.get("report_dir") or ""),
        os.path.dirname(HERE),  # papayu's helpers: this directory's parent
        changed=[str(p) for p in asked.get("changed") or ()],
        tip_sites=[str(p) for p in asked.get("sites") or ()],
        papayu_files=[os.path.join(HERE, name) for name in PAPAYU_FILES],
    )
    made.install()
    _state["shield"] = made
    return made
