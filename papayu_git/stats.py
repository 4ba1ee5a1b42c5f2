"""Protocol metrics from traces and the v2 graduation criteria (docs/DESIGN.md, "Traces":
"When v2 can stand alone").

Pure: a list of trace dicts in, a dict of numbers out. One trace = one plan or
apply command; its protocol_* fields describe the repair and fallback rounds
inside it (traces.py layout).
"""

from __future__ import annotations

import math
from collections import Counter
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from decimal import Decimal, InvalidOperation
from typing import Any, NamedTuple

from papayu_git.errors import PapayuError
from papayu_git.golden import trace_mode
from papayu_git.outcomes import CHECK_RAN, CheckState

GRADUATION_WINDOW = 100  # judged over the last 100 APPLY traces, and not before there are 100
GRADUATION_MAX_RATE = 0.01  # each failure rate must stay under 1%
NON_UTF8 = "ERR_NON_UTF8_FILE"
PATCH_FAILED = "ERR_PATCH_APPLY_FAILED"
UPDATE_FORBIDDEN = "ERR_V2_UPDATE_EXISTING_FORBIDDEN"


def _ratio(part: int, whole: int) -> float | None:
    return round(part / whole, 6) if whole else None


def p95(values: Sequence[float]) -> float | None:
    """Nearest-rank 95th percentile."""
    if not values:
        return None
    ordered = sorted(values)
    return ordered[max(0, math.ceil(0.95 * len(ordered)) - 1)]


def _fell_back(trace: Mapping[str, Any]) -> bool:
    return bool(trace.get("protocol_fallback_attempted"))


def _codes_seen(trace: Mapping[str, Any]) -> set[str]:
    """Every ERR code the apply met: the one repaired, the one fallen back on, the final one."""
    codes = {trace.get("protocol_repair_reason"), trace.get("protocol_fallback_reason")}
    final = trace.get("error_code")
    codes.add(final.split(":", 1)[0] if isinstance(final, str) else None)
    return {c for c in codes if isinstance(c, str) and c}


def _repaired(trace: Mapping[str, Any]) -> bool:
    """A v2 repair round ran and the apply then succeeded without falling back."""
    return (
        trace.get("protocol_repair_attempt") == 1
        and not _fell_back(trace)
        and trace.get("validation_outcome", "ok") == "ok"
        and not trace.get("error_code")
    )


def _check_state(trace: Mapping[str, Any]) -> str | None:
    check = trace.get("check")
    state = check.get("state") if isinstance(check, dict) else None
    return state if isinstance(state, str) else None  # a hand-edited trace must not break the set lookup


def _latency(trace: Mapping[str, Any]) -> float | None:
    request = trace.get("request")
    value = request.get("latency_ms") if isinstance(request, dict) else trace.get("latency_ms")
    return float(value) if isinstance(value, (int, float)) and not isinstance(value, bool) else None


def protocol_metrics(applies: Sequence[Mapping[str, Any]]) -> dict[str, Any]:
    count = len(applies)
    reasons = Counter(str(t.get("protocol_fallback_reason") or "unknown") for t in applies if _fell_back(t))
    fallbacks = sum(reasons.values())
    non_utf8 = reasons.get(NON_UTF8, 0)
    repairs = [t for t in applies if t.get("protocol_repair_attempt") == 1]
    return {
        "apply_count": count,
        "fallback_count": fallbacks,
        "fallback_rate": _ratio(fallbacks, count),
        # NON_UTF8 is a limit of the data, not a failure of v2 — out of both counts.
        "fallback_rate_excluding_non_utf8": _ratio(fallbacks - non_utf8, count - non_utf8),
        "fallback_reasons": dict(sorted(reasons.items())),
        "repair_attempts": len(repairs),
        "repair_successes": sum(1 for t in repairs if _repaired(t)),
        "repair_success_rate": _ratio(sum(1 for t in repairs if _repaired(t)), len(repairs)),
    }


def check_metrics(applies: Sequence[Mapping[str, Any]]) -> dict[str, Any]:
    states = [s for s in map(_check_state, applies) if s in CHECK_RAN]
    passed = states.count(CheckState.PASSED)
    return {"check_runs": len(states), "check_passed": passed, "check_pass_rate": _ratio(passed, len(states))}


