"""The selective check on real projects: does selection miss anything the full run finds, and
what does a one-file plan's regression run cost next to the full suite?

For each project (a local clone; `fetch` one, e.g. pallets/click), the newest commits that change
exactly one source file of the project's code (not its tests) are replayed as plans through the
real CLI, each on its parent as the tip: once with papayu.check.select=observe (every test runs;
the run says which tests selection would have reused and which of those failed: "missed"), once
with =on (only the selected tests run; the others keep the base's pass), and once with =off (the
full suite, the ratio's denominator: observe's run also records each test's inputs). Then, for each commit,
a few mutants of the lines it changed (an operator flipped, a constant changed) are replayed in
observe mode: each one the full run catches must be caught by the selection too.

    python bench/select_bench.py --project click=/tmp/click --project jinja=/tmp/jinja:trio,simplejson \\
        [--commits 5] [--mutants 3] [--work /tmp/papayu-select-bench]

Each project gets a virtualenv of its own in the work directory (`pip install -e . pytest` and the
extra packages named after `:`). Targets: 0 missed; the regression run of a one-file plan in on
mode <= 25% of the full (off) run's wall time (median over the commits, per project, same run).
"""

from __future__ import annotations

import argparse
import json
import os
import shutil
import statistics
import subprocess
import sys
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))

from papayu_git.check.selection.changes import python_change  # noqa: E402
from papayu_git.judges import is_code  # noqa: E402

TARGET_RATIO = 0.25
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
    source: Path
    deps: list[str]
    repo: Path = Path()
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


def setup(project: Project, work: Path) -> None:
    project.repo = work / project.name
    if not (project.repo / ".venv/bin/python").exists():
        shutil.rmtree(project.repo, ignore_errors=True)
        git(work, "clone", "-q", str(project.source), str(project.repo))
        subprocess.run([sys.executable, "-m", "venv", str(project.repo / ".venv")], check=True)
        pip = [str(project.repo / ".venv/bin/python"), "-m", "pip", "install", "-q"]
        subprocess.run([*pip, "-e", str(project.repo), "pytest", *project.deps], check=True)
    (project.repo / ".git/info/exclude").write_text(".venv/\n")
    python = project.repo / ".venv/bin/python"
    git(project.repo, "config", "papayu.check.command", f"{python} -m pytest -q -p no:cacheprovider")
    git(project.repo, "config", "papayu.check.prewarm", "false")
    git(project.repo, "config", "user.name", "bench")
    git(project.repo, "config", "user.email", "bench@example.com")


def one_file_commits(project: Project, count: int) -> list[tuple[str, str]]:
    """(commit, the one code file it changes), newest first."""
    found: list[tuple[str, str]] = []
    for commit in git(project.repo, "log", "--no-merges", "--format=%H", "-n", "400", "origin/HEAD").split():
        names = git(project.repo, "diff-tree", "--no-commit-id", "--name-status", "-r", commit).split("\n")
        changed = [line.split("\t") for line in names if line]
        code = [
            p
            for s, *ps in changed
            for p in ps
            if p.endswith(".py") and s == "M" and is_code(p, _Tree(project.repo, commit))
        ]
        if len(changed) == 1 and len(code) == 1:
            found.append((commit, code[0]))
        if len(found) >= count:
            break
    return found


def papayu(project: Project, *args: str, select: str) -> dict[str, Any]:
    env = {**os.environ, "PAPAYU_CHECK_SELECT": select, "PAPAYU_PROTOCOL_VERSION": "1"}
    proc = subprocess.run(
        [sys.executable, "-m", "papayu_git", *args], cwd=project.repo, env=env, capture_output=True, text=True
    )
    try:
        return json.loads(proc.stdout)
    except ValueError:
        raise SystemExit(f"papayu {' '.join(args)} printed no JSON: {proc.stderr[-2000:]}") from None


def apply(project: Project, name: str, path: str, content: str, select: str) -> dict[str, Any]:
    plan = project.repo.parent / f"{project.name}-{name}.json"
    plan.write_text(
        json.dumps({"actions": [{"kind": "UPDATE_FILE", "path": path, "content": content}], "summary": name})
    )
    data = papayu(project, "apply", str(plan), "-y", "--review", "--json", select=select)
    if data.get("state") == "review":
        papayu(project, "drop", data["plan_id"], "--json", select=select)
    return data


def mutants(old: str, new: str, limit: int) -> list[str]:
    """``new`` with one line of a function the commit changed mutated (an operator flipped, a
    constant changed), a few ways: what a wrong plan looks like."""
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


