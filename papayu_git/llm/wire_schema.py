"""The JSON schema sent as `response_format` (docs/DESIGN.md, "Providers": the capability ladder).

OpenAI's strict structured outputs accept only a subset of JSON Schema: every property
listed in `required`, `additionalProperties: false` everywhere, no if/then/oneOf. Our protocol
schemas (`schemas/llm_response_v*.json`) use all of those, so we *derive* a strict-compatible
wire schema instead of sending `strict: false`: an optional field becomes a nullable one
(`"type": ["string", "null"]`) and ``drop_nulls`` turns `null` back into "absent" before the
full local validation with the real protocol schema. Servers that turn the schema into a
grammar (llama.cpp, Ollama, vLLM) then force even a tiny model into the right shape; the
rules the wire schema cannot express (content vs patch per kind, path rules, limits) are
enforced locally by `validate.validate_response`, always.
"""

from __future__ import annotations

from functools import cache
from typing import Any

from papayu_git.memory import MEMORY_WHITELIST

_V1_KINDS = ["CREATE_DIR", "CREATE_FILE", "UPDATE_FILE", "DELETE_FILE", "DELETE_DIR"]
_V2_KINDS = ["CREATE_DIR", "CREATE_FILE", "UPDATE_FILE", "PATCH_FILE", "DELETE_FILE", "DELETE_DIR"]
_JSON_TYPES = {"string": "string", "integer": "integer", "string[]": "array"}


def _nullable(type_name: str, **extra: Any) -> dict[str, Any]:
    return {"type": [type_name, "null"], **extra}


def _closed(properties: dict[str, Any]) -> dict[str, Any]:
    return {"type": "object", "properties": properties, "required": list(properties), "additionalProperties": False}


def _strings() -> dict[str, Any]:
    return {"type": "array", "items": {"type": "string"}}


def _action(protocol: int) -> dict[str, Any]:
    props: dict[str, Any] = {
        "kind": {"type": "string", "enum": _V2_KINDS if protocol >= 2 else _V1_KINDS},
        "path": {"type": "string"},
        "content": _nullable("string"),
    }
    if protocol >= 2:
        props["patch"] = _nullable("string")
        props["base_sha256"] = _nullable("string")
    return _closed(props)


def _context_request() -> dict[str, Any]:
    return _closed(
        {
            "type": {"type": "string", "enum": ["read_file", "search", "logs", "env"]},
            "path": _nullable("string"),
            "start_line": _nullable("integer"),
            "end_line": _nullable("integer"),
            "query": _nullable("string"),
            "glob": _nullable("string"),
            "source": _nullable("string"),
            "last_n": _nullable("integer"),
        }
    )


def _memory_patch() -> dict[str, Any]:
    props: dict[str, Any] = {}
    for key, kind in MEMORY_WHITELIST.items():
        props[key] = (
            {"type": ["array", "null"], "items": {"type": "string"}}
            if kind == "string[]"
            else _nullable(_JSON_TYPES[kind])
        )
    return _closed(props)


@cache
def wire_schema(protocol: int) -> dict[str, Any]:
    """Strict-compatible response schema. Property order is generation order for grammar-based
    servers: the diagnosis (summary, plan) comes before the changes, as a person would write it."""
    return _closed(
        {
            "summary": {"type": "string"},
            "questions": _strings(),
            "context_requests": {"type": "array", "items": _context_request()},
            "plan": {"type": "array", "items": _closed({"step": {"type": "string"}, "details": {"type": "string"}})},
            "actions": {"type": "array", "items": _action(protocol)},
            "risks": _strings(),
            "commands_to_run": _strings(),
            "memory_patch": _memory_patch(),
        }
    )


