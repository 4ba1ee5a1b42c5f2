"""How often model-style broken diffs still apply correctly: papayu vs git apply vs GNU patch.

    .venv/bin/python bench/patch_robustness.py [REPO] [--corpus] [--max-changes N] [--seed S] [--json]

Cases are the real file changes of a git repository: for each non-merge commit, each
modified UTF-8 text file gives (old blob, `git diff` of that file, new blob). The diff
becomes a v2 PATCH_FILE (base_sha256 = sha256 of the old blob) and is perturbed the way
models break diffs (docs/DESIGN.md, "Applying a model's diff"). Every tool's output is compared
with the real post-commit blob: a tool that exits 0 with other bytes produced a WRONG result (a
silently misplaced hunk), which is worse than a refusal and is counted separately.

Corpus when REPO has fewer than --min-changes file changes (the default REPO, papayu-git
itself, is young): a scratch repository is built from successive versions of the same
Python sources found on this machine -- the standard library of every installed Python 3
(e.g. Debian's 3.11.2 beside a 3.11.7 build, or 3.12 -> 3.13) and packages that exist in
several versions (pip's and setuptools' vendored copies beside the standalone ones).
One commit adds every older version, then one commit per file turns it into the newer
version, so each change is a real upstream edit between two releases. Files over 256 KiB
are skipped; N changes are sampled with a fixed seed. On a machine with a single Python the
corpus is only the vendored copies (a few dozen changes); the table says how many it used.

Classes: unperturbed; hunk line numbers moved by a random +-1..20 (each hunk its own);
wrong hunk counts; `@@ @@` headers without numbers; trailing whitespace dropped from context
lines (only diffs that have some); `\\ No newline at end of file` removed (natural cases plus
each change re-diffed with both versions' final newline removed, when the diff then
touches the end of the file); and all of these at once, on the changes and on their
trailing-whitespace variants.
"""

from __future__ import annotations

import argparse
import glob
import itertools
import json
import random
import re
import shutil
import subprocess
import sys
import sysconfig
import tempfile
import time
import zlib
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import NamedTuple

from papayu_git.apply import new_file_contents, sha256_hex
from papayu_git.errors import PapayuError
from papayu_git.protocol import Action, ActionKind

ROOT = Path(__file__).resolve().parent.parent
MAX_FILE_BYTES = 256 * 1024
HEADER = re.compile(r"^@@ -(\d+)(?:,(\d+))? \+(\d+)(?:,(\d+))? @@(.*)$")
VENDOR_DIRS = ("pip/_vendor", "setuptools/_vendor", "pkg_resources/_vendor", "setuptools/_distutils")


class Case(NamedTuple):
    path: str
    old: bytes
    new: bytes
    diff: str


def git(args: list[str], cwd: Path, *, input: bytes | None = None) -> bytes:
    proc = subprocess.run(["git", *args], cwd=cwd, input=input, capture_output=True)
    if proc.returncode not in (0, 1) or (proc.returncode == 1 and args[0] != "diff"):
        raise SystemExit(f"git {' '.join(args)} failed: {proc.stderr.decode(errors='replace')}")
    return proc.stdout


def is_text(data: bytes) -> bool:
    if b"\x00" in data or len(data) > MAX_FILE_BYTES:
        return False
    try:
        data.decode("utf-8")
    except UnicodeDecodeError:
        return False
    return True


# --- cases from a repository ----------------------------------------------------------------


def repo_cases(repo: Path, limit: int) -> list[Case]:
    cases: list[Case] = []
    commits = git(["rev-list", "--no-merges", "HEAD"], repo).decode().split()
    for commit in commits:
        if len(cases) >= limit:
            break
        listing = git(["diff-tree", "-r", "--no-commit-id", "--no-renames", "--diff-filter=M", "-z", commit], repo)
        fields = listing.split(b"\x00")
        for meta, name in zip(fields[0::2], fields[1::2], strict=False):
            old_mode, new_mode, old_sha, new_sha = meta.decode().lstrip(":").split()[:4]
            if old_mode != new_mode or not old_mode.startswith("100"):
                continue
            old, new = git(["cat-file", "blob", old_sha], repo), git(["cat-file", "blob", new_sha], repo)
            if not (is_text(old) and is_text(new)):
                continue
            path = name.decode()
            diff = git(["diff", "--no-color", "--no-ext-diff", "-U3", f"{commit}^", commit, "--", path], repo)
            cases.append(Case(path, old, new, diff.decode("utf-8")))
    return cases


