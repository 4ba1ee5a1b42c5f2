"""Fail first on real projects: does the order ever let a regression land, how soon is a plan that
breaks a test it reaches rejected, and what does a green plan cost next to the suite in its own
order (docs/DESIGN.md, "Fail first")?

For each project (a local clone with its environment in `.venv`), the newest commits that change
exactly one source file of the project's code (not its tests) are replayed as plans through the
real CLI (`apply -y --review --json`), each on its parent as the tip:
- the commit itself (a green plan, usually), with the default setting (on: no setting at all) and
  with `papayu.check.select=off`, alternating which goes first;
- up to N mutants of the functions it changed (an operator flipped, a constant changed: a plan
  that breaks something), on and off.
Per check the bench reads the check's own record of its runs (`check.runs`: the tip's, the plan's,
the failing tests again on the tip, the rest) and the transaction's time of the check stage.

    python bench/select_bench.py --project dateutil=/tmp/dateutil --project parso=/tmp/parso \\
        [--commits 5] [--mutants 3]

Each project's `.venv` is what its check runs (`.venv/bin/python -m pytest`). Targets (medians per
project, one run): 0 missed regressions (a mutant `off` rejects that `on` lands); a mutant whose
broken test ran first is rejected in <= 25% of the whole suite's time (the green plan's `off` run);
a green plan's check stage under the default <= 1.05x `off`'s.
"""

from __future__ import annotations

import argparse
import json
import os
import statistics
import subprocess
import sys
import time
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))

from papayu_git.check.selection.changes import python_change  # noqa: E402
from papayu_git.judges import is_code  # noqa: E402

REJECT_RATIO = 0.25
GREEN_RATIO = 1.05
MIN_TESTS = 100  # a base with fewer passing tests did not run at that commit
MUTATIONS = (
    ("==", "!="),
    (" + ", " - "),
    (" < ", " >= "),
    ("True", "False"),
    (" and ", " or "),
    ("return ", "return not "),
)


@dataclass
class Project:
    name: str
    repo: Path
    rows: list[dict[str, Any]] = field(default_factory=list)


class _Tree:
    def __init__(self, repo: Path, rev: str) -> None:
        self.repo, self.rev = repo, rev

    def entry_kind(self, path: str) -> str | None:
        out = git(self.repo, "cat-file", "-t", f"{self.rev}:{path}", check=False).strip()
        return {"blob": "file", "tree": "dir"}.get(out)


def git(cwd: Path, *args: str, check: bool = True) -> str:
    proc = subprocess.run(["git", *args], cwd=cwd, capture_output=True, text=True)
    if check and proc.returncode != 0:
        raise SystemExit(f"git {' '.join(args)}: {proc.stderr}")
    return proc.stdout


def setup(project: Project) -> str:
    """The project's branch as it was (to come back to), and its check configured."""
    repo = project.repo
    exclude = repo / ".git/info/exclude"
    if ".venv/" not in exclude.read_text():
        exclude.write_text(exclude.read_text() + "\n.venv/\n")
    git(repo, "config", "papayu.check.command", ".venv/bin/python -m pytest -q -p no:cacheprovider")
    git(repo, "config", "papayu.check.prewarm", "false")
    git(repo, "config", "user.name", "bench")
    git(repo, "config", "user.email", "bench@example.com")
    return git(repo, "rev-parse", "HEAD").strip()


def one_file_commits(repo: Path, start: str, count: int) -> list[tuple[str, str]]:
    """(commit, the one code file it changes), newest first."""
    found: list[tuple[str, str]] = []
    for commit in git(repo, "log", "--no-merges", "--format=%H", "-n", "600", start).split():
        names = git(repo, "diff-tree", "--no-commit-id", "--name-status", "-r", commit).split("\n")
        changed = [line.split("\t") for line in names if line]
        code = [
            p for s, *ps in changed for p in ps if p.endswith(".py") and s == "M" and is_code(p, _Tree(repo, commit))
        ]
        if len(changed) == 1 and len(code) == 1:
            found.append((commit, code[0]))
        if len(found) >= count:
            break
    return found


