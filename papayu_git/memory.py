"""Engineering memory (SPEC §6, seed 001). The whitelist of memory_patch keys and their types."""

from __future__ import annotations

from typing import Any

from papayu_git.errors import PapayuError

# Seed 001 "Whitelist memory_patch": key -> expected JSON type.
MEMORY_WHITELIST: dict[str, str] = {
    "user.preferred_style": "string",
    "user.ask_budget": "integer",
    "user.risk_tolerance": "string",
    "user.default_language": "string",
    "user.output_format": "string",
    "project.default_test_command": "string",
    "project.default_lint_command": "string",
    "project.default_format_command": "string",
    "project.package_manager": "string",
    "project.build_command": "string",
    "project.src_roots": "string[]",
    "project.test_roots": "string[]",
    "project.ci_notes": "string",
}


def _has_type(value: Any, expected: str) -> bool:
    if expected == "string":
        return isinstance(value, str)
    if expected == "integer":
        return isinstance(value, int) and not isinstance(value, bool)
    if expected == "string[]":
        return isinstance(value, list) and all(isinstance(v, str) for v in value)
    raise AssertionError(expected)


def check_memory_patch(patch: Any) -> tuple[dict[str, Any], list[PapayuError], list[PapayuError]]:
    """Split a memory_patch into (accepted, unknown-key problems, wrong-type problems)."""
    if not isinstance(patch, dict):
        return {}, [], [PapayuError("ERR_MEMORY_TYPE", "memory_patch must be an object", path="memory_patch")]
    accepted: dict[str, Any] = {}
    unknown: list[PapayuError] = []
    wrong: list[PapayuError] = []
    for key, value in patch.items():
        expected = MEMORY_WHITELIST.get(key)
        if expected is None:
            unknown.append(PapayuError("ERR_MEMORY_KEY_NOT_ALLOWED", f"key {key!r} is not in the whitelist",
                                       path=f"memory_patch.{key}"))
        elif not _has_type(value, expected):
            wrong.append(PapayuError("ERR_MEMORY_TYPE", f"{key} must be {expected}, got {type(value).__name__}",
                                     path=f"memory_patch.{key}"))
        else:
            accepted[key] = value
    return accepted, unknown, wrong