def selection_metrics(applies: Sequence[Mapping[str, Any]]) -> dict[str, Any]:
    """Fail first's evidence (papayu.check.select): the checks that ran the tests a plan reaches
    first, those that stopped there (a failure rejected the plan before the rest ran), and the
    checks that found the tip's run already kept (by `doctor --check`, the prewarm, a landed plan)."""
    checks = [t.get("check") or {} for t in applies]
    ordered = [c for c in checks if _ordered(c.get("selection"))]
    runs = [r for c in checks for r in c.get("runs") or () if isinstance(r, Mapping)]
    return {
        "ordered_checks": len(ordered),
        "stopped_early": sum(1 for r in runs if r.get("stopped")),
        "tip_runs_kept": sum(1 for r in runs if r.get("run") == "tip" and not r.get("seconds")),
        "tip_runs_made": sum(1 for r in runs if r.get("run") == "tip" and r.get("seconds")),
    }


def _ordered(value: Any) -> bool:
    return isinstance(value, Mapping) and value.get("mode") == "on" and not value.get("unordered")


def latency_metrics(traces: Sequence[Mapping[str, Any]]) -> dict[str, Any]:
    values = [v for v in map(_latency, traces) if v is not None]
    return {"count": len(values), "mean": round(sum(values) / len(values), 3) if values else None, "p95": p95(values)}


def _criterion(name: str, value: Any, threshold: str, holds: bool) -> dict[str, Any]:
    return {"name": name, "value": value, "threshold": threshold, "holds": holds}


def graduation(applies: Sequence[Mapping[str, Any]], metrics: Mapping[str, Any]) -> dict[str, Any]:
    """When PAPAYU_PROTOCOL_FALLBACK_TO_V1=0 (v2 only) is safe (docs/DESIGN.md, "Traces")."""
    count = len(applies)
    patch_failed = sum(1 for t in applies if PATCH_FAILED in _codes_seen(t))
    repaired = sum(1 for t in applies if t.get("protocol_repair_reason") == PATCH_FAILED and _repaired(t))
    fell_back = sum(1 for t in applies if _fell_back(t) and t.get("protocol_fallback_reason") == PATCH_FAILED)
    forbidden = sum(1 for t in applies if UPDATE_FORBIDDEN in _codes_seen(t))
    rate = metrics["fallback_rate_excluding_non_utf8"]
    criteria = [
        _criterion("enough_applies", count, f">= {GRADUATION_WINDOW}", count >= GRADUATION_WINDOW),
        _criterion("fallback_rate_excluding_non_utf8", rate, "< 0.01", rate is not None and rate < GRADUATION_MAX_RATE),
        _criterion(
            "patch_apply_failed_rate",
            _ratio(patch_failed, count),
            "< 0.01",
            count > 0 and patch_failed / count < GRADUATION_MAX_RATE,
        ),
        _criterion(
            "patch_apply_failed_repaired_vs_fallback",
            {"repaired": repaired, "fallback": fell_back},
            "repaired > fallback (or no failures)",
            patch_failed == 0 or repaired > fell_back,
        ),
        _criterion(
            "v2_update_existing_forbidden_rate",
            _ratio(forbidden, count),
            "< 0.01 (tends to 0)",
            count > 0 and forbidden / count < GRADUATION_MAX_RATE,
        ),
    ]
    return {
        "window": GRADUATION_WINDOW,
        "criteria": criteria,
        "ready": all(c["holds"] for c in criteria),
        "action": "PAPAYU_PROTOCOL_FALLBACK_TO_V1=0 (v2-only) is safe"
        if all(c["holds"] for c in criteria)
        else "keep the v1 fallback",
    }


def _is_agent(trace: Mapping[str, Any]) -> bool:
    request = trace.get("request")
    return trace.get("command") == "agent" or (isinstance(request, dict) and request.get("mode") == "agent")


def agent_metrics(traces: Sequence[Mapping[str, Any]]) -> dict[str, Any]:
    """`git papayu agent` runs: how they ended, how many tool calls, how many were flagged.
    They are not protocol APPLY rounds, so the graduation criteria leave them out."""
    runs = [t for t in traces if _is_agent(t)]
    outcomes: Counter[str] = Counter()
    calls = []
    for trace in runs:
        applied, agent = trace.get("apply"), trace.get("agent")
        state = applied.get("state") if isinstance(applied, dict) else None
        end = agent.get("end") if isinstance(agent, dict) else None
        outcomes[str(state or trace.get("error_code") or end or "unknown")] += 1
        if isinstance(agent, dict) and isinstance(agent.get("steps"), list):
            calls.append(len(agent["steps"]))
    return {
        "runs": len(runs),
        "outcomes": dict(sorted(outcomes.items())),
        "tool_calls_mean": round(sum(calls) / len(calls), 2) if calls else None,
        "flagged": sum(1 for t in runs if t.get("behaviour_flags")),
    }


