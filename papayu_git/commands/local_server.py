"""`git papayu local-server`: the embedded llama.cpp server in the foreground, for reuse."""

from __future__ import annotations

import subprocess

import click

from papayu_git import output
from papayu_git.error_handler import handle_errors
from papayu_git.llm import local


def run(port: int | None, as_json: bool = False) -> int:
    spec = local.server_spec(None, port)
    # llama-cpp-python's server does not report its window: the commands that reuse it are told.
    info = {"base_url": spec.base_url, "model": str(spec.model), "port": spec.port, "n_ctx": spec.n_ctx}
    if as_json:
        output.emit_json(info)
    else:
        output.result(f"serving {spec.model.name} at {spec.base_url} (Ctrl-C stops it)")
        output.result(
            f"use it from other shells: export PAPAYU_LLM_BASE_URL={spec.base_url} PAPAYU_LLM_CONTEXT_TOKENS={spec.n_ctx}"
        )
    proc = subprocess.Popen(spec.argv(watch_parent=True), stdin=subprocess.DEVNULL, env=local.server_env())
    try:
        code = proc.wait()
    except KeyboardInterrupt:
        local.stop(proc)
        return 0
    if code < 0:
        raise local.died(code, proc.pid, spec.n_ctx)
    return code


@click.command("local-server")
@click.option("--port", type=int, help="Port on 127.0.0.1 (default: a free one).")
@click.option("--json", "as_json", is_flag=True, help="Print the base URL and model as JSON first.")
def command(port: int | None, as_json: bool) -> None:
    """Run the embedded local model (llama.cpp server, Gemma 3 270M) in the foreground.

    \b
    papayu starts this server by itself when no provider is configured, and stops it
    afterwards; run it here once to reuse it across commands:
      export PAPAYU_LLM_BASE_URL=http://127.0.0.1:PORT/v1
    Needs: pip install 'papayu-git[local]'.
    """
    with handle_errors(as_json):
        raise SystemExit(run(port, as_json))
