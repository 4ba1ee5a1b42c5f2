"""`git papayu local-server`: the embedded llama.cpp server in the foreground, for reuse."""

from __future__ import annotations

from urllib.parse import urlsplit

import click

from papayu_git import output, settings
from papayu_git.error_handler import handle_errors
from papayu_git.llm import local


def run(port: int, as_json: bool = False) -> int:
    spec = local.server_spec(None, port)
    proc, ready_fd = local.launch(spec, None)  # its log goes to this terminal
    try:
        with output.progress(f"loading {spec.model.name}"):
            timeout = float(settings.get_int("local_start_timeout_sec"))
            base_url = local.wait_until_ready(spec, proc, ready_fd, None, timeout) + "/v1"
        _say_served(spec, base_url, as_json)
        code = proc.wait()
    except KeyboardInterrupt:
        local.stop(proc)
        return 0
    except BaseException:
        local.stop(proc, 0)
        raise
    if code < 0:
        raise local.died(code, proc.pid, spec.n_ctx)
    return code


def _say_served(spec: local.ServerSpec, base_url: str, as_json: bool) -> None:
    # A reusing command reads the window from the server's /props; the variable saves it the question.
    info = {"base_url": base_url, "model": str(spec.model), "port": urlsplit(base_url).port}
    if as_json:
        output.emit_json({**info, "n_ctx": spec.n_ctx})
        return
    output.result(f"serving {spec.model.name} at {base_url} (Ctrl-C stops it)")
    output.result(f"from other shells: export PAPAYU_LLM_BASE_URL={base_url} PAPAYU_LLM_CONTEXT_TOKENS={spec.n_ctx}")


@click.command("local-server")
@click.option("--port", type=int, default=0, help="Port on 127.0.0.1 (default: a free one).")
@click.option("--json", "as_json", is_flag=True, help="Print the base URL and model as JSON once it is loaded.")
def command(port: int, as_json: bool) -> None:
    """Run the embedded local model (llama.cpp's server, Gemma 3 270M) in the foreground.

    \b
    papayu starts this server by itself when no provider is configured, and stops it
    afterwards; run it here once to reuse it across commands:
      export PAPAYU_LLM_BASE_URL=http://127.0.0.1:PORT/v1
    Needs: pip install 'papayu-git[local]'.
    """
    with handle_errors(as_json):
        raise SystemExit(run(port, as_json))
