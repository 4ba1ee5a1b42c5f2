"""`git papayu trace list|show ID|golden ID [OUT]` (docs/DESIGN.md, "Traces")."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import click

from papayu_git import output, plans
from papayu_git.bestof.runs import names_a_run
from papayu_git.cli import SuggestingGroup
from papayu_git.commands.drop import resolve_generated
from papayu_git.commands.show import step_lines
from papayu_git.error_handler import handle_errors
from papayu_git.errors import PapayuError
from papayu_git.git import papayu_dir
from papayu_git.golden import check_replay, trace_mode, trace_to_golden
from papayu_git.report import check_lines
from papayu_git.repository import open_repo
from papayu_git.secrets import safe_text
from papayu_git.traces import load_trace, load_traces, traces_dir, with_plan_context


def current_papayu_dir() -> Path:
    return papayu_dir(open_repo())


def summary_row(trace: dict[str, Any]) -> dict[str, Any]:
    """One trace as `trace list` shows it: the command that ran it (`fix`, `retry`, …; older
    traces: the round), the round it holds, and how it ended."""
    return {
        "trace_id": trace.get("trace_id"),
        "created_at": trace.get("created_at"),
        "invoked_as": trace.get("invoked_as") or trace.get("command"),
        "command": trace.get("command"),
        "mode": trace_mode(trace),
        "protocol": trace.get("schema_version"),
        "outcome": outcome_of(trace),
        "validation": trace.get("validation_outcome"),
        "error_code": trace.get("error_code"),
        "fallback": bool(trace.get("protocol_fallback_attempted")),
        "check": (trace.get("check") or {}).get("state") if isinstance(trace.get("check"), dict) else None,
        "plan_id": trace.get("plan_id"),
    }


def outcome_of(trace: dict[str, Any]) -> str:
    """How the traced step ended: the apply's state when it reached the transaction (landed,
    rolled_back, review, refused, ...); else whether the model's answer was taken."""
    apply = trace.get("apply")
    if isinstance(apply, dict) and apply.get("state"):
        return str(apply["state"])
    if trace.get("validation_outcome") == "err" or trace.get("error_code"):
        return "refused" if trace.get("command") == "apply" and trace.get("validated_json") else "failed"
    if trace.get("command") == "plan":
        return "planned"
    return str(trace.get("validation_outcome") or "-")


def run_list(last: int | None, as_json: bool) -> int:
    rows = [summary_row(t) for t in load_traces(traces_dir(current_papayu_dir()))]
    rows = rows[-last:] if last else rows
    if as_json:
        output.emit_json({"ok": True, "traces": rows})
        return 0
    if not rows:
        output.info("no traces yet (plan, apply, agent and research write them; PAPAYU_TRACE_ENABLED=0 turns them off)")
        return 0
    table = [
        [
            str(row["created_at"] or "")[:19],
            str(row["trace_id"]),
            row["plan_id"] or "-",
            _ran(row),
            f"v{row['protocol']}" if row["protocol"] else "-",
            row["outcome"] or "-",
            " ".join(
                x
                for x in (
                    row["error_code"] or "",
                    f"check={row['check']}" if row["check"] else "",
                    "fallback" * row["fallback"],
                )
                if x
            ),
        ]
        for row in rows
    ]
    header = ["AT", "TRACE", "PLAN", "COMMAND", "PROTO", "OUTCOME", "NOTES"]
    widths = [max(len(r[i]) for r in [header, *table]) for i in range(len(header))]
    with output.paged():
        for fields in [header, *table]:
            output.result("  ".join(f.ljust(w) for f, w in zip(fields, widths, strict=True)).rstrip())
    return 0


def _ran(row: dict[str, Any]) -> str:
    """`fix: plan` for the PLAN round of a `fix`; `apply` where the command is the round."""
    ran, step = row["invoked_as"] or "-", row["command"] or ""
    return ran if not step or step == ran else f"{ran}: {step}"


