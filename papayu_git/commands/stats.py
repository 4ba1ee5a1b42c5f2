"""`git papayu stats [--last N] [--json]`: how the applies went, whether diffs-only answers are
safe (stats.graduation), and the model's tokens and their estimated cost (docs/DESIGN.md, "Traces")."""

from __future__ import annotations

from decimal import Decimal
from pathlib import Path
from typing import Any

import click

from papayu_git import output, settings
from papayu_git.commands.trace import current_papayu_dir
from papayu_git.error_handler import handle_errors
from papayu_git.secrets import printable
from papayu_git.stats import NON_UTF8, Prices, compute_stats, parse_price
from papayu_git.traces import load_traces, traces_dir

PROVIDER_PRICE = "papayu.llm.providerPrice."  # + provider: git config only (settings.SECTIONS)


def _pct(value: float | None) -> str:
    return "-" if value is None else f"{value * 100:.1f}%"


def _ms(value: float | None) -> str:
    return "-" if value is None else f"{value:.0f} ms"


def configured_prices(cwd: str | None) -> Prices:
    """papayu.llm.price (PAPAYU_LLM_PRICE) for every provider, papayu.llm.providerPrice.<provider> for one;
    every one set is checked, used or not (a typo must not pass for "no estimate")."""
    configured = settings.resolve("llm_price", cwd)
    default = parse_price(configured.value, configured.source.removeprefix("git config "))
    by_provider = {
        provider: price
        for provider, value in settings.section_items(PROVIDER_PRICE, cwd).items()
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
        [printable(r["provider"]), printable(r["model"]), *(str(r[k]) for k in keys)]
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
    """How the applies went, in a user's words (the JSON keeps the metrics' names)."""
    count = stats["apply_count"]
    output.result(
        f"{count} plan{'s' if count != 1 else ''} applied here "
        f"(the last {stats['last']} applies are counted; {stats['traces']} traces in all)"
    )
    fallback = stats["fallback_count"]
    aside = stats["fallback_reasons"].get(NON_UTF8, 0)
    rows = [
        ("checks passed", f"{stats['check_passed']} of {stats['check_runs']} ({_pct(stats['check_pass_rate'])})"),
        (
            "answers rewritten as whole files",
            f"{fallback} of {count} ({_pct(stats['fallback_rate'])})"
            + (f", {aside} of them for a file that is not UTF-8" if aside else ""),
        ),
        *((f"  because of {reason}", str(n)) for reason, n in stats["fallback_reasons"].items()),
        (
            "diffs saved by a repair round",
            f"{stats['repair_successes']} of {stats['repair_attempts']} ({_pct(stats['repair_success_rate'])})",
        ),
        (
            "the model's answer time",
            f"mean {_ms(stats['latency_ms']['mean'])}, p95 {_ms(stats['latency_ms']['p95'])} "
            f"({stats['latency_ms']['count']} calls)",
        ),
    ]
    for label, value in rows:
        output.result(f"  {label:<34}{value}")
    print_extras(stats)
    print_readiness(stats["graduation"])
    print_usage(stats["usage"])


def print_extras(stats: dict[str, Any]) -> None:
    """Agent runs and online research, when there were any."""
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
    chosen = stats.get("selection") or {}
    if chosen.get("ordered_checks"):
        output.result(
            f"fail first: {chosen['ordered_checks']} checks ran the tests a plan reaches first, "
            f"{chosen['stopped_early']} stopped there on a failure; the tip's run was kept "
            f"{chosen['tip_runs_kept']} times, made {chosen['tip_runs_made']} times"
        )
    best = stats.get("best_of") or {}
    if best.get("runs"):
        outcomes = ", ".join(f"{k} {v}" for k, v in best["outcomes"].items())
        states = ", ".join(f"{k} {v}" for k, v in best["candidate_states"].items())
        output.result(f"best-of runs: {best['runs']} ({outcomes}); candidates {best['candidates']} ({states})")


def print_readiness(grad: dict[str, Any]) -> None:
    """Whether the model's diffs can go without the whole-file fallback here
    (papayu.protocol.fallbackToV1; docs/DESIGN.md, "Traces"), said as advice: what to do, and why."""
    output.result(f"whole-file fallback: {readiness(grad)}")


def readiness(grad: dict[str, Any]) -> str:
    """The graduation criteria (stats.graduation) as one piece of advice."""
    if grad["ready"]:
        return (
            f"the model's diffs applied reliably over the last {grad['window']} applies; you may turn the "
            "fallback off: git config papayu.protocol.fallbackToV1 false"
        )
    by_name = {c["name"]: c for c in grad["criteria"]}
    applies = by_name["enough_applies"]["value"]
    if applies < grad["window"]:
        return (
            f"keep it on (the default). Whether the model's diffs can do without it shows after "
            f"{grad['window']} applies here; {grad['window'] - applies} to go"
        )
    failing = next(c for c in grad["criteria"] if not c["holds"])
    return f"keep it on: {WHY_KEEP[failing['name']](failing['value'])}"


def _share(value: Any) -> str:
    return _pct(value) if isinstance(value, float) else str(value)


# Why the fallback stays on, per criterion of stats.graduation (each must hold over the window).
WHY_KEEP = {
    "fallback_rate_excluding_non_utf8": lambda v: f"{_share(v)} of the answers needed it (it could go below 1%)",
    "patch_apply_failed_rate": lambda v: f"{_share(v)} of the model's diffs did not apply (it could go below 1%)",
    "patch_apply_failed_repaired_vs_fallback": lambda v: (
        f"a diff that did not apply was rewritten whole ({v['fallback']}) more often than repaired ({v['repaired']})"
    ),
    "v2_update_existing_forbidden_rate": lambda v: (
        f"{_share(v)} of the answers rewrote an existing file whole where a diff was asked for"
    ),
}


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
    help="Look at the N most recent applies (whether the whole-file fallback can go is judged over 100).",
)
@click.option(
    "--traces",
    "traces_from",
    type=click.Path(file_okay=False, exists=True),
    help="Read traces from this directory instead of .git/papayu/traces.",
)
@click.option("--json", "as_json", is_flag=True, help="Machine-readable output.")
def command(last: int, traces_from: str | None, as_json: bool) -> None:
    """How the applies in the traces went: how often the check passed, how often the model's
    answer had to be rewritten as whole files (the whole-file fallback) and why, how often a
    repair round saved a diff, the model's answer time — and whether the fallback can be turned
    off here (papayu.protocol.fallbackToV1): under 1% of answers needing it and of diffs failing,
    failed diffs repaired more often than rewritten whole, over at least 100 applies.

    Then the prompt and completion tokens of every model call in the traces, per provider
    and model (calls whose server reported none: usage unknown), and their estimated cost
    when papayu.llm.price (PAPAYU_LLM_PRICE, or papayu.llm.providerPrice.<provider>) is set to
    PROMPT,COMPLETION in USD per million tokens."""
    with handle_errors(as_json):
        raise SystemExit(run(last, traces_from, as_json))