def papayu(repo: Path, *args: str, select: str | None) -> dict[str, Any]:
    env = {k: v for k, v in os.environ.items() if k != "PAPAYU_CHECK_SELECT"}
    env["PAPAYU_PROTOCOL_VERSION"] = "1"
    # A mutant may loop or grow without end: bounded, so that it stays a rejection, not the machine's.
    env.setdefault("PAPAYU_CHECK_MEMORY_MB", "2048")
    env.setdefault("PAPAYU_CHECK_TIMEOUT_SEC", "300")
    if select is not None:
        env["PAPAYU_CHECK_SELECT"] = select
    proc = subprocess.run(
        [sys.executable, "-m", "papayu_git", *args], cwd=repo, env=env, capture_output=True, text=True
    )
    try:
        return json.loads(proc.stdout)
    except ValueError:
        raise SystemExit(f"papayu {' '.join(args)} printed no JSON: {proc.stderr[-2000:]}") from None


def apply(repo: Path, name: str, path: str, content: str, select: str | None) -> dict[str, Any]:
    plan = repo.parent / f"{repo.name}-{name}.json"
    plan.write_text(
        json.dumps({"actions": [{"kind": "UPDATE_FILE", "path": path, "content": content}], "summary": name})
    )
    data = papayu(repo, "apply", str(plan), "-y", "--review", "--json", select=select)
    if data.get("state") == "review":
        papayu(repo, "drop", data["plan_id"], "--json", select=select)
    return data


def measured(data: dict[str, Any]) -> dict[str, Any]:
    """What one check cost: the check stage without a tip run made now (kept tip runs cost 0),
    the runs it made, and what they decided."""
    check = data.get("check") or {}
    runs = check.get("runs") or []
    tip = sum(float(r.get("seconds") or 0) for r in runs if r.get("run") == "tip")
    stage = float((data.get("timings") or {}).get("check") or 0.0) - tip
    plan = next((r for r in runs if r.get("run") in ("plan", "regression")), {})
    verdict = check.get("verdict") or {}
    return {
        "state": data.get("state"),
        "code": (data.get("error") or {}).get("code"),
        "stage": round(stage, 3),
        "tip": round(tip, 3),
        "runs": [f"{r.get('run')} {float(r.get('seconds') or 0):.1f}s/{r.get('tests', 0)}" for r in runs],
        "first": plan.get("first", 0),
        "stopped": bool(plan.get("stopped")),
        "broken": list(verdict.get("broken") or []),
        "passed": verdict.get("passed", 0),
        "by": ((check.get("selection") or {}).get("plan") or {}).get("by", ""),
    }


def mutants(old: str, new: str, limit: int) -> list[str]:
    """``new`` with one line of a function the commit changed mutated: what a wrong plan looks like."""
    import ast

    units = python_change(old.encode(), new.encode()).units
    spans: list[tuple[int, int]] = []
    for node in ast.walk(ast.parse(new)):
        if isinstance(node, (ast.FunctionDef, ast.AsyncFunctionDef)) and node.name in {
            u.rsplit(".", 1)[-1] for u in units
        }:
            spans.append((node.body[0].lineno, node.end_lineno or node.lineno))
    lines = new.splitlines(keepends=True)
    out: list[str] = []
    for start, end in spans:
        for i in range(start - 1, end):
            stripped = lines[i].lstrip()
            if stripped.startswith(("#", '"', "'", "def ", "class ", "@", "import", "from")):
                continue
            for a, b in MUTATIONS:
                if a in lines[i]:
                    out.append("".join([*lines[:i], lines[i].replace(a, b, 1), *lines[i + 1 :]]))
                    break
            if len(out) >= limit:
                return out
    return out


def replay(project: Project, commit: str, path: str, n_mutants: int, flip: bool) -> dict[str, Any] | None:
    repo = project.repo
    parent = git(repo, "rev-parse", f"{commit}^").strip()
    git(repo, "checkout", "-q", "-f", "-B", "bench", parent)
    git(repo, "clean", "-q", "-fdx", "-e", ".venv")
    old = git(repo, "show", f"{parent}:{path}")
    new = git(repo, "show", f"{commit}:{path}")
    modes: list[str | None] = [None, "off"] if not flip else ["off", None]
    row: dict[str, Any] = {"commit": commit[:10], "path": path}
    for mode in modes:  # the first pays the tip's run (recording it, once a project)
        label = mode or "default"
        row[label] = measured(apply(repo, f"{commit[:8]}-{label}", path, new, mode))
    if (row["off"]["passed"] or 0) < MIN_TESTS:  # the suite does not run at this old commit with today's tools
        return None
    row["mutants"] = []
    for i, text in enumerate(mutants(old, new, n_mutants)):
        pair = {}
        for mode in ("on", "off") if (i + flip) % 2 else ("off", "on"):
            pair[mode] = measured(apply(repo, f"{commit[:8]}-m{i}-{mode}", path, text, mode))
        row["mutants"].append(pair)
    return row


