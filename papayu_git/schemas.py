"""Loading our JSON schemas (top-level `schemas/`, installed as `papayu_git/schema_data/`).

Validation runs through a schema compiled by fastjsonschema (the hot path,
bench/validate_bench.py); when it rejects, jsonschema lists every error with its
location. Both read the same schema file, so the rule lives in one place.
"""

from __future__ import annotations

import hashlib
import json
from functools import lru_cache
from pathlib import Path
from typing import Any, Callable

from papayu_git.errors import PapayuError

RESPONSE_SCHEMAS = {1: "llm_response_v1", 2: "llm_response_v2"}


def schema_dir() -> Path:
    installed = Path(__file__).with_name("schema_data")
    if (installed / "llm_response_v2.json").is_file():
        return installed
    return Path(__file__).resolve().parent.parent / "schemas"  # source checkout


@lru_cache(maxsize=None)
def schema_bytes(name: str) -> bytes:
    return (schema_dir() / f"{name}.json").read_bytes()


@lru_cache(maxsize=None)
def load_schema(name: str) -> dict[str, Any]:
    return json.loads(schema_bytes(name))


@lru_cache(maxsize=None)
def schema_hash(name: str) -> str:
    """sha256 of the schema file bytes (recorded in traces as schema_hash)."""
    return hashlib.sha256(schema_bytes(name)).hexdigest()


@lru_cache(maxsize=None)
def _fast_validator(name: str) -> Callable[[Any], Any]:
    import fastjsonschema

    return fastjsonschema.compile(load_schema(name))  # type: ignore[no-any-return]


@lru_cache(maxsize=None)
def _full_validator(name: str) -> Any:
    import jsonschema

    return jsonschema.Draft7Validator(load_schema(name))


def _location(path: Any) -> str:
    out = "$"
    for part in path:
        out += f"[{part}]" if isinstance(part, int) else f".{part}"
    return out


def _message(err: Any) -> tuple[str, str]:
    """(location, message) of the most specific cause: a oneOf/anyOf failure reports the
    sub-error that got furthest instead of repeating the whole instance."""
    while err.context:
        # Skip the branches whose type does not even match (array vs object in v1's oneOf).
        typed = [e for e in err.context if not (e.validator == "type" and not e.relative_path)]
        err = max(typed or err.context, key=lambda e: len(e.absolute_path))
    message = err.message if len(err.message) <= 200 else err.message[:197] + "..."
    return _location(err.absolute_path), message


def schema_errors(name: str, data: Any, code: str = "ERR_SCHEMA") -> list[PapayuError]:
    """All schema violations of ``data``; [] when valid."""
    import fastjsonschema

    try:
        _fast_validator(name)(data)
        return []
    except fastjsonschema.JsonSchemaException:
        pass
    except RecursionError:
        return [PapayuError("ERR_JSON_TOO_DEEP", "JSON too deeply nested", path="$")]
    errors = []
    for err in sorted(_full_validator(name).iter_errors(data), key=lambda e: list(map(str, e.absolute_path))):
        location, message = _message(err)
        errors.append(PapayuError(code, message, path=location))
    return errors or [PapayuError(code, "does not match the schema", path="$")]