def run_show(wanted: str, as_json: bool) -> int:
    """Trace ID, or every trace of plan ID (its PLAN round, its apply, each in order), as a person
    reads them: the prompt, the answer, its validation and the check (raw JSON with --json)."""
    pdir = current_papayu_dir()
    plan_id, shown = _traces_of(pdir, wanted)
    if as_json:
        output.emit_json(shown[0] if plan_id is None else {"ok": True, "plan_id": plan_id, "traces": shown})
        return 0
    with output.paged():
        for trace in shown:
            for line in trace_lines(trace, _recorded_check(pdir, trace)):
                output.result(line)
            output.result("")
        output.result(f"(the whole record: git papayu trace show {safe_text(wanted)} --json)")
    return 0


def _recorded_check(pdir: Path, trace: dict[str, Any]) -> dict[str, Any] | None:
    """The check as its apply recorded it in the plan (with the verdict), when this trace is that apply's."""
    if not plans.is_id(trace.get("plan_id")) or not isinstance(trace.get("check"), dict):
        return None
    try:
        outcome = plans.load(pdir, str(trace["plan_id"])).extra.get("apply") or {}
    except PapayuError:
        return None
    return outcome.get("check") if outcome.get("trace_id") == trace.get("trace_id") else None


def trace_lines(trace: dict[str, Any], check: dict[str, Any] | None = None) -> list[str]:
    """One trace for a person: what ran, the model and the prompt, the answer, its validation, the
    check (``check``: as the plan records it, with the verdict) and what became of the plan.
    Every value is the record's (masked when written), printed through safe_text."""
    row = summary_row(trace)
    plan = f"  plan {safe_text(row['plan_id'])}" if row["plan_id"] else ""
    lines = [
        output.colour(f"trace {safe_text(row['trace_id'])}", "bold")
        + f"  {safe_text(_ran(row))}{plan}  {safe_text(str(row['created_at'] or '')[:19])}",
    ]
    if trace.get("goal"):
        lines.append(f"goal: {safe_text(trace['goal'], multiline=True)}")
    lines += _model_lines(trace.get("request"))
    lines += _prompt_lines(trace.get("prompt"))
    lines += _answer_lines(trace)
    lines += _validation_lines(trace)
    lines += _check_lines(trace.get("check"), check)
    apply = trace.get("apply")
    if isinstance(apply, dict) and apply.get("state"):
        commit = f", commit {str(apply.get('commit') or '')[:12]}" if apply.get("commit") else ""
        branch = f", branch {safe_text(apply['branch'])}" if apply.get("branch") else ""
        lines.append(f"outcome: {safe_text(apply['state'])}{commit}{branch}")
    timings = trace.get("timings")
    if isinstance(timings, dict) and timings:
        lines.append("timings: " + ", ".join(f"{safe_text(k)} {float(v):.2f}s" for k, v in timings.items()))
    return lines


def _model_lines(request: Any) -> list[str]:
    if not isinstance(request, dict):
        return []
    usage = [u for u in request.get("usage") or () if isinstance(u, dict)]
    tokens = [sum(int(u.get(k) or 0) for u in usage) for k in ("prompt_tokens", "completion_tokens")]
    said = f"; tokens {tokens[0]} prompt + {tokens[1]} answer" if any(tokens) else ""
    repairs = f", {request['repairs']} repair(s)" if request.get("repairs") else ""
    return [
        f"model: {safe_text(request.get('provider', '?'))}/{safe_text(request.get('model', '?'))}"
        f" ({safe_text(request.get('mode', '?'))} round): {request.get('calls', 0)} call(s){repairs}, "
        f"{request.get('latency_ms', 0)} ms{said}"
    ]


def _prompt_lines(prompt: Any) -> list[str]:
    """What the model was shown (llm/planner.py: prompt_outline), round by round."""
    if not isinstance(prompt, dict):
        return []
    sizes = [int(n) for n in prompt.get("messages_chars") or ()]
    lines = [f"prompt: {len(sizes)} message(s) of context, {sum(sizes):,} characters"]
    for number, shown in enumerate(prompt.get("rounds") or (), 1):
        blocks = [b for b in shown.get("blocks") or () if isinstance(b, dict)]
        lines.append(f"  round {number}: {len(blocks)} block(s)")
        for block in blocks:
            flags = "".join(f", {k}" for k in ("truncated", "requested", "dirty") if block.get(k))
            lines.append(
                f"    {safe_text(block.get('kind'))} {safe_text(block.get('name'))} ({block.get('chars', 0):,} chars{flags})"
            )
        if shown.get("dropped"):
            lines.append(f"    dropped by the diet: {safe_text(', '.join(shown['dropped']))}")
    return lines


