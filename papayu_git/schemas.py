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


def _inline_refs(node: Any, defs: dict[str, Any]) -> Any:
    """Replace local `#/$defs/x` references by their definitions (our schemas are not
    recursive). fastjsonschema compiles a $ref into a call that formats a name per array
    item; inlined, validating an action costs a few comparisons (bench/validate_bench.py)."""
    if isinstance(node, dict):
        ref = node.get("$ref")
        if isinstance(ref, str) and ref.startswith("#/$defs/") and len(node) == 1:
            return _inline_refs(defs[ref[len("#/$defs/"):]], defs)
        return {k: _inline_refs(v, defs) for k, v in node.items() if k != "$defs"}
    if isinstance(node, list):
        return [_inline_refs(v, defs) for v in node]
    return node


@lru_cache(maxsize=None)
def _fast_validator(name: str) -> Callable[[Any], Any]:
    import fastjsonschema

    schema = load_schema(name)
    inlined = _inline_refs(schema, schema.get("$defs", {}))
    return fastjsonschema.compile(inlined, detailed_exceptions=False)  # type: ignore[no-any-return]


@lru_cache(maxsize=None)
def _full_validator(name: str) -> Any:
    import jsonschema

    return jsonschema.Draft7Validator(load_schema(name))


def _location(path: Any) -> str:
    out = "$"
    for part in path:
        out += f"[{part}]" if isinstance(part, int) else f".{part}"
    return out


def _branch_misfits(errors: list[Any]) -> bool:
    """A oneOf/anyOf branch that does not even apply: wrong type at its root, or its
    discriminator (e.g. the action's ``kind``) has another value."""
    return any((e.validator == "type" and not e.relative_path) or
               (e.validator in ("enum", "const") and len(e.relative_path) <= 1) for e in errors)


def _false_schema_message(err: Any, parent: Any) -> str:
    """`"content": false` in a branch: name the field instead of quoting its value."""
    owner = parent.instance if parent is not None else None
    names = [k for k, v in owner.items() if v is err.instance] if isinstance(owner, dict) else []
    kind = owner.get("kind") if isinstance(owner, dict) else None
    field = f"'{names[0]}'" if names else "this field"
    return f"{field} is not allowed" + (f" for {kind}" if isinstance(kind, str) else "")


def _message(err: Any, locate: Callable[[list[Any]], list[Any]]) -> tuple[list[Any], str]:
    """(location, message) of the most specific cause: a oneOf/anyOf failure reports the
    branch that applies instead of repeating the whole instance."""
    parent = None
    while err.context:
        branches: dict[Any, list[Any]] = {}
        for sub in err.context:
            branches.setdefault(sub.schema_path[0], []).append(sub)
        fitting = [errs for errs in branches.values() if not _branch_misfits(errs)]
        if not fitting:
            return locate(list(err.absolute_path)), "matches none of the allowed forms"
        parent, err = err, max(fitting[0], key=lambda e: len(e.absolute_path))
    if err.schema is False:
        return locate(list(err.absolute_path)), _false_schema_message(err, parent)
    schema_path = list(err.schema_path)
    if "dependencies" in schema_path and err.validator == "enum":
        # {"dependencies": {"content": {kind in [...]}}}: say which field is out of place.
        field = schema_path[schema_path.index("dependencies") + 1]
        return locate(list(err.absolute_path)[:-1]), f"'{field}' is not allowed for {err.instance}"
    message = err.message if len(err.message) <= 200 else err.message[:197] + "..."
    return locate(list(err.absolute_path)), message


@lru_cache(maxsize=None)
def _action_validator(name: str) -> Callable[[Any], Any] | None:
    import fastjsonschema

    schema = load_schema(name)
    action = schema.get("$defs", {}).get("action")
    if action is None:
        return None
    return fastjsonschema.compile(_inline_refs(action, schema["$defs"]), detailed_exceptions=False)  # type: ignore[no-any-return]


# Where a response keeps its actions (SPEC §2.1): the array form, `actions`, `proposed_changes.actions`.
_ACTION_LISTS: tuple[tuple[str, ...], ...] = ((), ("actions",), ("proposed_changes", "actions"))


def _failing_only(name: str, data: Any) -> tuple[Any, dict[tuple[Any, ...], list[int]]]:
    """``data`` with the actions that pass the compiled validator removed, and for each action
    list the original index of every kept item. jsonschema then walks only the broken actions:
    reporting a bad plan of 50 actions costs about as much as one of 2."""
    check = _action_validator(name)
    if check is None:
        return data, {}
    import copy
    import fastjsonschema

    pruned, kept = copy.copy(data), {}
    for where in _ACTION_LISTS:
        parent = pruned
        for key in where[:-1]:
            parent = parent.get(key) if isinstance(parent, dict) else None
        items = parent if not where else parent.get(where[-1]) if isinstance(parent, dict) else None
        if not isinstance(items, list) or (where == () and not isinstance(data, list)):
            continue
        indices = []
        for i, item in enumerate(items):
            try:
                check(item)
            except fastjsonschema.JsonSchemaException:
                indices.append(i)
        kept[where] = indices
        subset = [items[i] for i in indices]
        if where == ():
            pruned = subset
        elif len(where) == 1:
            pruned[where[0]] = subset
        else:
            pruned[where[0]] = {**parent, where[1]: subset}
    return pruned, kept


def _original_path(path: list[Any], kept: dict[tuple[Any, ...], list[int]]) -> list[Any]:
    for where, indices in kept.items():
        n = len(where)
        if len(path) > n and tuple(path[:n]) == where and isinstance(path[n], int):
            return [*path[:n], indices[path[n]], *path[n + 1:]]
    return path


def _sort_key(path: list[Any]) -> list[tuple[int, int, str]]:
    return [(0, p, "") if isinstance(p, int) else (1, 0, str(p)) for p in path]


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
    pruned, kept = _failing_only(name, data)
    found = []
    for err in _full_validator(name).iter_errors(pruned):
        location, message = _message(err, lambda p: _original_path(p, kept))
        found.append((location, message))
    found.sort(key=lambda item: _sort_key(item[0]))
    errors = [PapayuError(code, message, path=_location(location)) for location, message in found]
    return errors or [PapayuError(code, "does not match the schema", path="$")]
