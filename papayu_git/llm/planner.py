"""The PLAN cycle of `git papayu plan` (docs/DESIGN.md, "Context", "Providers" and "Goals, rounds and
the behaviour contract").

context → system prompt (mode, protocol, ENGINEERING_MEMORY) → model → local validation
(one repair) → up to 2 rounds of context_requests → behaviour checks → stored plan + trace.
"""

from __future__ import annotations

import time
from dataclasses import dataclass, field, replace
from pathlib import Path
from typing import Any

from papayu_git import output, plans, settings, traces
from papayu_git import research as online_research
from papayu_git.context import ContextSession
from papayu_git.context.diet import TokenBudget
from papayu_git.errors import PapayuError
from papayu_git.git import papayu_dir, run_git
from papayu_git.llm import behaviour
from papayu_git.llm import window as windows
from papayu_git.llm.client import ChatClient
from papayu_git.llm.conversation import CallLog, Conversation
from papayu_git.llm.prompts import PromptMode, context_round_message, system_prompt, user_message
from papayu_git.memory import apply_memory_patch, build_memory_block, memory_value
from papayu_git.protocol import Mode, Response
from papayu_git.repository import open_repo
from papayu_git.secrets import safe_text, scrub_api_key

MAX_ROUNDS = 2  # context_requests are fulfilled in at most 2 rounds: each costs a model call
# In a known window the first message's context takes at most half of what is free: the context
# rounds and the repair share the other half (docs/DESIGN.md, "The model's window").
FIRST_SHARE = 2


@dataclass(frozen=True)
class PlanRequest:
    goal: str
    prompt_mode: PromptMode = PromptMode.FIX_PLAN
    protocol: int = 2
    log_text: str | None = None
    accept_memory: bool = False
    online_context: str = ""  # an ONLINE_CONTEXT block (research.Research.context_block), from --use-research
    previous_attempt: str = ""  # a PREVIOUS ATTEMPT block: a plan whose check failed (retry.py)
    retry_of: str = ""  # that plan's id, recorded in the new plan
    lens: str = ""  # the approach a best-of candidate is asked to take (bestof/sampling.py)


@dataclass(frozen=True)
class PlanOutcome:
    plan: plans.StoredPlan
    response: Response
    path: Path
    warnings: tuple[str, ...] = ()
    flags: tuple[dict[str, str], ...] = ()
    timings: dict[str, float] = field(default_factory=dict)


@dataclass
class _Cycle:
    """What one PLAN cycle collected along the way (mutable accumulator)."""

    session: ContextSession
    log: CallLog = field(default_factory=CallLog)
    messages: list[str] = field(default_factory=list)  # user messages = the plan's context
    context_sec: float = 0.0
    refused_requests: int = 0
    warnings: list[str] = field(default_factory=list)
    storage_started: float = 0.0
    trace_id: str = ""
    online_query: str = ""  # what the model asked to look up online (NEEDS_ONLINE_RESEARCH / ONLINE: search)
    online: dict[str, Any] = field(default_factory=dict)  # the online_fallback_* trace fields
    shown: list[dict[str, Any]] = field(default_factory=list)  # each round's context, outlined (prompt_outline)

    def render(self, blocks: Any, budget: TokenBudget | None) -> str:
        """The round's context as the model reads it, its outline kept for the trace."""
        text = str(_timed_context(self, self.session.render, blocks, budget))
        diet = self.session.last_diet
        if diet is not None:
            self.shown.append(
                {
                    "blocks": [_outlined(b) for b in diet.blocks],
                    "dropped": [f"{b.kind.value} {b.path or b.title}" for b in diet.dropped],
                }
            )
        return text

    def prompt_outline(self) -> dict[str, Any]:
        """What the model was shown, for `trace show`: each message's size and each round's
        context blocks (their kind, path, size, whether the diet cut them), never their text: the
        files are the base commit's, and a trace keeps no copy of the user's code."""
        return {"messages_chars": [len(m) for m in self.messages], "rounds": self.shown}


