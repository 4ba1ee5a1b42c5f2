"""The red path as a person meets it, through the real CLI: a question left with Ctrl-C or Ctrl-D
(on a real terminal), and the next command papayu names after a red check, a plan that fixes
nothing, a dirty work tree and an undo: each one is run as printed and does what it says."""

from __future__ import annotations

from pathlib import Path

import pytest
from calc_project import GOAL, GOOD, attempt
from helpers import git, stored_plans
from llm_server import ScriptedLLM
from terminal import CTRL_C, CTRL_D, Terminal

from papayu_git.check import sandbox

pytestmark = pytest.mark.skipif(
    sandbox.unavailable_reason() is not None, reason=f"bwrap does not work here: {sandbox.unavailable_reason()}"
)


@pytest.mark.parametrize("key, said", [(CTRL_C, "Ctrl-C"), (CTRL_D, "Ctrl-D")])
def test_ctrl_c_or_ctrl_d_at_the_landing_question_keeps_the_checked_plan_for_land(
    calc: Path, llm: ScriptedLLM, key: bytes, said: str
) -> None:
    llm.script = [*attempt(GOOD)]
    before = git(calc, "rev-parse", "main")
    term = Terminal(["fix", GOAL], calc, llm.env())
    term.expect("? [y/N]: ")
    term.type(key)
    code = term.wait()
    plan_id = stored_plans(calc)[-1]["id"]
    record = stored_plans(calc)[-1]["extra"]["apply"]
    assert code == 0, term.text  # as for a "no"
    assert "ERR_INTERNAL" not in term.text and "This is a bug" not in term.text
    assert f"papayu: {said} at the question: not landing" in term.text
    assert f"land it: git papayu land {plan_id}" in term.text
    assert record["state"] == "review" and record["declined"] is True and record["check"]["passed"]
    assert git(calc, "rev-parse", "main") == before
    kept = git(calc, "rev-parse", f"papayu/{plan_id}").strip()
    assert kept == record["commit"]
    # What it said works: the checked plan lands.
    landed = Terminal(["land", plan_id], calc)
    assert landed.wait() == 0, landed.text
    assert git(calc, "rev-parse", "main").strip() == kept
