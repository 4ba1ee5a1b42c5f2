"""Stored plans: `.git/papayu/plans/<id>.json`.

A plan records what the model saw (files with their sha256, the context text) so
that `apply ID` can run the APPLY round with the same context and check implicit
bases against the blobs at the branch tip (docs/DESIGN.md, "Accepted answers").
"""

from __future__ import annotations

import os
import re
import time
from dataclasses import asdict, dataclass, field, replace
from pathlib import Path
from typing import Any

from papayu_git import atomic
from papayu_git.errors import PapayuError, ValidationFailed
from papayu_git.protocol import parse_json_text
from papayu_git.secrets import PLAN_VERBATIM, mask_data

PLAN_FORMAT = 1


def new_id() -> str:
    """Short, sortable, unique enough for branch names: papayu/<id>."""
    return (
        time.strftime("%Y%m%d-%H%M%S", time.gmtime()) + "-" + os.urandom(3).hex()
    )  # not `secrets`: its import costs ~5 ms per command


# The shape new_id generates. An id becomes a file name (plans/<id>.json), a lock name and a
# branch (papayu/<id>), so an id from a file or the command line must have exactly this shape.
_ID = re.compile(r"\d{8}-\d{6}-[0-9a-f]{6}")
_ID_PREFIX = re.compile(r"\d{1,8}|\d{8}-\d{0,6}|\d{8}-\d{6}-[0-9a-f]{0,6}")


def is_id(value: object) -> bool:
    return isinstance(value, str) and _ID.fullmatch(value) is not None


def check_id(value: object, path: str = "id") -> str:
    """``value`` when it is an id papayu generates, else ERR_PLAN_ID_INVALID."""
    if not is_id(value):
        raise PapayuError(
            "ERR_PLAN_ID_INVALID", f"plan id {str(value)[:80]!r} is not YYYYMMDD-HHMMSS-xxxxxx", path=path
        )
    return str(value)


def is_id_prefix(value: str) -> bool:
    """``value`` can start a plan id (what `show`, `land`, `drop`, `pr` and `apply` accept)."""
    return _ID_PREFIX.fullmatch(value) is not None


@dataclass(frozen=True)
class StoredPlan:
    id: str
    goal: str = ""
    mode: str = "plan"  # plan | apply (the round that produced `response`)
    protocol: int = 2
    base_commit: str = ""
    branch: str = ""
    files: dict[str, str] = field(default_factory=dict)  # path -> sha256 shown to the model
    response: Any = None  # validated JSON of the last round
    trace_id: str = ""
    created_at: str = ""
    context: str = ""  # the user message sent with the plan round
    extra: dict[str, Any] = field(default_factory=dict)

    def to_json(self) -> dict[str, Any]:
        return {"papayu_plan": PLAN_FORMAT, **asdict(self)}

    @classmethod
    def from_json(cls, data: dict[str, Any]) -> StoredPlan:
        known = {k: v for k, v in data.items() if k in cls.__dataclass_fields__}
        return cls(**known)


def import_record(papayu_dir: Path, data: dict[str, Any]) -> StoredPlan:
    """A plan record given to `apply FILE`. It keeps its id, so applying a copy of
    `.git/papayu/plans/<id>.json` is `apply <id>`; a different plan stored under that id is never
    replaced: the record then gets a new id. Outcomes recorded elsewhere (extra.apply, extra.pr:
    commits, checks, pull requests of another run) are dropped."""
    plan = from_record(data)
    extra = {k: v for k, v in plan.extra.items() if k not in _OUTCOME_KEYS}
    try:
        stored: StoredPlan | None = load(papayu_dir, plan.id)
    except PapayuError:
        stored = None
    new = plan.id if stored is None or stored.response == plan.response else new_id()
    return replace(plan, id=new, extra=extra)


def plans_dir(papayu_dir: Path) -> Path:
    return papayu_dir / "plans"


def save(papayu_dir: Path, plan: StoredPlan) -> Path:
    directory = plans_dir(papayu_dir)
    directory.mkdir(parents=True, exist_ok=True)
    target = directory / f"{check_id(plan.id)}.json"

    record = mask_data(plan.to_json(), keep=PLAN_VERBATIM)  # what apply needs stays byte for byte
    return atomic.write_json(target, record, newline=False)


def is_plan_record(data: Any) -> bool:
    return isinstance(data, dict) and data.get("papayu_plan") == PLAN_FORMAT


_RECORD_TYPES: dict[str, type | tuple[type, ...]] = {
    "goal": str,
    "mode": str,
    "protocol": int,
    "base_commit": str,
    "branch": str,
    "files": dict,
    "trace_id": str,
    "created_at": str,
    "context": str,
    "extra": dict,
}