def _python_version(path: str) -> tuple[int, ...]:
    """The most precise X.Y[.Z] in the path: /x/versions/3.11.7/lib/python3.11 -> (3, 11, 7)."""
    found = re.findall(r"(\d+)\.(\d+)(?:\.(\d+))?", path)
    if not found:
        return (0,)
    best = max(found, key=lambda v: bool(v[2]))
    return tuple(int(x or 0) for x in best)


def stdlib_dirs() -> list[Path]:
    """Every Python 3 standard library on this machine, oldest first (by version in the path)."""
    candidates = {
        sysconfig.get_paths()["stdlib"],
        *glob.glob("/usr/lib/python3.*"),
        *glob.glob(str(Path.home() / ".pyenv/versions/3.*/lib/python3.*")),
    }
    dirs = [Path(c) for c in candidates if (Path(c) / "os.py").is_file()]
    return sorted({d.resolve() for d in dirs}, key=lambda d: (_python_version(str(d)), str(d)))


def package_versions() -> dict[str, list[Path]]:
    """name -> directories holding different copies of that package (standalone and vendored)."""
    site_dirs = {Path(p) for p in (sysconfig.get_paths()["purelib"], "/usr/lib/python3/dist-packages")}
    site_dirs |= {Path(p) for p in glob.glob(str(Path.home() / ".pyenv/versions/3.*/lib/python3.*/site-packages"))}
    found: dict[str, list[Path]] = {}
    for site in sorted(d for d in site_dirs if d.is_dir()):
        for vendor in VENDOR_DIRS:
            base = site / vendor
            if not base.is_dir():
                continue
            for pkg in sorted(base.iterdir()):
                if pkg.is_dir() and not pkg.name.startswith("_") and (site / pkg.name).is_dir():
                    found.setdefault(pkg.name, [site / pkg.name]).append(pkg)
    return {name: sorted(set(dirs)) for name, dirs in found.items()}


def version_pairs() -> Iterator[tuple[str, Path, Path]]:
    libs = stdlib_dirs()
    for older, newer in itertools.pairwise(libs):
        yield "stdlib", older, newer
    for name, dirs in sorted(package_versions().items()):
        for older, newer in itertools.pairwise(dirs):
            yield f"pkg/{name}", older, newer


def build_corpus(dest: Path, limit: int, seed: int) -> Path:
    changes: list[tuple[str, bytes, bytes]] = []
    for n, (prefix, older, newer) in enumerate(version_pairs()):
        for new_file in sorted(newer.rglob("*.py")):
            rel = new_file.relative_to(newer)
            old_file = older / rel
            if rel.parts[0] in ("test", "tests", "site-packages") or not old_file.is_file():
                continue
            old, new = old_file.read_bytes(), new_file.read_bytes()
            if old != new and is_text(old) and is_text(new):
                changes.append((f"{prefix}/v{n}/{rel}", old, new))
    changes = random.Random(seed).sample(changes, min(limit, len(changes)))
    git(["init", "-q", str(dest)], dest.parent)
    for path, old, _ in changes:
        (dest / path).parent.mkdir(parents=True, exist_ok=True)
        (dest / path).write_bytes(old)
    commit_all(dest, "corpus: older versions")
    for path, _, new in changes:
        (dest / path).write_bytes(new)
        commit_all(dest, f"corpus: {path}")
    return dest


def commit_all(repo: Path, message: str) -> None:
    git(["add", "-A"], repo)
    git(
        [
            "-c",
            "user.name=bench",
            "-c",
            "user.email=bench@example.com",
            "-c",
            "commit.gpgsign=false",
            "commit",
            "-q",
            "--no-verify",
            "-m",
            message,
        ],
        repo,
    )


# --- perturbations -------------------------------------------------------------------------


def _headers(diff: str, change: Callable[[re.Match[str]], str]) -> str:
    return "".join(
        change(m) + "\n" if (m := HEADER.match(line.rstrip("\n"))) else line for line in diff.splitlines(True)
    )


def _nonzero(rng: random.Random, low: int, high: int) -> int:
    return rng.choice([d for d in range(low, high + 1) if d])


def shift_lines(diff: str, rng: random.Random) -> str:
    def move(m: re.Match[str]) -> str:
        old, new = int(m.group(1)), int(m.group(3))
        d = _nonzero(rng, -20, 20)
        if old + d < 1 or new + d < 1:
            d = abs(d)
        return f"@@ -{old + d},{m.group(2) or 1} +{new + d},{m.group(4) or 1} @@{m.group(5)}"

    return _headers(diff, move)


