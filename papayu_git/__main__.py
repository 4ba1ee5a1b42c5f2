"""The program: `python -m papayu_git` and the console scripts `papayu` and `git-papayu`
(pyproject.toml), which run the CLI (cli.py) once the collector is set for a command's life."""

from __future__ import annotations

import gc
from typing import Any

# Start-up creates tens of thousands of objects that live until the process ends (modules,
# classes, functions, click's and papayu's tables). At the default threshold (700) the collector
# runs ~27 times while they load and frees nothing: ~2 % of an apply (bench/apply_bench.py). At
# this one it runs every 50,000 net allocations, so a long-running command (fix, agent, mcp) still
# has its cycles collected (docs/DESIGN.md, "Start-up and cost").
GEN0_THRESHOLD = 50_000


def main() -> Any:
    gc.set_threshold(GEN0_THRESHOLD, *gc.get_threshold()[1:])
    # Imported after the threshold is set: loading click and papayu is most of the collections.
    from papayu_git.cli import main as run_cli

    return run_cli()


if __name__ == "__main__":
    main()
