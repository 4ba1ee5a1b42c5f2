"""Engineering memory (docs/DESIGN.md, "Memory"): whitelist, files, git config overrides, MEMORY block.

Two persistent layers:
  user.*     <user config dir>/papayu-git/preferences.json   {"schema_version": 1, "user": {...}}
  project.*  <repo>/.papa-yu/project.json (committed)        {"schema_version": 1, "project": {...}}
`git config papayu.<layer>.<camelCaseName>` (e.g. papayu.project.defaultTestCommand,
papayu.user.askBudget) overrides a file value: git config names cannot hold '_'.
"""

from __future__ import annotations

import json
import os
import re
from pathlib import Path
from typing import Any, NamedTuple

from papayu_git import atomic, output, settings
from papayu_git.errors import PapayuError
from papayu_git.schemas import schema_errors
from papayu_git.secrets import masker

# The keys a memory_patch may set (upstream's names, so its documents stay valid): key -> expected JSON type.
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
LAYERS = ("user", "project")
MEMORY_BLOCK_LIMIT = 12 * 1024  # only a stable minimum (~12 KB) goes into the prompt
MEMORY_BLOCK_HEADER = "ENGINEERING_MEMORY (trusted by user; update only when user requests):"
MEMORY_BLOCK_FOOTER = (
    "Use ENGINEERING_MEMORY as defaults. If user explicitly asks to change — suggest updating memory and show new JSON."
)
# An explicit request to remember, in English or Russian like the goals; a negated one is not a
# request. Compiled when a goal is read (~1.5 ms, case-folded Cyrillic): validating a plan, which
# every apply does through this module, never asks (docs/DESIGN.md, "Start-up and cost").
_REMEMBER = (
    r"\b(remember|memori[sz]e|from now on|save (?:this|that) (?:in|to|as) (?:memory|preferences?))\b"
    r"|запомни|запомнить|запоминай|сохрани в памят"
)
_NOT_REMEMBER = r"\b(?:don'?t|do not|never)\s+remember\b|не\s+запоминай|не\s+запомина"


class MemoryValue(NamedTuple):
    value: Any
    source: str  # file path or "git config papayu.x.y"


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
            unknown.append(
                PapayuError(
                    "ERR_MEMORY_KEY_NOT_ALLOWED", f"key {key!r} is not in the whitelist", path=f"memory_patch.{key}"
                )
            )
        elif not _has_type(value, expected):
            wrong.append(
                PapayuError(
                    "ERR_MEMORY_TYPE",
                    f"{key} must be {expected}, got {type(value).__name__}",
                    path=f"memory_patch.{key}",
                )
            )
        elif errors := value_schema_errors(key, value):
            wrong.extend(errors)  # enum / range of the layer's schema (e.g. ask_budget 0..2)
        else:
            accepted[key] = value
    return accepted, unknown, wrong


def value_schema_errors(key: str, value: Any) -> list[PapayuError]:
    """Enum/range rules of schemas/preferences.json and project.json for one value."""
    layer, name = key.split(".", 1)
    errors = schema_errors(_schema_name(layer), {layer: {name: value}}, "ERR_MEMORY_TYPE")
    return [PapayuError("ERR_MEMORY_TYPE", f"{key}: {e.reason}", path=f"memory_patch.{key}") for e in errors]


def _schema_name(layer: str) -> str:
    return "preferences" if layer == "user" else "project"


def parse_value(key: str, text: str) -> Any:
    """A command-line VALUE as the key's type: integer, JSON array or comma list, string."""
    expected = MEMORY_WHITELIST.get(key)
    if expected is None:
        raise PapayuError(
            "ERR_MEMORY_KEY_NOT_ALLOWED",
            f"key {key!r} is not in the whitelist",
            path=key,
            hint="Keys: " + ", ".join(MEMORY_WHITELIST),
        )
    if expected == "integer":
        try:
            return int(text.strip())
        except ValueError:
            raise PapayuError("ERR_MEMORY_TYPE", f"{key} must be an integer, got {text!r}", path=key) from None
    if expected == "string[]":
        if text.strip().startswith("["):
            try:
                value = json.loads(text)
            except ValueError:
                raise PapayuError("ERR_MEMORY_TYPE", f"{key}: not a JSON array of strings", path=key) from None
            if not _has_type(value, expected):
                raise PapayuError("ERR_MEMORY_TYPE", f"{key} must be an array of strings", path=key)
            return value
        return [part.strip() for part in text.split(",") if part.strip()]
    return text


