"""`git papayu stats [--last N] [--json]`: protocol metrics, v2 graduation, and the model's tokens
and their estimated cost (docs/DESIGN.md, "Traces")."""

from __future__ import annotations

import json
import os
from decimal import Decimal
from pathlib import Path
from typing import Any

import click

from papayu_git import output, settings
from papayu_git.commands.trace import current_papayu_dir
from papayu_git.error_handler import handle_errors
from papayu_git.stats import Prices, compute_stats, parse_price
from papayu_git.traces import load_traces, traces_dir

PROVIDER_PRICE = "papayu.llm.price."  # + provider: git config only


def _pct(value: float | None) -> str:
    return "-" if value is None else f"{value * 100:.1f}%"


def _ms(value: float | None) -> str:
    return "-" if value is None else f"{value:.0f} ms"


def configured_prices(cwd: str | None) -> Prices:
    """papayu.llm.price (PAPAYU_LLM_PRICE) for every provider, papayu.llm.price.<provider> for one;
    every one set is checked, used or not (a typo must not pass for "no estimate")."""
    spec = settings.by_name("llm_price")
    key = spec.env if spec.env and os.environ.get(spec.env) is not None else spec.git_key
    default = parse_price(settings.get("llm_price", cwd), str(key))
    by_provider = {
        provider: price
        for provider, value in settings.git_config_items(PROVIDER_PRICE, cwd).items()
        if (price := parse_price(value, PROVIDER_PRICE + provider)) is not None
    }
    return Prices(default, by_provider)


def _usd(value: float | None) -> str:
    if value is None:
        return "-"
    if 0 < value < 0.000001:
        return "<$0.000001"
    return "$" + f"{Decimal(str(value)):.6f}".rstrip("0").rstrip(".")


def _table(rows: list[list[str]], left: int) -> list[str]:
    """Aligned columns: the first ``left`` to the left, the numbers after them to the right."""
    widths = [max(len(row[i]) for row in rows) for i in range(len(rows[0]))]
    return [
        "  ".join(f.ljust(w) if i < left else f.rjust(w) for i, (f, w) in enumerate(zip(row, widths, strict=True)))
        for row in rows
    ]


def print_usage(usage: dict[str, Any]) -> None:
    """Tokens per provider and model, and what they cost where a price is set."""
    if not usage["calls"]:
        output.result("model usage: no model calls in these traces")
        return
    priced = bool(usage["priced_providers"])
    header = ["PROVIDER", "MODEL", "CALLS", "USAGE UNKNOWN", "PROMPT TOKENS", "COMPLETION TOKENS"]
    keys = ["calls", "usage_unknown", "prompt_tokens", "completion_tokens"]
    rows = [
        [output.printable(r["provider"]), output.printable(r["model"]), *(str(r[k]) for k in keys)]
        + ([_usd(r["cost_usd"])] if priced else [])
        for r in usage["by_model"]
    ]
    if len(rows) > 1:
        rows.append(["total", "", *(str(usage[k]) for k in keys)] + ([_usd(usage["cost_usd"])] if priced else []))
    output.result(f"model usage ({usage['calls']} calls in all traces):")
    for line in _table([header + (["COST (USD)"] if priced else []), *rows], left=2):
        output.result("  " + line.rstrip())
    unknown = usage["usage_unknown"]
    not_counted = f"; {unknown} call(s) with usage unknown are not in it" if unknown else ""
    if not priced:
        output.result("cost: set papayu.llm.price to estimate")
    elif usage["unpriced_providers"]:
        missing = usage["unpriced_providers"]
        output.result(
            f"cost: ~{_usd(usage['cost_usd'])} for {', '.join(usage['priced_providers'])}{not_counted}; set "
            + " or ".join(PROVIDER_PRICE + p for p in missing)
            + f" to estimate {', '.join(missing)}"
        )
    else:
        output.result(f"cost: ~{_usd(usage['cost_usd'])} estimated{not_counted}")


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
    best = stats.get("best_of") or {}
    if best.get("runs"):
        outcomes = ", ".join(f"{k} {v}" for k, v in best["outcomes"].items())
        states = ", ".join(f"{k} {v}" for k, v in best["candidate_states"].items())
        output.result(f"best-of runs: {best['runs']} ({outcomes}); candidates {best['candidates']} ({states})")
    grad = stats["graduation"]
    output.result(f"v2 graduation ({'READY' if grad['ready'] else 'not yet'}): {grad['action']}")
    for c in grad["criteria"]:
        mark = output.colour("ok  ", "green") if c["holds"] else output.colour("no  ", "red")
        value = json.dumps(c["value"]) if isinstance(c["value"], dict) else c["value"]
        output.result(f"  {mark}{c['name']}: {value} (needs {c['threshold']})")
    print_usage(stats["usage"])


def run(last: int, traces_from: str | None, as_json: bool) -> int:
    if traces_from:
        directory = Path(traces_from)
    else:
        directory = traces_dir(current_papayu_dir())
    prices = configured_prices(None)
    stats = compute_stats(load_traces(directory), last, prices)
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
    ERR_PATCH_APPLY_FAILED < 1% and repaired more often than fallen back, ...).

    Then the prompt and completion tokens of every model call in the traces, per provider
    and model (calls whose server reported none: usage unknown), and their estimated cost
    when papayu.llm.price (PAPAYU_LLM_PRICE, or papayu.llm.price.<provider>) is set to
    PROMPT,COMPLETION in USD per million tokens."""
    with handle_errors(as_json):
        raise SystemExit(run(last, traces_from, as_json))