def replay(project: Project, commit: str, path: str, n_mutants: int) -> dict[str, Any] | None:
    parent = git(project.repo, "rev-parse", f"{commit}^").strip()
    git(project.repo, "checkout", "-q", "-f", "-B", "main", parent)
    git(project.repo, "clean", "-q", "-fdx", "-e", ".venv")
    old = git(project.repo, "show", f"{parent}:{path}")
    new = git(project.repo, "show", f"{commit}:{path}")
    observed = apply(project, f"{commit[:8]}-observe", path, new, "observe")
    passed = ((observed.get("check") or {}).get("verdict") or {}).get("passed") or 0
    if passed < MIN_TESTS:  # the suite does not run at this old commit with today's tools
        return None
    chosen = apply(project, f"{commit[:8]}-on", path, new, "on")
    # The full suite as it runs with selection off: observe's run also records each test's inputs
    # (it may become the next tip's base), which costs more than the suite itself on Python 3.11.
    plain = apply(project, f"{commit[:8]}-off", path, new, "off")
    row: dict[str, Any] = {"commit": commit[:10], "path": path}
    for key, data in (("off", plain), ("observe", observed), ("on", chosen)):
        check = data.get("check") or {}
        row[key] = {
            "state": data.get("state"),
            "seconds": check.get("duration_sec"),
            "selection": check.get("selection"),
        }
    killed = missed = 0
    for i, text in enumerate(mutants(old, new, n_mutants)):
        data = apply(project, f"{commit[:8]}-m{i}", path, text, "observe")
        selection = (data.get("check") or {}).get("selection") or {}
        failing = (data.get("check") or {}).get("verdict", {}).get("broken") or []
        killed += bool(failing)
        missed += len(selection.get("missed") or [])
    row["mutants"] = {"killed": killed, "missed": missed}
    return row


def report(projects: list[Project]) -> None:
    print(
        f"\n{'project':<12} {'commit':<11} {'file':<34} {'full s':>7} {'observe s':>9} {'on s':>6} {'ratio':>6} {'ran':>9} {'missed':>7} {'mutants':>9}"
    )
    for project in projects:
        ratios = []
        for row in project.rows:
            full, on = row["off"]["seconds"] or 0.0, row["on"]["seconds"] or 0.0
            observed = row["observe"]["seconds"] or 0.0
            sel = row["on"]["selection"] or {}
            ratio = on / full if full else float("nan")
            ratios.append(ratio)
            ran = (
                f"{sel.get('selected', '?')}/{sel.get('selected', 0) + sel.get('reused', 0)}"
                if not sel.get("full")
                else "full"
            )
            missed = len((row["observe"]["selection"] or {}).get("missed") or []) + row["mutants"]["missed"]
            mutants_col = f"{row['mutants']['killed']} killed"
            print(
                f"{project.name:<12} {row['commit']:<11} {row['path'][-34:]:<34} {full:7.1f} {observed:9.1f} {on:6.1f} {ratio:6.2f} "
                f"{ran:>9} {missed:>7} {mutants_col:>9}"
            )
            if sel.get("full"):
                print(f"{'':<12} full run: {sel['full'][:100]}")
        if ratios:
            median = statistics.median(ratios)
            verdict = "ok" if median <= TARGET_RATIO else "OVER"
            print(
                f"{project.name:<12} median regression run on/full: {median:.2f} (target <= {TARGET_RATIO}): {verdict}"
            )


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--project", action="append", required=True, help="NAME=PATH[:dep,dep]")
    parser.add_argument("--commits", type=int, default=5)
    parser.add_argument("--mutants", type=int, default=3)
    parser.add_argument("--work", default="/tmp/papayu-select-bench")
    args = parser.parse_args()
    work = Path(args.work)
    work.mkdir(parents=True, exist_ok=True)
    projects = []
    for spec in args.project:
        name, rest = spec.split("=", 1)
        source, _, deps = rest.partition(":")
        projects.append(Project(name, Path(source), [d for d in deps.split(",") if d]))
    for project in projects:
        setup(project, work)
        for commit, path in one_file_commits(project, args.commits * 4):
            row = replay(project, commit, path, args.mutants)
            print(
                json.dumps(row or {"commit": commit[:10], "skipped": "the suite does not run there"}), file=sys.stderr
            )
            if row is not None:
                project.rows.append(row)
            if len(project.rows) >= args.commits:
                break
    report(projects)


if __name__ == "__main__":
    main()