def record_errors(data: dict[str, Any]) -> list[PapayuError]:
    """What makes ``data`` (a plan record from a file) unusable: a malformed id, fields of the wrong type."""
    errors = []
    try:
        check_id(data.get("id"))
    except PapayuError as exc:
        errors.append(exc)
    for name, kind in _RECORD_TYPES.items():
        value = data.get(name)
        if value is not None and (not isinstance(value, kind) or isinstance(value, bool)):
            errors.append(
                PapayuError(
                    "ERR_PLAN_RECORD_INVALID",
                    f"{name} is a {type(value).__name__}, expected {getattr(kind, '__name__', kind)}",
                    path=name,
                )
            )
    files, extra = data.get("files"), data.get("extra")
    if isinstance(files, dict) and not all(isinstance(v, str) for v in files.values()):
        errors.append(PapayuError("ERR_PLAN_RECORD_INVALID", "files maps each path to a sha256 string", path="files"))
    if isinstance(extra, dict):
        errors.extend(
            PapayuError("ERR_PLAN_RECORD_INVALID", f"extra.{key} is not an object", path=f"extra.{key}")
            for key in _OUTCOME_KEYS
            if not isinstance(extra.get(key, {}), dict)
        )
    return errors


_OUTCOME_KEYS = ("apply", "pr")  # what papayu recorded about the plan in one repository


def from_record(data: dict[str, Any]) -> StoredPlan:
    """A plan record read from a file (`apply FILE`, a stored plan), refused unless well-formed."""
    errors = record_errors(data)
    if errors:
        raise ValidationFailed(errors)
    return StoredPlan.from_json({k: v for k, v in data.items() if v is not None or k == "response"})


BRANCH_PREFIX = "papayu/"  # every branch papayu makes (objects.branch_name: `papayu/<id>`)
# A best-of candidate's branch under papayu/, `<run>/<i>` (bestof/runs.py); a person reads and
# types the candidate as `<run>:<i>` (docs/DESIGN.md, "Best of N").
CANDIDATE_KEY = re.compile(r"(best-\d{8}-\d{6}-[0-9a-f]{6})/(\d{1,3})")


def plan_name(plan_id: str, branch: str = "") -> str:
    """What a plan is called wherever a person reads or types it: its id, or for a best-of
    candidate (kept on ``branch`` papayu/RUN/N) `RUN:N`, its one id in every message and command."""
    found = CANDIDATE_KEY.fullmatch(branch.removeprefix(BRANCH_PREFIX))
    return f"{found.group(1)}:{found.group(2)}" if found else plan_id


def plan_subject(plan_id: str, branch: str = "") -> str:
    """A plan as a message names it: `plan ID`, or `candidate RUN:N`."""
    name = plan_name(plan_id, branch)
    return f"candidate {name}" if name != plan_id else f"plan {plan_id}"


_SAFE_PREFIX = re.compile(r"[0-9A-Za-z][0-9A-Za-z_-]{0,63}")  # never a path, a glob or an option


def find_record(directory: Path, id_or_prefix: str, code: str, what: str) -> Path:
    """The one `<id>.json` in ``directory`` named by an id or a unique prefix (like git's short
    hashes). Ids never contain path separators, so nothing outside ``directory`` is read."""

    def stems() -> list[str]:  # on an error path only
        return sorted(m.stem for m in directory.glob("*.json")) if directory.is_dir() else []

    if not _SAFE_PREFIX.fullmatch(id_or_prefix):
        raise PapayuError(code, f"invalid {what} id {id_or_prefix[:80]!r}{did_you_mean(id_or_prefix, stems())}")
    exact = directory / f"{id_or_prefix}.json"
    if exact.is_file():
        return exact
    matches = sorted(directory.glob(f"{id_or_prefix}*.json")) if directory.is_dir() else []
    if len(matches) == 1:
        return matches[0]
    if len(matches) > 1:
        names = ", ".join(m.stem for m in matches[:5])
        raise PapayuError(
            code, f"{what} id prefix {id_or_prefix!r} is ambiguous: {names}", hint="Give more characters of the id."
        )
    raise PapayuError(code, f"no {what} {id_or_prefix!r}{did_you_mean(id_or_prefix, stems())}", path=str(directory))


_NEWEST = re.compile(r"@(?:~(\d{1,4}))?")
_HASH_PREFIX = re.compile(r"[0-9a-f]{1,6}")


