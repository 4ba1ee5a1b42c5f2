"""The report channel: how a check run's results reach papayu (docs/DESIGN.md, "A verdict per
test").

Two pipes from the check to papayu, each read by a thread of papayu's with a byte bound. The
stream pipe is inherited by the check's processes: papayu's pytest plugin (pytest_plugin.py)
writes a record there per test as pytest reports it, and so does its unittest reporter
(unittest_results.py) as unittest does. The report pipe is held by the check's
first process alone (inside.py), which sends the report files once the command and everything
it started have ended. Both are read into memory: nothing the check writes is put on the
user's disk. papayu's helpers for the check live in a directory of their own (the slot's
`papayu-check/`), given to the check read-only: inside.py, the plugin with its entry point, and
the hook that gives jest and vitest their reports (node_reports.cjs).
"""

from __future__ import annotations

import hashlib
import json
import os
import py_compile
import select
import shutil
import sys
import threading
from dataclasses import dataclass, field
from pathlib import Path

from papayu_git import output
from papayu_git.check.results import inside

HELPERS = "papayu-check"  # in the slot; inside the sandbox at view.HELPERS_INSIDE
PLUGIN_DIR = "pytest"
PLUGIN_MODULE = "papayu_pytest_results"
PLUGIN_ENTRY_POINT = "papayu-results"  # `-p no:papayu-results` turns it off
INPUTS_MODULE = "papayu_pytest_inputs.py"  # fail first's part (pytest_inputs.py), imported by the plugin
SHIELD_MODULE = "papayu_shield.py"  # the runtime shield (shield.py), installed by the plugin or the unittest reporter
# What the plugin and the unittest reporter share: the stream's pipe and the shield's installation
# (in_process.py), and the reporting path each verifies around every test (reporting_path.py).
IN_PROCESS_MODULE = "papayu_in_process.py"
REPORTING_PATH_MODULE = "papayu_reporting_path.py"
SHIELD_DIR = "shield"  # in the report directory: what each process's shield refused (shield.SINK_DIR)
ORDER_FILE = "order.json"  # beside the plugin: the order a run is to run its tests in (pytest_inputs.Orderer)
INPUTS_DIR = "inputs"  # in the report directory: each pytest process's record of what its tests read
NODE_HOOK = "node_reports.cjs"  # jest's and vitest's reports, through NODE_OPTIONS (instrument.py)
NODE_TEST_REPORTER = "node_test_reporter.cjs"  # node --test's, named in NODE_OPTIONS
# papayu's files the check's own interpreter runs (copied into the helpers' directory, never
# imported by papayu): what they import is the check's environment's, not papayu's dependencies.
# unittest's reporter (unittest_results.py), loaded by papayu's start-up hook (sitecustomize.py),
# both beside the plugin on PYTHONPATH.
UNITTEST_MODULE = "papayu_unittest_results.py"
CHECK_SIDE_FILES = (
    "inside.py",
    "in_process.py",
    "pytest_plugin.py",
    "pytest_inputs.py",
    "reporting_path.py",
    "shield.py",
    "sitecustomize.py",
    "unittest_results.py",
    NODE_HOOK,
    NODE_TEST_REPORTER,
)
# The stream's second door, in the report directory (inside.py relays it): for runners whose
# launcher closed the inherited pipe (tox, nox).
STREAM_FIFO = "stream.fifo"
MAX_STREAM_BYTES = 64 * 1024 * 1024
# The reports, their frames and notes: the files are bounded by inside.py, this bounds the pipe.
MAX_CHANNEL_BYTES = inside.MAX_REPORTS_BYTES + inside.MAX_REPORT_FILES * 8192 + 65536
_FIELDS = {"F": 3, "U": 3, "N": 2, "E": 2}  # a frame's header: its kind, then its sizes (E: the exit code)
DRAIN_SEC = 10.0  # after the command ended, how long a pipe may take to reach its end


