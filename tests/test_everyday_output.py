"""What the everyday commands print, through the real CLI after a real `fix` and `retry`: `trace
list` names the command that ran each round and how it ended, `trace show` takes a plan id, `list`
and `show` name the traces, `show` prints the plan's steps, `doctor` names the model it will use,
and a typo'd command gets a "did you mean"."""

from __future__ import annotations

import json
from pathlib import Path

import pytest
from calc_project import GOAL, GOOD, WRONG, attempt
from helpers import papayu, stored_plans
from llm_server import Reply, ScriptedLLM

from papayu_git.check import sandbox


@pytest.fixture
def fixed_then_retried(calc: Path, llm: ScriptedLLM) -> tuple[Path, str, str]:
    """`fix` (a plan that fixes nothing: held at review), then `retry` of it (lands)."""
    if sandbox.unavailable_reason() is not None:
        pytest.skip("bwrap does not work here")
    llm.script = [*attempt(WRONG)]
    assert papayu("fix", GOAL, "-y", "--attempts", "1", cwd=calc, env=llm.env(), timeout=300).returncode == 1
    held = stored_plans(calc)[-1]["id"]
    llm.script = [*attempt(GOOD)]
    retried = papayu("retry", held, "-y", cwd=calc, env=llm.env(), timeout=300)
    assert retried.returncode == 0, retried.stderr
    return calc, held, stored_plans(calc)[-1]["id"]


def test_trace_list_names_the_command_that_ran_each_round_and_how_it_ended(
    fixed_then_retried: tuple[Path, str, str],
) -> None:
    repo, held, landed = fixed_then_retried
    rows = json.loads(papayu("trace", "list", "--json", cwd=repo).stdout)["traces"]
    said = [(r["plan_id"], r["invoked_as"], r["command"], r["outcome"]) for r in rows]
    assert said == [
        (held, "fix", "plan", "planned"),
        (held, "fix", "apply", "review"),
        (landed, "retry", "plan", "planned"),
        (landed, "retry", "apply", "landed"),
    ]
    text = papayu("trace", "list", cwd=repo).stdout.splitlines()
    assert text[0].split() == ["AT", "TRACE", "PLAN", "COMMAND", "PROTO", "OUTCOME", "NOTES"]
    assert [line.split()[2:7] for line in text[1:]] == [  # PLAN, COMMAND (two words), PROTO, OUTCOME
        [held, "fix:", "plan", "v2", "planned"],
        [held, "fix:", "apply", "v2", "review"],
        [landed, "retry:", "plan", "v2", "planned"],
        [landed, "retry:", "apply", "v2", "landed"],
    ]


def test_trace_show_takes_a_plan_id_and_list_and_show_name_the_traces(
    fixed_then_retried: tuple[Path, str, str],
) -> None:
    repo, held, _landed = fixed_then_retried
    by_plan = json.loads(papayu("trace", "show", held, "--json", cwd=repo).stdout)
    assert by_plan["plan_id"] == held and [t["command"] for t in by_plan["traces"]] == ["plan", "apply"]
    plan_trace, apply_trace = (t["trace_id"] for t in by_plan["traces"])
    short = held.rsplit("-", 1)[1][:4]  # a plan's hash-part prefix works as anywhere else
    shown = papayu("trace", "show", short, cwd=repo)
    assert shown.returncode == 0 and plan_trace in shown.stdout and apply_trace in shown.stdout
    listed = {row["id"]: row for row in json.loads(papayu("list", "--json", cwd=repo).stdout)["plans"]}
    assert listed[held]["trace_id"] == apply_trace
    row = next(line for line in papayu("list", cwd=repo).stdout.splitlines() if line.startswith(held))
    assert f"  {apply_trace[:8]}  " in row
    show = papayu("show", held, cwd=repo)
    assert f"traces: {plan_trace}, {apply_trace}   (git papayu trace show {held})" in show.stdout


def test_show_prints_the_plans_steps(fixed_then_retried: tuple[Path, str, str]) -> None:
    repo, held, _landed = fixed_then_retried
    out = papayu("show", held, cwd=repo).stdout
    assert "Plan:\n  1. Fix add — return a + b\n" in out, out  # the PLAN round's steps (calc_project)


def test_doctor_names_the_model_it_will_use(repo: Path, llm: ScriptedLLM) -> None:
    env = {"PAPAYU_LLM_BASE_URL": llm.base_url}  # no PAPAYU_LLM_MODEL: the server is asked
    proc = papayu("doctor", "--json", cwd=repo, env=env)
    data = json.loads(proc.stdout)
    item = next(c for c in data["checks"] if c["name"] == "llm provider")
    assert item["status"] == "ok" and "model discovered-model (the one it serves)" in item["detail"], item
    assert data["model"] == {"provider": "openai-compatible", "name": "discovered-model"}
    assert "plans are asked of: discovered-model (openai-compatible)" in papayu("doctor", cwd=repo, env=env).stdout
    configured = papayu("doctor", cwd=repo, env={**env, "PAPAYU_LLM_MODEL": "mine"}).stdout
    assert "plans are asked of: mine (openai-compatible)" in configured
    several = {"object": "list", "data": [{"id": "small"}, {"id": "large"}]}
    llm.extras["/v1/models"] = Reply(200, several)
    item = next(
        c
        for c in json.loads(papayu("doctor", "--json", cwd=repo, env=env).stdout)["checks"]
        if c["name"] == "llm provider"
    )
    assert (
        item["status"] == "warn"
        and "serves 2 models: small, large" in item["detail"]
        and "PAPAYU_LLM_MODEL" in item["hint"]
    )


@pytest.mark.parametrize(
    "args, meant", [(["lnad", "x"], "'land'"), (["trace", "shwo", "x"], "'show'"), (["undo-"], "'undo'")]
)
def test_a_typod_command_gets_a_did_you_mean(repo: Path, args: list[str], meant: str) -> None:
    proc = papayu(*args, cwd=repo)
    assert proc.returncode == 2 and f"Did you mean {meant}?" in proc.stderr, proc.stderr
    unknown = papayu("zzzz", cwd=repo)
    assert (
        unknown.returncode == 2 and "No such command 'zzzz'." in unknown.stderr and "Did you mean" not in unknown.stderr
    )