def wrong_counts(diff: str, rng: random.Random) -> str:
    def recount(m: re.Match[str]) -> str:
        old_n = max(int(m.group(2) or 1) + _nonzero(rng, -3, 3), 0)
        new_n = max(int(m.group(4) or 1) + _nonzero(rng, -3, 3), 0)
        if (old_n, new_n) == (int(m.group(2) or 1), int(m.group(4) or 1)):
            old_n += 1
        return f"@@ -{m.group(1)},{old_n} +{m.group(3)},{new_n} @@{m.group(5)}"

    return _headers(diff, recount)


def no_numbers(diff: str, rng: random.Random) -> str:
    return _headers(diff, lambda m: "@@ @@")


def strip_context_ws(diff: str, rng: random.Random) -> str:
    out = []
    for line in diff.splitlines(True):
        if line.startswith(" "):
            body = line[1:].rstrip("\n")
            cr = "\r" if body.endswith("\r") else ""
            line = " " + body.removesuffix("\r").rstrip(" \t") + cr + "\n"
        out.append(line)
    return "".join(out)


def drop_marker(diff: str, rng: random.Random) -> str:
    return "".join(line for line in diff.splitlines(True) if not line.startswith("\\ No newline"))


PERTURBATIONS: dict[str, Callable[[str, random.Random], str]] = {
    "unperturbed": lambda diff, rng: diff,
    "line numbers +-1..20": shift_lines,
    "wrong hunk counts": wrong_counts,
    "@@ @@ (no numbers)": no_numbers,
    "context trailing ws dropped": strip_context_ws,
    "no-newline marker missing": drop_marker,
    "all of the above at once": lambda diff, rng: drop_marker(
        strip_context_ws(wrong_counts(shift_lines(diff, rng), rng), rng), rng
    ),
}


def _rediff(case: Case, old: bytes, new: bytes, scratch: Path) -> str:
    (scratch / "old").write_bytes(old)
    (scratch / "new").write_bytes(new)
    raw = git(["diff", "--no-index", "--no-color", "-U3", "old", "new"], scratch).decode()
    return f"--- a/{case.path}\n+++ b/{case.path}\n{raw[raw.index('@@') :]}"


def with_trailing_ws(case: Case, scratch: Path) -> Case | None:
    """The same edit on files where about a third of the lines end in whitespace (by content)."""

    def pad(data: bytes) -> bytes:
        out = []
        for line in data.splitlines(True):
            body = line.rstrip(b"\r\n")
            if body.strip() and zlib.crc32(body) % 3 == 0:
                line = body + (b" " if zlib.crc32(body) % 2 else b"\t  ") + line[len(body) :]
            out.append(line)
        return b"".join(out)

    old, new = pad(case.old), pad(case.new)
    return Case(case.path, old, new, _rediff(case, old, new, scratch)) if old != case.old else None


def without_final_newline(case: Case, scratch: Path) -> Case | None:
    """The same edit on files whose final newline is missing, re-diffed by git."""

    def chop(data: bytes) -> bytes:
        return data[:-2] if data.endswith(b"\r\n") else data[:-1] if data.endswith(b"\n") else data

    old, new = chop(case.old), chop(case.new)
    if old == new:
        return None
    diff = _rediff(case, old, new, scratch)
    return Case(case.path, old, new, diff) if "\\ No newline" in diff else None


# --- tools ----------------------------------------------------------------------------------


def run_papayu(case: Case, patch: str, scratch: Path) -> bytes | None:
    action = Action(ActionKind.PATCH_FILE, case.path, patch=patch, base_sha256=sha256_hex(case.old))
    try:
        return new_file_contents([action], {case.path: case.old}.get)[case.path]
    except PapayuError:
        return None


def _external(cmd: list[str]) -> Callable[[Case, str, Path], bytes | None]:
    def run(case: Case, patch: str, scratch: Path) -> bytes | None:
        target = scratch / "t" / case.path
        shutil.rmtree(scratch / "t", ignore_errors=True)
        target.parent.mkdir(parents=True)
        target.write_bytes(case.old)
        (scratch / "p.diff").write_text(patch, encoding="utf-8")
        proc = subprocess.run([*cmd, str(scratch / "p.diff")], cwd=scratch / "t", capture_output=True)
        return target.read_bytes() if proc.returncode == 0 and target.is_file() else None

    return run


TOOLS: dict[str, Callable[[Case, str, Path], bytes | None]] = {
    "papayu": run_papayu,
    "git apply": _external(["git", "apply"]),
    "git apply --recount -C1 --ignore-ws": _external(["git", "apply", "--recount", "-C1", "--ignore-whitespace"]),
    "GNU patch": _external(
        ["patch", "-p1", "--batch", "--forward", "--no-backup-if-mismatch", "--silent", "-r", "-", "-i"]
    ),
}


