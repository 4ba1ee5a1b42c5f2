"""papayu's start-up hook in the check's Python processes (docs/DESIGN.md, "A verdict per test":
unittest).

Copied as `sitecustomize.py` into papayu's read-only helpers directory, which is on the check's
PYTHONPATH: Python's `site` imports it in every interpreter of the check that reads PYTHONPATH
(not under `-I`, `-E` or `-S`). It does two things and nothing else at start-up: it waits for
`unittest` to be imported (a finder at the front of `sys.meta_path` that only looks at unittest's
names), then, once the package's own code ran and before whoever imported it goes on, has papayu's
unittest reporter (`papayu_unittest_results`, beside it) extend unittest's base result class and
install the runtime shield with unittest's reporting path as it is then (docs/DESIGN.md, "The
runtime shield"); unittest's modules imported later join that path the same way. And it runs the
`sitecustomize` it shadows (a distribution's, a virtualenv's), so start-up is otherwise what it
was. A process that never imports unittest pays a name comparison or two per import. It never
raises: a hook that fails leaves the run as it was, and the results papayu then misses are said.
"""

from __future__ import annotations

import importlib.machinery
import importlib.util
import os
import sys
from typing import Any

_HERE = os.path.dirname(os.path.abspath(__file__))
_WATCHED = "unittest"
_reporter: list[Any] = []  # papayu's unittest reporter, once unittest is imported


class _UnittestFinder:
    """Finds nothing; when unittest or one of its modules is found by the others, runs papayu's
    reporter right after the module's own code."""

    def __init__(self) -> None:
        self.busy = False

    def find_spec(self, name: str, path: Any = None, target: Any = None) -> Any:
        if self.busy or not (name == _WATCHED or (_reporter and name.startswith("unittest."))):
            return None
        self.busy = True
        try:
            spec = importlib.machinery.PathFinder.find_spec(name, path)
        finally:
            self.busy = False
        if spec is None or spec.loader is None or not hasattr(spec.loader, "exec_module"):
            return None
        run_module = spec.loader.exec_module

        def exec_module(module: Any) -> None:
            run_module(module)
            if name == _WATCHED:
                _extend()
            else:
                _loaded(name)

        spec.loader.exec_module = exec_module  # type: ignore[method-assign]
        return spec


def _extend() -> None:
    try:
        sys.path.insert(0, _HERE)
        try:
            import papayu_unittest_results
        finally:
            sys.path.remove(_HERE)
        _reporter.append(papayu_unittest_results)
        papayu_unittest_results.install(sys.modules["unittest.result"].TestResult)
    except Exception:  # papayu's hook must never be why a check fails
        pass


def _loaded(name: str) -> None:
    try:
        _reporter[0].loaded(name)
    except Exception:
        pass


def _shadowed() -> None:
    """The `sitecustomize` this one stands before on sys.path, run as it would have been."""
    path = [p for p in sys.path if os.path.abspath(p or os.curdir) != _HERE]
    spec = importlib.machinery.PathFinder.find_spec("sitecustomize", path)
    if spec is None or spec.loader is None:
        return
    module = importlib.util.module_from_spec(spec)
    sys.modules["sitecustomize"] = module
    spec.loader.exec_module(module)


if "unittest" in sys.modules:
    _extend()
sys.meta_path.insert(0, _UnittestFinder())
_shadowed()
