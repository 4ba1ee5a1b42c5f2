"""What papayu's runtime shield costs a real test suite, and which honest tests it refuses
(docs/DESIGN.md, "The runtime shield").

For each project (a local clone; `fetch` one, e.g. pallets/click), its suite runs with papayu's
pytest plugin loaded as the check loads it (a read-only helpers directory on PYTHONPATH, its
configuration beside it), interleaved: without the shield (the plugin as it was), and with it as
the tip's run has it (the cost). Then once more with every code file of the project counted as
changed by a plan, so that reaching for frames or objects anywhere in the project's code is
refused: the strictest case (a real plan changes a few files). What the shield refused there, and
in the timed runs, is listed: every one is an honest test it would refuse.

    python bench/shield_bench.py --project click=/tmp/click:pytest<9 --project cachetools=/tmp/cachetools \\
        --project markdown=/tmp/markdown:pyyaml:--ignore=tests/test_syntax/extensions/test_md_in_html.py \\
        [--repeat 5] [--work /tmp/papayu-shield-bench]

On a machine shared with other jobs, the suite's own time varies by ±8 % from run to run, more
than the shield costs; so its cost is also accounted from inside one run: an accounting plugin
times every call of the shield's event handlers and of its check around each test, the audit
hook's own call is counted at the cost of a hook that does nothing, and the shield's start-up
(importing it, its snapshot) is timed in a fresh interpreter. Their sum over the suite's CPU time
is the cost that does not depend on the machine's load.

Each project gets a virtualenv in the work directory (`pip install -e . pytest` and the packages
named after `:`, comma-separated). Target: the shield's cost <= 3% of the suite (median ratio).
Both the wall time and the CPU time of the suite's process are measured: on a shared machine the
CPU time (user + system, which other jobs do not inflate) is the steadier of the two.
"""

from __future__ import annotations

import argparse
import json
import os
import resource
import shutil
import statistics
import subprocess
import sys
import tempfile
import time
from dataclasses import dataclass, field
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))

from papayu_git.check.results.channel import PLUGIN_DIR, PLUGIN_MODULE, write_helpers  # noqa: E402
from papayu_git.judges import is_code  # noqa: E402

TARGET = 1.03


@dataclass
class Project:
    name: str
    source: Path
    deps: list[str]
    args: list[str] = field(default_factory=list)  # more of pytest's arguments
    repo: Path = Path()
    plain: list[float] = field(default_factory=list)
    shielded: list[float] = field(default_factory=list)
    plain_cpu: list[float] = field(default_factory=list)
    shielded_cpu: list[float] = field(default_factory=list)
    refused: list[str] = field(default_factory=list)  # in the timed runs (the tip's)
    strict: list[str] = field(default_factory=list)  # with every code file the plan's
    accounted: dict[str, float] = field(default_factory=dict)
    strict_with_sites: list[str] = field(default_factory=list)  # the same, given the tip's sites as a plan's run is
    outcome: dict[str, str] = field(default_factory=dict)


class _Listing:
    def __init__(self, files: set[str]) -> None:
        self.files = files

    def entry_kind(self, path: str) -> str | None:
        return "file" if path in self.files else None


def prepare(project: Project, work: Path) -> None:
    project.repo = work / project.name
    if not project.repo.exists():
        subprocess.run(["git", "clone", "-q", str(project.source), str(project.repo)], check=True)
    python = project.repo / ".venv/bin/python"
    if not python.exists():
        subprocess.run([sys.executable, "-m", "venv", str(project.repo / ".venv")], check=True)
        pip = [str(python), "-m", "pip", "install", "-q"]
        subprocess.run([*pip, "-e", str(project.repo), "pytest", *project.deps], check=True)


def code_files(repo: Path) -> list[str]:
    tracked = subprocess.run(["git", "ls-files"], cwd=repo, capture_output=True, text=True, check=True).stdout
    files = set(tracked.split())
    listing = _Listing(files)
    return sorted(p for p in files if p.endswith(".py") and is_code(p, listing))


