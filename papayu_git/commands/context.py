"""`git papayu context GOAL [--from-file LOG]`: show the context a plan would send (docs/DESIGN.md, "Context")."""

from __future__ import annotations

import click

from papayu_git import output
from papayu_git.context import gather, read_log_file
from papayu_git.error_handler import handle_errors
from papayu_git.git import find_toplevel


def run(goal: str, log_file: str | None = None, base: str = "HEAD", as_json: bool = False) -> int:
    log_text = read_log_file(log_file) if log_file else None
    session, blocks = gather(find_toplevel(), goal, log_text, base)
    text = session.render(blocks)
    diet = session.last_diet
    assert diet is not None
    if as_json:
        output.emit_json(
            {
                "ok": True,
                "base_commit": session.base_commit,
                "context": text,
                "blocks": [b.to_dict() for b in diet.blocks],
                "dropped": [b.to_dict() for b in diet.dropped],
                "files_shown": session.files_shown,
                "context_stats": session.context_stats,
                "cache_stats": session.cache_stats,
            }
        )
    else:
        output.result(text)
        stats = session.context_stats
        output.info(
            f"context: {stats['context_files_count']} blocks, {stats['context_total_chars']} chars, "
            f"{stats['context_files_dropped_count']} dropped, {stats['context_truncated_files_count']} "
            f"truncated; base {session.base_commit[:12]}"
        )
    return 0


@click.command("context")
@click.argument("goal")
@click.option(
    "--from-file",
    "log_file",
    type=click.Path(dir_okay=False, allow_dash=True),
    help="A log with the failure (test output, stack trace); '-' reads stdin.",
)
@click.option("--base", default="HEAD", show_default=True, help="Commit whose files are shown.")
@click.option("--json", "as_json", is_flag=True, help="Blocks, dropped blocks, files_shown and stats as JSON.")
def command(goal: str, log_file: str | None, base: str, as_json: bool) -> None:
    """Print the context `plan GOAL` would send to the model: ENV (OS, runtimes, package
    managers, recent and dirty files), files named by stack traces in GOAL or the log (±80
    lines, read from the base commit), test files, manifests — after the context diet.

    Nothing is sent anywhere; use it to see what the model will see.
    """
    with handle_errors(as_json):
        raise SystemExit(run(goal, log_file, base, as_json))
