"""Every module of the package imports first, in a fresh interpreter: an import cycle that one
import order hides (the test suite's) fails here, not on a user's first command."""

from __future__ import annotations

import pkgutil
import subprocess
import sys

import papayu_git


def test_every_module_imports_on_its_own() -> None:
    names = sorted(
        m.name
        for m in pkgutil.walk_packages(papayu_git.__path__, "papayu_git.")
        if not m.name.startswith("papayu_git.schema_validators.") and not m.name.endswith("__main__")
    )
    script = (
        "import subprocess, sys\n"
        "bad = []\n"
        "for name in sys.argv[1:]:\n"
        "    p = subprocess.run([sys.executable, '-c', 'import ' + name], capture_output=True, text=True)\n"
        "    if p.returncode:\n"
        "        bad.append(name + ': ' + (p.stderr.strip().splitlines() or ['?'])[-1])\n"
        "print('\\n'.join(bad))\n"
    )
    proc = subprocess.run([sys.executable, "-c", script, *names], capture_output=True, text=True, timeout=300)
    assert len(names) > 60 and proc.stdout.strip() == "", proc.stdout