def resolve_id(papayu_dir: Path, id_or_prefix: str) -> str:
    """The stored plan an id names, the way people type it: the whole id, a unique prefix of its
    hash part (`a1b2`), a unique prefix of it, `@` for the newest plan and `@~N` for the one N
    before it. Ambiguous: the candidates are named; unknown: the closest ids are offered."""
    value = id_or_prefix.strip()
    ids = stored_ids(papayu_dir)
    newest = _NEWEST.fullmatch(value)
    if newest:
        back = int(newest.group(1) or 0)
        if back >= len(ids):
            raise PapayuError(
                "ERR_PLAN_NOT_FOUND",
                f"{value!r}: there are {len(ids)} stored plan(s)",
                hint="`@` is the newest plan, `@~1` the one before; run 'git papayu list'.",
            )
        return ids[-1 - back]
    if not (is_id_prefix(value) or _HASH_PREFIX.fullmatch(value)):
        raise PapayuError(
            "ERR_PLAN_NOT_FOUND",
            f"invalid plan id {value[:80]!r}{did_you_mean(value, ids)}",
            hint="A plan id looks like 20260101-120000-a1b2c3; a prefix, its last part (a1b2) or @ / @~1 "
            "work too; run 'git papayu list'.",
        )
    # Up to six hex characters are first read as the hash part (what people copy from a branch
    # name); a date prefix is longer, or matches no hash.
    matches = [i for i in ids if i[16:].startswith(value)] if _HASH_PREFIX.fullmatch(value) else []
    if not matches and is_id_prefix(value):
        matches = [i for i in ids if i.startswith(value)]
    if len(matches) == 1:
        return check_id(matches[0], path=str(plans_dir(papayu_dir) / f"{matches[0]}.json"))
    if matches:
        shown = ", ".join(matches[-5:])
        raise PapayuError(
            "ERR_PLAN_NOT_FOUND",
            f"plan id {value!r} is ambiguous: {len(matches)} plans match ({shown})",
            hint="Give more characters of the id.",
        )
    raise PapayuError(
        "ERR_PLAN_NOT_FOUND",
        f"no plan {value!r}{did_you_mean(value, ids)}",
        path=str(plans_dir(papayu_dir)),
        hint="Run 'git papayu list'.",
    )


def did_you_mean(value: str, ids: list[str]) -> str:
    """ "; did you mean X?" with the stored ids closest to a mistyped one (whole ids, then their
    hash parts, as people copy them), "" when none is close: every lookup of an id says it."""
    import difflib  # only on an error path

    value = value[:80]
    close = difflib.get_close_matches(value, ids, n=3, cutoff=0.5) or difflib.get_close_matches(
        value, [i[16:] for i in ids if len(i) > 16], n=3, cutoff=0.5
    )
    return f"; did you mean {', '.join(close)}?" if close else ""


def stored_ids(papayu_dir: Path) -> list[str]:
    """The ids of the stored plans, oldest first (ids sort by time)."""
    directory = plans_dir(papayu_dir)
    return sorted(p.stem for p in directory.glob("*.json") if is_id(p.stem)) if directory.is_dir() else []


def read_record(path: Path) -> StoredPlan:
    """The stored plan in ``path``, parsed as strictly as a response file (protocol.parse_json_text);
    its id must be its file name."""
    try:
        data = parse_json_text(path.read_bytes())
    except OSError as exc:
        raise PapayuError("ERR_PLAN_NOT_FOUND", f"cannot read {path.name}: {exc.strerror}", path=str(path)) from None
    except PapayuError as exc:
        raise PapayuError(exc.code, exc.reason, path=str(path), hint=exc.hint) from None
    if not is_plan_record(data) or data.get("id") != path.stem:
        raise PapayuError("ERR_PLAN_RECORD_INVALID", "not a plan record with its file's id", path=str(path))
    return from_record(data)


def load(papayu_dir: Path, id_or_prefix: str) -> StoredPlan:
    plan_id = resolve_id(papayu_dir, id_or_prefix)
    return read_record(plans_dir(papayu_dir) / f"{plan_id}.json")


def list_plans(papayu_dir: Path) -> list[StoredPlan]:
    directory = plans_dir(papayu_dir)
    if not directory.is_dir():
        return []
    out = []
    for path in sorted(directory.glob("*.json")):
        if not is_id(path.stem):
            continue
        try:
            out.append(read_record(path))
        except PapayuError:
            continue
    return out


def update_outcome(pdir: Path, plan_id: str, **fields: Any) -> None:
    """`land` / `drop` of a kept branch: update the state recorded in the plan."""
    try:
        plan = load(pdir, plan_id)
    except PapayuError:
        return  # a branch without a plan record (e.g. its record was deleted): nothing to update
    outcome = {**(plan.extra.get("apply") or {}), **fields, "at": time.strftime("%Y-%m-%dT%H:%M:%SZ", time.gmtime())}
    save(pdir, replace(plan, extra={**plan.extra, "apply": outcome}))
