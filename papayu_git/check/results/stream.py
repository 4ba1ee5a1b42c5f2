"""pytest's results as papayu's plugin streamed them (pytest_plugin.py), and whether pytest's
JUnit file, read after the run, still says the same (docs/DESIGN.md, "A verdict per test").

A record comes per test report as pytest produces it; the file is what was on disk when the
check's processes were gone. Code under test runs in pytest's process and can rewrite the file
in between (an atexit handler, a background process): the two then differ, and the run is not
trusted. Sessions nested in a test (a pytest started by a test, through its pid's ancestors)
are not the check's tests and are left out.
"""

from __future__ import annotations

import json
from dataclasses import dataclass, field
from typing import Any

from papayu_git.check.results.outcome import RANK, CaseResult, Outcome

SHOWN = 3  # differences named when a report disagrees with the stream


@dataclass
class Attempt:
    """One test's reports: its phases' outcomes, the message of the failing one."""

    test_id: str
    phases: dict[str, str] = field(default_factory=dict)
    message: str = ""
    junit_name: tuple[str, str] | None = None
    subtest_failed: bool = False  # a subtest of it failed: the test fails, whatever its own call says

    @property
    def outcome(self) -> Outcome | None:
        """pytest's verdict on the test, as its JUnit file gives it; None when it never got one
        (the run stopped inside it)."""
        get = self.phases.get
        if get("collect"):
            return Outcome.ERROR if get("collect") == "failed" else Outcome.SKIPPED
        if get("call") == "failed" or (self.subtest_failed and get("call") in ("passed", "skipped")):
            return Outcome.FAILED
        if "failed" in (get("setup"), get("teardown")):
            return Outcome.ERROR
        if get("call") == "passed":
            return Outcome.PASSED
        if "skipped" in (get("setup"), get("call")):
            return Outcome.SKIPPED
        return None


@dataclass
class Session:
    key: str
    pid: int
    ancestors: tuple[int, ...]
    junit: str  # the JUnit file it writes, as pytest resolved it ("" for none)
    runner: str = "pytest"  # or "unittest" (unittest_results.py)
    ended: bool = False
    verified: int | None = None  # tests whose reporting path papayu's shield verified (None: no shield)
    shield: list[str] = field(default_factory=list)  # what the shield refused or found changed
    allowed: list[str] = field(default_factory=list)  # the tip's own code reaching, allowed
    order: dict[str, Any] = field(default_factory=dict)  # papayu's fail-first order: "first", "total", "stopped"
    attempts: list[Attempt] = field(default_factory=list)
    current: dict[str, Attempt] = field(default_factory=dict)
    reruns: set[str] = field(default_factory=set)

    def add(self, record: dict[str, Any]) -> None:
        test_id, when, outcome = str(record["id"]), str(record["when"]), str(record["outcome"])
        if outcome == "rerun":  # pytest-rerunfailures: this attempt is replaced by the next
            self.reruns.add(test_id)
            return
        attempt = self.current.get(test_id)
        if record.get("subtest") and attempt is not None and "call" not in attempt.phases:
            # A subtest reports inside its test, under its id, before the test's own call: it can
            # only fail the test (a subtest that passed or skipped says nothing of it).
            if outcome == "failed":
                attempt.subtest_failed = True
                attempt.message = attempt.message or str(record.get("message") or "")
            return
        if attempt is None or when in attempt.phases:
            if attempt is not None and test_id in self.reruns:
                self.attempts.remove(attempt)
                self.reruns.discard(test_id)
            attempt = Attempt(test_id)  # a second one, not a rerun: a collision, said by Collected
            self.attempts.append(attempt)
            self.current[test_id] = attempt
        attempt.phases[when] = outcome
        if outcome == "failed" and not attempt.message:
            attempt.message = str(record.get("message") or "")
        if isinstance(record.get("classname"), str) and isinstance(record.get("name"), str):
            attempt.junit_name = (record["classname"], record["name"])

    def cases(self) -> list[CaseResult]:
        return [CaseResult(a.test_id, o, a.message) for a in self.attempts if (o := a.outcome) is not None]

    def unverified(self) -> int:
        """Tests reported as called whose reporting path the shield did not verify before."""
        if self.verified is None:
            return 0
        return max(sum(1 for a in self.attempts if "call" in a.phases) - self.verified, 0)


@dataclass
class Stream:
    sessions: list[Session] = field(default_factory=list)  # the check's own, in order
    garbled: int = 0  # lines that are no record of an open session

    def streamed(self, runner: str = "pytest") -> bool:
        """``runner`` ran with papayu's reporter and reported: a session ended, or a test was reported."""
        return any(s.runner == runner and (s.ended or s.attempts) for s in self.sessions)


