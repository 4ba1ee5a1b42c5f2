"""papayu's shield in the check's Python processes (docs/DESIGN.md, "The runtime shield").

Copied beside papayu's pytest plugin (as `papayu_shield.py`) and installed once per process
(in_process.shield) by the first of papayu's helpers to load there: the unittest reporter when
unittest's import ends (papayu's start-up hook), or the pytest plugin when pytest imports it (an
entry point, loaded before pytest imports a conftest or a test); so before any code of the checked
tree in pytest and in `python -m unittest`. Only the standard library: it runs in the check's
interpreter, whatever its version (3.8+; `sys.monitoring` where there is one).

An audit hook (sys.addaudithook: nothing can remove it) watches what honest code does not need
to judge or be judged, and refuses it to code of the checked tree, tests included ("repository
code": a frame whose file is under the checked root and outside the environment's prefixes, or
code the repository compiled):

- rewriting: assigning a function's `__code__` (the repository's or the runner's, whoever asks;
  any, when the repository asks) or a runner's function's defaults, registering a trace, profile or monitoring callback or another
  audit hook, loading `ctypes`/`cffi` (and using ctypes), code objects built from bytes, writing
  to papayu's report directory or reading its helpers, or writing a descriptor above 2 through
  `/proc/self/fd` or `/dev/fd`. Refused whenever a repository frame is on the stack (a library
  doing it on the repository's behalf is the repository doing it), or in a thread the
  repository started.
- reaching: walking objects through `gc`, frames through `sys._getframe`, a traceback's,
  generator's or coroutine's frame, every thread's frames, listing the process's descriptors.
  Judged by who asks: the first frame outward that is not a library handing what it got back to
  its caller (inspect, traceback's walkers, importlib, pytest's `_pytest._code`); a library
  that asks for itself (warnings, logging, a JSON encoder) is not the repository asking. Refused
  where the asking frame is in a file the plan changed, unless the tip's own run reached from the
  same function (its sites, given); in the tip's own files (a base run: every file) it is allowed
  and its place recorded, since the tip's code is what judges the plan.

A refusal raises `ShieldRefusal` in the code that asked (the action does not happen) and is
written at once to papayu's stream (when this process has it) and to a file of the report
directory, naming the event and the repository's file:line. papayu then does not trust the run
(results/read.py). The other half is reporting_path.py's `Snapshot`, verified around every test:
the reporting path (modules, classes, named objects) is still the objects papayu saw before any
repository code ran; its functions are `protected` here (their code and defaults are the runner's).
"""

from __future__ import annotations

import _thread
import json
import os
import re
import sys
import threading
from collections.abc import Callable, Iterable
from typing import Any

MAX_RECORDS = 50  # refusals and changes written per process; the rest are counted
MAX_ALLOWED_SITES = 20  # the tip's own places that reached, recorded per process
SINK_DIR = "shield"  # in the report directory: one file per process

