"""`git papayu agent GOAL`: function calling inside papayu's transaction (docs/DESIGN.md, "Agent mode").

The model works on a private workspace (agent_workspace.py) through tools (agent_tools.py) for at
most --max-steps model turns. A final message without tool calls ends the run: the workspace
becomes a stored plan (mode "agent", whole-file actions) that commands/agent.py hands to the
transaction, so it is validated, committed on papayu/<id>, checked and landed or rolled back like
any plan. Until then nothing outside `.git/papayu/` (and unreferenced objects) is written.
"""

from __future__ import annotations

import re
import time
from dataclasses import dataclass, field
from pathlib import Path
from typing import TYPE_CHECKING, Any

from papayu_git import output, plans, settings, traces
from papayu_git.agent_tools import Tools
from papayu_git.agent_workspace import PROTOCOL, Workspace
from papayu_git.errors import PapayuError
from papayu_git.landing import resolve_target
from papayu_git.llm import behaviour
from papayu_git.llm.planner import ask_budget, memory_block
from papayu_git.llm.prompts import agent_system_prompt, agent_user_message
from papayu_git.llm.tools import agent_tools
from papayu_git.paths import configured_protected
from papayu_git.protocol import NO_CHANGES_PREFIX
from papayu_git.secrets import mask, mask_data, safe_text
from papayu_git.validate import says_no_changes

if TYPE_CHECKING:
    import pygit2

    from papayu_git.llm.client import ChatClient
    from papayu_git.protocol import Response
    from papayu_git.transaction import ApplyOptions

DEFAULT_MAX_STEPS = 24
DEFAULT_MAX_TOOL_OUTPUT = 20_000
CONVERSATION_CHARS = 4000
_QUESTION = re.compile(r"^\s*(?:[-*\d.)\s]*)(.{3,}\?)\s*$", re.M)


@dataclass
class AgentRun:
    """What one run produced; ``response`` is None when it ended without a plan to apply."""

    plan: plans.StoredPlan
    response: Response | None
    end: str  # final | questions | max_steps
    changes: list[tuple[str, str]]  # (status, path)
    flags: list[dict[str, str]] = field(default_factory=list)
    questions: list[str] = field(default_factory=list)
    warnings: list[str] = field(default_factory=list)


@dataclass
class _Log:
    turns: int = 0
    model_sec: float = 0.0
    usage: dict[str, int] = field(default_factory=dict)
    turn_usage: list[dict[str, Any]] = field(default_factory=list)  # one per turn, {} when none was reported
    finish: list[str] = field(default_factory=list)
    messages: list[dict[str, Any]] = field(default_factory=list)  # the conversation, as sent

    def conversation(self) -> list[dict[str, Any]]:
        """The conversation as stored with the plan: masked, each text cut to CONVERSATION_CHARS
        (the system prompt is papayu's own and left out)."""
        kept = []
        for message in self.messages[1:]:
            item = mask_data(message)
            text = item.get("content")
            if isinstance(text, str) and len(text) > CONVERSATION_CHARS:
                item["content"] = (
                    text[:CONVERSATION_CHARS] + f"\n[... {len(text) - CONVERSATION_CHARS} more characters]"
                )
            kept.append(item)
        return kept

    def add(self, turn: Any) -> None:
        self.turns += 1
        self.model_sec += float(getattr(turn, "model_sec", 0.0) or 0.0)
        self.finish.append(str(getattr(turn, "finish_reason", "")))
        self.turn_usage.append(dict(getattr(turn, "usage", None) or {}))
        for key, value in (getattr(turn, "usage", None) or {}).items():
            if isinstance(value, int) and not isinstance(value, bool):
                self.usage[key] = self.usage.get(key, 0) + value


