"""`git papayu hooks install`: the plain git pre-commit shim for users without pre-commit."""

from __future__ import annotations

from pathlib import Path

import click

from papayu_git import output
from papayu_git.cli import SuggestingGroup
from papayu_git.error_handler import handle_errors
from papayu_git.hooks import InstallState, install_shim, uninstall_shim


def run_install(chain: bool = False, force: bool = False, as_json: bool = False) -> int:
    result = install_shim(Path.cwd(), chain=chain, force=force)
    if as_json:
        output.emit_json(
            {
                "ok": True,
                "hook": str(result.hook),
                "state": result.state.value,
                "previous": str(result.previous) if result.previous else None,
            }
        )
        return 0
    output.result(f"{result.state.value}: {result.hook}")
    if result.state is InstallState.CHAINED:
        output.info(f"the existing hook moved to {result.previous} and runs first")
    elif result.state is InstallState.REPLACED:
        output.info(f"the existing hook was replaced; a backup is at {result.previous}")
    return 0


@click.group("hooks", cls=SuggestingGroup)
def command() -> None:
    """Git hooks of papayu-git.

    Users of the pre-commit tool add the hooks of .pre-commit-hooks.yaml to their
    .pre-commit-config.yaml instead (docs/FEATURES.md: pre-commit hooks).
    """


@command.command("install")
@click.option("--chain", is_flag=True, help="Keep an existing pre-commit hook and run it before papayu's checks.")
@click.option(
    "--force", is_flag=True, help="Replace an existing pre-commit hook (it is kept as pre-commit.papayu-backup)."
)
@click.option("--json", "as_json", is_flag=True, help="Machine-readable output.")
def install(chain: bool, force: bool, as_json: bool) -> None:
    """Install the pre-commit shim into the hooks directory (core.hooksPath if set).

    The shim validates the STAGED versions of .papa-yu/*.json, .papa-yu/project.json and
    golden traces with `papayu validate --staged`; an invalid file blocks the commit.
    An existing hook of another tool is never overwritten silently: without --chain or
    --force the command fails with ERR_HOOK_EXISTS. Re-running updates papayu's own shim.
    """
    if chain and force:
        raise click.UsageError("--chain and --force exclude each other")
    with handle_errors(as_json):
        raise SystemExit(run_install(chain, force, as_json))


def run_uninstall(as_json: bool = False) -> int:
    hook, restored = uninstall_shim(Path.cwd())
    if as_json:
        output.emit_json({"ok": True, "hook": str(hook), "restored": str(restored) if restored else None})
    else:
        output.result(f"removed: {hook}" + ("; the chained hook is back in place" if restored else ""))
    return 0


@command.command("uninstall")
@click.option("--json", "as_json", is_flag=True, help="Machine-readable output.")
def uninstall(as_json: bool) -> None:
    """Remove papayu's pre-commit shim; a hook kept by --chain is put back.

    A hook that is not papayu's is left alone (ERR_HOOK_NOT_INSTALLED).
    """
    with handle_errors(as_json):
        raise SystemExit(run_uninstall(as_json))