PATCH_LINES = 30  # of each action's diff or content; the rest is counted


def _answer_lines(trace: dict[str, Any]) -> list[str]:
    answer = trace.get("validated_json")
    if not isinstance(answer, dict | list):
        return ["answer: (none recorded)"]
    data: dict[str, Any] = answer if isinstance(answer, dict) else {"actions": answer}
    lines = ["answer:"]
    if data.get("summary"):
        lines.append(f"  summary: {safe_text(data['summary'], multiline=True)}")
    lines += [f"  {line}" for line in step_lines(data.get("plan"))]
    for title in ("questions", "risks", "commands_to_run"):
        items = [safe_text(i) for i in data.get(title) or () if isinstance(i, str) and i.strip()]
        lines += [f"  {title.replace('_', ' ')}:", *(f"    - {i}" for i in items)] if items else []
    actions = data.get("actions") or (data.get("proposed_changes") or {}).get("actions") or []
    for action in (a for a in actions if isinstance(a, dict)):
        lines.append(f"  {safe_text(action.get('kind'))} {safe_text(action.get('path'))}")
        body = action.get("patch") or action.get("content")
        if isinstance(body, str) and body:
            text = safe_text(body.rstrip("\n"), multiline=True).split("\n")
            more = [f"      ... {len(text) - PATCH_LINES} more lines"] if len(text) > PATCH_LINES else []
            lines += [*(f"      {line}" for line in text[:PATCH_LINES]), *more]
    if not actions and isinstance(answer, dict) and "actions" in data:
        lines.append("  actions: none")
    return lines


def _validation_lines(trace: dict[str, Any]) -> list[str]:
    outcome = trace.get("validation_outcome") or "-"
    code = f" {safe_text(trace['error_code'])}" if trace.get("error_code") else ""
    said = [f"validation: {safe_text(outcome)}{code}"]
    if trace.get("error"):
        said.append(f"  {safe_text(trace['error'], multiline=True)}")
    attempts = trace.get("protocol_attempts") or []
    if len(attempts) > 1 or trace.get("protocol_repair_attempt") or trace.get("protocol_fallback_attempted"):
        repair = (
            f"; repaired after {safe_text(trace.get('protocol_repair_reason') or '?')}"
            if trace.get("protocol_repair_attempt")
            else ""
        )
        fallback = (
            f"; fell back to v1 at {safe_text(trace.get('protocol_fallback_stage'))} "
            f"({safe_text(trace.get('protocol_fallback_reason'))})"
            if trace.get("protocol_fallback_attempted")
            else ""
        )
        said.append(f"  protocol: tried v{', v'.join(str(a) for a in attempts)}{repair}{fallback}")
    return said


def _check_lines(traced: Any, recorded: dict[str, Any] | None) -> list[str]:
    if recorded:
        return check_lines(recorded)
    if not isinstance(traced, dict) or not traced.get("state"):
        return []
    exit_code = f", exit {traced['exit_code']}" if traced.get("exit_code") is not None else ""
    seconds = f", {float(traced['duration_sec']):.1f}s" if traced.get("duration_sec") is not None else ""
    command = f" `{safe_text(traced['command'])}`" if traced.get("command") else ""
    return [
        f"check{command}: {safe_text(traced['state'])}{exit_code}{seconds} (sandbox: {safe_text(traced.get('sandbox') or '-')})"
    ]


