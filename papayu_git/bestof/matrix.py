"""The score matrix: one row per candidate, as the run goes and as it ended (docs/DESIGN.md,
"Best of N"). A row reads the transaction's result as it is: green is the gate's state (held at
review with nothing holding it, the check passed), never re-judged here."""

from __future__ import annotations

from dataclasses import asdict, dataclass, field
from typing import Any

from papayu_git import output
from papayu_git.bestof.ranking import Score, goal_named
from papayu_git.secrets import safe_text

ASKING, QUEUED, CHECKING = "asking", "queued", "checking"
FIRST_PART = "first part"  # its check ran the tests its change reaches first and waits to be ranked (phases.py)
GREEN, RED, HELD, REFUSED = "green", "red", "held", "refused"
DUPLICATE, NO_CHANGES, MODEL_FAILED, INVALID = "duplicate", "no changes", "model failed", "invalid"
SKIPPED, STOPPED, LANDED = "skipped", "stopped", "landed"
CHECKED = frozenset({GREEN, RED, HELD, LANDED})  # ranked: the gate said something about them
BUSY = frozenset({ASKING, QUEUED, CHECKING, FIRST_PART})


@dataclass
class Row:
    """One candidate, filled in as the run goes (the session owns it; the record stores it)."""

    index: int
    model: str
    temperature: float
    lens: str
    state: str = ASKING
    plan_id: str = ""
    branch: str = ""
    kept: bool = False  # its papayu/<run>/<i> exists
    commit: str = ""
    tree: str = ""
    duplicate_of: int = 0
    code: str = ""  # the error code that decided its state
    reason: str = ""
    files: int = 0
    added: int = 0
    deleted: int = 0
    fixed: list[str] = field(default_factory=list)
    goal_fixed: list[str] = field(default_factory=list)
    broken: list[str] = field(default_factory=list)  # newly failing, missing, failing in its own run
    flaky: list[str] = field(default_factory=list)
    verdict: str = ""  # the verdict's trailer: "passed 41, fixed 1, ..."
    log: str = ""
    tokens: int = 0
    seconds: float = 0.0
    rank: int = 0
    lost: str = ""  # why it did not win ("" for the winner)
    first: dict[str, Any] = field(default_factory=dict)  # what its check's first part found (phases.py)

    def to_dict(self) -> dict[str, Any]:
        return asdict(self)

    def failed(self, state: str, error: Any) -> None:
        self.state = state
        self.code = getattr(error, "code", "") or (error or {}).get("code", "")
        self.reason = getattr(error, "reason", "") or (error or {}).get("reason", "")

    def take_result(self, result: dict[str, Any], goal: str) -> None:
        """The transaction's result (ApplyResult.to_dict, or a refusal) for this candidate."""
        error = result.get("error") or (result.get("errors") or [None])[0] or {}
        check = result.get("check") or {}
        verdict = check.get("verdict") or {}
        self.commit = result.get("commit") or ""
        self.kept = bool(result.get("branch_kept")) or result.get("state") == "review"
        self.fixed = list(verdict.get("fixed") or [])
        self.goal_fixed = goal_named(goal, self.fixed)
        self.broken = [*verdict.get("broken", ()), *verdict.get("missing", ()), *verdict.get("new_failing", ())]
        self.flaky = list(verdict.get("flaky") or [])
        self.verdict = str(verdict.get("trailer") or ("passed" if check.get("passed") else ""))
        self.log = str(check.get("log") or "")
        state = result.get("state")
        if state == "review" and not error and check.get("passed"):
            self.state = GREEN
        elif state == "review":
            self.failed(HELD, error)
        elif state == "no_changes":
            self.failed(NO_CHANGES, error)
        elif state == "interrupted":
            self.failed(STOPPED, error)
        else:
            self.failed(REFUSED if state == "refused" else RED, error)

    def copy_of(self, other: Row) -> None:
        """A duplicate carries the verdict of the candidate with the same tree."""
        for name in ("fixed", "goal_fixed", "broken", "flaky", "verdict", "log"):
            setattr(self, name, getattr(other, name))

    def score(self) -> Score:
        return Score(
            self.index,
            self.state in (GREEN, LANDED),
            len(self.goal_fixed),
            len(self.fixed),
            len(self.flaky),
            self.files,
            self.added + self.deleted,
        )

    def why_not(self) -> str:
        """Why a candidate that was not ranked green did not win: the gate's word, or its own end."""
        reason = first_line(self.reason.split("; full output: ", 1)[0])  # the log is in the record
        said = f"{self.code}: {reason}" if self.code else reason
        if self.state == DUPLICATE:
            return f"the same tree as #{self.duplicate_of} (checked once)"
        prefix = {
            RED: "the gate",
            HELD: "held at review",
            REFUSED: "refused",
            MODEL_FAILED: "the model failed",
            INVALID: "invalid answer",
            SKIPPED: "not asked",
            STOPPED: "stopped",
        }.get(self.state, self.state)
        return f"{prefix}: {said}" if said else prefix


