"""`git papayu doctor`: what papayu can use here, each item actually tried.

First whether a model can answer at all (as `plan` and `fix` decide it before they start); then
git's version; the sandbox (the `papayu.check.sandbox` mode, which bwrap, user namespaces, network
isolation and the git-dir overlay, each probed with a real bwrap run; the resulting level;
the environment variable names withheld from the check); the check command the current
branch would get; the embedded model (started and asked for one token when it is the provider);
the LLM provider (a key is only ever reported as set or not); the pre-commit hooks. Nothing is written; every string
printed goes through ``secrets.mask``. Exit 1 only when something papayu needs is broken.

One module per area: `repository`, `sandbox`, `check`, `model`, `hooks`; `items` holds what they
report. This module collects them and is the command.
"""

from __future__ import annotations

import click

from papayu_git import output
from papayu_git.commands.doctor.check import check_command_item, tip_check_item
from papayu_git.commands.doctor.hooks import git_hook_item, precommit_config_item
from papayu_git.commands.doctor.items import FAIL, INFO, OK, WARN, Here, Item
from papayu_git.commands.doctor.model import local_model_item, model_item, provider_item
from papayu_git.commands.doctor.repository import git_item, repository_item
from papayu_git.commands.doctor.sandbox import (
    bwrap_item,
    check_env_item,
    network_item,
    overlay_item,
    sandbox_item,
    sandbox_setting_item,
    userns_item,
)
from papayu_git.error_handler import handle_errors
from papayu_git.secrets import mask, mask_data


def collect(check: bool = False, here: Here | None = None) -> list[Item]:
    here = here or Here()
    items = [
        model_item(),  # first: without a model nothing else matters
        git_item(),
        repository_item(here),
        sandbox_setting_item(here),
        bwrap_item(here),
        userns_item(here),
        network_item(here),
        overlay_item(here),
        sandbox_item(here),
        check_env_item(here),
        check_command_item(here),
    ]
    if check:
        items.append(tip_check_item(here))
    provider = provider_item(here)  # first: the local model's status depends on the provider
    return [*items, local_model_item(here), provider, git_hook_item(here), precommit_config_item(here)]


_STATUS_COLOURS = {OK: "green", WARN: "yellow", FAIL: "red", INFO: "cyan"}


def run(as_json: bool = False, check: bool = False) -> int:
    here = Here()
    checks = mask_data([item.to_dict() for item in collect(check, here)])
    ok = all(c["status"] != FAIL for c in checks)
    model = {"provider": here.provider or None, "name": here.model or None}
    if as_json:
        output.emit_json({"ok": ok, "model": model, "checks": checks})
        return 0 if ok else 1
    width = max(len(c["name"]) for c in checks)
    for c in checks:
        status = output.colour(f"{c['status']:<4}", _STATUS_COLOURS[c["status"]])
        output.result(f"{status}  {c['name']:<{width}}  {c['detail']}")
        if c["hint"]:
            output.result(f"{'':<4}  {'':<{width}}  {output.colour('-> ' + c['hint'], 'dim')}")
    failed = [c["name"] for c in checks if c["status"] == FAIL]
    warned = [c["name"] for c in checks if c["status"] == WARN]
    if failed:
        output.result(output.colour(f"papayu cannot work here: {', '.join(failed)}", "red"))
    elif warned:
        output.result(f"papayu works here, with warnings: {', '.join(warned)}")
    else:
        output.result(output.colour("papayu works here", "green"))
    if here.model:
        output.result(f"plans are asked of: {mask(here.model)} ({here.provider})")
    return 0 if ok else 1


@click.command("doctor")
@click.option("--json", "as_json", is_flag=True, help="Machine-readable output: {ok, checks: [...]}.")
@click.option(
    "--check",
    "tip_check",
    is_flag=True,
    help="Also run the check on the tip in the sandbox (as a plan's check runs), time it against the same "
    "command run directly in your tree, and say what it was missing. Runs your tests twice.",
)
def command(as_json: bool, tip_check: bool) -> None:
    """Show what papayu can use here, each item actually tried: git, the check's sandbox
    (bwrap, user namespaces, network isolation, git-dir overlay), the check command, the
    embedded model, the LLM provider (keys: set or not, never shown) and the hooks.
    Exit 1 when something papayu needs is broken."""
    with handle_errors(as_json):
        raise SystemExit(run(as_json, tip_check))
