"""Loading our JSON schemas (top-level `schemas/`, installed as `papayu_git/schema_data/`).

Validation runs through a schema compiled by fastjsonschema (the hot path,
bench/validate_bench.py); when it rejects, jsonschema lists every error with its
location. Both read the same schema file, so the rule lives in one place.

The fastjsonschema code is generated ahead of time into `schema_validators/<name>.py`
(`python -m papayu_git.schemas --write`; `--check` exits 1 when it is stale): compiling
at runtime cost ~12 ms per process (docs/DESIGN.md, "Start-up and cost"). A generated validator is used only while
its schema file still has the sha256 recorded beside it; otherwise we compile at runtime.
"""

from __future__ import annotations

import json
import re
import sys
from collections.abc import Callable
from functools import cache
from pathlib import Path
from typing import Any

from papayu_git.digests import sha256_hex
from papayu_git.errors import PapayuError

RESPONSE_SCHEMAS = {1: "llm_response_v1", 2: "llm_response_v2"}
# JSON files shipped beside the schemas that are not schemas themselves (nothing is validated
# against them, so no validator is generated): the agent's tool definitions (papayu_git.llm.tools).
DATA_FILES = frozenset({"agent_tools"})


def schema_dir() -> Path:
    installed = Path(__file__).with_name("schema_data")
    if (installed / "llm_response_v2.json").is_file():
        return installed
    return Path(__file__).resolve().parent.parent / "schemas"  # source checkout


@cache
def schema_bytes(name: str) -> bytes:
    return (schema_dir() / f"{name}.json").read_bytes()


@cache
def load_schema(name: str) -> dict[str, Any]:
    return json.loads(schema_bytes(name))


@cache
def schema_hash(name: str) -> str:
    """sha256 of the schema file bytes (recorded in traces as schema_hash)."""
    return sha256_hex(schema_bytes(name))


def _inline_refs(node: Any, defs: dict[str, Any]) -> Any:
    """Replace local `#/$defs/x` references by their definitions (our schemas are not
    recursive). fastjsonschema compiles a $ref into a call that formats a name per array
    item; inlined, validating an action costs a few comparisons (bench/validate_bench.py)."""
    if isinstance(node, dict):
        ref = node.get("$ref")
        if isinstance(ref, str) and ref.startswith("#/$defs/") and len(node) == 1:
            return _inline_refs(defs[ref[len("#/$defs/") :]], defs)
        return {k: _inline_refs(v, defs) for k, v in node.items() if k != "$defs"}
    if isinstance(node, list):
        return [_inline_refs(v, defs) for v in node]
    return node


def _compiled_parts(name: str) -> dict[str, Any]:
    """What fastjsonschema compiles for a schema: the whole document ("") and, when the
    schema has one, its action definition ("action"; reports walk only failing actions)."""
    schema = load_schema(name)
    defs = schema.get("$defs", {})
    parts = {"": _inline_refs(schema, defs)}
    if "action" in defs:
        parts["action"] = _inline_refs(defs["action"], defs)
    return parts


# The generated module's validators raise its stand-in for fastjsonschema's exception
# (importing fastjsonschema costs ~5 ms); both are ValueErrors, which is what we catch.
_REJECTED = ValueError


def _generated(name: str, part: str) -> Callable[[Any], Any] | None:
    """The validator generated ahead of time (schema_validators/<name>.py), if it was
    generated from these schema bytes: an edited schema is never checked by stale code."""
    import importlib

    try:
        module = importlib.import_module(f"papayu_git.schema_validators.{name}")
    except ImportError:
        return None
    if getattr(module, "SCHEMA_SHA256", None) != schema_hash(name):
        return None
    return getattr(module, "validate" + (f"_{part}" if part else ""), None)


def _compile(definition: Any) -> Callable[[Any], Any]:
    import fastjsonschema

    return fastjsonschema.compile(definition, detailed_exceptions=False)


@cache
def _fast_validator(name: str) -> Callable[[Any], Any]:
    return _generated(name, "") or _compile(_compiled_parts(name)[""])


@cache
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
    return any(
        (e.validator == "type" and not e.relative_path)
        or (e.validator in ("enum", "const") and len(e.relative_path) <= 1)
        for e in errors
    )


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


@cache
def _action_validator(name: str) -> Callable[[Any], Any] | None:
    generated = _generated(name, "action")
    if generated is not None:
        return generated
    action = _compiled_parts(name).get("action")
    return _compile(action) if action is not None else None


# Where a response keeps its actions (docs/DESIGN.md, "Accepted answers"): the array form, `actions`,
# `proposed_changes.actions`.
_ACTION_LISTS: tuple[tuple[str, ...], ...] = ((), ("actions",), ("proposed_changes", "actions"))


