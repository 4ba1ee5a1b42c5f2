"""`git papayu memory show|set KEY VALUE|unset KEY`: engineering memory (docs/DESIGN.md, "Memory")."""

from __future__ import annotations

import json
from pathlib import Path

import click

from papayu_git import output
from papayu_git.cli import SuggestingGroup
from papayu_git.error_handler import handle_errors
from papayu_git.errors import PapayuError
from papayu_git.git import find_toplevel
from papayu_git.memory import (
    MEMORY_WHITELIST,
    check_memory_patch,
    git_config_key,
    layer_path,
    load_memory,
    parse_value,
    read_layer,
    set_values,
    write_layer,
)

_KEYS_HELP = "Keys (type): " + "; ".join(f"{k} ({t})" for k, t in MEMORY_WHITELIST.items())


def _repo_root(required: bool) -> Path | None:
    try:
        return find_toplevel()
    except PapayuError:
        if required:
            raise
        return None


def run_show(as_json: bool) -> int:
    root = _repo_root(required=False)
    memory = load_memory(root, strict=True)
    if as_json:
        output.emit_json(
            {
                "ok": True,
                **{layer: {k: v.value for k, v in values.items()} for layer, values in memory.items()},
                "sources": {f"{layer}.{k}": v.source for layer, values in memory.items() for k, v in values.items()},
                "files": {
                    "user": str(layer_path("user", None)),
                    "project": str(layer_path("project", root)) if root else None,
                },
            }
        )
        return 0
    shown = 0
    for layer, values in memory.items():
        for name, item in values.items():
            value = item.value if isinstance(item.value, str) else json.dumps(item.value)
            output.result(f"{layer}.{name} = {value}    ({item.source})")
            shown += 1
    if not shown:
        output.info("no engineering memory yet; e.g. git papayu memory set project.default_test_command 'pytest -q'")
        output.info(f"(git config overrides: e.g. {git_config_key('project.default_test_command')})")
    return 0


def run_set(key: str, value: str, as_json: bool) -> int:
    parsed = parse_value(key, value)
    accepted, unknown, wrong = check_memory_patch({key: parsed})
    if unknown or wrong:
        raise (unknown + wrong)[0]
    root = _repo_root(required=key.startswith("project."))
    written = set_values(root, accepted)
    if as_json:
        output.emit_json({"ok": True, "key": key, "value": parsed, "file": str(written[0])})
    else:
        output.result(f"{key} = {parsed if isinstance(parsed, str) else json.dumps(parsed)}    ({written[0]})")
    return 0


def run_unset(key: str, as_json: bool) -> int:
    if key not in MEMORY_WHITELIST:
        raise PapayuError("ERR_MEMORY_KEY_NOT_ALLOWED", f"key {key!r} is not in the whitelist", path=key)
    layer, name = key.split(".", 1)
    root = _repo_root(required=layer == "project")
    values = read_layer(layer, root, strict=True)
    removed = values.pop(name, None) is not None
    path = write_layer(layer, root, values) if removed else None
    if as_json:
        output.emit_json({"ok": True, "key": key, "removed": removed, "file": str(path) if path else None})
    else:
        output.result(f"unset {key}" + (f"    ({path})" if path else " (was not set)"))
    return 0


@click.group("memory", cls=SuggestingGroup)
def command() -> None:
    """Engineering memory: defaults the model sees in its ENGINEERING_MEMORY block.

    \b
    user.*    -> <XDG_CONFIG_HOME or ~/.config>/papayu-git/preferences.json
    project.* -> .papa-yu/project.json in the working tree. `set`/`unset` of a
                 project.* key EDITS THAT FILE in your checkout (a config file you
                 asked to change; commit it to share it).
    git config papayu.<layer>.<camelCase> overrides a file value, e.g.
    `git config papayu.project.defaultTestCommand "pytest -q"`.
    """


@command.command("show")
@click.option("--json", "as_json", is_flag=True, help="Machine-readable output (values, sources, files).")
def show_command(as_json: bool) -> None:
    """Show the effective memory and where each value comes from."""
    with handle_errors(as_json):
        raise SystemExit(run_show(as_json))


@command.command("set", epilog=_KEYS_HELP)
@click.argument("key")
@click.argument("value")
@click.option("--json", "as_json", is_flag=True, help="Machine-readable output.")
def set_command(key: str, value: str, as_json: bool) -> None:
    """Set KEY to VALUE (parsed per the key's type: integer; string[] as a JSON array or
    'a,b'; string). project.* keys are written to .papa-yu/project.json in the working tree."""
    with handle_errors(as_json):
        raise SystemExit(run_set(key, value, as_json))


@command.command("unset", epilog=_KEYS_HELP)
@click.argument("key")
@click.option("--json", "as_json", is_flag=True, help="Machine-readable output.")
def unset_command(key: str, as_json: bool) -> None:
    """Remove KEY from its file (project.* edits .papa-yu/project.json in the working tree)."""
    with handle_errors(as_json):
        raise SystemExit(run_unset(key, as_json))