REACHING = frozenset(
    ["gc.get_objects", "gc.get_referrers", "gc.get_referents", "sys._current_frames", "sys._current_exceptions"]
)
REWRITING = frozenset(["sys.monitoring.register_callback", "sys.addaudithook"])
TRACING = frozenset(["sys.settrace", "sys.setprofile"])  # the tip's own files may: doctest, cProfile
FRAME_ATTRIBUTES = frozenset(["tb_frame", "gi_frame", "cr_frame", "ag_frame"])
FUNCTION_ATTRIBUTES = frozenset(["__code__", "__defaults__", "__kwdefaults__"])  # what a function does
# Modules that write any memory of the process: refused to the repository when first imported.
NATIVE_MODULES = frozenset(
    [
        "ctypes",
        "_ctypes",
        "cffi",
        "_cffi_backend",
        "_testcapi",
        "_testinternalcapi",
        "_xxsubinterpreters",
        "_xxinterpchannels",
    ]
)
# Every ctypes event of the audit events table: a call into native code, memory read or written.
CTYPES_EVENTS = frozenset(
    [
        "ctypes.addressof",
        "ctypes.call_function",
        "ctypes.cdata",
        "ctypes.cdata/buffer",
        "ctypes.create_string_buffer",
        "ctypes.create_unicode_buffer",
        "ctypes.dlopen",
        "ctypes.dlsym",
        "ctypes.dlsym/handle",
        "ctypes.get_errno",
        "ctypes.get_last_error",
        "ctypes.seh_exception",
        "ctypes.set_errno",
        "ctypes.set_last_error",
        "ctypes.string_at",
        "ctypes.wstring_at",
        "ctypes.PyObj_FromPtr",
    ]
)
# File events whose path argument may be papayu's report directory or helpers.
PATH_EVENTS = frozenset(
    [
        "os.remove",
        "os.rename",
        "os.truncate",
        "os.chmod",
        "os.chown",
        "os.rmdir",
        "os.mkdir",
        "os.symlink",
        "os.link",
        "os.utime",
        "shutil.rmtree",
        "shutil.move",
        "shutil.copyfile",
    ]
)
_FD_DIR = re.compile(r"^/(?:proc/(?:self|thread-self|\d+)(?:/task/\d+)?/fd|dev/fd)/?$")
_FD_PATH = re.compile(r"^/(?:proc/(?:self|thread-self|\d+)(?:/task/\d+)?/fd|dev/fd)/(\d+)$")
_MEMORY_PATH = re.compile(r"^/proc/(?:self|thread-self|\d+)(?:/task/\d+)?/mem$")
_WRITE_FLAGS = os.O_WRONLY | os.O_RDWR | os.O_APPEND | os.O_CREAT | os.O_TRUNC
_OTHER, _REPOSITORY, _PAPAYU = 0, 1, 2


class ShieldRefusal(RuntimeError):
    """What the repository's code asked for is refused in papayu's check."""


