"""Best of N pays for about one whole suite (docs/DESIGN.md, "Best of N"): every candidate's
check runs its first part alone (the tests its change reaches, those red on the tip) and waits;
once every candidate is that far, the one that may still rank best runs the rest, then the next,
until a fully green candidate leads every one still waiting. The others end there: a red one as
it is (no re-run on the tip to tell a flake, since it can no longer win), a green-so-far one
stopped.

Pure: rows in (their state and what their first part found), what to do with each out.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass

from papayu_git.bestof import matrix
from papayu_git.bestof.matrix import Row
from papayu_git.bestof.ranking import Score, goal_named, why_lost

GO, DONE, STOP = "go", "done", "stop"


@dataclass(frozen=True)
class Step:
    index: int
    what: str  # GO: run the rest; DONE: end as it is (red); STOP: stopped (could not outrank)
    why: str = ""


def optimistic(row: Row, goal: str) -> tuple[int, ...] | None:
    """The best key ``row`` can still reach (ranking.Score.key), from its first part: every test
    that failed there may prove flaky; None when something rejects it whatever the rest says."""
    first = row.first
    if first.get("rejected") or first.get("held"):
        return None
    fixed = list(first.get("fixed") or [])
    suspects = list(first.get("suspects") or [])
    return (1, len(goal_named(goal, fixed)), len(fixed), -len(suspects), -row.files, -(row.added + row.deleted))


def steps(rows: Sequence[Row], goal: str, *, first_green: bool, judge: bool) -> list[Step]:
    """What to tell the candidates waiting after their first part. Nothing while a first part is
    still to come (the ranking needs them all) or a candidate runs its rest; ``first_green``:
    every waiting candidate goes on at once; ``judge``: a tie may go either way (a judge breaks it)."""
    waiting = [r for r in rows if r.state == matrix.FIRST_PART and r.first.get("answer") is None]
    out = [_cannot_win(r) for r in waiting if optimistic(r, goal) is None]
    waiting = [r for r in waiting if optimistic(r, goal) is not None]
    if first_green:
        return out + [Step(r.index, GO) for r in waiting]
    busy = any(r.state in (matrix.ASKING, matrix.QUEUED, matrix.CHECKING) for r in rows)
    going = any(r.state == matrix.FIRST_PART and r.first.get("answer") == GO for r in rows)
    if busy or going or not waiting:
        return out
    leader = max((r for r in rows if r.state == matrix.GREEN), key=lambda r: (r.score().key(), -r.index), default=None)
    chances = [r for r in waiting if leader is None or _outranks(r, leader, goal, judge)]
    for row in waiting:
        if row not in chances and leader is not None:
            behind = why_lost(_score(row, goal), leader.score()) or f"tied with #{leader.index}; the lower number wins"
            out.append(Step(row.index, STOP if not row.first.get("suspects") else DONE, behind))
    if chances:
        best = max(chances, key=lambda r: (optimistic(r, goal) or (), -r.index))
        out.append(Step(best.index, GO))
    return out


def _cannot_win(row: Row) -> Step:
    """A candidate its first part rejects, or that something holds: a red one ends as it is, one
    that fixes nothing is held as such; one held for a human (its test edits, its reach) stops."""
    first = row.first
    if first.get("rejected"):
        return Step(row.index, DONE, f"rejected by its first part ({first['rejected']})")
    if first.get("held") == "ERR_CHECK_FIXES_NOTHING":
        return Step(row.index, DONE, "it fixes none of the tip's failing tests")
    return Step(row.index, STOP, f"held ({first.get('held')}): it cannot win")


def _score(row: Row, goal: str) -> Score:
    key = optimistic(row, goal) or (0, 0, 0, 0, 0, 0)
    return Score(row.index, bool(key[0]), key[1], key[2], -key[3], -key[4], -key[5])


def _outranks(row: Row, leader: Row, goal: str, judge: bool) -> bool:
    mine, theirs = optimistic(row, goal), leader.score().key()
    if mine is None:
        return False
    if mine != theirs:
        return mine > theirs
    return judge or row.index < leader.index  # a tie goes to the judge, else to the lower number
