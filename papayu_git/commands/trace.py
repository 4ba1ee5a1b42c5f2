"""`git papayu trace list|show ID|golden ID [OUT]` (docs/DESIGN.md, "Traces")."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import click

from papayu_git import output, plans
from papayu_git.cli import SuggestingGroup
from papayu_git.error_handler import handle_errors
from papayu_git.errors import PapayuError
from papayu_git.git import papayu_dir
from papayu_git.golden import check_replay, trace_mode, trace_to_golden
from papayu_git.repository import open_repo
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
    """Trace ID, or every trace of plan ID (its PLAN round, its apply, each in order)."""
    plan_id, shown = _traces_of(current_papayu_dir(), wanted)
    if as_json:
        output.emit_json(shown[0] if plan_id is None else {"ok": True, "plan_id": plan_id, "traces": shown})
        return 0
    with output.paged():
        for trace in shown:
            row = summary_row(trace)
            output.result(" ".join(f"{k}={v}" for k, v in row.items() if v not in (None, "", False)))
            output.result(json.dumps(trace, ensure_ascii=False, indent=2))
    return 0


def _traces_of(pdir: Path, wanted: str) -> tuple[str | None, list[dict[str, Any]]]:
    """The trace ``wanted`` names (plan id None); else, when it names a plan (an id, a prefix,
    @), that plan's id and its traces, oldest first."""
    if not plans.is_id(wanted) and not wanted.startswith("@"):
        try:
            return None, [load_trace(pdir, wanted)]
        except PapayuError:
            pass
    try:
        plan_id = plans.resolve_id(pdir, wanted)
    except PapayuError:
        return None, [load_trace(pdir, wanted)]  # neither: said as the trace it is not
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
@click.option("--json", "as_json", is_flag=True, help="Print the trace JSON only ({traces: [...]} for a plan).")
def show_command(trace_id: str, as_json: bool) -> None:
    """Show trace ID (a unique prefix is enough), or every trace of plan ID (a plan id, a unique
    prefix of it or of its hash part, @, @~N), its PLAN round first."""
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
