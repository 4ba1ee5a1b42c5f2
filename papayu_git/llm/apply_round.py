"""The APPLY round of a stored plan without actions (docs/DESIGN.md, "Providers": the repair retry
and the v2 -> v1 fallback).

Same context as the PLAN round (the stored user messages), the confirmed plan, and the APPLY
prompt. Each answer is validated and then *preflighted* (transaction.preflight: bases, tree
rules, patch application — everything that can fail before a commit is written), so
apply-time failures reach the model as repair material instead of as a rollback.

Protocol v2 by default. ERR_PATCH_APPLY_FAILED and ERR_V2_UPDATE_EXISTING_FORBIDDEN get the one
v2 repair first, then a single fallback to v1; ERR_NON_UTF8_FILE falls back at once. The v1
attempt has its own single repair and no further fallback: never a loop.
"""

from __future__ import annotations

import json
import time
from collections.abc import Callable
from dataclasses import dataclass, field, replace
from pathlib import Path
from typing import Any

from papayu_git import output, plans, settings, traces
from papayu_git.errors import PapayuError
from papayu_git.git import papayu_dir
from papayu_git.llm.client import ChatClient
from papayu_git.llm.conversation import CallLog, Conversation, InvalidAnswer
from papayu_git.llm.planner import ask_budget, memory_block, request_fields
from papayu_git.llm.prompts import PromptMode, apply_round_message, fallback_message, system_prompt
from papayu_git.protocol import Mode, Response
from papayu_git.repository import open_repo
from papayu_git.secrets import scrub_api_key
from papayu_git.transaction import preflight

FALLBACK_REPAIR_FIRST = frozenset({"ERR_PATCH_APPLY_FAILED", "ERR_V2_UPDATE_EXISTING_FORBIDDEN"})
FALLBACK_AT_ONCE = frozenset({"ERR_NON_UTF8_FILE"})
_SCHEMA_CODES = frozenset({"ERR_SCHEMA", "ERR_JSON_INVALID", "ERR_JSON_TRUNCATED", "ERR_JSON_TRAILING_GARBAGE"})


@dataclass
class ProtocolTrail:
    """The protocol_* trace fields of one APPLY round (docs/DESIGN.md, "Traces")."""

    default: int
    attempts: list[int] = field(default_factory=list)
    fallback_reason: str | None = None
    fallback_stage: str | None = None
    repair_attempt: int = 0
    repair_reason: str | None = None

    def fields(self) -> dict[str, Any]:
        return {
            "protocol_default": self.default,
            "protocol_attempts": list(self.attempts),
            "protocol_fallback_reason": self.fallback_reason,
            "protocol_fallback_stage": self.fallback_stage,
            "protocol_repair_attempt": self.repair_attempt,
            "protocol_repair_reason": self.repair_reason,
            "protocol_fallback_attempted": self.fallback_reason is not None,
        }


@dataclass(frozen=True)
class ApplyRound:
    plan: plans.StoredPlan  # the plan with the APPLY answer (saved)
    response: Response
    trail: ProtocolTrail
    timings: dict[str, float]


def _stage(code: str, from_preflight: bool) -> str:
    if code in _SCHEMA_CODES:
        return "schema"
    return "apply" if from_preflight else "validate"


def _preflight_check(
    repo_root: Path, plan: plans.StoredPlan, protocol: int, onto: str | None, seen: set[str]
) -> Callable[[Response], None]:
    def check(response: Response) -> None:
        try:
            preflight(
                repo_root,
                replace(plan, protocol=protocol, mode=Mode.APPLY.value, response=response.data),
                response,
                onto,
            )
        except PapayuError as exc:
            seen.update(e.code for e in getattr(exc, "errors", [exc]))
            raise

    return check


def apply_user_message(plan: plans.StoredPlan) -> str:
    plan_json = json.dumps(plan.response, ensure_ascii=False, indent=1)
    return f"{plan.context}\n\n{apply_round_message(plan_json)}" if plan.context else apply_round_message(plan_json)