def _outlined(block: Any) -> dict[str, Any]:
    flags = {k: True for k in ("truncated", "requested", "dirty") if getattr(block, k)}
    return {"kind": block.kind.value, "name": block.path or block.title, "chars": len(block.text), **flags}


def base_of(repo_root: Path) -> tuple[str, str]:
    """(commit, branch) the plan is made against; branch is '' on a detached HEAD."""
    head = run_git(["rev-parse", "--verify", "-q", "HEAD^{commit}"], cwd=repo_root, check=False)
    if head.returncode != 0:
        raise PapayuError("ERR_NO_COMMITS", "the repository has no commit yet")
    branch = run_git(["symbolic-ref", "--short", "-q", "HEAD"], cwd=repo_root, check=False).stdout.strip()
    return head.stdout.strip(), branch


def memory_block(repo_root: Path) -> str:
    """The ENGINEERING_MEMORY block (docs/DESIGN.md, "Memory") that follows the system prompt."""
    return build_memory_block(repo_root)


def ask_budget(repo_root: Path) -> int:
    """How many questions the model may ask, 0..2: memory user.ask_budget, else PAPAYU_LLM_ASK_BUDGET."""
    value = memory_value(repo_root, "user.ask_budget")
    if not isinstance(value, int) or isinstance(value, bool):
        value = settings.get_int("llm_ask_budget", str(repo_root))
    return max(0, min(2, value))


def _shape(mode: PromptMode) -> str:
    if mode is PromptMode.FIX_PLAN:
        return "plan"
    return "apply" if mode.round is Mode.APPLY else "response"


def _timed_context(cycle: _Cycle, fn: Any, *args: Any) -> Any:
    started = time.perf_counter()
    try:
        return fn(*args)
    finally:
        cycle.context_sec += time.perf_counter() - started


def _converse(cycle: _Cycle, conv: Conversation, first: str, round_mode: Mode) -> Response:
    cycle.messages.append(first)
    response = _take_online_requests(cycle, conv.ask(first))
    rounds = 0
    while response.context_requests and rounds < MAX_ROUNDS:
        rounds += 1
        output.info(f"papayu: the model asks for more context (round {rounds} of {MAX_ROUNDS})")
        blocks = _timed_context(cycle, cycle.session.fulfil, list(response.context_requests))
        room = windows.room(conv.client.window, conv.messages, context_round_message("", rounds, MAX_ROUNDS))
        text = cycle.render(blocks, room.budget() if room else None)
        if room:
            room.check(text)
        message = context_round_message(text, rounds, MAX_ROUNDS)
        cycle.messages.append(message)
        conv.read_files = dict(cycle.session.files_shown)
        response = _take_online_requests(cycle, conv.ask(message))
    if response.context_requests:
        # At most 2 rounds; a third request is refused, not fulfilled (docs/DESIGN.md, "Context").
        cycle.refused_requests = len(response.context_requests)
        cycle.warnings.append(f"{cycle.refused_requests} context_request(s) refused: at most {MAX_ROUNDS} rounds")
        if round_mode is Mode.APPLY and not response.actions:
            raise PapayuError(
                "ERR_CONTEXT_ROUNDS_EXCEEDED",
                f"the model still asks for context after {MAX_ROUNDS} rounds and proposes no change",
            )
    return response


def _take_online_requests(cycle: _Cycle, response: Response) -> Response:
    """`{type: search, query: "ONLINE: …"}` asks for the web, not for `git grep`: taken out of the
    context_requests (docs/DESIGN.md, "Online research") and kept as the cycle's online query."""
    online = [r for r in response.context_requests if online_research.online_request_query(r)]
    if not online:
        return response
    cycle.online_query = cycle.online_query or online_research.online_request_query(online[0])
    cycle.online.setdefault("online_fallback_trigger", "context_request")
    rest = tuple(r for r in response.context_requests if r not in online)
    data = dict(response.data) if isinstance(response.data, dict) else response.data
    if isinstance(data, dict):
        data["context_requests"] = list(rest)
    return replace(response, data=data, context_requests=rest)


