"""Command-line frame. Subcommands load lazily so `git papayu --help` starts fast.

Each subcommand lives in `papayu_git/commands/<name>.py` as a click command named
``command`` whose callback parses arguments and calls a typed ``run(...) -> int``.
"""

from __future__ import annotations

import atexit
import gc
import os
import sys
from importlib import import_module
from typing import IO, Any

import click

from papayu_git import __version__, invocation, output, settings
from papayu_git.error_handler import install_signal_handlers

# name -> (module, one-line help). The help is here so `--help` imports no command module.
LAZY_COMMANDS: dict[str, tuple[str, str]] = {
    "apply": (
        "papayu_git.commands.apply",
        "Commit a plan in a temp worktree, run the check, land on your branch or roll back.",
    ),
    "land": ("papayu_git.commands.land", "Fast-forward your branch with a reviewed papayu/<id>."),
    "drop": ("papayu_git.commands.drop", "Delete a generated branch papayu/<id>."),
    "undo": ("papayu_git.commands.undo", "Take a landing back while nothing came after it."),
    "list": ("papayu_git.commands.list", "Stored plans and generated branches with their state."),
    "show": ("papayu_git.commands.show", "A plan with its diff (coloured on a terminal)."),
    "diff": ("papayu_git.commands.diff", "Only the diff of a plan's commit (or --stat), through your pager."),
    "gc": ("papayu_git.commands.gc", "Remove stale worktrees, locks and old generated branches."),
    "doctor": (
        "papayu_git.commands.doctor",
        "What papayu can use here (git, sandbox, check command, model, provider, hooks), each tried.",
    ),
    "context": (
        "papayu_git.commands.context",
        "Show the context a plan would send to the model (debug; nothing is sent).",
    ),
    "plan": ("papayu_git.commands.plan", "Ask the model for a plan for GOAL and store it (nothing is applied)."),
    "fix": ("papayu_git.commands.fix", "Plan GOAL, check it, show the diff and land it on your yes."),
    "best-of": (
        "papayu_git.commands.best_of",
        "Ask for N plans on one pinned tip, check them side by side, land the best green one.",
    ),
    "retry": ("papayu_git.commands.retry", "Plan again for a plan whose check failed, telling the model how."),
    "agent": (
        "papayu_git.commands.agent",
        "Let the model work on GOAL with tools in a private workspace, then check and land its change.",
    ),
    "local-server": (
        "papayu_git.commands.local_server",
        "Run the embedded local model (llama.cpp, Gemma 3 270M) in the foreground for reuse.",
    ),
    "hooks": (
        "papayu_git.commands.hooks",
        "Install / uninstall the plain git pre-commit hook (for users without pre-commit).",
    ),
    "pr": ("papayu_git.commands.pr", "Push papayu/<id> and open a pull/merge request (GitHub, GitLab, Gitea)."),
    "validate": (
        "papayu_git.commands.validate",
        "Validate plan/response files, .papa-yu/project.json, preferences and golden traces.",
    ),
    "memory": ("papayu_git.commands.memory", "Engineering memory: show | set KEY VALUE | unset KEY."),
    "trace": ("papayu_git.commands.trace", "Traces: list | show ID | golden ID [OUT]."),
    "stats": (
        "papayu_git.commands.stats",
        "How the applies went (fallbacks, repairs, checks, latency), tokens per model and their cost.",
    ),
    "research": (
        "papayu_git.commands.research",
        "Search the web for QUERY, read a few pages safely, summarize them with sources (opt-in).",
    ),
    "mcp": ("papayu_git.commands.mcp", "Serve papayu's commands as MCP tools over stdio (for AI coding clients)."),
}


class SuggestingGroup(click.Group):
    """A typo'd subcommand gets git's "did you mean" (click has none for commands)."""

    def resolve_command(
        self, ctx: click.Context, args: list[str]
    ) -> tuple[str | None, click.Command | None, list[str]]:
        name = args[0] if args else ""
        if name and not name.startswith("-") and not ctx.resilient_parsing and self.get_command(ctx, name) is None:
            import difflib  # only on the way to the usage error

            close = difflib.get_close_matches(name, self.list_commands(ctx), n=3, cutoff=0.6)
            if close:
                ctx.fail(f"No such command {name!r}. Did you mean {' or '.join(repr(c) for c in close)}?")
        return super().resolve_command(ctx, args)


