"""`git papayu --help` stays fast: building the help imports click only, no heavy library."""

from __future__ import annotations

import json
import subprocess
import sys

HEAVY = [
    "pygit2",
    "httpx",
    "httpcore",
    "jsonschema",
    "fastjsonschema",
    "unidiff",
    "mcp",
    "mcp_types",
    "anyio",
    "trafilatura",
]

PROBE = """
import contextlib, io, json, sys
from papayu_git import cli
out = io.StringIO()
with contextlib.redirect_stdout(out):
    try:
        cli.main(sys.argv[1:])
    except SystemExit as exc:
        code = exc.code
heavy = sorted({name.split(".")[0] for name in sys.modules} & set(%r))
print(json.dumps({"code": code, "help": out.getvalue(), "heavy": heavy}))
""" % (HEAVY,)


def probe(*args: str) -> dict:
    proc = subprocess.run([sys.executable, "-c", PROBE, *args], capture_output=True, text=True, timeout=60)
    assert proc.returncode == 0, proc.stderr
    return json.loads(proc.stdout)


def test_root_help_imports_no_heavy_library() -> None:
    result = probe("--help")
    assert result["code"] == 0
    assert "validate" in result["help"] and "Usage:" in result["help"]
    assert result["heavy"] == []


def test_every_command_help_imports_no_heavy_library() -> None:
    from papayu_git.cli import LAZY_COMMANDS

    for name in LAZY_COMMANDS:
        result = probe(name, "--help")
        assert result["code"] == 0 and "Usage:" in result["help"], name
        assert result["heavy"] == [], f"`papayu {name} --help` imports {result['heavy']}"


def test_the_probe_would_notice_a_heavy_import() -> None:
    proc = subprocess.run(
        [sys.executable, "-c", "import jsonschema\n" + PROBE, "--help"], capture_output=True, text=True, timeout=60
    )
    assert json.loads(proc.stdout)["heavy"] == ["jsonschema"]
