"""The selective check: run only the tests whose inputs a plan changed (docs/DESIGN.md, "Pay for
what the plan changed").

`inputs` reads what each test of the base run read (papayu's pytest plugin records it:
results/pytest_inputs.py); `changes` says which units of a changed Python file changed (functions
by their qualified names, or the module's own code); `select` decides, for one run of a plan's
tree against the base, which tests run and which keep their base outcome.
"""

from papayu_git.check.selection.runs import ask, missed, mode, plan, record, tripped, with_reused

__all__ = ["ask", "missed", "mode", "plan", "record", "tripped", "with_reused"]