def _limit_questions(response: Response, budget: int, cycle: _Cycle) -> Response:
    if len(response.questions) <= budget:
        return response
    from dataclasses import replace

    cycle.warnings.append(f"{len(response.questions) - budget} question(s) over the ask budget ({budget}) dropped")
    data = dict(response.data) if isinstance(response.data, dict) else response.data
    if isinstance(data, dict):
        data["questions"] = list(response.questions[:budget])
    return replace(response, data=data, questions=response.questions[:budget])


def _memory(repo_root: Path, response: Response, request: PlanRequest, cycle: _Cycle) -> dict[str, Any]:
    """A memory_patch is applied only when the user asked for it (memory.py decides; docs/DESIGN.md, "Memory")."""
    if not response.memory_patch:
        return {}

    applied = apply_memory_patch(repo_root, response.memory_patch, request.goal, request.accept_memory)
    dropped = sorted(set(response.memory_patch) - set(applied))
    if dropped:
        cycle.warnings.append(
            "memory_patch not applied for "
            + ", ".join(dropped)
            + " (say 'remember …' in the goal or pass --accept-memory)"
        )
    return {"memory_patch_applied": applied, "memory_patch_dropped": dropped}


def make_plan(
    repo_root: Path, request: PlanRequest, client: ChatClient, timings: dict[str, float] | None = None
) -> PlanOutcome:
    """The PLAN cycle. ``timings`` (optional) is filled even when the cycle fails (bench)."""
    started = time.perf_counter()
    base_commit, branch = base_of(repo_root)
    cycle = _Cycle(session=ContextSession(repo_root, base_commit))
    cycle.context_sec = time.perf_counter() - started  # opening the session is context gathering
    try:
        outcome = _plan_with_research(repo_root, request, client, cycle, base_commit, branch)
    finally:
        if timings is not None:
            timings.update(_timings(cycle, started, cycle.storage_started or time.perf_counter()))
    return replace(outcome, timings=_timings(cycle, started, cycle.storage_started))


def _plan_with_research(
    repo_root: Path, request: PlanRequest, client: ChatClient, cycle: _Cycle, base_commit: str, branch: str
) -> PlanOutcome:
    """The PLAN cycle, and the online research fallback around it (docs/DESIGN.md, "Online research"):
    a failed plan (timeout, unparseable or invalid after the repair) or a model that asks for outside
    knowledge triggers one research per goal; with auto-use the cycle runs once more with its summary."""
    if request.online_context:
        cycle.online["online_context_used"] = True
    try:
        outcome = _plan_cycle(repo_root, request, client, cycle, base_commit, branch)
    except KeyboardInterrupt:  # Ctrl-C while the model thinks: traced as what it is
        stopped = PapayuError("ERR_INTERRUPTED", "interrupted while waiting for the model")
        _write_failure_trace(repo_root, cycle.trace_id, request, cycle, client, stopped)
        raise
    except PapayuError as exc:
        reason = online_research.failure_reason(exc)
        found = _research(repo_root, request, client, cycle, request.goal, reason) if reason else None
        if found is None or not online_research.auto_use(str(repo_root)):
            _write_failure_trace(repo_root, cycle.trace_id, request, cycle, client, exc)
            if found is not None:
                _print_research(found, request.goal)
            raise
        _write_failure_trace(repo_root, cycle.trace_id, request, cycle, client, exc)
        return _replan(repo_root, request, client, cycle, base_commit, branch, found)
    query = _asked_online(outcome.response, cycle)
    if not query:
        return outcome
    found = _research(repo_root, request, client, cycle, query, cycle.online.get("online_fallback_trigger", ""))
    _rewrite_trace(repo_root, outcome, cycle)
    if found is None:
        return outcome
    if online_research.auto_use(str(repo_root)):
        return _replan(repo_root, request, client, cycle, base_commit, branch, found)
    _print_research(found, request.goal)
    return replace(outcome, warnings=(*outcome.warnings, f"online research {found.id} stored (not used: no auto-use)"))


def _asked_online(response: Response, cycle: _Cycle) -> str:
    """The outside-knowledge question of the answer: `NEEDS_ONLINE_RESEARCH: <query>` in its summary,
    else an `ONLINE:` search request taken out of its context_requests."""
    asked = online_research.summary_query(response.summary)
    if asked:
        cycle.online.setdefault("online_fallback_trigger", "needs_online_research")
        return asked
    return cycle.online_query


