"""`git papayu trace list|show ID|golden ID [OUT]` (docs/DESIGN.md, "Traces")."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import click

from papayu_git import output
from papayu_git.error_handler import handle_errors
from papayu_git.git import open_repo, papayu_dir
from papayu_git.golden import check_replay, trace_mode, trace_to_golden
from papayu_git.traces import load_trace, load_traces, traces_dir, with_plan_context


def current_papayu_dir() -> Path:
    return papayu_dir(open_repo())


def summary_row(trace: dict[str, Any]) -> dict[str, Any]:
    return {
        "trace_id": trace.get("trace_id"),
        "created_at": trace.get("created_at"),
        "command": trace.get("command"),
        "mode": trace_mode(trace),
        "protocol": trace.get("schema_version"),
        "outcome": trace.get("validation_outcome"),
        "error_code": trace.get("error_code"),
        "fallback": bool(trace.get("protocol_fallback_attempted")),
        "check": (trace.get("check") or {}).get("state") if isinstance(trace.get("check"), dict) else None,
        "plan_id": trace.get("plan_id"),
    }


def run_list(last: int | None, as_json: bool) -> int:
    rows = [summary_row(t) for t in load_traces(traces_dir(current_papayu_dir()))]
    rows = rows[-last:] if last else rows
    if as_json:
        output.emit_json({"ok": True, "traces": rows})
        return 0
    if not rows:
        output.info("no traces yet (plan, apply, agent and research write them; PAPAYU_TRACE=0 turns them off)")
        return 0
    table = [
        [
            str(row["created_at"] or "")[:19],
            str(row["trace_id"]),
            row["command"] or "-",
            row["mode"] or "-",
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
    header = ["AT", "TRACE", "COMMAND", "MODE", "PROTO", "OUTCOME", "NOTES"]
    widths = [max(len(r[i]) for r in [header, *table]) for i in range(len(header))]
    with output.paged():
        for fields in [header, *table]:
            output.result("  ".join(f.ljust(w) for f, w in zip(fields, widths, strict=True)).rstrip())
    return 0


def run_show(trace_id: str, as_json: bool) -> int:
    trace = load_trace(current_papayu_dir(), trace_id)
    if as_json:
        output.emit_json(trace)
        return 0
    row = summary_row(trace)
    with output.paged():
        output.result(" ".join(f"{k}={v}" for k, v in row.items() if v not in (None, "", False)))
        output.result(json.dumps(trace, ensure_ascii=False, indent=2))
    return 0


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


@click.group("trace")
def command() -> None:
    """Traces of plan/apply rounds in .git/papayu/traces/<id>.json (PAPAYU_TRACE, on by default).

    Traces hold the config snapshot, context and cache stats, the validated answer, schema
    version and hash, protocol fallback fields and the check result; secrets are masked and
    the raw model output is kept only with PAPAYU_TRACE_RAW=1.
    """


@command.command("list")
@click.option("--last", type=click.IntRange(min=1), help="Only the N most recent traces.")
@click.option("--json", "as_json", is_flag=True, help="Machine-readable output.")
def list_command(last: int | None, as_json: bool) -> None:
    """List traces, oldest first: time, id, command, mode, protocol, outcome, error code."""
    with handle_errors(as_json):
        raise SystemExit(run_list(last, as_json))


@command.command("show")
@click.argument("trace_id")
@click.option("--json", "as_json", is_flag=True, help="Print the trace JSON only.")
def show_command(trace_id: str, as_json: bool) -> None:
    """Show trace ID (a unique prefix is enough)."""
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