class Shield:
    """The audit hook and what it records; one per process."""

    REPOSITORY = _REPOSITORY  # kind() of a file of the checked tree

    def __init__(
        self,
        root: str,
        report_dir: str,
        helpers: str,
        changed: Iterable[str] = (),
        papayu_files: Iterable[str] = (),
        tip_sites: Iterable[str] = (),
    ) -> None:
        self.root = os.path.normpath(root) + os.sep
        self.tip_sites = frozenset(tip_sites)  # "file::function::event" where the tip's own code reached
        self.report_dir = os.path.normpath(report_dir) if report_dir else ""
        self.helpers = os.path.normpath(helpers) if helpers else ""
        self.changed = frozenset(changed)  # files of the checked tree the plan changed (none: the tip's run)
        self.environment = _environment_prefixes(self.root)
        self.here = os.path.normpath(__file__)
        self.papayu = frozenset(os.path.normpath(f) for f in papayu_files) - {self.here}
        self.kinds: dict[str, int] = {}
        self.tainted_threads: set[int] = set()  # idents of threads the repository started, while they run
        self.raw_threads = False  # the repository started a thread without threading
        self.busy: set[int] = set()
        self.records = 0
        self.allowed: dict[str, str] = {}
        self.protected: set[int] = set()  # ids of functions on the reporting path
        self.current_test = ""
        self.cwd_papayus = False  # the working directory is papayu's (or unknown): relative paths are looked at
        self.stream: Callable[[dict[str, Any]], None] | None = None
        self._write = os.write
        self._dumps = json.dumps
        self._open = os.open
        self._close = os.close
        self._get_ident = _thread.get_ident
        self._getframe = sys._getframe
        self._sink = os.path.join(self.report_dir, SINK_DIR, f"{os.getpid()}.jsonl") if self.report_dir else ""
        self.learn_handing()
        handlers: dict[str, Callable[[str, tuple[Any, ...]], None]] = {
            "object.__setattr__": self._on_setattr,
            "object.__getattr__": self._on_getattr,
            "sys._getframe": self._on_reaching,
            "import": self._on_import,
            "open": self._on_open,
            "os.listdir": self._on_listing,
            "os.scandir": self._on_listing,
            "compile": self._on_compile,
            "code.__new__": self._on_compile,
            "marshal.loads": self._on_marshal,
            "_thread.start_new_thread": self._on_thread,
            "os.chdir": self._on_chdir,
        }
        handlers.update(dict.fromkeys(REACHING, self._on_reaching))
        handlers.update(dict.fromkeys(REWRITING, self._on_rewriting))
        handlers.update(dict.fromkeys(TRACING, self._on_tracing))
        handlers.update(dict.fromkeys(PATH_EVENTS, self._on_path_event))
        handlers.update(dict.fromkeys(CTYPES_EVENTS, self._on_ctypes))
        self._handlers = handlers

    # -- installation ---------------------------------------------------------------------------

    def learn_handing(self) -> None:
        """The libraries that hand back what they got, as imported by now (the shield may be
        installed before pytest imported its `_pytest._code`)."""
        self._handing_files, self._handing_codes = _handing()

    def install(self) -> None:
        handlers, busy, get_ident = self._handlers, self.busy, self._get_ident

        attributes = {"object.__getattr__": FRAME_ATTRIBUTES, "object.__setattr__": FUNCTION_ATTRIBUTES}

        def papayu_audit(event: str, args: tuple[Any, ...]) -> None:
            handler = handlers.get(event)
            if handler is None:
                return  # most events: one dictionary lookup
            names = attributes.get(event)
            if names is not None and (len(args) < 2 or args[1] not in names):
                return  # an attribute read or written that reaches nothing (inspect reading __code__)
            ident = get_ident()
            if ident in busy:
                return  # the shield's own work raising events
            busy.add(ident)
            try:
                handler(event, args)
            finally:
                busy.discard(ident)

        sys.addaudithook(papayu_audit)

    # -- what a frame is --------------------------------------------------------------------------

    def kind(self, filename: str) -> int:
        known = self.kinds.get(filename)
        if known is not None:
            return known
        path = os.path.normpath(filename) if filename[:1] == os.sep else filename
        if path in self.papayu:
            kind = _PAPAYU
        elif path.startswith(self.root) and not path.startswith(self.environment):
            kind = _REPOSITORY
        else:
            kind = _OTHER
        self.kinds[filename] = kind
        return kind

    def repository(self, filename: str) -> bool:
        """Whether ``filename`` is the checked tree's (outside the environment)."""
        return self.kind(filename) == _REPOSITORY

    def _frames(self) -> Iterable[Any]:
        """The stack outward from the code that raised the event (the shield's frames left out)."""
        frame: Any = self._getframe(1)
        here = self.here
        while frame is not None and frame.f_code.co_filename == here:
            frame = frame.f_back
        while frame is not None:
            yield frame
            frame = frame.f_back

    def _repository_on_stack(self) -> Any:
        """The innermost repository frame on the stack, unless papayu's own code comes first
        (papayu acting for itself); in a thread the repository started, the innermost frame."""
        innermost = None
        for frame in self._frames():
            innermost = innermost or frame
            kind = self.kind(frame.f_code.co_filename)
            if kind == _PAPAYU:
                return None
            if kind == _REPOSITORY:
                return frame
        if self._get_ident() in self.tainted_threads or (
            self.raw_threads and isinstance(threading.current_thread(), threading._DummyThread)
        ):
            return innermost
        return None

    def _asker(self) -> Any:
        """The frame that asked, when it is the repository's: the first outward that is not a
        library handing back what it got (inspect, traceback's walkers, importlib,
        _pytest._code, logging.currentframe) nor code compiled from a string (it acts for
        whoever ran it); None when that frame is not the repository's."""
        for frame in self._frames():
            code = frame.f_code
            filename = code.co_filename
            if filename in self._handing_files or code in self._handing_codes or filename[:1] == "<":
                continue
            kind = self.kind(filename)
            return frame if kind == _REPOSITORY else None
        return None

    # -- the events -------------------------------------------------------------------------------

    def _on_setattr(self, event: str, args: tuple[Any, ...]) -> None:
        if len(args) < 2 or args[1] not in FUNCTION_ATTRIBUTES:
            return
        if args[1] != "__code__":  # a runner's function's defaults (a result class its runner makes)
            if id(args[0]) in self.protected:
                self._refuse(f"assigns the runner's function {_name(args[0])}.{args[1]}", self._repository_on_stack())
            return
        # Whoever asks, when the function is the checked code's or the runner's (a gadget such as
        # monkeypatch.setattr(f, "__code__", ...) asks for the repository); any function, when the
        # repository asks itself. A library rewriting its own (types.coroutine, at asyncio's
        # import) is neither.
        target = args[0]
        code = getattr(target, "__code__", None)
        if len(args) > 2 and _same_behaviour(code, args[2]):
            return  # only its flags or names changed (types.coroutine marks a generator a coroutine)
        owned = code is not None and self.kind(code.co_filename) == _REPOSITORY
        runners = id(target) in self.protected
        asker = self._asker()
        if owned or runners or asker is not None:
            whose = "the checked code's function" if owned else "the runner's function" if runners else "function"
            self._refuse(f"assigns {whose} {_name(target)}.__code__", asker or self._repository_on_stack())

    def _on_getattr(self, event: str, args: tuple[Any, ...]) -> None:
        if len(args) > 1 and args[1] in FRAME_ATTRIBUTES:
            self._reaching(f"reads a {type(args[0]).__name__}'s {args[1]}")

    def _on_reaching(self, event: str, args: tuple[Any, ...]) -> None:
        self._reaching(event)

    def _on_listing(self, event: str, args: tuple[Any, ...]) -> None:
        path = args[0] if args else None
        if isinstance(path, (str, bytes)):
            name = _normal(path)
            if _FD_DIR.match(name):
                self._reaching(f"lists the process's descriptors ({name})")
            elif self._papayus(name) and not _on_path(name):
                # A directory on sys.path (the plugin's) is listed by every import that searches
                # it and every metadata walker (importlib.metadata.entry_points): names only.
                self._rewriting(f"lists papayu's {name}")

    def _on_rewriting(self, event: str, args: tuple[Any, ...]) -> None:
        self._rewriting(event)

    def _on_tracing(self, event: str, args: tuple[Any, ...]) -> None:
        """A trace or profile function set while only the tip's own files are on the stack
        (a test of the tip running doctest, which puts back the trace it found, or profiling
        with cProfile) is the judge's doing: allowed and said, like the tip's reaching. Any frame
        of a file the plan changed, code compiled under another file's name, or a thread the
        repository started, and it is refused. The trace left in place is verified around each
        test (pytest_plugin.Guard)."""
        innermost = None
        for frame in self._frames():
            filename = frame.f_code.co_filename
            kind = self.kind(filename)
            if kind == _PAPAYU:
                return
            if kind != _REPOSITORY:
                continue
            innermost = innermost or frame
            rel = self.rel(filename)
            if rel in self.changed or rel == os.path.normpath(filename):  # outside the root: compiled as another's
                self._refuse(event, frame)
        if self._get_ident() in self.tainted_threads or innermost is None:
            self._rewriting(event)  # a thread the repository started (or none of its frames): as before
            return
        site = f"{self.rel(innermost.f_code.co_filename)}:{innermost.f_lineno}"
        if site not in self.allowed and len(self.allowed) < MAX_ALLOWED_SITES:
            self.allowed[site] = event
            self.emit({"kind": "allowed", "what": event, "where": site, "test": self.current_test})

    def _on_import(self, event: str, args: tuple[Any, ...]) -> None:
        module = args[0] if args else ""
        if isinstance(module, str) and module.split(".", 1)[0] in NATIVE_MODULES:
            frame = self._asker()
            if frame is not None:
                self._refuse(f"imports {module}", frame)

    def _on_ctypes(self, event: str, args: tuple[Any, ...]) -> None:
        frame = self._asker()
        if frame is not None:
            self._refuse(f"uses ctypes ({event})", frame)

    def _on_open(self, event: str, args: tuple[Any, ...]) -> None:
        path = args[0] if args else None
        if isinstance(path, bytes):
            path = os.fsdecode(path)
        if not isinstance(path, str):
            return
        if path[:1] != os.sep and ".." not in path and not self.cwd_papayus:
            return  # the common case: a file under the working directory (the checked tree)
        name = _normal(path)
        system = name.startswith(("/proc/", "/dev/"))
        if not (system or self._papayus(name)):
            return  # a file of the project, the environment or the tests
        mode, flags = (args[1] if len(args) > 1 else None), (args[2] if len(args) > 2 else 0)
        writing = (isinstance(mode, str) and any(c in mode for c in "wax+")) or bool(
            isinstance(flags, int) and flags & _WRITE_FLAGS
        )
        for candidate in (name, os.path.realpath(name)) if system else (name,):
            fd = _FD_PATH.match(candidate)
            if writing and fd is not None and int(fd.group(1)) > 2:
                self._rewriting(f"opens descriptor {fd.group(1)} through {name} for writing")
                return
            if writing and _MEMORY_PATH.match(candidate):
                self._rewriting(f"opens {name} for writing")
                return
            # Writing anywhere of papayu's; reading only its configuration (the stream's descriptor
            # is named there): reports and papayu's modules and metadata are no secret.
            if self._papayus(candidate) and (writing or (candidate.endswith(".json") and self._helpers(candidate))):
                self._rewriting(f"opens papayu's {candidate}")
                return

    def _on_chdir(self, event: str, args: tuple[Any, ...]) -> None:
        path = args[0] if args else None
        if isinstance(path, (str, bytes)):
            self.cwd_papayus = self._papayus(_normal(path))
        elif isinstance(path, int):
            self.cwd_papayus = True  # a directory by descriptor: every relative path is looked at

    def _on_path_event(self, event: str, args: tuple[Any, ...]) -> None:
        for path in args[:2]:
            if isinstance(path, (str, bytes)) and self._papayus(_normal(path)):
                self._rewriting(f"{event} on papayu's {_normal(path)}")
                return

    def _on_compile(self, event: str, args: tuple[Any, ...]) -> None:
        """Code the repository compiles under another file's name is the repository's."""
        filename = args[1] if len(args) > 1 else None
        if isinstance(filename, bytes):
            filename = os.fsdecode(filename)
        foreign = isinstance(filename, str) and filename[:1] == os.sep and self.kind(filename) != _REPOSITORY
        if foreign and self._asker() is not None:
            self.kinds[filename] = _REPOSITORY  # type: ignore[index]

    def _on_marshal(self, event: str, args: tuple[Any, ...]) -> None:
        for frame in self._frames():
            if self.kind(frame.f_code.co_filename) == _REPOSITORY:
                self._refuse("builds code from bytes (marshal.loads)", frame)
            return

    def _on_thread(self, event: str, args: tuple[Any, ...]) -> None:
        if self._repository_on_stack() is None:
            return
        thread = getattr(args[0] if args else None, "__self__", None)
        if isinstance(thread, threading.Thread):
            _taint(self, thread)
        else:
            self.raw_threads = True

    # -- refusing and recording ------------------------------------------------------------------

    def _helpers(self, name: str) -> bool:
        return bool(self.helpers) and name.startswith(self.helpers + os.sep)

    def _papayus(self, name: str) -> bool:
        for where in (self.report_dir, self.helpers):
            if where and (name == where or name.startswith(where + os.sep)):
                return True
        return False

    def _rewriting(self, what: str) -> None:
        frame = self._repository_on_stack()
        if frame is not None:
            self._refuse(what, frame)

    def _reaching(self, what: str) -> None:
        frame = self._asker()
        if frame is None:
            return
        code = frame.f_code
        rel = self.rel(code.co_filename)
        # Where the tip's own code reaches (its run said so), in a function of that name: the
        # plan changed the file, not what that function needs (jinja's debug.py rewriting
        # tracebacks). The lines a plan adds there are read before it runs (check/reach.py).
        key = f"{rel}::{getattr(code, 'co_qualname', code.co_name)}::{what}"
        if rel in self.changed and key not in self.tip_sites:
            self._refuse(what, frame)
            return
        site = f"{rel}:{frame.f_lineno}"
        if site not in self.allowed and len(self.allowed) < MAX_ALLOWED_SITES:
            self.allowed[site] = what
            record = {"kind": "allowed", "what": what, "where": site, "site": key, "test": self.current_test}
            self.emit(record)

    def rel(self, filename: str) -> str:
        path = os.path.normpath(filename) if filename[:1] == os.sep else filename
        return path[len(self.root) :] if path.startswith(self.root) else path

    def _refuse(self, what: str, frame: Any) -> None:
        where = f"{self.rel(frame.f_code.co_filename)}:{frame.f_lineno}" if frame is not None else "?"
        self.emit({"kind": "refused", "what": what, "where": where, "test": self.current_test})
        raise ShieldRefusal(f"papayu's check refuses this: {what} at {where} (docs/DESIGN.md, 'The runtime shield')")

    def emit(self, record: dict[str, Any], stream: bool = True) -> None:
        """Written at once to the stream (when this process has it and ``stream``) and to the
        sink file."""
        self.records += 1
        if self.records > MAX_RECORDS:
            return
        if self.stream is not None and stream:
            try:
                self.stream(record)
            except Exception:
                pass
        if not self._sink:
            return
        line = (self._dumps(record, ensure_ascii=False) + "\n").encode("utf-8", "replace")
        try:
            os.makedirs(os.path.dirname(self._sink), exist_ok=True)
            fd = self._open(self._sink, os.O_WRONLY | os.O_CREAT | os.O_APPEND, 0o600)
        except OSError:
            return
        try:
            self._write(fd, line)
        except OSError:
            pass
        finally:
            self._close(fd)


