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
from typing import Any

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


def compute_stats(traces: Sequence[Mapping[str, Any]], last: int = GRADUATION_WINDOW) -> dict[str, Any]:
    """Metrics over the last ``last`` APPLY traces (oldest first in ``traces``); model latency over
    those applies and the plan rounds of the same plans."""
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
        "latency_ms": latency_metrics(rounds),
        "graduation": graduation(applies, metrics),
        "agent": agent_metrics(traces),
        "online": online_metrics(traces),
    }
