"""Traces (docs/DESIGN.md, "Traces"): `.git/papayu/traces/<trace_id>.json`.

One JSON object per plan or apply command: its repair and v2->v1 fallback rounds are
described by the protocol_* fields, and the transaction adds its outcome to the APPLY
round's trace (trace_id_for_apply), so `stats` counts one trace as one APPLY. Layout
(every field optional except the first three; writers fill what they know, readers —
`trace`, `stats`, golden conversion — tolerate gaps):

    trace_format              1
    trace_id                  uuid4 string
    created_at                ISO-8601 UTC with microseconds (sort key for `stats --last N`)
    command                   the round or step it holds: "plan" | "apply" | "agent" | "research" ...
    invoked_as                the command line's subcommand that ran it: "fix", "retry", "plan", "apply", "mcp" ...
    plan_id, goal             the stored plan this trace belongs to, and its goal
    papayu_version            the papayu that wrote it
    config_snapshot           {setting name: value} of settings.SETTINGS (never API keys)
    schema_version, schema_hash   protocol of the validated answer; sha256 of its schema file
    request                   {mode, provider, model, input_chars, token_budget, strict_json, latency_ms,
                              calls, usage: one entry per model call, the server's token counts or {}}
    context_stats, cache_stats    ContextSession counters (upstream's key names)
    plan_files                {path: sha256} shown to the model in PLAN
    validated_json            the validated (or rejected) model answer
    validation_outcome        "ok" | "err";   error_code: ERR_* or null
    protocol_default, protocol_attempts, protocol_fallback_reason, protocol_fallback_stage,
    protocol_repair_attempt, protocol_repair_reason, protocol_fallback_attempted   repair and v2->v1 fallback
    check                     {command, source, sandbox, state: outcomes.CheckState, exit_code, duration_sec}
    apply                     {state: outcomes.ApplyState, branch, commit}
    raw_content               raw model output — only with PAPAYU_TRACE_RAW=1, masked

Writers build records with `record` (the common fields above, then theirs); every string of
the record, file contents included, goes through ``secrets.mask_data`` there, before it is written.
"""

from __future__ import annotations

import json
import uuid
from datetime import UTC, datetime
from pathlib import Path
from typing import TYPE_CHECKING, Any

from papayu_git import __version__, atomic, invocation, settings
from papayu_git.errors import PapayuError
from papayu_git.plans import find_record
from papayu_git.schemas import RESPONSE_SCHEMAS, schema_hash
from papayu_git.secrets import mask_data, masker

if TYPE_CHECKING:
    from papayu_git.plans import StoredPlan

TRACE_FORMAT = 1
# Settings whose names say they might hold a credential never enter a snapshot.
_SECRET_WORDS = ("key", "token", "secret", "password")


def new_trace_id() -> str:
    return str(uuid.uuid4())


def traces_dir(papayu_dir: Path) -> Path:
    return papayu_dir / "traces"


def now_iso() -> str:
    return datetime.now(UTC).isoformat(timespec="microseconds").replace("+00:00", "Z")


def _settings_cwd(papayu_dir: Path) -> str | None:
    # `.git/papayu` may not exist yet; git config is read from the repository it belongs to.
    parent = papayu_dir.parent
    return str(parent) if parent.is_dir() else None


def tracing_enabled(papayu_dir: Path | None = None) -> bool:
    return settings.get_bool("trace_enabled", _settings_cwd(papayu_dir) if papayu_dir else None)


def raw_enabled(papayu_dir: Path | None = None) -> bool:
    return settings.get_bool("trace_raw", _settings_cwd(papayu_dir) if papayu_dir else None)


def config_snapshot(cwd: str | None = None) -> dict[str, str]:
    """Every setting's effective value (SETTINGS table), masked; credentials excluded."""
    mask = masker()
    snapshot = {}
    for setting in settings.SETTINGS:
        if any(word in setting.name.lower() for word in _SECRET_WORDS):
            continue
        snapshot[setting.name] = mask(settings.get(setting.name, cwd))
    return snapshot


def schema_fields(protocol: int) -> dict[str, Any]:
    """schema_version and schema_hash of the response schema of ``protocol``."""
    return {"schema_version": protocol, "schema_hash": schema_hash(RESPONSE_SCHEMAS[protocol])}


class TraceRecord(dict[str, Any]):
    """A record as `record` built it: ids and timestamps set, raw_content policy applied, masked."""


def record(
    command: str,
    plan: StoredPlan | None = None,
    *,
    papayu_dir: Path | None = None,
    trace_id: str = "",
    protocol: int | None = None,
    **fields: Any,
) -> TraceRecord:
    """The one place a trace record is assembled (docs/DESIGN.md, "Traces").

    The common fields — trace_format, trace_id (``trace_id``, else a new uuid4), created_at,
    command, plan_id and goal (of ``plan``), papayu_version, and schema_version / schema_hash
    when ``protocol`` is given — then ``fields``, which win over them. raw_content is dropped
    unless PAPAYU_TRACE_RAW=1, and every string is masked here, once: `write_trace` stores the
    result as it is (adding config_snapshot, which `config_snapshot` masks itself).
    """
    data: dict[str, Any] = {"command": command}
    if invocation.command():
        data["invoked_as"] = invocation.command()
    if plan is not None:
        data.update(plan_id=plan.id, goal=plan.goal)
    data["papayu_version"] = __version__
    if protocol is not None:
        data.update(schema_fields(protocol))
    data.update(fields)
    return _completed(papayu_dir, trace_id or new_trace_id(), data)


