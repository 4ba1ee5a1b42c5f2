"""A best-of run's record and refs: `.git/papayu/runs/<run>.json` (the score matrix) and one
`papayu/<run>/<i>` per checked candidate (docs/DESIGN.md, "Best of N").

A run id is `best-YYYYMMDD-HHMMSS-xxxxxx`. A plan id (`YYYYMMDD-HHMMSS-xxxxxx`) can never start
with `best-`, so `papayu/<plan id>` (a file ref) and `papayu/<run>/<i>` (refs below a directory)
never stand in each other's way: git refuses a ref where another one's directory is.

Light on purpose: `show`, `land`, `drop`, `list`, `gc` and every command's stale-lock sweep read
runs, and none of them may load the model stack.
"""

from __future__ import annotations

import re
import time
from pathlib import Path
from typing import TYPE_CHECKING, Any

from papayu_git import atomic, locks, plans
from papayu_git.errors import PapayuError
from papayu_git.objects import BRANCH_PREFIX, commit_of, delete_branch, generated_branches
from papayu_git.outcomes import ApplyState
from papayu_git.plans import CANDIDATE_KEY
from papayu_git.protocol import parse_json_text
from papayu_git.secrets import mask_data

if TYPE_CHECKING:
    import pygit2

RUN_PREFIX = "best-"
RUNS_DIR = "runs"
RUN_FORMAT = 1
_RUN_ID = re.compile(r"best-\d{8}-\d{6}-[0-9a-f]{6}")
_ARG = re.compile(r"(best-[0-9a-f-]{0,22}|@)(?:[:/](\d{1,3}))?")
FINISHED = frozenset({"landed", "kept", "no_green", "interrupted", "dropped"})


def new_id() -> str:
    return RUN_PREFIX + plans.new_id()


def is_id(value: object) -> bool:
    return isinstance(value, str) and _RUN_ID.fullmatch(value) is not None


def branch_key(run_id: str, index: int) -> str:
    """The candidate's branch under papayu/ (objects.branch_name makes `papayu/<run>/<i>` of it)."""
    return f"{run_id}/{index}"


def parse_key(key: str) -> tuple[str, int] | None:
    """(run, index) of a generated branch's name under papayu/, None for a plan's."""
    found = CANDIDATE_KEY.fullmatch(key)
    return (found.group(1), int(found.group(2))) if found else None


def names_a_run(arg: str) -> bool:
    """``arg`` (what show/land/drop were given) names a run or one of its candidates."""
    return arg.removeprefix(BRANCH_PREFIX).startswith(RUN_PREFIX)


def runs_dir(pdir: Path) -> Path:
    return pdir / RUNS_DIR


def lock_path(pdir: Path, run_id: str) -> Path:
    return locks.locks_dir(pdir) / f"{run_id}.lock"


def save(pdir: Path, record: dict[str, Any]) -> Path:
    """The record, masked (goals and the models' words may quote a secret)."""
    runs_dir(pdir).mkdir(parents=True, exist_ok=True)
    body = {"papayu_run": RUN_FORMAT, **record, "updated_at": time.strftime("%Y-%m-%dT%H:%M:%SZ", time.gmtime())}
    return atomic.write_json(runs_dir(pdir) / f"{record['id']}.json", mask_data(body))


def load(pdir: Path, run_id: str) -> dict[str, Any]:
    path = runs_dir(pdir) / f"{run_id}.json"
    try:
        data = parse_json_text(path.read_bytes())
    except (OSError, PapayuError):
        raise PapayuError("ERR_RUN_NOT_FOUND", f"no record of run {run_id}", path=str(path)) from None
    if not isinstance(data, dict) or data.get("id") != run_id or not isinstance(data.get("candidates"), list):
        raise PapayuError("ERR_RUN_NOT_FOUND", f"{path.name} is not a best-of run record", path=str(path))
    return data


def stored_ids(pdir: Path) -> list[str]:
    directory = runs_dir(pdir)
    return sorted(p.stem for p in directory.glob("*.json") if is_id(p.stem)) if directory.is_dir() else []


def resolve(pdir: Path, arg: str) -> tuple[str, int | None]:
    """(run id, candidate number or None) of `RUN`, `RUN:N`, `papayu/RUN/N`; RUN is the whole id,
    a unique prefix of it, `best-` and a prefix of its hash part, or `best-@` (the newest)."""
    found = _ARG.fullmatch(arg.strip().removeprefix(BRANCH_PREFIX).replace("best-@", "@"))
    if found is None:
        raise PapayuError("ERR_RUN_NOT_FOUND", f"{arg[:80]!r} is not RUN or RUN:N")
    value, number = found.group(1), int(found.group(2)) if found.group(2) else None
    ids = stored_ids(pdir)
    if value == "@":
        matches = ids[-1:]
    else:
        hashed = value[len(RUN_PREFIX) :]
        matches = [i for i in ids if i == value] or [i for i in ids if i.startswith(value)]
        matches = matches or [i for i in ids if hashed and i[len(RUN_PREFIX) + 16 :].startswith(hashed)]
    if len(matches) != 1:
        said = f"ambiguous: {', '.join(matches[-5:])}" if matches else "no such run"
        raise PapayuError("ERR_RUN_NOT_FOUND", f"{arg[:80]!r}: {said}", path=str(runs_dir(pdir)))
    return matches[0], number