def _traces_of(pdir: Path, wanted: str) -> tuple[str | None, list[dict[str, Any]]]:
    """The trace ``wanted`` names (plan id None); else, when it names a plan (an id, a prefix,
    @, a candidate's RUN:N), that plan's id and its traces, oldest first."""
    if names_a_run(wanted):
        wanted = resolve_generated(open_repo(), pdir, wanted)
    if not plans.is_id(wanted) and not wanted.startswith("@"):
        try:
            return None, [load_trace(pdir, wanted)]
        except PapayuError:
            pass
    try:
        plan_id = plans.resolve_id(pdir, wanted)
    except PapayuError as not_a_plan:
        try:
            return None, [load_trace(pdir, wanted)]
        except PapayuError as not_a_trace:  # neither: said as the one it is closest to
            raise not_a_plan if "did you mean" in not_a_plan.reason else not_a_trace from None
    found = [t for t in load_traces(traces_dir(pdir)) if t.get("plan_id") == plan_id]
    if not found:
        raise PapayuError("ERR_TRACE_NOT_FOUND", f"plan {plan_id} has no trace (PAPAYU_TRACE_ENABLED=0 when it ran?)")
    return plan_id, found


def run_golden(trace_id: str, out: str | None, as_json: bool) -> int:
    pdir = current_papayu_dir()
    golden = trace_to_golden(with_plan_context(pdir, load_trace(pdir, trace_id)))
    problems = check_replay(golden)
    for problem in problems:
        output.warn(f"the golden trace does not replay: {problem.format()}")
    text = json.dumps(golden, ensure_ascii=False, indent=2) + "\n"
    if out is None or out == "-":
        output.result(text.rstrip("\n"))
        return 0 if not problems else 1
    Path(out).parent.mkdir(parents=True, exist_ok=True)
    Path(out).write_text(text, encoding="utf-8")
    if as_json:
        output.emit_json({"ok": not problems, "file": out, "replay_errors": [p.to_dict() for p in problems]})
    else:
        output.info(f"wrote {out}")
    return 0 if not problems else 1


@click.group("trace", cls=SuggestingGroup)
def command() -> None:
    """Traces of plan/apply rounds in .git/papayu/traces/<id>.json (PAPAYU_TRACE_ENABLED, on by default).

    Traces hold the config snapshot, context and cache stats, the validated answer, schema
    version and hash, protocol fallback fields and the check result; secrets are masked and
    the raw model output is kept only with PAPAYU_TRACE_RAW=1.
    """


@command.command("list")
@click.option("--last", type=click.IntRange(min=1), help="Only the N most recent traces.")
@click.option("--json", "as_json", is_flag=True, help="Machine-readable output.")
def list_command(last: int | None, as_json: bool) -> None:
    """List traces, oldest first: time, id, plan, the command that ran it (`fix: plan`, `retry: apply`,
    `apply`, ...), protocol, outcome (planned, landed, rolled_back, review, refused, failed), notes."""
    with handle_errors(as_json):
        raise SystemExit(run_list(last, as_json))


@command.command("show")
@click.argument("trace_id", metavar="ID")
@click.option("--json", "as_json", is_flag=True, help="Print the trace's raw JSON ({traces: [...]} for a plan).")
def show_command(trace_id: str, as_json: bool) -> None:
    """Show trace ID (a unique prefix is enough), or every trace of plan ID (a plan id, a unique
    prefix of it or of its hash part, @, @~N, a candidate's RUN:N), its PLAN round first: the
    model and what it was shown, its answer, the validation, the check and the outcome. --json
    prints the whole record."""
    with handle_errors(as_json):
        raise SystemExit(run_show(trace_id, as_json))


@command.command("golden")
@click.argument("trace_id")
@click.argument("out", required=False)
@click.option("--json", "as_json", is_flag=True, help="Machine-readable report (with OUT).")
def golden_command(trace_id: str, out: str | None, as_json: bool) -> None:
    """Convert trace ID to a golden trace (upstream format: protocol, request, context,
    result) on stdout or into OUT. Exit 1 when the golden trace does not replay through
    the validator (docs/CONTRIBUTING.md: golden update policy)."""
    with handle_errors(as_json):
        raise SystemExit(run_golden(trace_id, out, as_json))