def read_stream(data: bytes) -> Stream:
    out = Stream()
    open_sessions: dict[str, Session] = {}
    nested: set[str] = set()
    for line in data.splitlines():
        try:
            record = json.loads(line)
            key, kind = str(record["session"]), record["kind"]
        except (ValueError, KeyError, TypeError):
            out.garbled += 1
            continue
        if key in nested:
            continue
        try:
            if kind == "start" and key not in open_sessions:
                session = Session(
                    key,
                    int(record["pid"]),
                    tuple(int(p) for p in record["ancestors"]),
                    str(record["junit"]),
                    "unittest" if record.get("runner") == "unittest" else "pytest",
                )
                # Inside an open session of the check's (a test running a runner): not the check's.
                if any(s.pid in (session.pid, *session.ancestors) and not s.ended for s in out.sessions):
                    nested.add(key)
                    continue
                open_sessions[key] = session
                out.sessions.append(session)
            elif kind == "test" and key in open_sessions and not open_sessions[key].ended:
                open_sessions[key].add(record)
            elif kind == "end" and key in open_sessions and not open_sessions[key].ended:
                open_sessions[key].ended = True
                if "verified" in record:
                    open_sessions[key].verified = int(record["verified"])
            elif kind in SHIELD_KINDS and key in open_sessions and not open_sessions[key].ended:
                said = shield_line(record)
                (open_sessions[key].allowed if kind == "allowed" else open_sessions[key].shield).append(said)
            elif kind == "order" and key in open_sessions and not open_sessions[key].ended:
                open_sessions[key].order.update(_order(record))
            else:
                out.garbled += 1
        except (ValueError, KeyError, TypeError):
            out.garbled += 1
    return out


SHIELD_KINDS = ("refused", "changed", "allowed")


def shield_line(record: dict[str, Any]) -> str:
    """One record of papayu's shield (results/shield.py) as the verdict says it."""
    what, where, test = str(record.get("what") or "?"), str(record.get("where") or ""), str(record.get("test") or "")
    kind = str(record.get("kind"))
    said = f"{where}: {what}" if kind != "changed" else f"{what} (seen at {where})" if where else what
    return said + (f" (in {test})" if test and test != where else "")


@dataclass
class ShieldFiles:
    """What every process's shield wrote to its file in the report directory."""

    refused: list[str] = field(default_factory=list)  # refusals and changes: the run is not trusted
    allowed: list[str] = field(default_factory=list)  # the tip's own code reaching, allowed
    sites: list[str] = field(default_factory=list)  # where it reached ("file::function::event")
    support: list[str] = field(default_factory=list)  # files the run loaded as test support


def read_shield_files(files: dict[str, bytes], prefix: str) -> ShieldFiles:
    """The refusals and changes, the tip's own allowed reaches and their sites, and the files
    the runner loaded as test support (its plugins and fixtures' modules), that every process's
    shield wrote to its file in the report directory (xdist's workers have no stream)."""
    out = ShieldFiles()
    for name in sorted(n for n in files if n.startswith(prefix)):
        for line in files[name].splitlines():
            try:
                record = json.loads(line)
                kind = record["kind"]
            except (ValueError, KeyError, TypeError):
                out.refused.append(f"{name}: a line that is no record of papayu's shield")
                continue
            if kind in SHIELD_KINDS:
                (out.allowed if kind == "allowed" else out.refused).append(shield_line(record))
            if kind == "allowed" and isinstance(record.get("site"), str):
                out.sites.append(record["site"])
            if kind == "support" and isinstance(record.get("files"), list):
                out.support.extend(str(f) for f in record["files"][:MAX_SUPPORT_FILES])
    for listing in (out.refused, out.allowed, out.sites, out.support):
        listing[:] = dict.fromkeys(listing)
    return out


MAX_SUPPORT_FILES = 2000  # per process's record


def by_junit_name(session: Session) -> dict[tuple[str, str], Outcome] | None:
    """Each test's outcome under the classname and name pytest's JUnit file gives it (the plugin
    sends them, so the file's ids need no rebuilding); None when a record came without them."""
    out: dict[tuple[str, str], Outcome] = {}
    for attempt in session.attempts:
        outcome = attempt.outcome
        if outcome is None:
            continue
        if attempt.junit_name is None:
            return None
        worst(out, attempt.junit_name, outcome)
    return out


def differences(streamed: dict[Any, Outcome], reported: dict[Any, Outcome]) -> list[str]:
    """How a report differs from the stream, the first few named; empty when it says the same
    of the same tests."""
    differ = []
    for key in sorted(streamed.keys() | reported.keys(), key=str):
        was, now = streamed.get(key), reported.get(key)
        if was != now:
            name = "::".join(filter(None, key)) if isinstance(key, tuple) else str(key)
            differ.append(f"{name}: streamed {was or 'nothing'}, the report says {now or 'nothing'}")
    if len(differ) > SHOWN:
        differ[SHOWN:] = [f"... and {len(differ) - SHOWN} more"]
    return differ


def worst(into: dict[Any, Outcome], key: Any, outcome: Outcome) -> None:
    if key not in into or RANK[outcome] > RANK[into[key]]:
        into[key] = outcome


def _order(record: dict[str, Any]) -> dict[str, Any]:
    """What the plugin said of the fail-first order (pytest_inputs.Orderer): how many tests it ran
    first of how many, and why it stopped after them. Only ever said, never trusted: papayu judges
    the results (a test not run is missing unless a failure already rejects the plan)."""
    out: dict[str, Any] = {}
    for name in ("first", "total"):
        if name in record:
            out[name] = int(record[name])
    if "stopped" in record:
        out["stopped"] = str(record["stopped"])[:200]
    return out
