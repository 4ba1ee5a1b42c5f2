"""Validation throughput and CLI cold start (docs/DESIGN.md, "Start-up and cost"). Prints a table; `make bench` runs it.

- plans/s: 10,000 mixed plans (1-50 actions; ~70 % valid, ~30 % with one realistic fault),
  validated with `validate_response` (parsed JSON) and `validate_text` (raw model text), one core.
  Target >= 2,000 plans/s. Rates use the process's CPU time, so other load on a shared machine
  does not count; a reference loop shows how fast this core is.
- cold start: median wall time of `git papayu --help` (git hands it to man), `git papayu -h`
  (our process through git) and `papayu --help` beside `python -c pass`, in the same run.
  Target <= 8x.
"""

from __future__ import annotations

import hashlib
import json
import os
import random
import statistics
import subprocess
import sys
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

from papayu_git.errors import PapayuError
from papayu_git.validate import validate_response, validate_text

PLANS = 10_000
STARTS = 15
FAULTS: list[Callable[[dict[str, Any]], None]] = []


def fault(fn: Callable[[dict[str, Any]], None]) -> Callable[[dict[str, Any]], None]:
    FAULTS.append(fn)
    return fn


@fault
def _traversal(a: dict[str, Any]) -> None:
    a["path"] = "../" + a["path"]


@fault
def _git_dir(a: dict[str, Any]) -> None:
    a["path"] = "src/.GIT/" + a["path"]


@fault
def _hfs_git(a: dict[str, Any]) -> None:
    a["path"] = ".g\u200cit/" + a["path"]  # HFS+ ignores U+200C: this is .git on macOS


@fault
def _protected(a: dict[str, Any]) -> None:
    a["path"] = "config/.env.local"


@fault
def _windows_alias(a: dict[str, Any]) -> None:
    a["path"] = "deploy/id_ed25519. "  # Windows opens deploy/id_ed25519


@fault
def _nul(a: dict[str, Any]) -> None:
    if "content" in a:
        a["content"] += "\x00"
    else:
        a["path"] = "/abs/" + a["path"]


@fault
def _bad_sha(a: dict[str, Any]) -> None:
    if "base_sha256" in a:
        a["base_sha256"] = a["base_sha256"].upper()
    else:
        a["path"] = "C:\\x\\" + a["path"]


@fault
def _schema(a: dict[str, Any]) -> None:
    a["kind"] = "MOVE_FILE"  # not in the enum: the schema rejects it (jsonschema reports)


def _action(rng: random.Random, i: int) -> dict[str, Any]:
    path = f"src/pkg{rng.randrange(20)}/module_{i}.py"
    body = "".join(f"def f{j}(x):\n    return x + {j}\n" for j in range(rng.randrange(1, 40)))
    kind = rng.choice(
        ["CREATE_FILE", "CREATE_FILE", "PATCH_FILE", "PATCH_FILE", "UPDATE_FILE", "DELETE_FILE", "CREATE_DIR"]
    )
    if kind == "PATCH_FILE":
        diff = f"--- a/{path}\n+++ b/{path}\n@@ -1,3 +1,3 @@\n def f0(x):\n-    return x\n+    return x + 1\n"
        return {"kind": kind, "path": path, "patch": diff, "base_sha256": hashlib.sha256(body.encode()).hexdigest()}
    if kind in ("CREATE_FILE", "UPDATE_FILE"):
        return {"kind": kind, "path": path, "content": body}
    return {"kind": kind, "path": path.removesuffix(".py") if kind == "CREATE_DIR" else path}


def make_plans(seed: int = 2) -> list[dict[str, Any]]:
    rng = random.Random(seed)
    plans = []
    for n in range(PLANS):
        actions = [_action(rng, i) for i in range(rng.randint(1, 50))]
        if rng.random() < 0.3:
            rng.choice(FAULTS)(rng.choice(actions))
        plans.append({"actions": actions, "summary": f"plan {n}", "memory_patch": {}})
    return plans


def _rate(plans: list[Any], validate: Callable[[Any], Any]) -> tuple[float, int]:
    ok = 0
    started = time.process_time()
    for plan in plans:
        try:
            validate(plan)
            ok += 1
        except PapayuError:
            pass
    return len(plans) / (time.process_time() - started), ok


def _reference_loop() -> float:
    """CPU seconds for 10M additions in a Python loop (~0.4 s on a typical 2020s core)."""
    started = time.process_time()
    total = 0
    for i in range(10_000_000):
        total += i
    return time.process_time() - started


def _median_start(argv: list[str], env: dict[str, str]) -> float:
    times = []
    for _ in range(STARTS):
        started = time.perf_counter()
        subprocess.run(argv, env=env, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL, check=True)
        times.append(time.perf_counter() - started)
    return statistics.median(times)


def main() -> int:
    plans = make_plans()
    texts = [json.dumps(p) for p in plans]
    validate_response({"actions": [], "summary": "NO_CHANGES: warm"}, protocol=2)
    reference = _reference_loop()
    parsed_rate, ok = _rate(plans, lambda p: validate_response(p, protocol=2, mode="apply"))
    text_rate, _ = _rate(texts, lambda t: validate_text(t, protocol=2, mode="apply"))
    actions = sum(len(p["actions"]) for p in plans)

    env = {**os.environ, "PATH": f"{Path(sys.executable).parent}{os.pathsep}{os.environ.get('PATH', '')}"}
    base = _median_start([sys.executable, "-c", "pass"], env)
    starts = {cmd: _median_start(cmd.split(), env) for cmd in ("git papayu --help", "git papayu -h", "papayu --help")}

    print(
        f"validation: {PLANS} plans, {actions} actions, {ok} valid / {PLANS - ok} rejected, one core "
        f"(reference loop: {reference:.2f} s CPU; load average {os.getloadavg()[0]:.1f})"
    )
    print(f"{'measure':<34} {'value':>12} {'target':>12}  status")
    rows = [
        ("plans/s validate_response (JSON)", parsed_rate, 2000.0),
        ("plans/s validate_text (raw text)", text_rate, 2000.0),
    ]
    for label, value, target in rows:
        print(f"{label:<34} {value:>12,.0f} {'>= 2,000':>12}  {'ok' if value >= target else 'MISS'}")
    print(f"{'python -c pass (median)':<34} {base * 1000:>10.1f}ms {'':>12}")
    for cmd, seconds in starts.items():
        ratio = seconds / base
        print(
            f"{cmd + ' (median)':<34} {seconds * 1000:>10.1f}ms {'<= 8.0x':>12}  "
            f"{ratio:.1f}x {'ok' if ratio <= 8 else 'MISS'}"
        )
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
