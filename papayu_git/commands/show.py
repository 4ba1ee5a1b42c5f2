"""`git papayu show ID`: the plan and its diff, coloured on a terminal."""

from __future__ import annotations

import json
import sys
from typing import Any

import click

from papayu_git import output, plans
from papayu_git.bestof import runs
from papayu_git.bestof.matrix import run_lines
from papayu_git.bestof.runs import names_a_run
from papayu_git.commands.drop import resolve_generated
from papayu_git.diffs import plan_diff, render_diff
from papayu_git.error_handler import handle_errors
from papayu_git.housekeeping import open_checkout
from papayu_git.plans import plan_name, plan_subject
from papayu_git.report import check_lines
from papayu_git.secrets import safe_text


def run(plan_id: str, as_json: bool = False) -> int:
    if names_a_run(plan_id):  # a best-of run (docs/DESIGN.md, "Best of N")
        return show_run(plan_id, as_json)
    repo, _root, pdir = open_checkout()
    resolved = resolve_generated(repo, pdir, plan_id)
    try:
        plan: Any = plans.load(pdir, resolved)
    except Exception:
        plan = None
    outcome = (plan.extra.get("apply") or {}) if plan else {}
    colour = output.use_colour(sys.stdout) and not as_json
    diff = plan_diff(repo, resolved, outcome.get("commit"))
    if as_json:
        output.emit_json({"ok": True, "plan": plan.to_json() if plan else None, "diff": diff}, verbatim=("diff",))
        return 0
    with output.paged():
        if plan is not None:
            _print_plan(plan, outcome)
        output.result(render_diff(diff, colour) if diff else "(no commit yet: apply the plan to see its diff)")
    return 0


def show_run(arg: str, as_json: bool) -> int:
    """`show RUN`: the run's matrix; `show RUN:N`: its candidate, a plan like any other."""
    repo, _root, pdir = open_checkout()
    run_id, number = runs.resolve(pdir, arg)
    record = runs.current(repo, pdir, runs.load(pdir, run_id))
    if number is not None:
        return run(str(runs.candidate(record, number)["plan_id"]), as_json)
    if as_json:
        output.emit_json({"ok": True, "run": record})
        return 0
    with output.paged():
        for line in run_lines(record):
            output.result(line)
    return 0


def _print_plan(plan: Any, outcome: dict[str, Any]) -> None:
    """Every value comes from the stored record (the model's words): through safe_text."""
    data: dict[str, Any] = plan.response if isinstance(plan.response, dict) else {"actions": plan.response or []}
    state = safe_text(outcome.get("state", "not applied"))
    who = plan_subject(plan.id, str(outcome.get("branch") or ""))  # a best-of candidate: RUN:N
    output.result(output.colour(who, "bold") + f"  state: {state}")
    if plan.goal:
        output.result(f"goal: {safe_text(plan.goal, multiline=True)}")
    if data.get("summary"):
        output.result(f"summary: {safe_text(data['summary'], multiline=True)}")
    for line in step_lines(plan_steps(plan)):
        output.result(line)
    for action in data.get("actions") or (data.get("proposed_changes") or {}).get("actions") or []:
        output.result(f"  {safe_text(action.get('kind'))} {safe_text(action.get('path'))}")
    for risk in data.get("risks") or []:
        output.result(output.colour(f"  risk: {safe_text(risk)}", "yellow"))
    _print_agent_steps(plan.extra.get("agent"))
    if outcome.get("test_edits"):
        output.result(
            output.colour("edits tests or how they run: " + safe_text(", ".join(outcome["test_edits"])), "yellow")
        )
    if outcome.get("check"):  # as the apply reported it (report.check_lines)
        for line in check_lines(outcome["check"]):
            output.result(line)
    traces = dict.fromkeys(t for t in (plan.extra.get("plan_trace_id"), plan.trace_id, outcome.get("trace_id")) if t)
    name = plan_name(plan.id, str(outcome.get("branch") or ""))
    if traces:
        output.result(f"traces: {', '.join(safe_text(t) for t in traces)}   (git papayu trace show {name})")
    output.result("")


def plan_steps(plan: Any) -> list[Any]:
    """The plan's steps: its answer's, or, once an APPLY round replaced that answer with the
    change, those of the PLAN round it kept (extra.plan_response)."""
    for data in (plan.response, plan.extra.get("plan_response")):
        if isinstance(data, dict) and isinstance(data.get("plan"), list) and data["plan"]:
            return list(data["plan"])
    return []


def step_lines(items: Any) -> list[str]:
    """Numbered steps under "Plan:", as `plan` and `show` print them (the model's words, escaped)."""
    rows = []
    for n, step in enumerate(items or (), 1):
        if isinstance(step, dict):
            details = f" — {safe_text(step['details'])}" if step.get("details") else ""
            rows.append(f"  {n}. {safe_text(step.get('step', ''))}{details}")
        elif isinstance(step, str):
            rows.append(f"  {n}. {safe_text(step)}")
    return [output.colour("Plan:", "bold"), *rows] if rows else []


def _print_agent_steps(agent: Any) -> None:
    """`git papayu agent`'s tool calls, in order (docs/DESIGN.md, "Agent mode")."""
    if not isinstance(agent, dict) or not isinstance(agent.get("steps"), list):
        return
    output.result(
        f"agent: {len(agent['steps'])} tool call(s) in {agent.get('turns', '?')} turn(s), end: "
        f"{safe_text(agent.get('end', '?'))}"
    )
    for step in agent["steps"]:
        if not isinstance(step, dict):
            continue
        args = safe_text(json.dumps(step.get("arguments"), ensure_ascii=False))
        args = args if len(args) <= 100 else args[:97] + "..."
        state = "ok" if step.get("ok") else safe_text(step.get("code") or "error")
        output.result(
            f"  {step.get('turn', '?')}. {safe_text(step.get('tool'))} {args} -> {state} "
            f"({step.get('result_chars', 0)} chars, {step.get('ms', 0)} ms)"
        )


@click.command("show")
@click.argument("plan_id", metavar="ID")
@click.option("--json", "as_json", is_flag=True, help="Machine-readable output (plan record + plain diff).")
def command(plan_id: str, as_json: bool) -> None:
    """Show a plan (goal, summary, steps, actions, risks) and the diff of its commit."""
    with handle_errors(as_json):
        raise SystemExit(run(plan_id, as_json))
