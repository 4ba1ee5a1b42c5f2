"""One best-of run: N candidates for one pinned tip, asked, checked, ranked (docs/DESIGN.md,
"Best of N").

The models are asked in threads; each answer becomes a tree as soon as it arrives, a new tree is
checked in a child process (at most `papayu.candidates.checks` at once, every one against the one
base run of the tip, which base.py computes once under its lock), a tree seen before is not
checked again. Until the winner lands nothing touches the user's branch, index or work tree; a
Ctrl-C (or SIGTERM) stops every child once, waits for their rollbacks and deletes every ref of
the run. `decide.py` takes it from there: the ranking, the judge, the landing.
"""

from __future__ import annotations

import contextlib
import os
import time
from collections import deque
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING, Any

from papayu_git import locks, output, settings
from papayu_git.bestof import asking, checking, matrix, phases, runs
from papayu_git.bestof.matrix import Row
from papayu_git.bestof.sampling import samples
from papayu_git.errors import PapayuError
from papayu_git.git import papayu_dir
from papayu_git.housekeeping import clear_stale
from papayu_git.landing import resolve_target
from papayu_git.llm.config import Provider
from papayu_git.objects import delete_branch
from papayu_git.repository import open_repo
from papayu_git.traces import now_iso

if TYPE_CHECKING:
    import pygit2

    from papayu_git.bestof.sampling import Sample
    from papayu_git.landing import Target
    from papayu_git.llm.local import LocalServer

POLL_SEC = 0.1
SKIP_CODES = frozenset({"ERR_BUDGET_EXHAUSTED", "ERR_BEST_OF_TIMEOUT"})


@dataclass(frozen=True)
class Options:
    count: int
    check: str | None = None
    onto: str | None = None
    yes: bool = False
    review: bool = False
    allow_test_edits: bool = False
    run_proposed: bool = False
    first_green: bool = False
    budget_tokens: int = 0
    timeout_sec: float = 0.0
    as_json: bool = False