# --- files ---------------------------------------------------------------------------------


def user_config_dir() -> Path:
    """XDG_CONFIG_HOME or ~/.config (APPDATA on Windows): where preferences.json lives."""
    if os.name == "nt" and os.environ.get("APPDATA"):
        return Path(os.environ["APPDATA"]) / "papayu-git"
    base = os.environ.get("XDG_CONFIG_HOME") or os.path.join(os.path.expanduser("~"), ".config")
    return Path(base) / "papayu-git"


def preferences_path() -> Path:
    return user_config_dir() / "preferences.json"


def project_path(repo_root: Path) -> Path:
    return repo_root / ".papa-yu" / "project.json"


def layer_path(layer: str, repo_root: Path | None) -> Path:
    if layer == "user":
        return preferences_path()
    if repo_root is None:
        raise PapayuError("ERR_NOT_A_GIT_REPO", "project.* memory lives in a repository's .papa-yu/project.json")
    return project_path(repo_root)


def read_layer(layer: str, repo_root: Path | None, strict: bool = True) -> dict[str, Any]:
    """The layer's values from its file ({} when absent). strict: schema errors raise;
    else values that break the schema or the whitelist are skipped (the prompt must still build)."""
    path = layer_path(layer, repo_root)
    code = "ERR_PREFERENCES_INVALID" if layer == "user" else "ERR_PROJECT_INVALID"
    try:
        data = json.loads(path.read_text(encoding="utf-8"))
    except FileNotFoundError:
        return {}
    except (OSError, ValueError) as exc:
        if strict:
            raise PapayuError(code, f"cannot read {path}: {exc}", path=str(path)) from exc
        return {}
    errors = schema_errors(_schema_name(layer), data, code)
    if errors and strict:
        raise PapayuError(code, "; ".join(e.format() for e in errors[:3]), path=str(path))
    values = data.get(layer, {}) if isinstance(data, dict) and isinstance(data.get(layer), dict) else {}
    accepted, _, _ = check_memory_patch({f"{layer}.{k}": v for k, v in values.items()})
    return {k.split(".", 1)[1]: v for k, v in accepted.items()}


def write_layer(layer: str, repo_root: Path | None, values: dict[str, Any]) -> Path:
    """Atomically write the layer file; refuses symlinks (never write through a symlink)."""
    path = layer_path(layer, repo_root)
    doc = {"schema_version": 1, layer: dict(sorted(values.items()))}
    code = "ERR_PREFERENCES_INVALID" if layer == "user" else "ERR_PROJECT_INVALID"
    errors = schema_errors(_schema_name(layer), doc, code)
    if errors:
        raise PapayuError(code, errors[0].reason, path=errors[0].path)
    for part in (path.parent, path):
        if part.is_symlink():
            raise PapayuError(
                "ERR_PATH_THROUGH_SYMLINK", f"{part} is a symbolic link; refusing to write", path=str(part)
            )
    path.parent.mkdir(parents=True, exist_ok=True)
    return atomic.write_json(path, doc)


# --- git config overrides ------------------------------------------------------------------


def git_config_key(key: str) -> str:
    """project.default_test_command -> papayu.project.defaultTestCommand (git forbids '_')."""
    layer, name = key.split(".", 1)
    head, *rest = name.split("_")
    return f"papayu.{layer}.{head}{''.join(w.capitalize() for w in rest)}"


def _git_override(key: str, cwd: str | None) -> Any:
    raw = settings.git_config_value(git_config_key(key), cwd)
    if raw is None:
        return None
    try:
        return parse_value(key, raw)
    except PapayuError as exc:
        output.warn(f"ignoring git config {git_config_key(key)}: {exc.reason}")
        return None


def load_memory(repo_root: Path | None, strict: bool = False) -> dict[str, dict[str, MemoryValue]]:
    """Effective memory per layer with the source of each value (git config beats files)."""
    cwd = str(repo_root) if repo_root else None
    out: dict[str, dict[str, MemoryValue]] = {}
    for layer in LAYERS:
        if layer == "project" and repo_root is None:
            out[layer] = {}
            continue
        source = str(layer_path(layer, repo_root))
        values = {k: MemoryValue(v, source) for k, v in read_layer(layer, repo_root, strict).items()}
        for key in (k for k in MEMORY_WHITELIST if k.startswith(layer + ".")):
            override = _git_override(key, cwd)
            if override is not None:
                values[key.split(".", 1)[1]] = MemoryValue(override, f"git config {git_config_key(key)}")
        out[layer] = {k: values[k] for k in sorted(values)}
    return out