class Tally(NamedTuple):
    cases: int
    correct: dict[str, int]
    wrong: dict[str, int]


def show_failure(name: str, case: Case, patch: str) -> None:
    action = Action(ActionKind.PATCH_FILE, case.path, patch=patch)
    try:
        new_file_contents([action], {case.path: case.old}.get)
        reason = "WRONG RESULT"
    except PapayuError as exc:
        reason = exc.format()
    print(f"### papayu failed: {name}: {case.path}\n{reason[:3000]}\n", file=sys.stderr)


def measure(cases: list[Case], seed: int, scratch: Path, show_failures: bool = False) -> tuple[dict[str, Tally], float]:
    rng = random.Random(seed)
    extra: dict[str, Callable[[Case, Path], Case | None]] = {
        "no-newline marker missing": without_final_newline,
        "context trailing ws dropped": with_trailing_ws,
        "all of the above at once": with_trailing_ws,
    }
    results: dict[str, Tally] = {}
    papayu_time = 0.0
    for name, perturb in PERTURBATIONS.items():
        derive = extra.get(name)
        pool = cases + ([c for c in (derive(c, scratch) for c in cases) if c is not None] if derive else [])
        tally = Tally(0, {t: 0 for t in TOOLS}, {t: 0 for t in TOOLS})
        for case in pool:
            patch = perturb(case.diff, rng)
            if name != "unperturbed" and patch == case.diff:
                continue  # the perturbation does not apply to this diff
            tally = tally._replace(cases=tally.cases + 1)
            for tool, run in TOOLS.items():
                start = time.perf_counter()
                out = run(case, patch, scratch)
                if tool == "papayu":
                    papayu_time += time.perf_counter() - start
                if out == case.new:
                    tally.correct[tool] += 1
                elif out is not None:
                    tally.wrong[tool] += 1
                if tool == "papayu" and out != case.new and show_failures:
                    show_failure(name, case, patch)
        results[name] = tally
    return results, papayu_time


def render(results: dict[str, Tally], source: str, n_cases: int, papayu_ms: float) -> str:
    head = ["class", "cases", *TOOLS]
    rows = [head, ["---"] * len(head)]
    for name, tally in results.items():
        cells = [
            f"{100 * tally.correct[t] / tally.cases:.1f}% ({tally.wrong[t]} wrong)" if tally.cases else "-"
            for t in TOOLS
        ]
        rows.append([name, str(tally.cases), *cells])
    widths = [max(len(r[i]) for r in rows) for i in range(len(head))]
    lines = ["| " + " | ".join(c.ljust(w) for c, w in zip(r, widths, strict=False)) + " |" for r in rows]
    return (
        f"corpus: {source}; {n_cases} file changes; papayu mean {papayu_ms:.2f} ms per apply\n"
        "cell = share applied byte-identical to the real commit (silently wrong results)\n" + "\n".join(lines)
    )


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("repo", nargs="?", type=Path, default=ROOT)
    parser.add_argument("--max-changes", type=int, default=300)
    parser.add_argument("--min-changes", type=int, default=100)
    parser.add_argument("--seed", type=int, default=3)
    parser.add_argument(
        "--corpus",
        action="store_true",
        help="use the corpus of successive Python source versions even when REPO has enough changes",
    )
    parser.add_argument("--json", action="store_true")
    parser.add_argument("--show-failures", action="store_true", help="print papayu's error for each miss")
    args = parser.parse_args(argv)
    with tempfile.TemporaryDirectory(prefix="papayu-patchbench-") as tmp:
        scratch = Path(tmp)
        cases = repo_cases(args.repo, args.max_changes)
        source = f"{args.repo} ({len(cases)} file changes from its commits)"
        if args.corpus or len(cases) < args.min_changes:
            corpus = build_corpus(scratch / "corpus", args.max_changes, args.seed)
            cases = repo_cases(corpus, args.max_changes)
            source = "corpus of successive Python source versions on this machine" + (
                "" if args.corpus else f" ({args.repo} has fewer than {args.min_changes} file changes)"
            )
        results, papayu_time = measure(cases, args.seed, scratch, args.show_failures)
    n_applies = sum(t.cases for t in results.values())
    papayu_ms = 1000 * papayu_time / max(n_applies, 1)
    if args.json:
        print(
            json.dumps(
                {
                    "source": source,
                    "file_changes": len(cases),
                    "papayu_mean_ms": papayu_ms,
                    "classes": {k: v._asdict() for k, v in results.items()},
                },
                indent=2,
            )
        )
    else:
        print(render(results, source, len(cases), papayu_ms))
    return 0


if __name__ == "__main__":
    sys.exit(main())