def _action_by_kind(protocol: int) -> dict[str, Any]:
    """One closed shape per kind (anyOf): a grammar then cannot put `content` on a PATCH_FILE."""

    def shape(kinds: list[str], **fields: Any) -> dict[str, Any]:
        return _closed({"kind": {"type": "string", "enum": kinds}, "path": {"type": "string"}, **fields})

    writes = ["CREATE_FILE"] if protocol >= 2 else ["CREATE_FILE", "UPDATE_FILE"]
    shapes = [shape(writes, content={"type": "string"}), shape(["CREATE_DIR", "DELETE_FILE", "DELETE_DIR"])]
    if protocol >= 2:
        shapes.insert(
            0,
            shape(
                ["PATCH_FILE"], patch={"type": "string"}, base_sha256={"type": "string", "pattern": "^[0-9a-f]{64}$"}
            ),
        )
    return {"anyOf": shapes}


SHAPES = ("response", "plan", "apply")  # any answer | fix-plan (no actions) | APPLY round


@cache
def grammar_schema(protocol: int, shape: str = "response") -> dict[str, Any]:
    """For servers that compile the schema into a sampling grammar (llama.cpp's `json_object`
    + schema, the embedded model's rung): only summary and actions are required, lists and prose are bounded
    (maxItems/maxLength) and memory_patch is left out, so a small model reaches the closing
    brace within a few hundred tokens instead of rambling through every optional field.
    The grammar also enforces what the round's prompt asks: a fix-plan answer has no actions
    (docs/DESIGN.md, "Accepted answers": rounds); an APPLY answer has actions or a summary starting
    with NO_CHANGES:."""
    strict = wire_schema(protocol)["properties"]

    def bounded(items: Any, n: int, low: int = 0) -> dict[str, Any]:
        return {"type": "array", "items": items, "maxItems": n, **({"minItems": low} if low else {})}

    def text(n: int) -> dict[str, Any]:
        return {"type": "string", "maxLength": n}

    def answer(summary: dict[str, Any], actions: dict[str, Any]) -> dict[str, Any]:
        props = {
            "summary": summary,
            "actions": actions,
            "plan": bounded(_closed({"step": text(60), "details": text(120)}), 3),
            "questions": bounded(text(120), 2),
            "context_requests": bounded(strict["context_requests"]["items"], 2),
            "risks": bounded(text(120), 2),
            "commands_to_run": bounded(text(80), 2),
        }
        return {
            "type": "object",
            "properties": props,
            "required": ["summary", "actions"],
            "additionalProperties": False,
        }

    action = _action_by_kind(protocol)
    if shape == "plan":
        return answer(text(160), bounded(action, 0))
    if shape == "apply":
        no_changes = {"type": "string", "pattern": '^NO_CHANGES: [^"\\\\]{0,150}$'}
        return {"anyOf": [answer(text(160), bounded(action, 3, low=1)), answer(no_changes, bounded(action, 0))]}
    return answer(text(160), bounded(action, 3))


def response_format(protocol: int, shape: str = "response") -> dict[str, Any]:
    """OpenAI Chat Completions `response_format` (also understood by llama.cpp, vLLM, LM Studio).
    Its name (`papayu_<shape>_v<protocol>`) tells the grammar rung which bounded schema to derive."""
    assert shape in SHAPES, shape
    return {
        "type": "json_schema",
        "json_schema": {"name": f"papayu_{shape}_v{protocol}", "strict": True, "schema": wire_schema(protocol)},
    }


def format_name_info(name: str) -> tuple[int, str]:
    """(protocol, shape) from a response_format name."""
    shape = name.split("_")[1] if name.count("_") >= 2 else "response"
    return (1 if name.endswith("v1") else 2), shape if shape in SHAPES else "response"


def drop_nulls(value: Any) -> Any:
    """`null` means "absent" in the wire schema; remove such keys at every depth."""
    if isinstance(value, dict):
        return {k: drop_nulls(v) for k, v in value.items() if v is not None}
    if isinstance(value, list):
        return [drop_nulls(v) for v in value]
    return value