def run_suite(
    project: Project,
    shield: bool,
    helpers: Path,
    report: Path,
    changed: list[str] | None = None,
    sites: list[str] | None = None,
) -> tuple[float, float, str]:
    shutil.rmtree(report, ignore_errors=True)
    report.mkdir(parents=True)
    config: dict[str, object] = {"root": str(project.repo)}
    if shield:
        config["shield"] = {
            "root": str(project.repo),
            "report_dir": str(report),
            "changed": changed or [],
            "code": [],
            "sites": sites or [],
        }
    (helpers / PLUGIN_DIR / f"{PLUGIN_MODULE}.json").write_text(json.dumps(config))
    env = {**os.environ, "PYTHONPATH": str(helpers / PLUGIN_DIR), "PYTHONDONTWRITEBYTECODE": "1"}
    env.pop("PYTEST_ADDOPTS", None)
    python = str(project.repo / ".venv/bin/python")
    before = resource.getrusage(resource.RUSAGE_CHILDREN)
    start = time.perf_counter()
    proc = subprocess.run(
        [python, "-m", "pytest", "-q", "-p", "no:cacheprovider", *project.args],
        cwd=project.repo,
        env=env,
        capture_output=True,
        text=True,
    )
    took = time.perf_counter() - start
    after = resource.getrusage(resource.RUSAGE_CHILDREN)
    cpu = (after.ru_utime - before.ru_utime) + (after.ru_stime - before.ru_stime)
    return took, cpu, (proc.stdout.strip().splitlines() or [""])[-1]


ACCOUNTING = """
import sys, time, json, os
_spent = {"handlers": 0, "checks": 0, "events": 0, "handled": 0, "tests": 0}
_clock = time.thread_time_ns  # CPU time: other jobs on the machine do not count
_pair = min(-(_clock() - _clock()) for _ in range(2000))  # what one reading of the clock costs

def _timed(function, key):
    def timed(*args, **kwargs):
        start = _clock()
        try:
            return function(*args, **kwargs)
        finally:
            _spent[key] += max(_clock() - start - _pair, 0)
            _spent["handled" if key == "handlers" else "tests"] += 1
    return timed

def _count(event, args):
    _spent["events"] += 1

def pytest_configure(config):
    plugin = sys.modules.get("papayu_pytest_results")
    shield = getattr(plugin, "_shield", None)
    if shield is None or getattr(plugin, "_guard", None) is None:
        return
    for name, handler in list(shield._handlers.items()):
        shield._handlers[name] = _timed(handler, "handlers")
    plugin._guard.check = _timed(plugin._guard.check, "checks")
    sys.addaudithook(_count)

def pytest_unconfigure(config):
    with open(os.environ["ACCOUNT"], "w") as handle:
        json.dump(_spent, handle)
"""
STARTUP = """
import sys, time
sys.path.insert(0, sys.argv[1])
import pytest, _pytest.junitxml, _pytest.skipping, _pytest.unittest, _pytest.python
start = time.process_time()
import papayu_pytest_results as plugin
plugin._start_guard(plugin._shield)
print(time.process_time() - start)
"""
NOOP_HOOK = """
import sys, time
start = time.process_time()
for _ in range(200000):
    id(start)
bare = time.process_time() - start
sys.addaudithook(lambda event, args: None)
start = time.process_time()
for _ in range(200000):
    id(start)
print((time.process_time() - start - bare) / 200000)
"""


def account(project: Project, helpers: Path, report: Path, work: Path) -> dict[str, float]:
    """The shield's own time in one run of the suite, and its start-up: seconds."""
    (work / "papayu_shield_accounting.py").write_text(ACCOUNTING)
    out = work / f"{project.name}-account.json"
    config = {
        "root": str(project.repo),
        "shield": {"root": str(project.repo), "report_dir": str(report), "changed": []},
    }
    (helpers / PLUGIN_DIR / f"{PLUGIN_MODULE}.json").write_text(json.dumps(config))
    env = {**os.environ, "PYTHONPATH": f"{work}{os.pathsep}{helpers / PLUGIN_DIR}", "ACCOUNT": str(out)}
    python = str(project.repo / ".venv/bin/python")
    args = [python, "-m", "pytest", "-q", "-p", "no:cacheprovider", "-p", "papayu_shield_accounting", *project.args]
    subprocess.run(args, cwd=project.repo, env=env, capture_output=True, text=True)
    spent = json.loads(out.read_text())
    startup = [
        float(
            subprocess.run(
                [python, "-c", STARTUP, str(helpers / PLUGIN_DIR)],
                cwd=project.repo,
                env=env,
                capture_output=True,
                text=True,
            ).stdout
            or 0
        )
        for _ in range(5)
    ]
    hook = float(subprocess.run([python, "-c", NOOP_HOOK], capture_output=True, text=True).stdout or 0)
    return {
        "handlers": spent["handlers"] / 1e9,
        "checks": spent["checks"] / 1e9,
        "hook_calls": spent["events"] * hook,
        "startup": statistics.median(startup),
        "events": spent["events"],
        "tests": spent["tests"],
    }


def tip_sites(report: Path) -> list[str]:
    """Where the tip's run reached, allowed: what a plan's run is given (TestResults.reaching)."""
    sites = set()
    for sink in sorted((report / "shield").glob("*.jsonl")):
        for line in sink.read_text().splitlines():
            record = json.loads(line)
            if record.get("kind") == "allowed" and record.get("site"):
                sites.add(record["site"])
    return sorted(sites)


