"""Fail first: the order a check runs the suite in (docs/DESIGN.md, "Fail first").

`inputs` reads what each test of a base run read (papayu's pytest plugin records it once:
results/pytest_inputs.py); `changes` says which units of a changed Python file changed (functions
by their qualified names, or the module's own code); `signals` finds the test files a change
reaches without a record (names, imports); `order` puts first the tests a run's change reaches,
those red on the tip or in recent checks, and those of the test files it changes; `runs` turns
that into what a run asks papayu's plugin. The order never decides a verdict: the whole suite
judges every plan.
"""

from papayu_git.check.selection.order import FirstPart
from papayu_git.check.selection.runs import (
    first_ask,
    first_only_ask,
    mode,
    only_ask,
    order_for,
    orderable,
    remember_failures,
    rest_ask,
)

__all__ = [
    "FirstPart",
    "first_ask",
    "first_only_ask",
    "mode",
    "only_ask",
    "order_for",
    "orderable",
    "remember_failures",
    "rest_ask",
]