def candidate(record: dict[str, Any], number: int) -> dict[str, Any]:
    for row in record["candidates"]:
        if isinstance(row, dict) and row.get("index") == number:
            return row
    raise PapayuError("ERR_RUN_NOT_FOUND", f"run {record['id']} has no candidate {number}")


def candidate_key(pdir: Path, plan_id: str) -> str:
    """The kept branch (its name under papayu/) of a best-of candidate's plan; "" for any other plan."""
    try:
        branch = (plans.load(pdir, plan_id).extra.get("apply") or {}).get("branch") or ""
    except PapayuError:
        return ""
    key = str(branch).removeprefix(BRANCH_PREFIX)
    return key if parse_key(key) else ""


def refs_of(repo: pygit2.Repository, run_id: str) -> dict[int, str]:
    """candidate number -> commit of the run's papayu/<run>/<i> refs."""
    out = {}
    for key, commit in generated_branches(repo).items():
        parsed = parse_key(key)
        if parsed is not None and parsed[0] == run_id:
            out[parsed[1]] = commit
    return out


def drop(repo: pygit2.Repository, pdir: Path, run_id: str, numbers: list[int] | None = None) -> list[int]:
    """Delete the run's refs (all, or those of ``numbers``); the candidates' plans and the record
    say `dropped`. Returns the numbers whose ref was deleted."""
    dropped = []
    for number in sorted(refs_of(repo, run_id)):
        if (numbers is None or number in numbers) and delete_branch(repo, branch_key(run_id, number)):
            dropped.append(number)
    try:
        record = load(pdir, run_id)
    except PapayuError:
        return dropped
    for row in record["candidates"]:
        if isinstance(row, dict) and row.get("index") in dropped:
            row["kept"] = False
            if plans.is_id(row.get("plan_id")):
                plans.update_outcome(pdir, row["plan_id"], state=ApplyState.DROPPED)
    if not any(isinstance(r, dict) and r.get("kept") for r in record["candidates"]) and record.get("state") != "landed":
        record["state"] = "dropped"
    save(pdir, record)
    return dropped


def current(repo: pygit2.Repository, pdir: Path, record: dict[str, Any]) -> dict[str, Any]:
    """The run as it is now, whichever command changed it since its record was written (`land
    RUN:N`, `land ID` of a candidate's plan, `drop`, `undo`, a branch deleted by hand): a candidate
    whose plan landed (and was not undone) is `landed`; `kept` is whether its ref exists; the run is
    `landed` while one of its candidates is, `dropped` when none is kept and none landed."""
    refs = refs_of(repo, str(record.get("id", "")))
    landed = False
    rows = []
    for row in record.get("candidates") or []:
        if not isinstance(row, dict):
            continue
        row = {**row, "kept": int(row.get("index") or 0) in refs}
        outcome = _outcome(pdir, row.get("plan_id"))
        if outcome.get("state") == ApplyState.LANDED and not outcome.get("undone_to"):
            row["state"], landed = "landed", True
        elif row.get("state") == "landed":  # undone since: the gate's word for it again
            row["state"] = "green"
        rows.append(row)
    state = record.get("state")
    if landed:
        state = "landed"
    elif state in ("landed", "kept", "no_green") and not refs:
        state = "dropped"
    elif state == "landed":  # its landing was undone: the candidates wait again
        state = "kept"
    return {**record, "candidates": rows, "state": state}


def _outcome(pdir: Path, plan_id: object) -> dict[str, Any]:
    if not plans.is_id(plan_id):
        return {}
    try:
        return dict(plans.load(pdir, str(plan_id)).extra.get("apply") or {})
    except PapayuError:
        return {}


def alive(pdir: Path, run_id: str) -> bool:
    info = locks.read_lock(lock_path(pdir, run_id))
    return info is not None and info.alive


def gc(repo: pygit2.Repository, pdir: Path, cutoff: float) -> list[str]:
    """`gc`: the refs of finished runs, those of a run whose winner landed at any age (the others
    can never fast-forward there now), the rest once older than ``cutoff``."""
    removed = []
    for key, commit in sorted(generated_branches(repo).items()):
        parsed = parse_key(key)
        if parsed is None or alive(pdir, parsed[0]):
            continue
        try:
            landed = current(repo, pdir, load(pdir, parsed[0])).get("state") == "landed"
        except PapayuError:
            landed = False
        if (landed or commit_of(repo, commit).commit_time <= cutoff) and parsed[1] in drop(
            repo, pdir, parsed[0], [parsed[1]]
        ):
            removed.append(BRANCH_PREFIX + key)
    return removed


def clear_dead(repo: pygit2.Repository, pdir: Path, info: locks.LockInfo) -> None:
    """A best-of whose process died (kill -9) before it finished: its candidates roll back."""
    run_id = str(info.data.get("run", ""))
    if not is_id(run_id):
        return
    try:
        state = load(pdir, run_id).get("state")
    except PapayuError:
        state = None
    if state not in FINISHED:
        drop(repo, pdir, run_id)