class ShortHelpHint(click.UsageError):
    """A usage error whose hint names `-h`, which reaches papayu however it was installed: git turns
    `git papayu --help` into `man git-papayu`, which finds the page only where man looks
    (docs/REFERENCE.md, "Exit codes")."""

    def __init__(self, error: click.UsageError) -> None:
        super().__init__(error.format_message(), error.ctx)

    @classmethod
    def of(cls, error: click.UsageError) -> click.UsageError:
        """``error`` with this hint; one that shows itself otherwise (the help for a bare group) stays."""
        return cls(error) if type(error).show is click.UsageError.show else error

    def show(self, file: IO[Any] | None = None) -> None:
        file = file or sys.stderr
        color = self.ctx.color if self.ctx else None
        if self.ctx is not None:
            click.echo(f"{self.ctx.get_usage()}\nTry '{self.ctx.command_path} -h' for help.\n", file=file, color=color)
        click.echo(f"Error: {self.format_message()}", file=file, color=color)


class LazyGroup(SuggestingGroup):
    def make_context(
        self, info_name: str | None, args: list[str], parent: click.Context | None = None, **extra: Any
    ) -> click.Context:
        try:
            return super().make_context(info_name, args, parent, **extra)
        except click.UsageError as error:
            raise ShortHelpHint.of(error) from None

    def invoke(self, ctx: click.Context) -> Any:
        try:
            return super().invoke(ctx)  # the subcommand's own parsing happens in here
        except click.UsageError as error:
            raise ShortHelpHint.of(error) from None

    def list_commands(self, ctx: click.Context) -> list[str]:
        return sorted(LAZY_COMMANDS)

    def get_command(self, ctx: click.Context, name: str) -> click.Command | None:
        if name not in LAZY_COMMANDS:
            return None
        module = import_module(LAZY_COMMANDS[name][0])
        return module.command

    def format_commands(self, ctx: click.Context, formatter: click.HelpFormatter) -> None:
        rows = [(name, LAZY_COMMANDS[name][1]) for name in self.list_commands(ctx)]
        with formatter.section("Commands"):
            formatter.write_dl(rows)


@click.group(cls=LazyGroup, context_settings={"help_option_names": ["-h", "--help"]})
@click.version_option(__version__, prog_name="papayu-git")
@click.option("-C", "directory", type=click.Path(file_okay=False), help="Run as if started in DIRECTORY.")
@click.option("-v", "--verbose", is_flag=True, help="Print events (EVENT key=value ...) on stderr.")
@click.pass_context
def cli(ctx: click.Context, directory: str | None, verbose: bool) -> None:
    """papayu-git: plans from a language model land as commits only when the check passes.

    \b
    Typical flow:
      git papayu plan "fix the failing test"   # ask the model, store a plan
      git papayu apply <ID>                     # commit in a temp worktree, check, land or roll back
      git papayu fix "fix the failing test"    # both, after confirmation

    Your branch, index and working tree are untouched unless the check passes.
    """
    settings.notices_to(output.notice)  # settings never prints: its notices go out here
    if directory:
        os.chdir(directory)
    if verbose:
        os.environ["PAPAYU_LOG"] = "1"
    invocation.set_command(ctx.invoked_subcommand or "")


def main(argv: list[str] | None = None) -> Any:
    # Exit codes: click's usage errors exit 2; commands return 0/1; bugs 3 (error_handler).
    # The interpreter's last garbage collection walks every object still alive (pygit2's and
    # click's classes, enums, ...): ~15 ms per command here. Module objects are not garbage;
    # freezing them first lets the exit skip the walk (bench/apply_bench.py).
    atexit.register(gc.freeze)

    install_signal_handlers()
    return cli.main(args=argv if argv is not None else sys.argv[1:], prog_name=_prog_name())


def _prog_name() -> str:
    name = os.path.basename(sys.argv[0]) if sys.argv and sys.argv[0] else "papayu"
    return "git papayu" if name == "git-papayu" else "papayu"