def _research(
    repo_root: Path, request: PlanRequest, client: ChatClient, cycle: _Cycle, query: str, reason: str
) -> online_research.Research | None:
    """One research per goal: never again after an attempt, nor when the plan already has one."""
    if request.online_context or cycle.online.get("online_fallback_attempted"):
        cycle.online["online_fallback_skipped"] = "cycle_protection"
        return None
    if not online_research.enabled(str(repo_root)):
        cycle.online["online_fallback_skipped"] = "disabled"
        return None
    stats: dict[str, Any] = {}
    cycle.online.update(online_fallback_attempted=True, online_fallback_executed=False, online_fallback_reason=reason)
    output.info(f"papayu: online research ({reason}): {query[:120]}")
    try:
        found = online_research.run(
            query, client, papayu_dir(open_repo(repo_root)), cwd=str(repo_root), reason=reason, stats=stats
        )
    except (PapayuError, OSError) as exc:  # research is a help: its failure never fails the plan
        why = exc.format() if isinstance(exc, PapayuError) else f"{type(exc).__name__}: {exc}"
        cycle.online["online_research"] = {**_research_stats(stats), "error": why}
        cycle.warnings.append(f"online research failed: {why}")
        return None
    cycle.online.update(online_fallback_executed=True, online_research={"id": found.id, **_research_stats(stats)})
    return found


# What a plan's trace keeps of its research: the fetch's counts, and the summary's model calls
# (provider, model, usage per call), which `stats` counts.
RESEARCH_TRACE_KEYS = (
    "results", "pages_ok", "pages_failed", "cache_hit", "early_stop", "sources_dropped", "failures",
    "provider", "model", "usage",
)  # fmt: skip


def _research_stats(stats: dict[str, Any]) -> dict[str, Any]:
    return {k: stats[k] for k in RESEARCH_TRACE_KEYS if k in stats}


def _replan(
    repo_root: Path,
    request: PlanRequest,
    client: ChatClient,
    cycle: _Cycle,
    base_commit: str,
    branch: str,
    found: online_research.Research,
) -> PlanOutcome:
    """The next planning call, once, with the research as an ONLINE_CONTEXT block."""
    output.info(f"papayu: planning again with online research {found.id}")
    cycle.online["online_research"] = {**cycle.online.get("online_research", {}), "used_as_context": True}
    cycle.online["online_replan"] = True  # stats counts the attempt once: on the first trace
    cycle.messages, cycle.refused_requests, cycle.online_query, cycle.shown = [], 0, "", []
    cycle.trace_id = ""
    # A trace of its own, with its own calls (the first trace keeps the first cycle's, stats adds
    # both up); the times go on adding up for the plan's timings.
    cycle.log = CallLog(cycle.log.model_sec, cycle.log.validation_sec, cycle.log.preflight_sec)
    request = replace(request, online_context=found.context_block())
    try:
        outcome = _plan_cycle(repo_root, request, client, cycle, base_commit, branch)
    except PapayuError as exc:
        _write_failure_trace(repo_root, cycle.trace_id, request, cycle, client, exc)
        raise
    if _asked_online(outcome.response, cycle):  # asked again: refused (cycle protection), recorded
        cycle.online["online_fallback_skipped"] = "cycle_protection"
        _rewrite_trace(repo_root, outcome, cycle)
    return outcome


def _print_research(found: online_research.Research, goal: str) -> None:
    import shlex

    for line in found.lines():
        output.info(line)
    output.info(f"re-plan with it: git papayu plan {shlex.quote(goal)} --use-research {found.id}")


def _rewrite_trace(repo_root: Path, outcome: PlanOutcome, cycle: _Cycle) -> None:
    """Add the online_fallback_* fields to the stored plan's trace (written before the research ran)."""
    try:
        pdir = papayu_dir(open_repo(repo_root))
        traces.write_record(pdir, outcome.plan.trace_id, "plan", outcome.plan, **cycle.online)
    except (OSError, PapayuError):
        pass