def write_helpers(slot: Path) -> Path:
    """The helpers' directory, written afresh (what a previous check did to it is gone)."""
    where = slot / HELPERS
    shutil.rmtree(where, ignore_errors=True)
    plugin = where / PLUGIN_DIR
    dist = plugin / f"{PLUGIN_MODULE}-1.dist-info"
    dist.mkdir(parents=True)
    here = Path(__file__).parent
    shutil.copyfile(here / "inside.py", where / "inside.py")
    shutil.copyfile(here / NODE_HOOK, where / NODE_HOOK)
    shutil.copyfile(here / NODE_TEST_REPORTER, where / NODE_TEST_REPORTER)
    shutil.copyfile(here / "pytest_plugin.py", plugin / f"{PLUGIN_MODULE}.py")  # not imported: pytest may be absent
    shutil.copyfile(here / "pytest_inputs.py", plugin / INPUTS_MODULE)
    shutil.copyfile(here / "shield.py", plugin / SHIELD_MODULE)
    shutil.copyfile(here / "in_process.py", plugin / IN_PROCESS_MODULE)
    shutil.copyfile(here / "reporting_path.py", plugin / REPORTING_PATH_MODULE)
    shutil.copyfile(here / "sitecustomize.py", plugin / "sitecustomize.py")
    shutil.copyfile(here / "unittest_results.py", plugin / UNITTEST_MODULE)
    (dist / "METADATA").write_text(f"Metadata-Version: 2.1\nName: {PLUGIN_MODULE}\nVersion: 1\n")
    (dist / "entry_points.txt").write_text(f"[pytest11]\n{PLUGIN_ENTRY_POINT} = {PLUGIN_MODULE}\n")
    _bytecode(plugin, slot / PYC_CACHE)
    return where


PYC_CACHE = "helpers-pyc"  # in the slot, outside what the check sees: the plugin compiled once per version


def _bytecode(plugin: Path, cache: Path) -> None:
    """The modules beside the plugin compiled, for a check whose Python is papayu's: the
    directory is read-only in the check, so every process would compile again what it imports
    of them (the start-up hook in every Python process; tens of ms of a small suite's run;
    docs/BENCHMARKS.md). Unchecked-hash bytecode, from a cache keyed by the source's digest:
    valid whatever the copies' times, ignored by any other Python version."""
    tag = sys.implementation.cache_tag
    if not tag:
        return
    for source in sorted(plugin.glob("*.py")):  # the plugin, the unittest reporter, the start-up hook and theirs
        data = source.read_bytes()
        cached = cache / f"{source.stem}.{hashlib.sha256(data).hexdigest()[:20]}.{tag}.pyc"
        if not cached.exists():
            cache.mkdir(parents=True, exist_ok=True)
            temporary = cached.with_name(f".{cached.name}.{os.getpid()}")
            py_compile.compile(
                str(source),
                cfile=str(temporary),
                doraise=False,
                invalidation_mode=py_compile.PycInvalidationMode.UNCHECKED_HASH,
            )
            if not temporary.exists():
                continue
            os.replace(temporary, cached)
        target = plugin / "__pycache__" / f"{source.stem}.{tag}.pyc"
        target.parent.mkdir(exist_ok=True)
        shutil.copyfile(cached, target)