def run_agent(
    repo: pygit2.Repository,
    root: Path,
    pdir: Path,
    goal: str,
    options: ApplyOptions,
    client: ChatClient,
    *,
    max_steps: int = DEFAULT_MAX_STEPS,
    max_output: int = DEFAULT_MAX_TOOL_OUTPUT,
    log_text: str | None = None,
) -> AgentRun:
    """The loop; raises ERR_AGENT_MAX_STEPS (after recording the run) when no final message came."""
    started = time.perf_counter()
    target = resolve_target(repo, options.onto)
    normalize = settings.get("normalize_eol", str(root)).strip().lower() == "lf"
    workspace = Workspace(repo, target.tip, configured_protected(str(root)), normalize_eol=normalize)
    plan_id, trace_id = plans.new_id(), traces.new_trace_id()
    definitions = agent_tools()
    tools = Tools(workspace, repo, root, pdir, plan_id, options, max_output, definitions)
    budget = ask_budget(root)
    decision = behaviour.decide(goal, log_text, "")
    first = agent_user_message(goal, behaviour.agent_note(decision, budget), log_text)
    messages: list[dict[str, Any]] = [
        {"role": "system", "content": agent_system_prompt(memory_block(root), budget)},
        {"role": "user", "content": first},
    ]
    log = _Log(messages=messages)
    final: str | None = None
    try:
        for turn_no in range(1, max_steps + 1):
            max_tokens = client.config.max_tokens(sum(len(str(m.get("content") or "")) for m in messages))
            with output.progress(f"agent: model turn {turn_no}"):
                turn = client.chat_with_tools(messages, definitions, max_tokens)
            log.add(turn)
            messages.append(turn.assistant_message)
            if not turn.tool_calls:
                final = turn.content or ""
                break
            for call in turn.tool_calls:
                result = tools.call(turn_no, call.name, call.arguments)
                step = tools.steps[-1]
                output.event("AGENT_STEP", turn=turn_no, tool=call.name[:40], ok=step.ok, code=step.code or "")
                messages.append({"role": "tool", "tool_call_id": call.id, "content": result})
    except PapayuError as exc:
        _record(
            pdir,
            _plan(plan_id, trace_id, goal, target, first, {}),
            tools,
            log,
            client,
            started,
            end="error",
            error=exc.code,
        )
        raise
    if final is None:
        plan = _plan(plan_id, trace_id, goal, target, first, {})
        _record(pdir, plan, tools, log, client, started, end="max_steps", error="ERR_AGENT_MAX_STEPS")
        raise PapayuError(
            "ERR_AGENT_MAX_STEPS",
            f"the model still called tools after {max_steps} turns; nothing was committed (plan {plan_id})",
        )
    return _finish(
        workspace, tools, log, client, pdir, plan_id, trace_id, goal, target, first, final, decision, budget, started
    )


def _finish(
    workspace: Workspace,
    tools: Tools,
    log: _Log,
    client: ChatClient,
    pdir: Path,
    plan_id: str,
    trace_id: str,
    goal: str,
    target: Any,
    first: str,
    final: str,
    decision: behaviour.BehaviourDecision,
    budget: int,
    started: float,
) -> AgentRun:
    evidence = tools.evidence
    summary = final.strip() or f"papayu agent: {goal.strip()}"
    flags = behaviour.flag_agent_claims(
        summary,
        patched=evidence.patched,
        tests_ran=evidence.tests_ran,
        tests_passed=evidence.tests_passed,
        ran=evidence.ran,
    )
    warnings = [f["message"] for f in flags]
    if log.finish and log.finish[-1] == "length":
        warnings.append("the model's final message was cut off (finish_reason: length)")
    questions = [q.strip() for q in _QUESTION.findall(summary)][: max(budget, 0)]
    changes = [(workspace.status(p), p) for p in sorted(workspace.overlay)]
    asked = bool(questions) and not decision.act and budget > 0
    if workspace.overlay and says_no_changes(summary):  # the transaction would land what it disowns
        refused = _plan(plan_id, trace_id, goal, target, first, {})
        _record(pdir, refused, tools, log, client, started, end="error", error="ERR_NO_CHANGES_WITH_ACTIONS")
        raise _no_changes_with_changes(workspace, plan_id)
    if not workspace.overlay and not summary.startswith(NO_CHANGES_PREFIX):
        summary = f"{NO_CHANGES_PREFIX} {summary}"
    response, files = workspace.response(summary)
    data = dict(response.data)
    if asked:
        data["questions"] = questions
    plan = _plan(plan_id, trace_id, goal, target, first, files, data, flags, warnings)
    end = "questions" if asked else "final"
    _record(pdir, plan, tools, log, client, started, end=end, flags=flags)
    return AgentRun(plan, None if asked else response, end, changes, flags, questions if asked else [], warnings)


