"""Stage timings for `--json` and the test pause points.

``PAPAYU_TEST_PAUSE_AT=<stage>`` makes papayu print a marker on stderr and sleep
at that stage until it is killed, so tests can `kill -9` it at a known point
(after_commit, during_check, during_land) and check that nothing of the user's
state changed. ``PAPAYU_TEST_CRASH_AT=<stage>`` raises an unexpected exception there
instead, to test the crash path (rollback, exit 3, masked crash report).
"""

from __future__ import annotations

import os
import time
from collections.abc import Iterator
from contextlib import contextmanager

from papayu_git import output

PAUSE_ENV = "PAPAYU_TEST_PAUSE_AT"
CRASH_ENV = "PAPAYU_TEST_CRASH_AT"  # raise an unexpected exception there: the crash path (exit 3)
PAUSE_MARKER = "PAPAYU_PAUSED"
STAGES = ("after_commit", "during_check", "during_land")


def pause_point(stage: str) -> None:
    if os.environ.get(CRASH_ENV) == stage:
        # The message carries what a leaked credential looks like: crash reports must mask it.
        raise RuntimeError(f"simulated bug at {stage} (token ghp_{'T' * 36})")
    if os.environ.get(PAUSE_ENV) != stage:
        return
    output.info(f"{PAUSE_MARKER} stage={stage} pid={os.getpid()}")
    while True:  # until killed: the test's kill -9 is the point
        time.sleep(3600)


class Stopwatch:
    """Accumulates seconds per stage name (validate, build_commit, check, land)."""

    def __init__(self) -> None:
        self.timings: dict[str, float] = {}
        self.failed_in = ""  # the stage an exception left (the innermost), for the error's report

    @contextmanager
    def stage(self, name: str) -> Iterator[None]:
        start = time.perf_counter()
        self.failed_in = ""
        try:
            yield
        except BaseException:
            self.failed_in = self.failed_in or name
            raise
        finally:
            elapsed = time.perf_counter() - start
            self.timings[name] = round(self.timings.get(name, 0.0) + elapsed, 6)