@dataclass(frozen=True)
class PluginAsk:
    """What one run asks of papayu's pytest plugin beyond its results: fail first's part
    (pytest_inputs.py; docs/DESIGN.md, "Fail first"). The order only ever changes when a test
    runs, never whether its result counts: papayu judges the whole suite's results."""

    record: bool = False  # record what each test read (a base run)
    first: frozenset[str] = frozenset()  # node ids to run before the rest
    first_files: frozenset[str] = frozenset()  # test files whose every test runs first
    known_failing: frozenset[str] = frozenset()  # first-part tests whose failure does not stop the run
    stop: bool = False  # stop after the first part when one of its tests failed (not known failing)
    only: frozenset[str] | None = None  # run only these node ids (and ``only_files``' tests)
    only_files: frozenset[str] = frozenset()
    skip: frozenset[str] = frozenset()  # node ids not to run (the rest of a run whose first part ran)
    skip_files: frozenset[str] = frozenset()  # test files not to collect (all their tests ran)
    # The files of the run's tree that are not the tip's (docs/DESIGN.md, "The runtime shield"):
    # reaching for frames or objects is refused there, allowed (and said) in the tip's own files.
    changed: frozenset[str] = frozenset()
    code: frozenset[str] = frozenset()  # those of them that are the plan's code: no runner hook comes from there
    tip_sites: frozenset[str] = frozenset()  # where the tip's own run reached, allowed there (TestResults.reaching)

    @property
    def ordering(self) -> bool:
        return bool(self.first or self.first_files or self.only is not None or self.skip or self.skip_files)

    def plugin_config(self, helpers: Path, helpers_inside: str, root: str, report_dir: str) -> dict[str, object]:
        """The plugin's configuration for this ask; writes the order file into ``helpers``."""
        shield = {
            "root": root,
            "report_dir": report_dir,
            "changed": sorted(self.changed),
            "code": sorted(self.code),
            "sites": sorted(self.tip_sites),
        }
        config: dict[str, object] = {"root": root, "shield": shield}
        if self.record:
            config["inputs_dir"] = f"{report_dir}/{INPUTS_DIR}"
        if self.ordering:
            order = {
                "first": sorted(self.first),
                "first_files": sorted(self.first_files),
                "known_failing": sorted(self.known_failing),
                "stop": self.stop,
                "only": sorted(self.only) if self.only is not None else None,
                "only_files": sorted(self.only_files),
                "skip": sorted(self.skip),
                "skip_files": sorted(self.skip_files),
            }
            (helpers / PLUGIN_DIR / ORDER_FILE).write_text(json.dumps(order))
            config["order"] = f"{helpers_inside}/{PLUGIN_DIR}/{ORDER_FILE}"
        return config

    def report_globs(self) -> list[str]:
        """The files of the report directory the check's first process sends besides the
        runners' reports: every process's shield file, each pytest's inputs when recording."""
        return [f"{SHIELD_DIR}/*.jsonl", *([f"{INPUTS_DIR}/*.jsonl"] if self.record else [])]


def delivered_inputs(delivery: Delivery) -> bytes:
    """The inputs records each pytest process wrote (pytest_inputs.Recorder), one after another,
    each process's introduced by a line naming it (its unit numbers are its own)."""
    out = bytearray()
    prefix = INPUTS_DIR + "/"
    for name in sorted(n for n in delivery.files if n.startswith(prefix)):
        out += json.dumps({"process": name[len(prefix) :]}).encode() + b"\n" + delivery.files[name]
        if not out.endswith(b"\n"):
            out += b"\n"
    return bytes(out)


@dataclass
class Delivery:
    """What one run sent: the plugin's records, the reports, and what was wrong on the way."""

    stream: bytes = b""
    files: dict[str, bytes] = field(default_factory=dict)
    unreadable: list[str] = field(default_factory=list)  # reports there and not sent, and why
    notes: list[str] = field(default_factory=list)  # what the check did to its report directory
    errors: list[str] = field(default_factory=list)  # a channel that cannot be trusted
    ended: bool = False  # the first process sent its end: the command ran to its end


class _Drain(threading.Thread):
    """Reads a pipe to its end, keeping at most ``cap`` bytes (the rest is counted, not kept)."""

    def __init__(self, fd: int, cap: int) -> None:
        super().__init__(daemon=True)
        self.fd, self.cap = fd, cap
        self.data = bytearray()
        self.over = 0
        self.stop = threading.Event()
        output.start_thread(self)

    def run(self) -> None:
        while True:
            ready, _, _ = select.select([self.fd], [], [], 0.2)
            if not ready:
                if self.stop.is_set():
                    return
                continue
            chunk = os.read(self.fd, 65536)
            if not chunk:
                return
            room = self.cap - len(self.data)
            self.data += chunk[: max(room, 0)]
            self.over += max(len(chunk) - max(room, 0), 0)

    def finish(self, wait: float) -> bytes:
        self.join(timeout=wait)
        self.stop.set()
        self.join(timeout=1)
        return bytes(self.data)