def _failing_only(name: str, data: Any) -> tuple[Any, dict[tuple[Any, ...], list[int]]]:
    """``data`` with the actions that pass the compiled validator removed, and for each action
    list the original index of every kept item. jsonschema then walks only the broken actions:
    reporting a bad plan of 50 actions costs about as much as one of 2."""
    check = _action_validator(name)
    if check is None:
        return data, {}
    import copy

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
            except _REJECTED:
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
            return [*path[:n], indices[path[n]], *path[n + 1 :]]
    return path


def _sort_key(path: list[Any]) -> list[tuple[int, int, str]]:
    return [(0, p, "") if isinstance(p, int) else (1, 0, str(p)) for p in path]


def schema_errors(name: str, data: Any, code: str = "ERR_SCHEMA") -> list[PapayuError]:
    """All schema violations of ``data``; [] when valid."""
    try:
        _fast_validator(name)(data)
        return []
    except _REJECTED:
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


# --- the generated validators (python -m papayu_git.schemas --write) ---

GENERATED = Path(__file__).with_name("schema_validators")
REGENERATE = "python -m papayu_git.schemas --write"

# The lines of compile_to_code's header that the package's stand-ins replace.
_HEADER_LINES = re.compile(
    r'^(VERSION = "[^"]*"|from decimal import Decimal|import re|'
    r"from fastjsonschema import JsonSchemaValueException, JsonSchemaValuesException|"
    r"NoneType = type\(None\))\n",
    re.M,
)


def _part_code(code: str, function: str) -> str:
    """compile_to_code's text for one part minus its header, its one function named
    ``function`` and its regex table renamed to match (two parts share a module)."""
    defs = re.findall(r"^def (\w+)\(", code, re.M)
    if len(defs) != 1 or code.count(f"{defs[0]}(") != 1 or "Decimal(" in code:
        raise RuntimeError(f"unexpected fastjsonschema output for {function}: functions {defs}")
    code = _HEADER_LINES.sub("", code).replace(f"def {defs[0]}(", f"def {function}(", 1)
    patterns = "REGEX_PATTERNS" + function[len("validate") :]
    return re.sub(r"\bREGEX_PATTERNS\b", patterns, code).strip("\n")


def generated_module(name: str) -> str:
    """The text of schema_validators/<name>.py for the schema file as it is now."""
    import fastjsonschema

    parts = [
        _part_code(
            fastjsonschema.compile_to_code(definition, detailed_exceptions=False),
            "validate" + (f"_{part}" if part else ""),
        )
        for part, definition in _compiled_parts(name).items()
    ]
    return "\n".join(
        [
            f"# GENERATED by `{REGENERATE}` from schemas/{name}.json; do not edit.",
            f"# fastjsonschema {fastjsonschema.VERSION}: compile_to_code(<the $ref-inlined schema>,"
            " detailed_exceptions=False).",
            "# papayu_git/schemas.py uses it only while the schema file's sha256 equals SCHEMA_SHA256.",
            "import re",
            "",
            "from papayu_git.schema_validators import Decimal, JsonSchemaValueException, JsonSchemaValuesException, NoneType",
            "",
            f'SCHEMA_SHA256 = "{schema_hash(name)}"',
            "",
            "",
            "\n\n\n".join(parts),
            "",
        ]
    )


def schema_names() -> list[str]:
    """Every schema file's name (without .json), the data files beside them left out."""
    return sorted(p.stem for p in schema_dir().glob("*.json") if p.stem not in DATA_FILES)


def generated_files() -> dict[Path, str]:
    return {GENERATED / f"{name}.py": generated_module(name) for name in schema_names()}


def main(argv: list[str]) -> int:
    """`--write` regenerates schema_validators/; `--check` exits 1 when it is stale."""
    write = "--write" in argv
    files = generated_files()
    stale = [path for path, text in files.items() if not path.is_file() or path.read_text(encoding="utf-8") != text]
    orphans = [path for path in GENERATED.glob("*.py") if path not in files and path.name != "__init__.py"]
    if write:
        GENERATED.mkdir(exist_ok=True)
        for path in stale:
            path.write_text(files[path], encoding="utf-8")
        for path in orphans:
            path.unlink()
    for path in stale + orphans:
        print(f"{'updated' if write else 'out of date'}: {path}", file=sys.stderr)
    if (stale or orphans) and not write:
        print(f"run: {REGENERATE}", file=sys.stderr)
        return 1
    return 0


if __name__ == "__main__":
    raise SystemExit(main(sys.argv[1:]))