def _completed(papayu_dir: Path | None, trace_id: str, data: dict[str, Any]) -> TraceRecord:
    out: dict[str, Any] = {"trace_format": TRACE_FORMAT, "trace_id": trace_id, "created_at": now_iso(), **data}
    out["trace_id"] = trace_id
    if not raw_enabled(papayu_dir):
        out.pop("raw_content", None)  # raw output only on explicit PAPAYU_TRACE_RAW=1
    return TraceRecord(mask_data(out))


def build_record(
    papayu_dir: Path, trace_id: str, data: dict[str, Any], existing: dict[str, Any] | None = None
) -> dict[str, Any]:
    """What `write_trace` stores under ``trace_id``: ``data`` (a `record`, else completed and
    masked the same way) merged over ``existing``, the record already stored under that id, whose
    trace_format, created_at and config_snapshot stay (one trace per command: the LLM round writes
    it first, the transaction adds its outcome)."""
    new = data if isinstance(data, TraceRecord) else _completed(papayu_dir, trace_id, data)
    merged: dict[str, Any] = {**(existing or {}), **new, "trace_id": trace_id}
    if existing:
        merged.update({k: existing[k] for k in ("trace_format", "created_at", "config_snapshot") if k in existing})
        merged["updated_at"] = now_iso()
        if not raw_enabled(papayu_dir):
            merged.pop("raw_content", None)
    if "config_snapshot" not in merged:
        merged["config_snapshot"] = config_snapshot(_settings_cwd(papayu_dir))
    return merged


def write_record(
    papayu_dir: Path, trace_id: str, command: str, plan: StoredPlan | None = None, **fields: Any
) -> Path | None:
    """``record`` for ``trace_id`` written (merged) into this repository's trace: the usual way to
    trace; `write_trace` is for data that is already a record."""
    return write_trace(papayu_dir, trace_id, record(command, plan, papayu_dir=papayu_dir, trace_id=trace_id, **fields))


def write_trace(papayu_dir: Path, trace_id: str, data: dict[str, Any]) -> Path | None:
    """Write `traces/<trace_id>.json`; None when tracing is off (PAPAYU_TRACE_ENABLED=0).

    Several modules contribute to one trace (the LLM round, then the transaction): a second
    write with the same id merges its top-level keys into the existing record (later wins).
    """
    if not tracing_enabled(papayu_dir):
        return None
    directory = traces_dir(papayu_dir)
    directory.mkdir(parents=True, exist_ok=True)
    target = directory / f"{_safe_id(trace_id)}.json"
    existing = _read_object(target)
    return atomic.write_json(target, build_record(papayu_dir, trace_id, data, existing), default=str)


def _read_object(path: Path) -> dict[str, Any] | None:
    try:
        data = json.loads(path.read_text(encoding="utf-8"))
    except (OSError, ValueError):
        return None
    return data if isinstance(data, dict) else None


def _safe_id(trace_id: str) -> str:
    if not trace_id or any(c in trace_id for c in "/\\\0") or trace_id.startswith("."):
        raise PapayuError("ERR_TRACE_NOT_FOUND", f"invalid trace id {trace_id!r}")
    return trace_id


def resolve_id(papayu_dir: Path, id_or_prefix: str) -> Path:
    return find_record(traces_dir(papayu_dir), id_or_prefix, "ERR_TRACE_NOT_FOUND", "trace")


def load_trace(papayu_dir: Path, id_or_prefix: str) -> dict[str, Any]:
    path = resolve_id(papayu_dir, id_or_prefix)
    try:
        data = json.loads(path.read_text(encoding="utf-8"))
    except (OSError, ValueError) as exc:
        raise PapayuError("ERR_TRACE_NOT_FOUND", f"cannot read {path.name}: {exc}", path=str(path)) from exc
    if not isinstance(data, dict):
        raise PapayuError("ERR_TRACE_NOT_FOUND", "not a trace object", path=str(path))
    return data


def load_traces(directory: Path) -> list[dict[str, Any]]:
    """Every readable trace object in ``directory``, oldest first (by created_at, then name)."""
    out = []
    for path in sorted(directory.glob("*.json")) if directory.is_dir() else []:
        try:
            data = json.loads(path.read_text(encoding="utf-8"))
        except (OSError, ValueError):
            continue
        if isinstance(data, dict):
            data.setdefault("trace_id", path.stem)
            out.append(data)
    return sorted(out, key=lambda d: (str(d.get("created_at", "")), str(d["trace_id"])))


def trace_id_for_apply(papayu_dir: Path, round_trace_id: str) -> str:
    """The trace id a transaction records its outcome under: the APPLY round's own trace when that
    round has no outcome yet (one apply command = one trace, so `stats` counts it once), else new.
    An agent run's trace takes its transaction's outcome the same way (agent.restore_command)."""
    if round_trace_id and "/" not in round_trace_id and not round_trace_id.startswith("."):
        data = _read_object(traces_dir(papayu_dir) / f"{round_trace_id}.json")
        if data and data.get("command") in ("apply", "agent") and "apply" not in data:
            return round_trace_id
    return new_trace_id()


def with_plan_context(papayu_dir: Path, trace: dict[str, Any]) -> dict[str, Any]:
    """An APPLY round reuses its plan's context: take context_stats/cache_stats from the plan's trace."""
    plan_trace = trace.get("plan_trace_id")
    if "context_stats" in trace or not isinstance(plan_trace, str) or not plan_trace or "/" in plan_trace:
        return trace
    plan = _read_object(traces_dir(papayu_dir) / f"{plan_trace}.json") or {}
    return {**{k: plan[k] for k in ("context_stats", "cache_stats") if isinstance(plan.get(k), dict)}, **trace}