class Channel:
    """The two pipes of one run of the check's command."""

    def __init__(self, helpers: Path, plugin: dict[str, object] | None = None) -> None:
        """``plugin``: more of the plugin's configuration (the selective check's: see asks())."""
        self.stream_r, self.stream_w = os.pipe()
        self.files_r, self.files_w = os.pipe()
        config = {"fd": self.stream_w, "ino": os.fstat(self.stream_w).st_ino, **(plugin or {})}
        (helpers / PLUGIN_DIR / f"{PLUGIN_MODULE}.json").write_text(json.dumps(config))
        self.drains: tuple[_Drain, _Drain] | None = None

    @property
    def pass_fds(self) -> tuple[int, int]:
        return (self.stream_w, self.files_w)

    def started(self) -> None:
        """The command runs: papayu's copies of the write ends go, so each pipe ends with the check."""
        for fd in (self.stream_w, self.files_w):
            os.close(fd)
        self.drains = (_Drain(self.stream_r, MAX_STREAM_BYTES), _Drain(self.files_r, MAX_CHANNEL_BYTES))

    def finish(self) -> Delivery:
        if self.drains is None:
            self.started()
        assert self.drains is not None
        stream, files = self.drains
        reports = files.finish(DRAIN_SEC)
        delivery = parse_reports(reports, over=files.over)
        # Unsandboxed, a process that left the check's group may hold the stream open: not waited for.
        delivery.stream = stream.finish(DRAIN_SEC if delivery.ended else 1.0)
        if stream.over:
            delivery.errors.append(f"pytest's result stream went over {MAX_STREAM_BYTES} bytes")
        for fd in (self.stream_r, self.files_r):
            os.close(fd)
        return delivery


def wrapper_argv(helpers_inside: str, config: dict[str, object]) -> list[str]:
    """The command line of the check's first process (inside.py); the command follows `--`."""
    python = os.path.realpath(sys.executable)
    return [python, "-I", "-S", f"{helpers_inside}/inside.py", json.dumps(config), "--"]


def plugin_path(helpers_inside: str, pythonpath: str) -> str:
    """PYTHONPATH with the plugin's directory last: it shadows nothing of the project's."""
    return os.pathsep.join(filter(None, (pythonpath, f"{helpers_inside}/{PLUGIN_DIR}")))


def node_options(helpers_inside: str, node_options: str, *, test_reporter: bool = False) -> str:
    """NODE_OPTIONS with papayu's hook required after what the project's environment has, and
    with ``test_reporter`` papayu's reporter for node --test (node_test_reporter.cjs)."""
    out = f"{node_options} --require {_quoted(f'{helpers_inside}/{NODE_HOOK}')}"
    if test_reporter:
        reporter = _quoted(f"{helpers_inside}/{NODE_TEST_REPORTER}")
        out += f" --test-reporter={reporter} --test-reporter-destination=stdout"
    return out.strip()


def _quoted(path: str) -> str:
    """A path as NODE_OPTIONS reads it: in double quotes where it has a space or a quote."""
    if " " not in path and '"' not in path:
        return path
    return '"' + path.replace("\\", "\\\\").replace('"', '\\"') + '"'


def parse_reports(data: bytes, *, over: int = 0) -> Delivery:
    """The frames inside.py wrote. They come from the check's first process alone, so anything
    out of shape (or a report named twice) means the channel cannot be trusted."""
    out = Delivery()
    at = 0
    while at < len(data):
        end = data.find(b"\n", at, at + 80)
        head = data[at:end].decode("ascii", "replace").split(" ") if end >= 0 else []
        if len(head) != _FIELDS.get(head[0] if head else "") or not all(p.isdigit() for p in head[1:]):
            out.errors.append(f"the report channel is garbled at byte {at}")
            return out
        at = end + 1
        if head[0] == "E":
            out.ended = True
            if at != len(data):
                out.errors.append("the report channel went on after its end")
            return out
        sizes = [int(p) for p in head[1:]]
        body = data[at : at + sum(sizes)]
        at += sum(sizes)
        if len(body) < sum(sizes):
            break
        _frame(out, head[0], body, sizes)
    if over:
        out.errors.append(f"the reports went over papayu's bound of {MAX_CHANNEL_BYTES} bytes")
    if not out.ended:
        out.notes.append("the check's reports did not arrive: its first process did not reach its end")
    return out


def _frame(out: Delivery, kind: str, body: bytes, sizes: list[int]) -> None:
    if kind == "N":
        out.notes.append(body.decode("utf-8", "replace"))
        return
    name = body[: sizes[0]].decode("utf-8", "replace")
    rest = body[sizes[0] :]
    if name in out.files or any(u.startswith(name + ": ") for u in out.unreadable):
        out.errors.append(f"the report channel sent {name} twice")
    elif kind == "F":
        out.files[name] = rest
    else:
        out.unreadable.append(f"{name}: {rest.decode('utf-8', 'replace')}")