def online_metrics(traces: Sequence[Mapping[str, Any]]) -> dict[str, Any]:
    """The online research fallback of plans (docs/DESIGN.md, "Online research"); a re-plan with the
    research carries the same fields, so only first attempts count as attempts."""
    first = [t for t in traces if t.get("online_fallback_attempted") and not t.get("online_replan")]
    reasons = Counter(str(t.get("online_fallback_reason") or "unknown") for t in first)
    runs = [t["online_research"] for t in first if isinstance(t.get("online_research"), dict)]

    def total(key: str) -> int:
        return sum(int(r.get(key) or 0) for r in runs if isinstance(r.get(key), (int, bool)))

    return {
        "attempted": len(first),
        "executed": sum(1 for t in first if t.get("online_fallback_executed")),
        "used_as_context": sum(
            1
            for t in traces
            if isinstance(t.get("online_research"), dict) and t["online_research"].get("used_as_context")
        ),
        "reasons": dict(sorted(reasons.items())),
        "results": total("results"),
        "pages_ok": total("pages_ok"),
        "pages_failed": total("pages_failed"),
        "cache_hits": total("cache_hit"),
        "early_stops": total("early_stop"),
    }


def best_of_metrics(traces: Sequence[Mapping[str, Any]]) -> dict[str, Any]:
    """`best-of` runs (docs/DESIGN.md, "Best of N"): how they ended and each candidate's end. The
    candidates' plans and checks are counted with the other plans and applies; their tokens too."""
    runs = [t["best_of"] for t in traces if t.get("command") == "best-of" and isinstance(t.get("best_of"), dict)]
    candidates = [c for run in runs for c in run.get("candidates") or [] if isinstance(c, dict)]
    return {
        "runs": len(runs),
        "outcomes": dict(sorted(Counter(str(run.get("state") or "unknown") for run in runs).items())),
        "candidates": len(candidates),
        "candidate_states": dict(sorted(Counter(str(c.get("state") or "unknown") for c in candidates).items())),
    }


class Price(NamedTuple):
    """USD per million tokens."""

    prompt: Decimal
    completion: Decimal

    def cost(self, prompt_tokens: int, completion_tokens: int) -> Decimal:
        return (prompt_tokens * self.prompt + completion_tokens * self.completion) / 1_000_000


def parse_price(value: str, key: str) -> Price | None:
    """``PROMPT,COMPLETION`` (USD per million tokens) as set under ``key``; None when empty."""
    if not value.strip():
        return None
    parts = value.split(",")
    try:
        numbers = [Decimal(part.strip()) for part in parts]
    except InvalidOperation:
        numbers = []
    if len(numbers) != 2 or not all(n.is_finite() and n >= 0 for n in numbers):
        raise PapayuError(
            "ERR_CONFIG_INVALID",
            f"{key} is {value!r}, not PROMPT,COMPLETION",
            path=key,
            hint=f"Set {key} to two prices in USD per million tokens, prompt then completion (e.g. 2.50,10), "
            "or unset it for no estimate.",
        )
    return Price(numbers[0], numbers[1])


class Prices(NamedTuple):
    """The configured prices: ``default`` for every provider, ``by_provider`` wins over it."""

    default: Price | None = None
    by_provider: Mapping[str, Price] = {}

    def of(self, provider: str) -> Price | None:
        return self.by_provider.get(provider, self.default)


NO_PRICES = Prices()


@dataclass
class _Tally:
    calls: int = 0
    usage_unknown: int = 0  # calls whose server reported no token counts: not counted as 0
    prompt_tokens: int = 0
    completion_tokens: int = 0

    def add(self, other: _Tally) -> None:
        self.calls += other.calls
        self.usage_unknown += other.usage_unknown
        self.prompt_tokens += other.prompt_tokens
        self.completion_tokens += other.completion_tokens

    def cost(self, price: Price | None) -> Decimal | None:
        return price.cost(self.prompt_tokens, self.completion_tokens) if price else None

    def row(self, price: Price | None) -> dict[str, Any]:
        cost = self.cost(price)
        return {
            **vars(self),
            "price": {"prompt": float(price.prompt), "completion": float(price.completion)} if price else None,
            "cost_usd": float(cost) if cost is not None else None,
        }


def _count(value: Any) -> int | None:
    return value if isinstance(value, int) and not isinstance(value, bool) and value >= 0 else None


