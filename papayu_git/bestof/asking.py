"""Asking the candidates' models: one thread each, since the time goes to waiting on HTTP
(docs/DESIGN.md, "Best of N").

Each candidate runs the same rounds as `fix` (the PLAN cycle, then the APPLY round when the plan
has no actions yet) through a client of its own: its model, its temperature, its approach. Every
request first passes the run's `Budget` (the deadline of --timeout, the tokens of
--budget-tokens), and what the model answered or why it failed is left in the candidate's
`Answer` for the session. Nothing here is printed: the threads run under the live table.
"""

from __future__ import annotations

import threading
import time
from dataclasses import dataclass, field, replace
from pathlib import Path
from typing import TYPE_CHECKING, Any

from papayu_git import output
from papayu_git.answers import response_of
from papayu_git.errors import PapayuError
from papayu_git.llm.client import ChatClient, ChatReply
from papayu_git.llm.config import Provider
from papayu_git.llm.planner import PlanRequest, make_plan

if TYPE_CHECKING:
    from papayu_git.bestof.sampling import Sample
    from papayu_git.llm.local import LocalServer
    from papayu_git.llm.routing import Route
    from papayu_git.plans import StoredPlan
    from papayu_git.protocol import Response

CHARS_PER_TOKEN = 4  # a request's prompt, estimated before the server counts it


@dataclass
class Answer:
    """One candidate's model side as it goes: filled by its thread, read once ``done`` is set."""

    sample: Sample
    model: str = ""  # the model the server serves, when the configuration named none
    plan: StoredPlan | None = None
    response: Response | None = None
    error: PapayuError | None = None
    tokens: int = 0
    started: float = field(default_factory=time.monotonic)
    done: threading.Event = field(default_factory=threading.Event)


class Budget:
    """The run's bounds, shared by the asking threads: no request starts after the deadline, nor
    when the tokens spent and those reserved by requests under way would pass --budget-tokens."""

    def __init__(self, tokens: int, deadline: float | None) -> None:
        self.tokens, self.deadline = tokens, deadline
        self.spent = self.reserved = 0
        self._lock = threading.Lock()

    def left_sec(self) -> float | None:
        return None if self.deadline is None else self.deadline - time.monotonic()

    def admit(self, estimate: int) -> None:
        left = self.left_sec()
        if left is not None and left <= 0:
            raise PapayuError("ERR_BEST_OF_TIMEOUT", "the run's --timeout passed before this request")
        with self._lock:
            if self.tokens and self.spent + self.reserved + estimate > self.tokens:
                raise PapayuError(
                    "ERR_BUDGET_EXHAUSTED",
                    f"a request of ~{estimate} tokens would pass --budget-tokens {self.tokens} "
                    f"({self.spent} spent, {self.reserved} reserved by requests under way)",
                )
            self.reserved += estimate

    def settle(self, estimate: int, used: int) -> None:
        with self._lock:
            self.reserved -= estimate
            self.spent += used


class MeteredClient(ChatClient):
    """A ChatClient whose every answer passes the run's budget and is counted for its candidate."""

    def __init__(self, answer: Answer, budget: Budget, server: LocalServer | None = None) -> None:
        config = answer.sample.config
        assert config is not None
        left = budget.left_sec()
        timeout = config.timeout_sec if left is None else max(1.0, min(config.timeout_sec, left))
        config = replace(config, temperature=answer.sample.temperature, timeout_sec=timeout)
        super().__init__(config.with_base_url(server.base_url) if server else config, server=server)
        self.answer, self.budget = answer, budget

    def complete(
        self,
        messages: list[dict[str, str]],
        response_format: dict[str, Any] | None,
        *,
        input_chars: int,
        max_tokens: int | None = None,
    ) -> ChatReply:
        estimate = max(1, input_chars // CHARS_PER_TOKEN)
        self.budget.admit(estimate)
        used = 0
        try:
            reply = super().complete(messages, response_format, input_chars=input_chars, max_tokens=max_tokens)
            used = reported_tokens(reply.usage) or estimate + len(reply.text) // CHARS_PER_TOKEN
            return reply
        finally:
            self.budget.settle(estimate, used)
            self.answer.tokens += used


def named_by_the_server(samples: list[Sample]) -> list[Sample]:
    """Samples whose configuration names no model, labelled with the one their server serves
    (asked once per server, before the table is drawn): the matrix shows the model that answers.
    A server that cannot say keeps the label; its candidate fails with the reason when asked.
    The embedded server is not running yet: its candidates are named when their thread asks it."""
    served: dict[str, str] = {}
    out = []
    for sample in samples:
        config = sample.config
        if config is None or config.model or config.provider is Provider.LOCAL:
            out.append(sample)
            continue
        if config.base_url not in served:
            try:
                with ChatClient(replace(config, timeout_sec=min(config.timeout_sec, 10.0))) as client:
                    served[config.base_url] = client.model()
            except PapayuError:
                served[config.base_url] = ""
        name = served[config.base_url]
        out.append(replace(sample, label=f"{config.provider.value}/{name}") if name else sample)
    return out


def reported_tokens(usage: dict[str, Any]) -> int:
    counts = [usage.get(k) for k in ("prompt_tokens", "completion_tokens")]
    return sum(c for c in counts if isinstance(c, int) and not isinstance(c, bool) and c > 0)


@dataclass(frozen=True)
class Question:
    """What every candidate is asked: the goal as routed, the log, the protocol, the target branch."""

    root: Path
    route: Route
    protocol: int
    log_text: str | None
    onto: str | None


def start(question: Question, answer: Answer, budget: Budget, server: LocalServer | None = None) -> None:
    """Ask in a daemon thread: one that still waits on a server past the deadline is left behind
    (its request has a timeout of its own) and never holds up the end of the run."""
    output.start_thread(threading.Thread(target=ask, args=(question, answer, budget, server), daemon=True))


def ask(question: Question, answer: Answer, budget: Budget, server: LocalServer | None = None) -> None:
    with output.quiet():
        try:
            if answer.sample.error is not None:
                raise answer.sample.error
            with MeteredClient(answer, budget, server) as client:
                answer.model = client.model()  # the real name for the matrix (asked once, cached)
                request = PlanRequest(
                    question.route.goal,
                    question.route.prompt_mode,
                    question.protocol,
                    question.log_text,
                    lens=answer.sample.lens,
                )
                outcome = make_plan(question.root, request, client)
                answer.plan, answer.response = outcome.plan, outcome.response
                if not outcome.response.is_no_changes:
                    answer.plan, answer.response = response_of(
                        question.root, outcome.plan, question.protocol, question.onto, client
                    )
        except PapayuError as exc:
            answer.error = exc
        except Exception as exc:  # a bug in one candidate is that candidate's failure, shown in the matrix
            answer.error = PapayuError("ERR_INTERNAL", f"{type(exc).__name__}: {exc}")
        finally:
            answer.done.set()
