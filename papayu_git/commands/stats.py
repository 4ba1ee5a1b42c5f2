"""`git papayu stats [--last N] [--json]`: protocol metrics and v2 graduation (docs/DESIGN.md, "Traces")."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import click

from papayu_git import output
from papayu_git.commands.trace import current_papayu_dir
from papayu_git.error_handler import handle_errors
from papayu_git.stats import compute_stats
from papayu_git.traces import load_traces, traces_dir


def _pct(value: float | None) -> str:
    return "-" if value is None else f"{value * 100:.1f}%"


def _ms(value: float | None) -> str:
    return "-" if value is None else f"{value:.0f} ms"


def print_report(stats: dict[str, Any]) -> None:
    output.result(f"last {stats['last']} APPLY traces: {stats['apply_count']} (of {stats['traces']} traces)")
    output.result(
        f"  fallback_rate                     {_pct(stats['fallback_rate'])} ({stats['fallback_count']} fallbacks)"
    )
    output.result(f"  fallback_rate_excluding_non_utf8  {_pct(stats['fallback_rate_excluding_non_utf8'])}")
    for reason, count in stats["fallback_reasons"].items():
        output.result(f"    {reason:<34}{count}")
    output.result(
        f"  repair success rate               {_pct(stats['repair_success_rate'])} "
        f"({stats['repair_successes']}/{stats['repair_attempts']})"
    )
    output.result(
        f"  check pass rate                   {_pct(stats['check_pass_rate'])} "
        f"({stats['check_passed']}/{stats['check_runs']})"
    )
    latency = stats["latency_ms"]
    output.result(
        f"  model latency                     mean {_ms(latency['mean'])}, p95 {_ms(latency['p95'])} "
        f"({latency['count']} calls)"
    )
    agent = stats.get("agent") or {}
    if agent.get("runs"):
        outcomes = ", ".join(f"{k} {v}" for k, v in agent["outcomes"].items())
        output.result(
            f"agent runs: {agent['runs']} ({outcomes}); tool calls per run {agent['tool_calls_mean']}; "
            f"flagged {agent['flagged']}"
        )
    online = stats.get("online") or {}
    if online.get("attempted"):
        reasons = ", ".join(f"{k} {v}" for k, v in online["reasons"].items())
        output.result(
            f"online research: {online['attempted']} attempted, {online['executed']} executed, "
            f"{online['used_as_context']} used as context ({reasons}); results {online['results']}, "
            f"pages ok {online['pages_ok']} / failed {online['pages_failed']}, cache hits {online['cache_hits']}, "
            f"early stops {online['early_stops']}"
        )
    grad = stats["graduation"]
    output.result(f"v2 graduation ({'READY' if grad['ready'] else 'not yet'}): {grad['action']}")
    for c in grad["criteria"]:
        mark = output.colour("ok  ", "green") if c["holds"] else output.colour("no  ", "red")
        value = json.dumps(c["value"]) if isinstance(c["value"], dict) else c["value"]
        output.result(f"  {mark}{c['name']}: {value} (needs {c['threshold']})")


def run(last: int, traces_from: str | None, as_json: bool) -> int:
    if traces_from:
        directory = Path(traces_from)
    else:
        directory = traces_dir(current_papayu_dir())
    stats = compute_stats(load_traces(directory), last)
    if as_json:
        output.emit_json({"ok": True, "directory": str(directory), **stats})
    else:
        print_report(stats)
    return 0


@click.command("stats")
@click.option(
    "--last",
    default=100,
    show_default=True,
    type=click.IntRange(min=1),
    help="Look at the N most recent APPLY traces (graduation judges the last 100).",
)
@click.option(
    "--traces",
    "traces_from",
    type=click.Path(file_okay=False, exists=True),
    help="Read traces from this directory instead of .git/papayu/traces.",
)
@click.option("--json", "as_json", is_flag=True, help="Machine-readable output.")
def command(last: int, traces_from: str | None, as_json: bool) -> None:
    """Protocol metrics from traces: apply count, fallback rate (with and without
    ERR_NON_UTF8_FILE), fallback reasons, repair success rate, check pass rate, mean and
    p95 model latency — and whether the v2 graduation criteria hold (fallback < 1%,
    ERR_PATCH_APPLY_FAILED < 1% and repaired more often than fallen back, ...)."""
    with handle_errors(as_json):
        raise SystemExit(run(last, traces_from, as_json))