def summary(project: Project) -> dict[str, Any]:
    rows = project.rows
    green = [
        r["default"]["stage"] / r["off"]["stage"]
        for r in rows
        if r["off"]["stage"] and r["default"]["state"] == r["off"]["state"]
    ]
    missed = reached = 0
    reject: list[float] = []
    unreached: list[float] = []
    for row in rows:
        whole = row["off"]["stage"]
        for pair in row["mutants"]:
            on, off = pair["on"], pair["off"]
            if off["code"] == "ERR_CHECK_REGRESSION" and on["code"] != "ERR_CHECK_REGRESSION":
                missed += 1
            if on["code"] == "ERR_CHECK_REGRESSION" and whole:
                (reject if on["stopped"] else unreached).append(on["stage"] / whole)
                reached += on["stopped"]
    return {
        "project": project.name,
        "commits": len(rows),
        "green_ratio": statistics.median(green) if green else None,
        "missed": missed,
        "rejected_reached": len(reject),
        "reject_ratio": statistics.median(reject) if reject else None,
        "rejected_unreached": len(unreached),
        "unreached_ratio": statistics.median(unreached) if unreached else None,
        "suite": statistics.median([r["off"]["stage"] for r in rows]) if rows else None,
    }


def report(projects: list[Project]) -> None:
    print("\n| project | commit | file | off s | default s | default/off | first | mutants: on s / off s (stopped?) |")
    print("|---|---|---|---:|---:|---:|---:|---|")
    for project in projects:
        for row in project.rows:
            off, default = row["off"], row["default"]
            ratio = default["stage"] / off["stage"] if off["stage"] else float("nan")
            muts = "; ".join(
                f"{p['on']['stage']:.1f}/{p['off']['stage']:.1f}{' stop' if p['on']['stopped'] else ''}"
                f"{'' if p['on']['code'] == p['off']['code'] else ' DIFFER ' + str(p['on']['code']) + '/' + str(p['off']['code'])}"
                for p in row["mutants"]
            )
            print(
                f"| {project.name} | {row['commit']} | `{row['path'][-30:]}` | {off['stage']:.1f} | {default['stage']:.1f} "
                f"| {ratio:.2f} | {default['first']} | {muts or '-'} |"
            )
    print(
        "\n| project | commits | suite (off) s | green default/off | missed | rejected when reached (n) / suite | rejected otherwise (n) / suite |"
    )
    print("|---|---:|---:|---:|---:|---|---|")
    for project in projects:
        s = summary(project)
        fmt = lambda v: f"{v:.2f}" if isinstance(v, float) else "-"  # noqa: E731
        print(
            f"| {s['project']} | {s['commits']} | {fmt(s['suite'])} | {fmt(s['green_ratio'])} | {s['missed']} "
            f"| {fmt(s['reject_ratio'])} ({s['rejected_reached']}) | {fmt(s['unreached_ratio'])} ({s['rejected_unreached']}) |"
        )


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--project", action="append", required=True, help="NAME=PATH (a clone with .venv)")
    parser.add_argument("--commits", type=int, default=5)
    parser.add_argument("--mutants", type=int, default=3)
    parser.add_argument("--out", default="", help="also write every row as JSON lines here")
    args = parser.parse_args()
    projects = [Project(spec.split("=", 1)[0], Path(spec.split("=", 1)[1]).resolve()) for spec in args.project]
    out = open(args.out, "a") if args.out else None  # noqa: SIM115
    print(f"load before: {os.getloadavg()}", file=sys.stderr)
    for project in projects:
        start = setup(project)
        began = time.monotonic()
        for n, (commit, path) in enumerate(one_file_commits(project.repo, start, args.commits * 4)):
            row = replay(project, commit, path, args.mutants, flip=bool(n % 2))
            said = row or {"commit": commit[:10], "skipped": "the suite does not run there"}
            print(json.dumps({"project": project.name, **said, "load": os.getloadavg()}), file=sys.stderr)
            if out is not None:
                out.write(json.dumps({"project": project.name, **said, "load": os.getloadavg()}) + "\n")
                out.flush()
            if row is not None:
                project.rows.append(row)
            if len(project.rows) >= args.commits:
                break
        git(project.repo, "checkout", "-q", "-f", start)
        print(f"{project.name}: {time.monotonic() - began:.0f}s, load {os.getloadavg()}", file=sys.stderr)
    report(projects)


if __name__ == "__main__":
    main()
