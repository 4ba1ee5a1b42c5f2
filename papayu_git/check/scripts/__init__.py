"""What a check command runs, read through the package scripts it names, on the tip's tree
(docs/DESIGN.md, "What the check runs").

`npm test` is not a test runner: it runs the `test` script of package.json, which may run
`vitest run`, another script (`npm run test:unit`), every workspace package's script (`pnpm -r
test`), or a chain of them behind `cross-env` or variables. papayu reads those scripts as the
shell and npm, pnpm and yarn would, down to the commands that really run (the *leaves*: a
program and its arguments, with the directory it runs in), so that the runner at the end gets
its reporter. Everything is read from the tree the check command was resolved on, the tip's
(command.py): a plan cannot choose how its check's results are read.

Followed: `&&`/`||`/`;`/`|` chains, `cd DIR`, variable assignments, `env`, `cross-env`,
`cross-env-shell`, `dotenv --`, `sh -c`, `npx`/`npm exec`/`pnpm exec`/`pnpm dlx`/`yarn exec`,
`c8`/`nyc`, `npm test|start|run X` (with `--prefix`, `-w`, `--workspaces`), `pnpm X|run X`
(with `-r`, `--filter`, `-C`), `yarn X|run X|workspace W X|workspaces run X|workspaces foreach
run X` (with `--cwd`), `npm-run-all`/`run-s`/`run-p` patterns, `concurrently` commands, pre- and
post-scripts. Workspaces come from pnpm-workspace.yaml or package.json `workspaces`. What cannot
be followed (a missing script, a script too deep, quoting the shell would reject) is said in
``notes``; a filter papayu cannot evaluate counts every package (more leaves than run is
harmless: they only allow a reader, never require one).
"""

from __future__ import annotations

from papayu_git.check.scripts.programs import HANDLERS
from papayu_git.check.scripts.walk import Leaf, Runs, State, Tree, Walk, split_commands

__all__ = ["Leaf", "Runs", "Tree", "resolve", "split_commands"]


def resolve(command: str, tree: Tree | None) -> Runs:
    """The leaves ``command`` runs on ``tree`` (None: no tree, the command's text alone)."""
    walk = Walk(tree, HANDLERS)
    walk.command(command, State())
    return Runs(tuple(walk.leaves), tuple(dict.fromkeys(walk.notes)), walk.scripts)