def memory_value(repo_root: Path | None, key: str) -> Any:
    """One effective value (e.g. project.default_test_command for the check command), or None."""
    layer, name = key.split(".", 1)
    found = load_memory(repo_root).get(layer, {}).get(name)
    return found.value if found else None


# --- memory_patch and the prompt block -----------------------------------------------------


def asks_to_remember(goal: str) -> bool:
    return bool(re.search(_REMEMBER, goal or "", re.I)) and not re.search(_NOT_REMEMBER, goal or "", re.I)


def secret_errors(values: dict[str, Any]) -> list[PapayuError]:
    """Values that ``secrets.mask`` would change: never written to memory files, which are committed or shared."""
    mask = masker()
    errors = []
    for key, value in values.items():
        texts = value if isinstance(value, list) else [value]
        if any(isinstance(t, str) and mask(t) != t for t in texts):
            errors.append(PapayuError("ERR_MEMORY_SECRET", f"the value of {key} looks like a credential", path=key))
    return errors


def set_values(repo_root: Path | None, values: dict[str, Any]) -> list[Path]:
    """Write whitelisted, type-checked dotted keys into their layer files; refuses secrets."""
    for err in secret_errors(values):
        output.event("MEMORY_SET_REJECTED", code=err.code, key=err.path, value=values[err.path])
        raise err
    written = []
    for layer in LAYERS:
        mine = {k.split(".", 1)[1]: v for k, v in values.items() if k.startswith(layer + ".")}
        if mine:
            current = read_layer(layer, repo_root, strict=True)
            written.append(write_layer(layer, repo_root, {**current, **mine}))
    return written


def apply_memory_patch(repo_root: Path, patch: Any, goal: str, accept_flag: bool) -> list[str]:
    """Apply a model's memory_patch only when the user asked (docs/DESIGN.md, "Memory"); returns the applied keys.
    Unknown keys are dropped and wrongly typed values rejected (events say which)."""
    if not patch:
        return []
    if not (accept_flag or asks_to_remember(goal)):
        output.event(
            "MEMORY_PATCH_IGNORED",
            keys=",".join(sorted(patch)) if isinstance(patch, dict) else "",
            reason="not requested (say 'remember' or pass --accept-memory)",
        )
        return []
    accepted, unknown, wrong = check_memory_patch(patch)
    secret = secret_errors(accepted)
    for err in unknown + wrong + secret:
        output.event("MEMORY_PATCH_REJECTED", code=err.code, key=err.path, reason=err.reason)
    accepted = {k: v for k, v in accepted.items() if k not in {e.path for e in secret}}
    set_values(repo_root, accepted)
    if accepted:
        output.event("MEMORY_PATCH_APPLIED", keys=",".join(sorted(accepted)))
    return sorted(accepted)


def memory_json(repo_root: Path | None) -> dict[str, dict[str, Any]]:
    return {layer: {k: v.value for k, v in values.items()} for layer, values in load_memory(repo_root).items()}


def build_memory_block(repo_root: Path | None) -> str:
    """The ENGINEERING_MEMORY block for the system prompt; "" when memory is empty."""
    memory = {layer: values for layer, values in memory_json(repo_root).items() if values}
    if not memory:
        return ""
    frame = len(MEMORY_BLOCK_HEADER.encode()) + len(MEMORY_BLOCK_FOOTER.encode()) + 3  # + three newlines
    body = _fit(memory, MEMORY_BLOCK_LIMIT - frame)
    return f"{MEMORY_BLOCK_HEADER}\n{body}\n\n{MEMORY_BLOCK_FOOTER}"


def _compact(data: Any) -> str:
    return json.dumps(data, ensure_ascii=False, separators=(",", ":"))


def _fit(memory: dict[str, dict[str, Any]], limit: int) -> str:
    """Compact JSON within ``limit`` bytes: halve the longest string until it fits."""
    while len(_compact(memory).encode()) > limit:
        layer, name = max(
            ((lay, n) for lay, vals in memory.items() for n in vals), key=lambda ln: len(_compact(memory[ln[0]][ln[1]]))
        )
        value = memory[layer][name]
        if isinstance(value, str) and len(value) > 16:
            memory[layer][name] = value[: len(value) // 2] + "…"
        elif isinstance(value, list) and len(value) > 1:
            memory[layer][name] = value[: len(value) // 2]
        else:
            del memory[layer][name]
    return _compact(memory)