def shield_records(report: Path) -> list[str]:
    out = []
    for sink in sorted((report / "shield").glob("*.jsonl")):
        for line in sink.read_text().splitlines():
            record = json.loads(line)
            if record.get("kind") in ("refused", "changed"):
                out.append(f"{record.get('test') or '-'}: {record.get('where')}: {record.get('what')}")
    return out


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--project", action="append", required=True, help="NAME=CLONE[:dep,dep[:PYTEST ARGS]]")
    parser.add_argument("--repeat", type=int, default=5)
    parser.add_argument("--account-only", action="store_true", help="only the accounting run and the strict one")
    parser.add_argument("--work", type=Path, default=Path(tempfile.gettempdir()) / "papayu-shield-bench")
    args = parser.parse_args()
    args.work.mkdir(parents=True, exist_ok=True)
    projects = []
    for spec in args.project:
        name, _, rest = spec.partition("=")
        source, _, rest = rest.partition(":")
        deps, _, extra = rest.partition(":")
        projects.append(Project(name, Path(source), [d for d in deps.split(",") if d], extra.split()))
    for project in projects:
        prepare(project, args.work)
        slot = args.work / f"{project.name}-slot"
        helpers = write_helpers(slot)
        report = args.work / f"{project.name}-report"
        run_suite(project, True, helpers, report)  # warm-up: imports compiled, caches filled
        for round_ in range(1 if args.account_only else args.repeat):
            order = (False, True) if round_ % 2 == 0 else (True, False)
            for shield in order:
                took, cpu, said = run_suite(project, shield, helpers, report)
                (project.shielded if shield else project.plain).append(took)
                (project.shielded_cpu if shield else project.plain_cpu).append(cpu)
                project.outcome["shield" if shield else "plain"] = said
                if shield:
                    project.refused = sorted(set(project.refused) | set(shield_records(report)))
        run_suite(project, True, helpers, report)
        sites = tip_sites(report)
        project.accounted = account(project, helpers, report, args.work)
        run_suite(project, True, helpers, report, changed=code_files(project.repo))
        project.strict = sorted(set(shield_records(report)))
        run_suite(project, True, helpers, report, changed=code_files(project.repo), sites=sites)
        project.strict_with_sites = sorted(set(shield_records(report)))
        print(json.dumps({"project": project.name, "load": os.getloadavg(), **_summary(project)}), flush=True)
    print(
        "\n| project | suite | wall plain s | wall shielded s | ratio | CPU plain s | CPU shielded s | ratio | refused |"
    )
    print("|---|---|---:|---:|---:|---:|---:|---:|---:|")
    for project in projects:
        summary = _summary(project)
        print(
            f"| {project.name} | {project.outcome.get('plain', '')} | {summary['plain']:.2f} | "
            f"{summary['shielded']:.2f} | {summary['ratio']:.3f} | {summary['plain_cpu']:.2f} | "
            f"{summary['shielded_cpu']:.2f} | {summary['cpu_ratio']:.3f} | "
            f"{len(project.refused)} / {len(project.strict)} / {len(project.strict_with_sites)} |"
        )
    print("\n| project | events | handlers s | checks s | hook calls s | start-up s | shield s | of the suite's CPU |")
    print("|---|---:|---:|---:|---:|---:|---:|---:|")
    for project in projects:
        spent = project.accounted
        total = spent["handlers"] + spent["checks"] + spent["hook_calls"] + spent["startup"]
        share = total / statistics.median(project.plain_cpu)
        print(
            f"| {project.name} | {spent['events']:.0f} | {spent['handlers']:.3f} | {spent['checks']:.3f} | "
            f"{spent['hook_calls']:.3f} | {spent['startup']:.3f} | {total:.3f} | {share:.1%} |"
        )
    for project in projects:
        for line in project.refused:
            print(f"- {project.name} (tip): {line}")
        for line in project.strict:
            print(f"- {project.name} (every code file the plan's): {line}")
        for line in project.strict_with_sites:
            print(f"- {project.name} (every code file the plan's, the tip's sites given): {line}")
    print(f"\nload average: {os.getloadavg()}; target: ratio <= {TARGET}")
    return 0


def _summary(project: Project) -> dict[str, float]:
    plain, shielded = statistics.median(project.plain), statistics.median(project.shielded)
    plain_cpu, shielded_cpu = statistics.median(project.plain_cpu), statistics.median(project.shielded_cpu)
    return {
        "plain": plain,
        "shielded": shielded,
        "ratio": shielded / plain,
        "plain_cpu": plain_cpu,
        "shielded_cpu": shielded_cpu,
        "cpu_ratio": shielded_cpu / plain_cpu,
    }


if __name__ == "__main__":
    sys.exit(main())
