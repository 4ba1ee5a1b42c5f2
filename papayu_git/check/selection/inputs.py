"""What each test of a base run read, as papayu's pytest plugin recorded it (results/pytest_inputs.py).

The record is JSON lines, one process after another (`{"process": NAME}` first): units
(`{"n", "f", "q"}`: a number for a file and a function, or `<module>`), then a line per test (`t`:
its node id) or per process's global part (`g`) with the units it ran (`u`), the files of the
repository it opened (`o`) and the directories it listed (`d`), why it is not selectable (`x`)
and its seconds (`s`); `{"off": WHY}` where the recorder stopped (what it recorded before stands:
only the tests recorded whole are in the record). A record that cannot be read as a whole is no
record: the order then comes from the cost-free signals (signals.py).
"""

from __future__ import annotations

import json
from dataclasses import dataclass, field
from typing import Any

Unit = tuple[str, str]  # (path from the root, qualified name or "<module>")


@dataclass
class Inputs:
    units: set[Unit] = field(default_factory=set)
    opened: set[str] = field(default_factory=set)
    listed: set[str] = field(default_factory=set)
    unselectable: str = ""
    seconds: float = 0.0


@dataclass
class Recorded:
    tests: dict[str, Inputs] = field(default_factory=dict)
    shared: Inputs = field(default_factory=Inputs)  # outside any test, every process's together
    loaded: set[str] = field(default_factory=set)  # files whose code any process ran
    problem: str = ""  # why this record cannot be used ("" when it can)
    off: str = ""  # why the recorder stopped during its run ("" when it recorded to the end)

    def files(self) -> set[str]:
        return self.loaded | self.shared.opened | {p for t in self.tests.values() for p in t.opened}


def read_inputs(data: bytes) -> Recorded:
    out = Recorded()
    if not data.strip():
        out.problem = "the base run recorded no inputs (papayu's pytest plugin did not run there)"
        return out
    units: dict[int, Unit] = {}
    for number, line in enumerate(data.splitlines(), 1):
        try:
            _line(json.loads(line), units, out)
        except (ValueError, KeyError, TypeError, IndexError) as exc:
            out.problem = f"the base run's record of inputs is unreadable at line {number} ({exc})"
            return out
    if not out.tests:
        out.problem = f"nothing was recorded: {out.off}" if out.off else "the record names no test"
    return out


def _line(record: dict[str, Any], units: dict[int, Unit], out: Recorded) -> None:
    if "process" in record:
        units.clear()
    elif "off" in record:
        out.off = out.off or str(record["off"])[:300]
    elif "n" in record:
        unit = (str(record["f"]), str(record["q"]))
        units[int(record["n"])] = unit
        out.loaded.add(unit[0])
    elif "t" in record or "g" in record:
        inputs = Inputs(
            {units[int(n)] for n in record.get("u", [])},
            {str(p) for p in record.get("o", [])},
            {str(p) for p in record.get("d", [])},
            str(record.get("x") or ""),
            float(record.get("s") or 0.0),
        )
        if "g" in record:
            _merge(out.shared, inputs)
        else:
            test = str(record["t"])
            if test in out.tests:  # one test recorded twice (a rerun): both runs' inputs
                _merge(out.tests[test], inputs)
            else:
                out.tests[test] = inputs


def _merge(into: Inputs, more: Inputs) -> None:
    into.units |= more.units
    into.opened |= more.opened
    into.listed |= more.listed
    into.unselectable = into.unselectable or more.unselectable
    into.seconds += more.seconds