def _same_behaviour(old: Any, new: Any) -> bool:
    """Whether code object ``new`` is ``old`` but for its flags, names or place."""
    if old is None or type(new) is not type(old):
        return False
    fields = {"co_flags": old.co_flags, "co_name": old.co_name, "co_filename": old.co_filename}
    fields["co_firstlineno"] = old.co_firstlineno
    if hasattr(old, "co_qualname"):
        fields["co_qualname"] = old.co_qualname
    try:
        return bool(new.replace(**fields) == old)
    except (TypeError, ValueError):
        return False


def _taint(shield: Shield, thread: threading.Thread) -> None:
    """A thread the repository started counts as the repository's while it runs its target
    (not before: a tracer's per-thread setup in threading's bootstrap is the tracer's)."""
    run = thread.run

    def run_as_repository() -> None:
        ident = shield._get_ident()
        shield.tainted_threads.add(ident)
        try:
            run()
        finally:
            shield.tainted_threads.discard(ident)

    thread.run = run_as_repository  # type: ignore[method-assign]


def _environment_prefixes(root: str) -> tuple[str, ...]:
    """Where installed code lives: the interpreter's prefixes and its site directories (a
    virtualenv inside the checked tree is the environment, not the repository)."""
    found = {sys.prefix, sys.base_prefix, sys.exec_prefix, getattr(sys, "base_exec_prefix", sys.prefix)}
    for path in sys.path:
        if path and ("site-packages" in path or "dist-packages" in path) and not path.startswith(root):
            found.add(path)
    try:
        import site

        found.update(site.getsitepackages())
        found.add(site.getusersitepackages())
    except Exception:
        pass
    prefixes = {os.path.normpath(p) + os.sep for p in found if p}
    # A prefix holding the checked tree itself (a project under /usr/src, /usr the prefix) is no
    # environment of it; a virtualenv inside the tree is.
    return tuple(sorted(p for p in prefixes if p != os.sep and not root.startswith(p)))


