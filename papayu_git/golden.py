"""Golden traces (docs/DESIGN.md, "Traces"): the upstream format {protocol, request, context, result}.

Replay = run the recorded validated_json through our validator with the recorded
mode and protocol, and compare the ok/err outcome and the error code.
"""

from __future__ import annotations

import json
from collections.abc import Mapping
from pathlib import Path
from typing import Any, NamedTuple

from papayu_git.errors import PapayuError, ValidationFailed
from papayu_git.schemas import RESPONSE_SCHEMAS, schema_errors, schema_hash
from papayu_git.validate import validate_response

# The upstream implementation recorded some errors as prose; the code we give them.
UPSTREAM_MESSAGES = {
    "protected or non-text file": "ERR_PROTECTED_PATH",
}
# Codes only an apply against a real tree can produce: the apply tests replay those, not the validator.
APPLY_TIME_CODES = frozenset({"ERR_BASE_MISMATCH", "ERR_PATCH_APPLY_FAILED", "ERR_NON_UTF8_FILE"})


class Outcome(NamedTuple):
    outcome: str  # "ok" | "err"
    code: str | None  # ERR_* or None


def is_golden(data: Any) -> bool:
    return isinstance(data, dict) and {"protocol", "request", "result"} <= data.keys()


def expected_code(recorded: str | None) -> str | None:
    """Our ERR code for what the trace recorded (ERR_X: text, or upstream prose)."""
    if not recorded:
        return None
    head = recorded.split(":", 1)[0].strip()
    if head.startswith("ERR_"):
        return head
    for message, code in UPSTREAM_MESSAGES.items():
        if recorded.startswith(message):
            return code
    return recorded


def expected(trace: Mapping[str, Any]) -> Outcome:
    result = trace["result"]
    return Outcome(result["validation_outcome"], expected_code(result.get("error_code")))


def plan_read_paths(trace: Mapping[str, Any]) -> set[str]:
    """Files a PLAN trace asked to read (context_requests read_file)."""
    data = trace.get("result", {}).get("validated_json")
    requests = data.get("context_requests", []) if isinstance(data, dict) else []
    return {r["path"] for r in requests if isinstance(r, dict) and r.get("type") == "read_file" and "path" in r}


def sibling_read_files(path: Path, schema_version: int) -> dict[str, str]:
    """Upstream traces do not list the files read in PLAN: take them from the PLAN
    traces of the same directory and protocol (001_fix_bug_plan reads src/main.rs)."""
    files: dict[str, str] = {}
    for sibling in sorted(path.parent.glob("*.json")):
        try:
            data = json.loads(sibling.read_text(encoding="utf-8"))
        except (OSError, ValueError):
            continue
        if (
            is_golden(data)
            and data["request"].get("mode") == "plan"
            and data["protocol"].get("schema_version") == schema_version
        ):
            files.update({p: "" for p in plan_read_paths(data)})
    return files


def read_files_for(trace: Mapping[str, Any], path: Path | None) -> dict[str, str] | None:
    recorded = trace.get("context", {}).get("plan_files")
    if isinstance(recorded, dict):
        return dict(recorded)
    if path is None:
        return None
    return sibling_read_files(path, trace["protocol"]["schema_version"])


def replay(trace: Mapping[str, Any], path: Path | None = None) -> tuple[Outcome, list[PapayuError]]:
    """Validate the recorded response as the trace's mode/protocol; return our outcome."""
    try:
        validate_response(
            trace["result"]["validated_json"],
            protocol=trace["protocol"]["schema_version"],
            mode=trace["request"]["mode"],
            read_files=read_files_for(trace, path),
        )
    except ValidationFailed as exc:
        return Outcome("err", exc.code), exc.errors
    except PapayuError as exc:
        return Outcome("err", exc.code), [exc]
    return Outcome("ok", None), []


def check_replay(trace: Mapping[str, Any], path: Path | None = None) -> list[PapayuError]:
    """[] when our replay gives the recorded outcome; else one ERR_GOLDEN_MISMATCH."""
    want = expected(trace)
    got, errors = replay(trace, path)
    if got.outcome != want.outcome:
        detail = "; ".join(e.format() for e in errors[:3])
        return [
            PapayuError(
                "ERR_GOLDEN_MISMATCH",
                f"recorded {want.outcome}, replay gives {got.outcome}" + (f" ({detail})" if detail else ""),
                path="result.validation_outcome",
            )
        ]
    if want.outcome == "err" and got.code != want.code:
        return [
            PapayuError(
                "ERR_GOLDEN_MISMATCH", f"recorded {want.code}, replay gives {got.code}", path="result.error_code"
            )
        ]
    return []


# --- trace -> golden (`git papayu trace golden`) --------------------------------------------

GOLDEN_REQUEST_FIELDS = ("mode", "input_chars", "token_budget", "strict_json", "provider", "model")


def trace_request(trace: Mapping[str, Any]) -> dict[str, Any]:
    request = trace.get("request")
    return request if isinstance(request, dict) else {}


def trace_mode(trace: Mapping[str, Any]) -> str | None:
    """plan | apply: request.mode, else the trace's own mode, else its command (the transaction's
    apply trace has no request block); None for anything else."""
    request = trace_request(trace)
    for mode in (request.get("mode"), trace.get("mode"), trace.get("command")):
        if mode in ("plan", "apply"):
            return str(mode)
    return None


def trace_to_golden(trace: Mapping[str, Any]) -> dict[str, Any]:
    """The upstream golden format {protocol, request, context, result} of one trace.

    Volatile fields (trace_id, created_at, latency, config) are left out so that a
    regenerated golden differs only when behaviour differs. Upstream convention kept:
    an apply-time code (base mismatch, patch failure) is recorded with
    validation_outcome "ok" — the response validated, the apply step refused it.
    """
    if "validated_json" not in trace or trace_mode(trace) is None:
        raise PapayuError(
            "ERR_GOLDEN_INVALID",
            "the trace has no validated_json or no plan/apply mode",
            hint="Only LLM round traces (plan/apply) convert to golden traces.",
        )
    version = int(trace.get("schema_version") or 2)
    request = trace_request(trace)
    code = trace.get("error_code") or None
    outcome = trace.get("validation_outcome") or ("err" if code else "ok")
    if code in APPLY_TIME_CODES:
        outcome = "ok"
    context: dict[str, Any] = {k: trace[k] for k in ("context_stats", "cache_stats") if isinstance(trace.get(k), dict)}
    if trace.get("plan_files"):
        context["plan_files"] = dict(sorted(trace["plan_files"].items()))
    golden = {
        "protocol": {
            "schema_version": version,
            "schema_hash": trace.get("schema_hash") or schema_hash(RESPONSE_SCHEMAS[version]),
        },
        "request": {
            "mode": trace_mode(trace),
            **{k: request[k] for k in GOLDEN_REQUEST_FIELDS[1:] if request.get(k) is not None},
        },
        "context": context,
        "result": {"validated_json": trace["validated_json"], "validation_outcome": outcome, "error_code": code},
    }
    errors = schema_errors("golden_trace", golden, "ERR_GOLDEN_INVALID")
    if errors:
        raise errors[0]
    return golden
