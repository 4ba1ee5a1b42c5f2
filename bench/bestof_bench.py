"""`best-of 4` against `fix` with one candidate, in one run, on the same tip with its base cached.

Two cases. Model-bound: every model answer takes MODEL_SEC (the scripted server's fixed latency
stands in for a model's time) and the check is two quick tests; target: best-of 4 ≤ 1.5× one
`fix` (the four are asked at once and checked side by side). Check-bound: the model answers at
once and every check burns BURN_SEC of CPU; on a 2-core machine four checks cannot overlap, so
best-of 4 costs about what four checks on two cores cost: reported, no target.

Both commands run with --review (nothing lands), so every run starts from the same tip and the
same cached base run; runs alternate between the two commands and the medians are compared.

    .venv/bin/python bench/bestof_bench.py [--runs 3] [--model-sec 2.0] [--burn-sec 2.0]
"""

from __future__ import annotations

import argparse
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
CALC = "def add(a, b):\n    return a - b\n"
TESTS = "from calc import add\n\n\ndef test_add():\n    assert add(2, 3) == 5\n"
BURN = "import time\n\n\ndef test_burn():\n    end = time.process_time() + {sec}\n    while time.process_time() < end:\n        pass\n"
FIXES = {  # four different right answers: four trees, four checks
    0.0: "a + b",
    0.3: "b + a",
    0.5: "sum((a, b))",
    0.7: "(a + b)",
}
TARGET = 1.5


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


def router(delay: float) -> Any:
    def reply(body: dict[str, Any]) -> Reply:
        new = FIXES[round(float(body["temperature"]), 2)]
        if not any("The operator confirmed this plan" in str(m.get("content")) for m in body["messages"]):
            answer = chat(plan_answer("add() subtracts"))
        else:
            patch = f"--- a/calc.py\n+++ b/calc.py\n@@ -1,2 +1,2 @@\n def add(a, b):\n-    return a - b\n+    return {new}\n"
            action = {
                "kind": "PATCH_FILE",
                "path": "calc.py",
                "patch": patch,
                "base_sha256": shown_files(body)["calc.py"],
            }
            answer = chat({"summary": "add() fixed", "actions": [action]})
        answer.delay = delay
        return answer

    return reply


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


def case(name: str, model_sec: float, burn_sec: float, runs: int) -> dict[str, Any]:
    server = ScriptedLLM([])
    server.script = [router(model_sec)] * (runs * 10 + 10)
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
    rows = [
        case("model-bound", args.model_sec, 0.0, args.runs),
        case("check-bound", 0.0, args.burn_sec, args.runs),
    ]
    print(f"best-of 4 vs fix (1 candidate), --review, base cached, median of {args.runs}; {os.cpu_count()} CPUs")
    print("| case | model s/answer | check CPU s | fix s | best-of 4 s | ratio | target |")
    print("|---|---:|---:|---:|---:|---:|---|")
    for row in rows:
        target = f"<= {TARGET}x" if row["case"] == "model-bound" else "reported"
        print(
            f"| {row['case']} | {row['model_sec']:.1f} | {row['burn_sec']:.1f} | {row['fix']:.2f} | "
            f"{row['best']:.2f} | {row['ratio']:.2f}x | {target} |"
        )
    met = rows[0]["ratio"] <= TARGET
    print(f"model-bound: {rows[0]['ratio']:.2f}x; target <= {TARGET}x: {'met' if met else 'NOT met'}")
    return 0 if met else 1


if __name__ == "__main__":
    sys.exit(main())
