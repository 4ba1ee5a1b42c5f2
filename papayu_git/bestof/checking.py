"""From an answer to a verdict: the candidate's tree (identical trees are checked once), then its
transaction in a child process (docs/DESIGN.md, "Best of N").

The tree is built here, in memory and in the object store only (transaction.prepare, then
objects.build_tree): two answers that read differently but make the same tree cost one check.
Each check is `python -m papayu_git.bestof.child` in a session of its own, so that stopping one
(--first-green, --timeout, Ctrl-C) is one SIGTERM, which the CLI already treats like Ctrl-C: its
check's process group is killed and its transaction rolls back.
"""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
import time
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING, Any

from papayu_git.diffs import numstat_files
from papayu_git.git import run_git
from papayu_git.objects import build_tree
from papayu_git.transaction import prepare

if TYPE_CHECKING:
    import pygit2

    from papayu_git.landing import Target
    from papayu_git.plans import StoredPlan
    from papayu_git.protocol import Response

STOP_GRACE_SEC = 30.0  # a stopped child rolls back within this, else it is killed


@dataclass(frozen=True)
class Shape:
    tree: str  # the candidate's tree: what decides whether two candidates are the same
    files: int
    added: int
    deleted: int

    @property
    def lines(self) -> int:
        return self.added + self.deleted


def shape(repo: pygit2.Repository, plan: StoredPlan, response: Response, target: Target) -> Shape | None:
    """The tree the transaction would commit on ``target`` and its size; None when it is the tip's.
    Raises what the transaction would refuse the answer with (validation, bases)."""
    prepared = prepare(repo, plan, response, target)
    tree = str(build_tree(prepared.base, prepared.changes))
    base = str(prepared.base.tree.id)
    if tree == base:
        return None
    args = ["diff", "--no-ext-diff", "--no-textconv", "--no-renames", "--numstat", "-z", base, tree]
    files = numstat_files(str(run_git(args, cwd=repo.workdir).stdout))
    added = sum(f["added"] or 0 for f in files)
    deleted = sum(f["deleted"] or 0 for f in files)
    return Shape(tree, len(files), added, deleted)


@dataclass(frozen=True)
class Spec:
    """What the child needs to run one candidate's transaction."""

    root: str
    plan_id: str
    branch: str  # papayu/<branch>: `<run>/<i>`
    tip: str  # the run's pinned tip
    check: str | None
    onto: str | None
    yes: bool  # deletions confirmed (-y, or a question on a terminal before any landing)
    allow_test_edits: bool
    run_proposed: bool


class Child:
    """One candidate's check in a child process; its result is the transaction's, as JSON."""

    def __init__(self, spec: Spec, logs: Path, timeout_sec: float | None) -> None:
        logs.mkdir(parents=True, exist_ok=True)
        stem = spec.branch.replace("/", "-")
        self.out_path, self.err_path = logs / f"{stem}.json", logs / f"{stem}.log"
        self.first_path = logs / f"{stem}.first.json"  # what its check's first part found (phases.py)
        env = dict(os.environ)
        if timeout_sec is not None:  # the run's deadline bounds the check too
            env["PAPAYU_CHECK_TIMEOUT_SEC"] = str(max(1, int(timeout_sec)))
        with open(self.out_path, "wb") as out, open(self.err_path, "wb") as err:
            self.proc = subprocess.Popen(
                [sys.executable, "-m", "papayu_git.bestof.child"],
                cwd=spec.root,
                stdin=subprocess.PIPE,  # the spec (the check command among it) stays out of `ps`
                stdout=out,
                stderr=err,
                env=env,
                start_new_session=True,  # Ctrl-C reaches the session only; it stops each child once
            )
        assert self.proc.stdin is not None
        # The spec on one line; the pipe stays open for the answer after the first part.
        self.proc.stdin.write(json.dumps({**spec.__dict__, "first_path": str(self.first_path)}).encode() + b"\n")
        self.proc.stdin.flush()
        self.stopped = False

    def first_part(self) -> dict[str, Any] | None:
        """What the check's first part found, once the child wrote it and waits for an answer."""
        try:
            data = json.loads(self.first_path.read_text(encoding="utf-8"))
        except (OSError, ValueError):
            return None
        return data if isinstance(data, dict) else None

    def answer(self, what: str) -> None:
        """ "go" (the flaky re-run and the rest) or "done" (end as it is), to a child waiting after
        its first part."""
        assert self.proc.stdin is not None
        try:
            self.proc.stdin.write(what.encode() + b"\n")
            self.proc.stdin.flush()
        except (BrokenPipeError, OSError):
            pass

    def poll(self) -> dict[str, Any] | None:
        """None while it runs; then the transaction's result (or the refusal) as the child said it."""
        if self.proc.poll() is None:
            return None
        if self.proc.stdin is not None and not self.proc.stdin.closed:
            self.proc.stdin.close()
        try:
            data = json.loads(self.out_path.read_text(encoding="utf-8"))
        except (OSError, ValueError):
            data = None
        if isinstance(data, dict):
            return data
        tail = self.err_path.read_text(encoding="utf-8", errors="replace").strip().splitlines()[-3:]
        reason = f"the candidate's check ended with exit {self.proc.returncode} and no result: {' / '.join(tail)}"
        return {"ok": False, "state": "interrupted" if self.stopped else "failed", "errors": [_error(reason)]}

    def stop(self) -> None:
        """SIGTERM once: the child kills its check and rolls back."""
        if self.proc.poll() is None and not self.stopped:
            self.stopped = True
            try:
                os.kill(self.proc.pid, signal.SIGTERM)
            except ProcessLookupError:
                pass

    def wait(self, until: float) -> None:
        """Wait for a stopped child until ``until`` (monotonic), then kill it."""
        try:
            self.proc.wait(timeout=max(0.0, until - time.monotonic()))
        except subprocess.TimeoutExpired:
            self.proc.kill()
            self.proc.wait()


def _error(reason: str) -> dict[str, str]:
    return {"code": "ERR_INTERNAL", "path": "", "reason": reason, "hint": "See the candidate's log named above."}