def _plan_cycle(
    repo_root: Path, request: PlanRequest, client: ChatClient, cycle: _Cycle, base_commit: str, branch: str
) -> PlanOutcome:
    blocks = _timed_context(cycle, cycle.session.base_context, request.goal, request.log_text)
    _say_dirty(blocks)
    budget = ask_budget(repo_root)
    system = system_prompt(request.prompt_mode, request.protocol, memory_block(repo_root), budget)
    context_text, decision = _first_context(cycle, request, client, blocks, system, budget)
    round_mode = request.prompt_mode.round
    conv = Conversation(
        client,
        system,
        protocol=request.protocol,
        mode=round_mode,
        read_files=dict(cycle.session.files_shown),
        log=cycle.log,
        shape=_shape(request.prompt_mode),
    )
    trace_id = cycle.trace_id = traces.new_trace_id()
    first = user_message(request.goal, context_text, decision.note(budget), request.previous_attempt, request.lens)
    response = _converse(cycle, conv, first, round_mode)
    response = _limit_questions(response, budget, cycle)
    shown_text = "\n".join([request.goal, request.log_text or "", *cycle.messages])
    flags = behaviour.flag_answer(response, cycle.session.files_shown, shown_text)
    extra = {
        "prompt_mode": request.prompt_mode.value,
        "ask_budget": budget,
        "behaviour_flags": flags,
        "behaviour": {"act": decision.act, "reasons": list(decision.reasons), "missing": list(decision.missing)},
        **({"retry_of": request.retry_of} if request.retry_of else {}),
        **({"lens": request.lens} if request.lens else {}),
        **_memory(repo_root, response, request, cycle),
    }
    cycle.warnings.extend(cycle.log.notes)
    cycle.storage_started = time.perf_counter()
    plan = plans.StoredPlan(
        id=plans.new_id(),
        goal=request.goal,
        mode=round_mode.value,
        protocol=request.protocol,
        base_commit=base_commit,
        branch=branch,
        files=dict(cycle.session.files_shown),
        response=response.data,
        trace_id=trace_id,
        created_at=traces.now_iso(),
        context="\n\n".join(cycle.messages),
        extra={**extra, "warnings": list(cycle.warnings)},
    )
    pdir = papayu_dir(open_repo(repo_root))
    plan, path = _store(pdir, plan, client, _trace(plan, request, cycle, client, response, flags, pdir))
    return PlanOutcome(plan, response, path, tuple(cycle.warnings), tuple(flags))


def _say_dirty(blocks: list[Any]) -> None:
    """Before the model is asked: the files it is shown that have uncommitted changes. It sees the
    committed version; a plan that edits one stops before its check (transaction/run.py, dirty_paths)."""
    dirty = sorted({b.path for b in blocks if getattr(b, "dirty", False) and getattr(b, "path", "")})
    if dirty:
        shown = ", ".join(dirty[:8]) + (f" and {len(dirty) - 8} more" if len(dirty) > 8 else "")
        output.info(
            f"papayu: uncommitted changes in files the model is shown: {safe_text(shown)} (it sees the committed "
            "version; a plan that edits them stops before its check until they are committed or stashed)"
        )


def _first_context(
    cycle: _Cycle, request: PlanRequest, client: ChatClient, blocks: list[Any], system: str, budget: int
) -> tuple[str, behaviour.BehaviourDecision]:
    """The first message's context, fitted to the model's window when it is known, and the
    behaviour decision taken on what the model will see."""
    note = behaviour.decide(request.goal, request.log_text, "").note(budget)  # about as long as the final one
    fixed = user_message(request.goal, request.online_context, note, request.previous_attempt, request.lens)
    room = windows.room(client.window, [{"role": "system", "content": system}], fixed)
    text = cycle.render(blocks, room.budget(FIRST_SHARE) if room else None)
    if room:
        room.check(text)
    decision = behaviour.decide(request.goal, request.log_text, text)
    if request.online_context:
        text = f"{text}\n\n{request.online_context}"
    return text, decision