def _no_changes_with_changes(workspace: Workspace, plan_id: str) -> PapayuError:
    changed = sorted(workspace.overlay)
    listed = safe_text(", ".join(changed[:5])) + (f" and {len(changed) - 5} more" if len(changed) > 5 else "")
    return PapayuError(
        "ERR_NO_CHANGES_WITH_ACTIONS",
        f"the model ended with 'NO_CHANGES' after changing {listed}; nothing was committed (plan {plan_id})",
        path="summary",
        hint="Run the agent again: its final message must describe the change it made, or say NO_CHANGES "
        "after making none.",
    )


def _plan(
    plan_id: str,
    trace_id: str,
    goal: str,
    target: Any,
    first: str,
    files: dict[str, str],
    data: dict[str, Any] | None = None,
    flags: list[dict[str, str]] | None = None,
    warnings: list[str] | None = None,
) -> plans.StoredPlan:
    return plans.StoredPlan(
        id=plan_id,
        goal=goal,
        mode="agent",
        protocol=PROTOCOL,
        base_commit=target.tip,
        branch=target.branch,
        files=files,
        response=data if data is not None else {"summary": "", "actions": []},
        trace_id=trace_id,
        created_at=traces.now_iso(),
        context=first,
        extra={"behaviour_flags": flags or [], "warnings": warnings or []},
    )


def _record(
    pdir: Path,
    plan: plans.StoredPlan,
    tools: Tools,
    log: _Log,
    client: ChatClient,
    started: float,
    *,
    end: str,
    error: str | None = None,
    flags: list[dict[str, str]] | None = None,
) -> None:
    """The plan (with its steps, for `show`) and the run's trace; the transaction adds its outcome
    to the same trace (traces.trace_id_for_apply)."""
    steps = [s.record() for s in tools.steps]
    tools_ms = sum(s.ms for s in tools.steps)
    agent = {
        "end": end,
        "turns": log.turns,
        "steps": steps,
        "usage": log.usage,
        "model_sec": round(log.model_sec, 3),
        "tools_ms": round(tools_ms, 1),
        "evidence": {k: v for k, v in vars(tools.evidence).items() if k != "runs"},
        "conversation": log.conversation(),
    }
    plan.extra["agent"] = agent
    plans.save(pdir, plan)
    config = client.config
    traces.write_record(
        pdir,
        plan.trace_id,
        "agent",
        plan,
        protocol=plan.protocol,
        mode="agent",
        request={
            "mode": "agent",
            "provider": config.provider.value,
            "model": client.model(),
            "calls": log.turns,
            "latency_ms": round(log.model_sec * 1000),
            "usage": log.turn_usage,  # per call, as plan and apply rounds record it (stats reads it)
        },
        agent=agent,
        plan_files=dict(plan.files),
        validated_json=plan.response,
        validation_outcome="ok" if error is None else "err",
        error_code=error,
        behaviour_flags=flags or [],
        timings={"model": log.model_sec, "tools": tools_ms / 1000, "total": time.perf_counter() - started},
    )


def restore_command(pdir: Path, trace_id: str) -> None:
    """The transaction writes its outcome as an "apply" record into this run's trace; the trace
    stays an agent run, so `stats` counts it among agent runs, not protocol APPLY rounds."""
    traces.write_trace(pdir, trace_id, {"command": "agent"})


def describe(run: AgentRun) -> list[str]:
    """Lines for the terminal: the summary (the model's words, escaped and masked) and the changes."""
    lines = [
        f"agent plan {run.plan.id}: {len(run.plan.extra['agent']['steps'])} tool call(s) in "
        f"{run.plan.extra['agent']['turns']} turn(s)"
    ]
    summary = run.plan.response.get("summary", "") if isinstance(run.plan.response, dict) else ""
    lines.append("summary: " + safe_text(mask(summary), multiline=True))
    lines += [f"  {status} {safe_text(path)}" for status, path in run.changes]
    return lines