def _tokens(entry: Any) -> tuple[int, int] | None:
    """(prompt, completion) of one call, None when the server did not report both."""
    if not isinstance(entry, dict):
        return None
    prompt, completion = _count(entry.get("prompt_tokens")), _count(entry.get("completion_tokens"))
    return None if prompt is None or completion is None else (prompt, completion)


def _call_tally(request: Mapping[str, Any]) -> _Tally:
    """The model calls of one trace's ``request``, whose `usage` has an entry per call: the
    server's token counts, {} or nulls when it reported none."""
    usage, calls = request.get("usage"), _count(request.get("calls")) or 0
    if not isinstance(usage, (list, dict)):  # a trace written before usage was recorded
        return _Tally(calls=calls, usage_unknown=calls)
    tally = _Tally()
    for entry in usage if isinstance(usage, list) else [usage]:
        tokens = _tokens(entry)
        tally.calls += 1
        if tokens is None:
            tally.usage_unknown += 1
        else:
            tally.prompt_tokens += tokens[0]
            tally.completion_tokens += tokens[1]
    if isinstance(usage, dict) and calls > 1:  # an older agent trace: one sum over its turns
        tally.calls, tally.usage_unknown = calls, calls if tally.usage_unknown else 0
    return tally


def _model_calls(trace: Mapping[str, Any]) -> list[Mapping[str, Any]]:
    """The blocks of one trace that record model calls ({provider, model, usage, calls}): its
    request, and the summary calls of the online research a plan ran. A re-plan with that research
    carries the same block, so only the plan that ran it counts them."""
    blocks = [trace["request"]] if isinstance(trace.get("request"), dict) else []
    research = trace.get("online_research")
    if isinstance(research, dict) and isinstance(research.get("usage"), list) and not trace.get("online_replan"):
        blocks.append(research)
    return blocks


def usage_metrics(traces: Sequence[Mapping[str, Any]], prices: Prices = NO_PRICES) -> dict[str, Any]:
    """Prompt and completion tokens of every model call the traces record, per provider and model,
    and the estimated cost where the provider has a price (docs/DESIGN.md, "Traces")."""
    by_model: dict[tuple[str, str], _Tally] = {}
    for trace in traces:
        for calls in _model_calls(trace):
            tally = _call_tally(calls)
            if tally.calls:
                key = (str(calls.get("provider") or "unknown"), str(calls.get("model") or "unknown"))
                by_model.setdefault(key, _Tally()).add(tally)
    by_provider: dict[str, _Tally] = {}
    for (provider, _model), tally in by_model.items():
        by_provider.setdefault(provider, _Tally()).add(tally)
    total = _Tally()
    for tally in by_provider.values():
        total.add(tally)
    priced = sorted(p for p in by_provider if prices.of(p))
    cost = sum((by_provider[p].cost(prices.of(p)) or Decimal(0) for p in priced), Decimal(0))
    return {
        **vars(total),
        "cost_usd": float(cost) if priced else None,
        "priced_providers": priced,
        "unpriced_providers": sorted(set(by_provider) - set(priced)),
        "by_provider": [{"provider": p, **t.row(prices.of(p))} for p, t in sorted(by_provider.items())],
        "by_model": [{"provider": p, "model": m, **t.row(prices.of(p))} for (p, m), t in sorted(by_model.items())],
    }


def compute_stats(
    traces: Sequence[Mapping[str, Any]], last: int = GRADUATION_WINDOW, prices: Prices = NO_PRICES
) -> dict[str, Any]:
    """Metrics over the last ``last`` APPLY traces (oldest first in ``traces``); model latency over
    those applies and the plan rounds of the same plans; token usage over every trace."""
    applies = [t for t in traces if trace_mode(t) == "apply" and not _is_agent(t)][-last:]
    plan_ids = {t.get("plan_id") for t in applies} - {None, ""}
    rounds = [t for t in traces if trace_mode(t) == "plan" and t.get("plan_id") in plan_ids] + list(applies)
    if not applies:  # nothing applied yet: the latency of the most recent plan rounds
        rounds = [t for t in traces if trace_mode(t) is not None][-last:]
    metrics = protocol_metrics(applies)
    return {
        "last": last,
        "traces": len(traces),
        **metrics,
        **check_metrics(applies),
        "selection": selection_metrics(applies),
        "latency_ms": latency_metrics(rounds),
        "graduation": graduation(applies, metrics),
        "agent": agent_metrics(traces),
        "online": online_metrics(traces),
        "best_of": best_of_metrics(traces),
        "usage": usage_metrics(traces, prices),
    }
