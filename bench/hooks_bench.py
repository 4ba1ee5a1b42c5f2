"""What the git hook shim costs a commit, and how long `pr` / `land --when-green` take against a
local forge (stdlib HTTP server on 127.0.0.1, file:// bare remote).

    .venv/bin/python bench/hooks_bench.py [--runs 5] [--plans 50]
"""

from __future__ import annotations

import argparse
import json
import os
import statistics
import subprocess
import sys
import tempfile
import time
from collections.abc import Callable
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT / "tests"))
sys.path.insert(0, str(ROOT))

from forge_server import BRANCH, PLAN_ID, ForgeServer, make_kept  # noqa: E402

PLAN = {"actions": [{"kind": "CREATE_FILE", "path": "notes/todo.md", "content": "- ship\n"}], "summary": "todo"}
ENV = {
    **os.environ,
    "GIT_AUTHOR_NAME": "b",
    "GIT_AUTHOR_EMAIL": "b@example.com",
    "GIT_COMMITTER_NAME": "b",
    "GIT_COMMITTER_EMAIL": "b@example.com",
    "GIT_CONFIG_NOSYSTEM": "1",
}
for _name in ("GH_TOKEN", "GITHUB_TOKEN", "GITLAB_TOKEN", "GITEA_TOKEN"):
    ENV.pop(_name, None)


def sh(*args: str, cwd: Path, env: dict[str, str] | None = None) -> None:
    subprocess.run(args, cwd=cwd, env=env or ENV, check=True, capture_output=True)


def papayu(*args: str, cwd: Path, env: dict[str, str] | None = None) -> None:
    sh(sys.executable, "-m", "papayu_git", *args, cwd=cwd, env={**ENV, **(env or {})})


def median_ms(fn: Callable[[int], object], runs: int) -> float:
    samples = []
    for i in range(runs):
        start = time.perf_counter()
        fn(i)
        samples.append((time.perf_counter() - start) * 1000)
    return statistics.median(samples)


def commit_cost(base: Path, runs: int, plans: int, hook: bool) -> dict[str, float]:
    repo = base / ("with" if hook else "without")
    repo.mkdir()
    sh("git", "init", "-q", "-b", "main", cwd=repo)
    sh("git", "commit", "-q", "--allow-empty", "-m", "init", cwd=repo)
    if hook:
        papayu("hooks", "install", cwd=repo)

    def plain(i: int) -> None:
        (repo / f"f{i}.txt").write_text(str(i))
        sh("git", "add", "-A", cwd=repo)
        sh("git", "commit", "-q", "-m", f"plain {i}", cwd=repo)

    def with_plans(i: int) -> None:
        for j in range(plans):
            (repo / ".papa-yu").mkdir(exist_ok=True)
            (repo / ".papa-yu" / f"p{i}-{j}.json").write_text(json.dumps(PLAN))
        sh("git", "add", "-A", cwd=repo)
        sh("git", "commit", "-q", "-m", f"plans {i}", cwd=repo)

    return {"no plan file staged": median_ms(plain, runs), f"{plans} plan files staged": median_ms(with_plans, runs)}


def forge_cost(base: Path, runs: int) -> dict[str, float]:
    times: dict[str, list[float]] = {"pr (push + POST)": [], "land --when-green (green at once)": []}
    for i in range(runs):
        kept = make_kept(base / f"forge{i}")
        with ForgeServer() as server:
            server.route("POST", "/repos/acme/widget/pulls", (201, {"number": 1, "html_url": "https://x/1"}))
            server.route(
                "GET",
                f"/repos/acme/widget/commits/{kept.sha}/status",
                (200, {"state": "success", "statuses": [{"state": "success", "context": "ci"}]}),
            )
            server.route("GET", f"/repos/acme/widget/commits/{kept.sha}/check-runs", (200, {"check_runs": []}))
            env = {"PAPAYU_FORGE_API_URL": server.url, "GH_TOKEN": "bench-token"}
            start = time.perf_counter()
            papayu("pr", PLAN_ID, "--forge", "github", cwd=kept.repo, env=env)
            times["pr (push + POST)"].append((time.perf_counter() - start) * 1000)
            start = time.perf_counter()
            papayu("land", PLAN_ID, "--when-green", "--interval", "0.05", cwd=kept.repo, env=env)
            times["land --when-green (green at once)"].append((time.perf_counter() - start) * 1000)
        assert not subprocess.run(
            ["git", "branch", "--list", BRANCH], cwd=kept.repo, capture_output=True, text=True
        ).stdout.strip()
    return {k: statistics.median(v) for k, v in times.items()}


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__)
    parser.add_argument("--runs", type=int, default=5)
    parser.add_argument("--plans", type=int, default=50)
    args = parser.parse_args()
    with tempfile.TemporaryDirectory(prefix="papayu-hooks-bench-") as tmp:
        base = Path(tmp)
        (base / "home").mkdir()
        ENV["HOME"] = str(base / "home")
        without = commit_cost(base, args.runs, args.plans, hook=False)
        with_hook = commit_cost(base, args.runs, args.plans, hook=True)
        forge = forge_cost(base, args.runs)
    print(f"| git commit (median of {args.runs}) | no hook, ms | papayu shim, ms | shim cost, ms |")
    print("|---|---|---|---|")
    for key in without:
        print(f"| {key} | {without[key]:.0f} | {with_hook[key]:.0f} | {with_hook[key] - without[key]:.0f} |")
    print()
    print(f"| command (median of {args.runs}, local forge) | ms |")
    print("|---|---|")
    for key, value in forge.items():
        print(f"| {key} | {value:.0f} |")


if __name__ == "__main__":
    main()