def _handing() -> tuple[frozenset[str], frozenset[Any]]:
    """The files and code objects of libraries that hand a frame or an import back to their
    caller: the caller is who asks."""
    import inspect
    import traceback

    files = {inspect.__file__, "<frozen importlib._bootstrap>", "<frozen importlib._bootstrap_external>"}
    importlib = sys.modules.get("importlib")
    if importlib is not None and getattr(importlib, "__file__", None):
        files.add(importlib.__file__)  # type: ignore[arg-type]
    for name, module in list(sys.modules.items()):
        if (name == "_pytest._code" or name.startswith("_pytest._code.")) and getattr(module, "__file__", None):
            files.add(module.__file__)  # type: ignore[arg-type]
    codes = {traceback.walk_stack.__code__, traceback.walk_tb.__code__}
    logging = sys.modules.get("logging")
    current = getattr(logging, "currentframe", None)
    if current is not None and hasattr(current, "__code__"):
        codes.add(current.__code__)
    return frozenset(files), frozenset(codes)


def _on_path(name: str) -> bool:
    return any(entry and _normal(entry) == name for entry in list(sys.path) if isinstance(entry, str))


def _normal(path: str | bytes) -> str:
    name = os.fsdecode(path)
    return os.path.normpath(name if os.path.isabs(name) else os.path.join(os.getcwd(), name))


def _name(target: Any) -> str:
    module = getattr(target, "__module__", None) or "?"
    return f"{module}.{getattr(target, '__qualname__', None) or getattr(target, '__name__', '?')}"
