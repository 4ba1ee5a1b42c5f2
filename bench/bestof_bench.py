"""`best-of 4` against `fix` with one candidate, in one run, on the same tip with its base cached.

Two cases. Model-bound: every model answer takes MODEL_SEC (the scripted server's fixed latency
stands in for a model's time), four different right answers, and the check is a few quick tests;
target: best-of 4 <= 1.5x one `fix` (the four are asked at once and checked side by side).
Check-bound: the model answers at once, the suite has a test that burns BURN_SEC of CPU (one no
change reaches: it runs in the rest, docs/DESIGN.md "Fail first"), and the four candidates are
mixed: one held (it edits the test file), one red (it fixes add() and breaks sub()), two green;
target: best-of 4 <= 1.5x one `fix` (every candidate runs its first part, only the best green
one its rest: about one suite).

Both commands run with --review (nothing lands), so every run starts from the same tip and the
same cached base run; runs alternate between the two commands and the medians are compared.

    .venv/bin/python bench/bestof_bench.py [--runs 3] [--model-sec 6.0] [--burn-sec 2.0]
"""

from __future__ import annotations

import argparse
import difflib
import os
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT / "tests"))

from llm_server import Reply, ScriptedLLM, chat, plan_answer, shown_files  # noqa: E402

GOAL = "fix the failing test tests/test_calc.py"
CALC = "def add(a, b):\n    return a - b\n\n\ndef sub(a, b):\n    return a - b\n"
TESTS = (
    "from calc import add, sub\n\n\ndef test_add():\n    assert add(2, 3) == 5\n\n\n"
    "def test_sub():\n    assert sub(5, 3) == 2\n"
)
BURN = "import time\n\n\ndef test_burn():\n    end = time.process_time() + {sec}\n    while time.process_time() < end:\n        pass\n"
FIXES = {  # four different right answers: four trees, four checks
    0.0: "a + b",
    0.3: "b + a",
    0.5: "sum((a, b))",
    0.7: "(a + b)",
}
TARGET = 1.5
RED = "return a + b\n\n\ndef sub(a, b):\n    return a + b"  # fixes add, breaks sub
HELD = "held"  # fixes add and edits the test file: held for a human (ERR_TEST_EDITS_HELD)
MIXED = {0.0: "a + b", 0.3: RED, 0.5: HELD, 0.7: "b + a"}


def make_repo(root: Path, burn_sec: float) -> Path:
    repo = root / "calc"
    (repo / "tests").mkdir(parents=True)
    (repo / "calc.py").write_text(CALC)
    (repo / "tests" / "test_calc.py").write_text(TESTS)
    (repo / "pyproject.toml").write_text("[tool.pytest.ini_options]\npythonpath = ['.']\n")
    if burn_sec:
        (repo / "tests" / "test_burn.py").write_text(BURN.format(sec=burn_sec))
    ident = ["-c", "user.name=b", "-c", "user.email=b@b"]
    for args in (["init", "-q", "-b", "main"], [*ident, "add", "-A"], [*ident, "commit", "-q", "-m", "calc"]):
        subprocess.run(["git", *args], cwd=repo, check=True)
    subprocess.run(
        ["git", "config", "papayu.check.command", f"{sys.executable} -m pytest -q -p no:cacheprovider"],
        cwd=repo,
        check=True,
    )
    return repo


def router(delay: float, answers: dict[float, str]) -> Any:
    def reply(body: dict[str, Any]) -> Reply:
        new = answers[round(float(body["temperature"]), 2)]
        if not any("The operator confirmed this plan" in str(m.get("content")) for m in body["messages"]):
            answer = chat(plan_answer("add() subtracts"))
        else:
            answer = chat({"summary": "add() fixed", "actions": actions(body, new)})
        answer.delay = delay
        return answer

    return reply


def actions(body: dict[str, Any], new: str) -> list[dict[str, Any]]:
    shown = shown_files(body)
    if new == HELD:
        tests = TESTS + "\n\ndef test_add_again():\n    assert add(1, 1) == 2\n"
        fixed = CALC.replace("return a - b", "return a + b", 1)
        return [_patch(shown, "calc.py", CALC, fixed), _patch(shown, "tests/test_calc.py", TESTS, tests)]
    if new == RED:
        return [_patch(shown, "calc.py", CALC, CALC.replace("return a - b", "return a + b"))]
    return [_patch(shown, "calc.py", CALC, CALC.replace("return a - b", "return " + new, 1))]


def _patch(shown: dict[str, str], path: str, old: str, new: str) -> dict[str, Any]:
    diff = "".join(difflib.unified_diff(old.splitlines(True), new.splitlines(True), f"a/{path}", f"b/{path}"))
    return {"kind": "PATCH_FILE", "path": path, "patch": diff, "base_sha256": shown[path]}


def timed(repo: Path, env: dict[str, str], *args: str) -> float:
    started = time.perf_counter()
    proc = subprocess.run(
        [sys.executable, "-m", "papayu_git", *args, "--review", "--json"],
        cwd=repo,
        env={**os.environ, **env},
        capture_output=True,
        text=True,
        timeout=900,
    )
    elapsed = time.perf_counter() - started
    if proc.returncode != 0:
        raise SystemExit(f"papayu {' '.join(args)} failed ({proc.returncode}): {proc.stderr[-2000:]}")
    return elapsed


def case(name: str, model_sec: float, burn_sec: float, runs: int, answers: dict[float, str]) -> dict[str, Any]:
    server = ScriptedLLM([])
    server.script = [router(model_sec, answers)] * (runs * 10 + 10)
    try:
        with tempfile.TemporaryDirectory() as tmp:
            repo = make_repo(Path(tmp), burn_sec)
            env = {**server.env(), "PAPAYU_LLM_TIMEOUT_SEC": "120"}
            timed(repo, env, "fix", GOAL, "-y")  # warms the base run of the tip (cached for every run after)
            single, best = [], []
            for _ in range(runs):
                single.append(timed(repo, env, "fix", GOAL, "-y"))
                best.append(timed(repo, env, "best-of", "4", GOAL, "-y"))
    finally:
        server.close()
    one, four = statistics.median(single), statistics.median(best)
    return {"case": name, "model_sec": model_sec, "burn_sec": burn_sec, "fix": one, "best": four, "ratio": four / one}


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--runs", type=int, default=3)
    parser.add_argument("--model-sec", type=float, default=6.0)
    parser.add_argument("--burn-sec", type=float, default=2.0)
    args = parser.parse_args()
    load = os.getloadavg()
    rows = [
        case("model-bound", args.model_sec, 0.0, args.runs, FIXES),
        case("check-bound, mixed", 0.0, args.burn_sec, args.runs, MIXED),
    ]
    print(f"best-of 4 vs fix (1 candidate), --review, base cached, median of {args.runs}; {os.cpu_count()} CPUs")
    print(f"load average before {load}, after {os.getloadavg()}")
    print("| case | model s/answer | check CPU s | fix s | best-of 4 s | ratio | target |")
    print("|---|---:|---:|---:|---:|---:|---|")
    for row in rows:
        print(
            f"| {row['case']} | {row['model_sec']:.1f} | {row['burn_sec']:.1f} | {row['fix']:.2f} | "
            f"{row['best']:.2f} | {row['ratio']:.2f}x | <= {TARGET}x |"
        )
    met = all(row["ratio"] <= TARGET for row in rows)
    print(f"target <= {TARGET}x: {'met' if met else 'NOT met'}")
    return 0 if met else 1


if __name__ == "__main__":
    sys.exit(main())
