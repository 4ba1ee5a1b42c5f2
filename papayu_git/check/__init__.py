"""The check: which command, where it runs, what it sees, and what it says about a plan.

One room per concern: `command` resolves the check command on the tip, `scripts` reads what it
runs through its package scripts (on the tip too), `sandbox` builds the bubblewrap command line, `environment` decides what of the user's machine the check
sees (variables and mounts), `run` runs it and keeps its log. docs/DESIGN.md, "The check's
trust boundary", is the design.
"""

from papayu_git.check.command import CheckCommand, detect_command, resolve_command
from papayu_git.check.run import CheckResult, kept_under_tmp, kill_orphans, run_check

__all__ = [
    "CheckCommand",
    "CheckResult",
    "detect_command",
    "kept_under_tmp",
    "kill_orphans",
    "resolve_command",
    "run_check",
]