def _attempt(
    repo_root: Path,
    plan: plans.StoredPlan,
    client: ChatClient,
    protocol: int,
    text: str,
    log: CallLog,
    onto: str | None,
    preflight_codes: set[str],
) -> Response:
    system = system_prompt(PromptMode.APPLY, protocol, memory_block(repo_root), ask_budget(repo_root))
    conv = Conversation(
        client,
        system,
        protocol=protocol,
        mode=Mode.APPLY,
        read_files=dict(plan.files),
        log=log,
        check=_preflight_check(repo_root, plan, protocol, onto, preflight_codes),
        shape="apply",
    )
    return conv.ask(text)


def _fallback_reason(exc: InvalidAnswer, plan: plans.StoredPlan, repo_root: Path) -> str | None:
    if plan.protocol < 2 or not settings.get_bool("protocol_fallback_to_v1", str(repo_root)):
        return None
    return next((c.code for c in exc.causes if c.code in FALLBACK_REPAIR_FIRST | FALLBACK_AT_ONCE), None)


def _negotiate(
    repo_root: Path, plan: plans.StoredPlan, client: ChatClient, log: CallLog, trail: ProtocolTrail, onto: str | None
) -> Response:
    text = apply_user_message(plan)
    seen: set[str] = set()
    trail.attempts.append(plan.protocol)
    try:
        response = _attempt(repo_root, plan, client, plan.protocol, text, log, onto, seen)
        trail.repair_attempt, trail.repair_reason = log.repairs, log.repair_reason
        return response
    except InvalidAnswer as exc:
        trail.repair_attempt, trail.repair_reason = log.repairs, log.repair_reason
        reason = _fallback_reason(exc, plan, repo_root)
        if reason is None:
            raise
    trail.fallback_reason, trail.fallback_stage = reason, _stage(reason, reason in seen)
    output.event("PROTOCOL_FALLBACK", **{"from": "v2", "to": "v1", "reason": reason, "stage": trail.fallback_stage})
    output.warn(f"protocol v2 failed ({reason}); asking once more with protocol v1 (full file contents)")
    trail.attempts.append(1)
    return _attempt(repo_root, plan, client, 1, text + "\n" + fallback_message(reason), log, onto, set())


def run_apply_round(repo_root: Path, plan: plans.StoredPlan, client: ChatClient, onto: str | None = None) -> ApplyRound:
    started = time.perf_counter()
    log, trail, trace_id = CallLog(), ProtocolTrail(default=plan.protocol), traces.new_trace_id()
    pdir = papayu_dir(open_repo(repo_root))

    def trace(**fields: Any) -> None:
        """The round's trace: what both outcomes record, then ``fields``."""
        traces.write_record(
            pdir,
            trace_id,
            "apply",
            plan,
            plan_trace_id=plan.trace_id,
            plan_files=dict(plan.files),
            **trail.fields(),
            request=request_fields(client, "apply", log),
            raw_content=log.raw,
            **fields,
        )

    try:
        response = _negotiate(repo_root, plan, client, log, trail, onto)
    except PapayuError as exc:
        rejected = (
            {"validated_json": log.last_json, **traces.schema_fields(trail.attempts[-1])}
            if log.last_json is not None and trail.attempts
            else {}
        )
        trace(**rejected, validation_outcome="err", error_code=getattr(exc, "cause_code", exc.code), error=exc.format())
        raise
    protocol = trail.attempts[-1]
    updated = replace(
        plan,
        mode=Mode.APPLY.value,
        protocol=protocol,
        response=response.data,
        trace_id=trace_id,
        extra={
            **plan.extra,
            "plan_response": plan.response,
            "plan_trace_id": plan.trace_id,
            "protocol": trail.fields(),
            "apply_warnings": list(log.notes),
        },
    )
    updated = plans.StoredPlan.from_json(scrub_api_key(updated.to_json(), client.config.api_key))
    plans.save(pdir, updated)
    trace(protocol=protocol, mode="apply", validated_json=response.data, validation_outcome="ok", error_code=None)
    timings = {
        "model": log.model_sec,
        "validation": log.validation_sec,
        "preflight": log.preflight_sec,
        "total": time.perf_counter() - started,
    }
    return ApplyRound(updated, response, trail, timings)