class Session:
    """Asks, checks and ranks; the record (`runs.py`) is saved at each step that matters."""

    def __init__(self, root: Path, question: asking.Question, options: Options) -> None:
        self.root, self.question, self.options = root, question, options
        self.repo: pygit2.Repository = open_repo(root)
        self.pdir = papayu_dir(self.repo)
        clear_stale(self.repo, self.pdir)
        self.target: Target = resolve_target(self.repo, options.onto)  # the tip every candidate is built on
        self.run_id = runs.new_id()
        self.samples = asking.named_by_the_server(samples(root, options.count))
        self.rows = [Row(s.index, s.label, s.temperature, s.lens) for s in self.samples]
        self.started = time.monotonic()
        deadline = self.started + options.timeout_sec if options.timeout_sec else None
        self.budget = asking.Budget(options.budget_tokens, deadline)
        self.answers = [asking.Answer(s) for s in self.samples]
        self.trees: dict[str, int] = {}  # tree id -> the candidate checking it
        self.queue: deque[Row] = deque()
        self.children: dict[int, checking.Child] = {}
        self.stop_reason: PapayuError | None = None
        self.record: dict[str, Any] = {
            "id": self.run_id,
            "goal": question.route.goal,
            "target": self.target.branch,
            "tip": self.target.tip,
            "created_at": now_iso(),
            "state": "running",
            "options": {"candidates": options.count, "first_green": options.first_green,
                        "budget_tokens": options.budget_tokens, "timeout_sec": options.timeout_sec},
        }  # fmt: skip

    # --- the run --------------------------------------------------------------------------------
    def gather(self) -> None:
        """Ask every candidate and check every new tree, until all have ended (or the run stops)."""
        self.save()
        with contextlib.ExitStack() as stack, output.live() as update:
            server = self._local_server(stack)
            for answer in self.answers:  # the embedded server only for the candidates of provider local
                asking.start(self.question, answer, self.budget, server if _local(answer.sample) else None)
            while any(row.state in matrix.BUSY for row in self.rows):
                self._take_answers()
                self._collect()
                self._phases()
                self._start_checks()
                self._bound()
                update(matrix.table(self.rows))
                time.sleep(POLL_SEC)
            update(matrix.table(self.rows))

    def abort(self, why: str) -> None:
        """Ctrl-C or SIGTERM: every child stopped once and waited for, every ref of the run gone."""
        self._stop_all(PapayuError("ERR_INTERRUPTED", why))
        runs.drop(self.repo, self.pdir, self.run_id)
        for row in self.rows:
            row.kept = False
        self.save("landed" if self.record.get("landed") else "interrupted")  # a landing stays one

    def save(self, state: str | None = None) -> None:
        if state:
            self.record["state"] = state
        self.record["candidates"] = [row.to_dict() for row in self.rows]
        self.record["samples"] = [s.to_dict() for s in self.samples]
        runs.save(self.pdir, self.record)

    # --- steps ----------------------------------------------------------------------------------
    def _local_server(self, stack: contextlib.ExitStack) -> LocalServer | None:
        if not any(_local(s) for s in self.samples):
            return None
        from papayu_git.llm.local import running_server

        return stack.enter_context(running_server(str(self.root)))

    def _take_answers(self) -> None:
        for row, answer in zip(self.rows, self.answers, strict=True):
            if row.state == matrix.ASKING:
                row.tokens, row.seconds = answer.tokens, time.monotonic() - answer.started
                if answer.model and answer.sample.config is not None:  # asked from the server: its real name
                    row.model = f"{answer.sample.config.provider.value}/{answer.model}"
                if answer.done.is_set():
                    self._answered(row, answer)
                    self.save()

    def _answered(self, row: Row, answer: asking.Answer) -> None:
        row.plan_id = answer.plan.id if answer.plan else ""
        if answer.error is not None:
            code = answer.error.code
            if code in SKIP_CODES:
                row.failed(matrix.SKIPPED, answer.error)
            else:  # the model's own failure, or an answer the transaction would refuse
                row.failed(matrix.MODEL_FAILED if code.startswith("ERR_LLM") else matrix.INVALID, answer.error)
            return
        assert answer.plan is not None and answer.response is not None
        try:
            shape = (
                checking.shape(self.repo, answer.plan, answer.response, self.target)
                if answer.response.actions
                else None
            )
        except PapayuError as exc:
            row.failed(matrix.INVALID, exc)
            return
        if shape is None:
            row.state, row.reason = matrix.NO_CHANGES, "the answer changes nothing"
            return
        row.tree, row.files, row.added, row.deleted = shape.tree, shape.files, shape.added, shape.deleted
        if shape.tree in self.trees:
            row.state, row.duplicate_of = matrix.DUPLICATE, self.trees[shape.tree]
            return
        self.trees[shape.tree] = row.index
        row.state = matrix.QUEUED
        self.queue.append(row)

    def _start_checks(self) -> None:
        # A candidate waiting after its first part holds a checkout, not a CPU.
        while self.queue and self._running() < self._parallel():
            row = self.queue.popleft()
            row.branch = f"papayu/{runs.branch_key(self.run_id, row.index)}"
            spec = checking.Spec(
                str(self.root),
                row.plan_id,
                runs.branch_key(self.run_id, row.index),
                self.target.tip,
                self.options.check,
                self.options.onto,
                True,  # deletions: the winner's diff is shown (or -y given) before anything lands
                self.options.allow_test_edits,
                self.options.run_proposed,
            )
            self.children[row.index] = checking.Child(
                spec, runs.runs_dir(self.pdir) / self.run_id, self.budget.left_sec()
            )
            row.state = matrix.CHECKING

    def _running(self) -> int:
        return sum(1 for i in self.children if not (self.rows[i - 1].state == matrix.FIRST_PART and not self._going(i)))

    def _going(self, index: int) -> bool:
        return self.rows[index - 1].first.get("answer") == phases.GO

    def _phases(self) -> None:
        """After the first parts: the rest for the candidate that may still rank best, the end for
        the ones that can no longer win (phases.py)."""
        judge = bool(settings.get("candidates_judge", str(self.root)).strip())
        for step in phases.steps(
            self.rows, self.question.route.goal, first_green=self.options.first_green, judge=judge
        ):
            row, child = self.rows[step.index - 1], self.children.get(step.index)
            if child is None:
                continue
            row.first["answer"] = step.what
            if step.what == phases.STOP:
                row.first["stopped"] = step.why
                child.stop()
            else:
                child.answer(step.what)
            self.save()

    def _parallel(self) -> int:
        configured = settings.get_int("candidates_checks", str(self.root))
        # A check waits on more than the CPU (its sandbox, the runner's start-up, the disk): two per CPU
        # finished four candidates a quarter sooner than one per CPU did (bench/bestof_bench.py).
        return configured if configured > 0 else 2 * (os.cpu_count() or 1)

    def _collect(self) -> None:
        for index, child in list(self.children.items()):
            row = self.rows[index - 1]
            row.seconds = time.monotonic() - self.answers[index - 1].started
            result = child.poll()
            if result is None:
                found = child.first_part() if row.state == matrix.CHECKING else None
                if found is not None:  # its first part ran: it waits to be ranked (phases.py)
                    row.state, row.first = matrix.FIRST_PART, found
                    self.save()
                continue
            del self.children[index]
            row.take_result(result, self.question.route.goal)
            if row.first.get("stopped") and row.state == matrix.STOPPED:  # stopped by phases.py, not interrupted
                row.code, row.reason = "", f"not checked further: {row.first['stopped']}"
            for twin in self.rows:
                if twin.duplicate_of == index:
                    twin.copy_of(row)
            self.save()

    def _bound(self) -> None:
        """--first-green and --timeout end the run early: what is still going is stopped."""
        if self.options.first_green and any(row.state == matrix.GREEN for row in self.rows):
            first = min(row.index for row in self.rows if row.state == matrix.GREEN)
            self._stop_all(PapayuError("ERR_INTERRUPTED", f"--first-green: #{first} passed the gate first"))
        left = self.budget.left_sec()
        if left is not None and left <= 0:
            self._stop_all(PapayuError("ERR_BEST_OF_TIMEOUT", f"--timeout {self.options.timeout_sec:g}s passed"))

    def _stop_all(self, why: PapayuError) -> None:
        self.stop_reason = self.stop_reason or why
        for child in self.children.values():
            child.stop()
        until = time.monotonic() + checking.STOP_GRACE_SEC
        for index, child in self.children.items():
            child.wait(until)
            delete_branch(self.repo, runs.branch_key(self.run_id, index))  # gone also if it was killed
        for row in self.rows:
            if row.state in matrix.BUSY:
                row.failed(matrix.STOPPED, why)
                row.kept = False
        self.children.clear()
        self.queue.clear()
        self.save()


def _local(sample: Sample) -> bool:
    return sample.config is not None and sample.config.provider is Provider.LOCAL


def lock(session: Session) -> Any:
    """The run's lock: while it is held the run is alive; a dead holder's candidates roll back."""
    return locks.held(runs.lock_path(session.pdir, session.run_id), wait_sec=0, kind="bestof", run=session.run_id)