def first_line(text: str, limit: int = 160) -> str:
    line = (text or "").strip().split("\n", 1)[0]
    return line if len(line) <= limit else line[: limit - 3] + "..."


MODEL_WIDTH = 40


def header(width: int) -> str:
    return f"{'#':>2}  {'MODEL':<{width}}  {'TEMP':>4}  {'STATE':<12} {'FIXED':>5} {'BROKEN':>6}  {'DIFF':<12} {'SEC':>5} {'TOKENS':>6}"


def line(row: Row, width: int) -> str:
    diff = f"{row.files}f +{row.added}/-{row.deleted}" if row.tree else "-"
    state = row.state if not row.duplicate_of else f"= #{row.duplicate_of}"
    checked = row.state in CHECKED or row.duplicate_of
    fixed, broken = (str(len(row.fixed)), str(len(row.broken))) if checked else ("-", "-")
    model = safe_text(row.model)
    model = model if len(model) <= width else model[: width - 3] + "..."
    return (
        f"{row.index:>2}  {model:<{width}}  {row.temperature:>4.1f}  {state:<12} {fixed:>5} {broken:>6}  "
        f"{diff:<12} {row.seconds:>5.1f} {row.tokens:>6}"
    )


def _width(rows: list[Row]) -> int:
    return min(MODEL_WIDTH, max([5, *(len(safe_text(row.model)) for row in rows)]))


def table(rows: list[Row]) -> list[str]:
    width = _width(rows)
    return [header(width), *(line(row, width) for row in rows)]


def final(rows: list[Row]) -> list[str]:
    """The matrix as the run ended, best first, each loser with why it lost."""
    width = _width(rows)
    out = [header(width)]
    for row in sorted(rows, key=lambda r: (r.rank or 10_000, r.index)):
        out.append(line(row, width))
        if row.lost:
            out.append(f"      lost: {safe_text(row.lost)}")
        elif row.rank == 1:
            out.append(f"      winner{': ' + safe_text(row.verdict) if row.verdict else ''}")
    return out


def run_lines(record: dict[str, Any]) -> list[str]:
    """A stored run as `show RUN` prints it: goal, tip, ranking, the final matrix, the judge, what
    goes on from it."""
    rows = [_row(data) for data in record["candidates"] if isinstance(data, dict)]
    winner = record.get("winner")
    out = [
        output.colour(f"run {record['id']}", "bold") + f"  state: {safe_text(record.get('state', '?'))}",
        f"goal: {safe_text(record.get('goal', ''), multiline=True)}",
        f"on {safe_text(record.get('target', ''))} @ {str(record.get('tip', ''))[:12]}; ranked by: "
        + "; ".join(record.get("ranking") or []),
        "",
        *final(rows),
    ]
    judge = record.get("judge") or {}
    if judge:
        said = judge.get("error", {}).get("code") if judge.get("error") else f"chose #{judge.get('choice')}"
        out.append(f"judge {safe_text(judge.get('model', ''))}: {safe_text(said)}")
    for offer in record.get("retry") or []:
        out.append(f"retry: {safe_text(offer)}")
    kept = [row for row in rows if row.kept]
    if kept:  # record: runs.current, the refs as they are now
        out.append("kept: " + ", ".join(f"{record['id']}:{row.index}" for row in kept))
        land = (
            f"land one: git papayu land {record['id']}:{winner}    "
            if winner and record.get("state") != "landed" and any(row.index == winner for row in kept)
            else ""
        )
        out.append(f"{land}drop them: git papayu drop {record['id']}")
    elif any(row.state in CHECKED for row in rows):
        landed = [f"#{row.index}" for row in rows if row.state == LANDED]
        out.append("no candidate is kept: " + (f"{landed[0]} landed, the rest were dropped" if landed else "dropped"))
    return out


def _row(data: dict[str, Any]) -> Row:
    known = {k: v for k, v in data.items() if k in Row.__dataclass_fields__}
    return Row(**known)
