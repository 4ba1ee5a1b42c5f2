"""Masking takes linear time on hostile text (docs/DESIGN.md, "Masking").

Check output and model text are written by an adversary and can be megabytes long; a masking
pattern that scans a long run once per character of it turned 200k characters into 27 s,
outside every timeout and under the locks. Every pattern of secrets.py is run here against
long runs of the characters its alternatives accept, next to each of its needles, and so is
``mask`` itself: 1 MB must take well under a second, and 2 MB at most about twice as long.
"""

from __future__ import annotations

import re
import time
from collections.abc import Callable

import pytest

from papayu_git import secrets
from papayu_git.check.secret_files import spellings, value_masker
from papayu_git.secrets import literal_masker, mask

MB = 1_000_000
# pattern name -> (needle, run) pairs: the needle with a long run of the run's characters on
# either side, and repeated with none or one run character between. The runs are characters
# the pattern's alternatives accept next to that needle. Every compiled pattern is listed.
HOSTILE: dict[str, tuple[tuple[str, str], ...]] = {
    "_PRIVATE_KEY": (("-----BEGIN ", "A"), ("-----BEGIN RSA PRIVATE KEY-----", "A"), ("-----END ", " ")),
    "_TOKENS": (
        ("sk-", "a"), ("sk-proj-", "-"), ("ghp_", "a"), ("AKIA", "A"), ("AIza", "-"), ("xoxb-", "a"),
        ("eyJ", "a"), ("eyJaaaaaaaa.", "a"), ("rk_live_", "a"), ("bearer", " "),
    ),
    "_GLUED": (("github_pat_", "a"), ("eyJ", "_"), ("eyJaaaaaaaa.eyJ", "a"), ("AKIA", "0")),
    "_PREFIXED": (
        ("://", "a"), ("://", ":"), ("a://b:", "a"), ("a:", "a"), ("a:", "%"), ("@", "a"),
        ("authorization:", " "), ("hooks.slack.com/services/", "a"),
    ),
    "_KEY": (("password", "a"), ("pass", "_"), ("token", "."), ("key", "-"), ("password", " "), ('"pwd"', "=")),
    "_VALUE": (('"', "a"), ("'", " "), ('\\"', "a"), ('\\"', "\\")),
    "_PASSWORD_COMMAND": (("mysql", "a"), ("mysql", "-"), ("mariadb", " "), ("sshpass", " ")),
    "_PASSWORD_FLAG": ((" -p", "a"), ("mysql -p", " "), ("sshpass -p ", "'")),
    "_ERROR_CODE": (("ERR_", "A"), ("ERR_", "_")),
    "_CAMEL": (("aA", "a"),),
    "_SEGMENTS": (("_", "a"), ("-.", "_")),
    "_LINE_CONTROLS": (("\x1b[", "a"), ("\u202e", "\n")),
    "_MULTILINE_CONTROLS": (("\r", "\n"), ("\x1b]52;", "\r")),
}  # fmt: skip
# mask() runs every pattern (and the Python that pairs their matches) on each text: the
# pairs that reach those loops, on top of the patterns' own.
MASK_HOSTILE = (
    ("a", "a"), ("://", "a"), ("pass", "a"), ("password:", '"'), ("password=", "="), ("token", "_"),
    ("DB_PASSWORD:", " "), ("mysql", " "), (" -p", "x"), ("sshpass -p ", "x"), ("eyJ", "a"), ("a:", "a"),
    ("-----BEGIN PRIVATE KEY-----", "-----END "), ("bearer ", " "), ('\\"password\\": \\"', "a"),
    (".aws/credentials: ", "ERR_X "),
)  # fmt: skip


def _patterns() -> dict[str, re.Pattern[str]]:
    return {name: value for name, value in vars(secrets).items() if isinstance(value, re.Pattern)}


def _hostile(needle: str, run: str, size: int) -> list[str]:
    long_run = run * ((size - len(needle)) // len(run))
    return [
        needle + long_run,
        long_run + needle,
        *((needle + run * gap) * (size // (len(needle) + len(run) * gap)) for gap in (0, 1)),
    ]


def _seconds(work: Callable[[str], object], text: str) -> float:
    """The CPU seconds of the work, not the wall clock's: the suite runs on every core at once
    (pytest -n), and a thread waiting for its turn must not look like a quadratic pattern."""
    started = time.thread_time()
    work(text)
    return time.thread_time() - started


def assert_linear(work: Callable[[str], object], needle: str, run: str) -> list[tuple[float, float]]:
    """1 MB under a second, 2 MB under 3.5 times that, in CPU time (more measures of each before
    that fails: the machine is shared). A quadratic pattern takes 4 times as long on twice the
    text, and already fails the 64 kB bound. Returns the (1 MB, 2 MB) seconds of each shape."""
    timings = []
    for shape, (small, one, two) in enumerate(
        zip(_hostile(needle, run, 64_000), _hostile(needle, run, MB), _hostile(needle, run, 2 * MB), strict=True)
    ):
        where = f"needle {needle!r}, run {run!r}, shape {shape}"
        assert min(_seconds(work, small), _seconds(work, small)) < 0.25, f"{where}: 64 kB already slow (quadratic?)"
        t1, t2 = _seconds(work, one), _seconds(work, two)
        for _ in range(4):  # the best of five when the first measures fail: caches are shared too
            if t2 > 3 * t1 or t1 >= 1.0:
                t1, t2 = min(t1, _seconds(work, one)), min(t2, _seconds(work, two))
        assert t1 < 1.0, f"{where}: 1 MB took {t1:.2f} s"
        assert t2 < 3.5 * max(t1, 0.02), f"{where}: 1 MB {t1:.3f} s, 2 MB {t2:.3f} s"
        timings.append((t1, t2))
    return timings


def test_every_pattern_has_hostile_inputs() -> None:
    assert set(_patterns()) == set(HOSTILE)


@pytest.mark.parametrize("name", sorted(HOSTILE))
def test_each_pattern_is_linear_on_runs_next_to_its_needles(name: str) -> None:
    pattern = _patterns()[name]
    for needle, run in HOSTILE[name]:
        assert_linear(lambda text: sum(1 for _ in pattern.finditer(text)), needle, run)


@pytest.mark.slow
@pytest.mark.parametrize(("needle", "run"), MASK_HOSTILE, ids=[repr(p[0]) for p in MASK_HOSTILE])
def test_mask_is_linear_on_hostile_text(needle: str, run: str) -> None:
    assert_linear(mask, needle, run)


def test_the_literal_values_masker_is_linear_with_hundreds_of_values() -> None:
    values = [f"value-{n:04d}-{'q' * (n % 17)}" for n in range(400)]
    apply = literal_masker(values)
    for needle in ("value-0001-", values[7]):
        assert_linear(apply, needle, "q")


def test_the_file_values_masker_is_linear_on_spaced_and_split_runs() -> None:
    """A value spaced out or split over lines is found in the text without its whitespace and
    mapped back (secret_files.spread_masker): runs of whitespace, of near-misses of a spread
    value and of its pieces cost a pass each, not one per gap."""
    value = "q7Lm2Xp9Rt4Vb6Nz"
    apply = value_masker(spellings(value.encode()))
    for needle, run in (
        (" ".join(value), " "),
        (" ".join(value[:-1]), " q"),
        (value[:8] + "\n", "\n"),
        (value, " "),
        ("q 7", " q"),
        ("\n", "q7Lm\n"),
    ):
        assert_linear(apply, needle, run)
