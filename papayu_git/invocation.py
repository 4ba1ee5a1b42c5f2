"""Which papayu command this process runs (`fix`, `retry`, `apply`, `mcp`, …), set once by the
command line and read by the records it writes: a trace says the round it holds (`plan`,
`apply`) and the command that ran it (docs/FEATURES.md, "Traces and events")."""

from __future__ import annotations

_command = ""


def set_command(name: str) -> None:
    global _command
    _command = name


def command() -> str:
    """The subcommand on the command line; "" when papayu runs as a library (tests, scripts)."""
    return _command