def _store(
    pdir: Path, plan: plans.StoredPlan, client: ChatClient, trace: dict[str, Any]
) -> tuple[plans.StoredPlan, Path]:
    """Save the plan (API key scrubbed) and its trace."""
    plan = plans.StoredPlan.from_json(scrub_api_key(plan.to_json(), client.config.api_key))
    path = plans.save(pdir, plan)
    traces.write_trace(pdir, plan.trace_id, trace)
    return plan, path


def _timings(cycle: _Cycle, started: float, storage_started: float) -> dict[str, float]:
    now = time.perf_counter()
    return {
        "context": cycle.context_sec,
        "model": cycle.log.model_sec,
        "validation": cycle.log.validation_sec,
        "storage": (now - storage_started) if storage_started else 0.0,
        "total": now - started,
    }


def request_fields(client: ChatClient, mode: str, log: CallLog, prompt_mode: str = "") -> dict[str, Any]:
    """The trace's `request` record (docs/ARCHITECTURE.md, traces): mode is the round, plan|apply."""
    config = client.config
    return {
        "mode": mode,
        "prompt_mode": prompt_mode or mode,
        "provider": config.provider.value,
        "model": client.model(),
        "base_url": config.base_url,
        "input_chars": log.input_chars,
        "token_budget": log.token_budget,
        "strict_json": bool(client.formats),
        "response_format_fallback": client.format_fallback,
        "calls": log.calls,
        "repairs": log.repairs,
        "latency_ms": round(log.model_sec * 1000),
        "usage": log.usage,
        **_window_fields(client),
    }


def _window_fields(client: ChatClient) -> dict[str, Any]:
    window = client.window.known
    return {"context_window": window.tokens, "context_window_source": window.source} if window else {}


def _trace(
    plan: plans.StoredPlan,
    request: PlanRequest,
    cycle: _Cycle,
    client: ChatClient,
    response: Response,
    flags: list[dict[str, str]],
    pdir: Path,
) -> dict[str, Any]:
    return traces.record(
        "plan",
        plan,
        papayu_dir=pdir,
        trace_id=plan.trace_id,
        protocol=request.protocol,
        mode=plan.mode,
        prompt_mode=request.prompt_mode.value,
        request=request_fields(client, request.prompt_mode.round.value, cycle.log, request.prompt_mode.value),
        context_stats=dict(cycle.session.context_stats),
        cache_stats=dict(cycle.session.cache_stats),
        plan_files=dict(plan.files),
        validated_json=response.data,
        validation_outcome="ok",
        error_code=None,
        protocol_default=request.protocol,
        protocol_attempts=[request.protocol],
        context_rounds=max(0, len(cycle.messages) - 1),
        context_requests_refused=cycle.refused_requests,
        behaviour_flags=flags,
        warnings=list(cycle.warnings),
        prompt=cycle.prompt_outline(),
        raw_content=cycle.log.raw,
        **cycle.online,
    )


def _write_failure_trace(
    repo_root: Path, trace_id: str, request: PlanRequest, cycle: _Cycle, client: ChatClient, exc: PapayuError
) -> None:
    if not trace_id:
        return  # failed before the model was asked: nothing to trace
    # the rejected answer, when there is one: trace golden can convert it
    rejected = {"validated_json": cycle.log.last_json} if cycle.log.last_json is not None else {}
    try:
        pdir = papayu_dir(open_repo(repo_root))
        traces.write_record(
            pdir,
            trace_id,
            "plan",
            protocol=request.protocol,
            goal=request.goal,
            prompt_mode=request.prompt_mode.value,
            request=request_fields(client, request.prompt_mode.round.value, cycle.log, request.prompt_mode.value),
            context_stats=dict(cycle.session.context_stats),
            validation_outcome="err",
            error_code=getattr(exc, "cause_code", exc.code),
            error=exc.format(),
            protocol_default=request.protocol,
            protocol_attempts=[request.protocol],
            prompt=cycle.prompt_outline(),
            raw_content=cycle.log.raw,
            **rejected,
            **cycle.online,
        )
    except (OSError, PapayuError):
        pass  # the original error matters more than its trace
