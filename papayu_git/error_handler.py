"""Maps exceptions to exit codes: 0 ok, 1 PapayuError, 2 usage, 3 bug, 130 ^C, 143 SIGTERM, 129 SIGHUP."""

from __future__ import annotations

import os
import sys
import time
from collections.abc import Iterator
from contextlib import contextmanager

import click

from papayu_git import output
from papayu_git.errors import PapayuError
from papayu_git.secrets import mask, safe_text

EXIT_OK, EXIT_FAILURE, EXIT_USAGE, EXIT_BUG, EXIT_INTERRUPTED = 0, 1, 2, 3, 130


class Terminated(KeyboardInterrupt):
    """SIGTERM / SIGHUP, handled like Ctrl-C: the check's process group is killed, the
    transaction rolls back, and papayu exits 128 + the signal number (143, 129)."""

    def __init__(self, signum: int) -> None:
        super().__init__(signum)
        self.signum = signum


def _terminate(signum: int, _frame: object) -> None:
    raise Terminated(signum)


def install_signal_handlers() -> None:
    import signal

    for sig in (signal.SIGTERM, signal.SIGHUP):
        signal.signal(sig, _terminate)


def _write_crash_report(exc: BaseException) -> str:
    import tempfile  # only on the crash path: ~6 ms of imports every command would pay
    import traceback

    fd, path = tempfile.mkstemp(prefix=f"papayu-crash-{time.strftime('%Y%m%d-%H%M%S')}-", suffix=".log")
    with os.fdopen(fd, "w", encoding="utf-8") as f:
        f.write(mask("".join(traceback.format_exception(exc))))
    return path


@contextmanager
def handle_errors(json_output: bool = False) -> Iterator[None]:
    try:
        yield
    except PapayuError as exc:
        if json_output:  # emit_json masks
            output.emit_json({"ok": False, "errors": [e.to_dict() for e in getattr(exc, "errors", [exc])]})
        else:
            output.error(safe_text(exc.format(), multiline=True))
        sys.exit(EXIT_FAILURE)
    except (KeyboardInterrupt, click.Abort) as exc:  # Abort: Ctrl-C or Ctrl-D at one of click's questions
        # What the interruption left behind, when the step it cut says so (notes on the exception:
        # what happened, then the next steps), instead of a bare "interrupted".
        notes = [safe_text(note) for note in getattr(exc, "__notes__", ())]
        said = f" {notes[0]}" if notes else ""
        steps = "".join(f"\n  {step}" for step in notes[1:])
        if isinstance(exc, Terminated):
            import signal

            output.error(f"terminated by {signal.Signals(exc.signum).name}{said}{steps}")
            sys.exit(128 + exc.signum)
        output.error(f"interrupted{said}{steps}")
        sys.exit(EXIT_INTERRUPTED)
    except BrokenPipeError:
        # `papayu list --json | head`: the reader left; like git, stop quietly. Point stdout
        # at /dev/null so the interpreter's final flush does not raise again.
        os.dup2(os.open(os.devnull, os.O_WRONLY), sys.stdout.fileno())
        sys.exit(EXIT_OK)
    except (SystemExit, GeneratorExit):
        raise
    except Exception as exc:  # anything else escaping is a bug (docs/ARCHITECTURE.md, "Conventions")
        report = _write_crash_report(exc)

        output.error(
            f"ERR_INTERNAL: {type(exc).__name__}: {safe_text(exc, multiline=True)}\n"
            f"This is a bug in papayu; the traceback is in {report}"
        )
        sys.exit(EXIT_BUG)
