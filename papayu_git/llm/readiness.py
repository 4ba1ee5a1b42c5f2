"""Whether a model can answer here, decided before a command gathers context, prepares a checkout
or starts a model (docs/DESIGN.md, "Providers": can a model answer).

Milliseconds, nothing started and nothing sent: the configuration parses; OpenAI has its key; the
embedded model's llama.cpp and model file are installed; a configured server's port accepts a
connection. A definite no is the PapayuError that names what to configure. A probe that cannot
tell (a slow network, a name that resolves slowly) lets the command go on: the request decides.
"""

from __future__ import annotations

import socket
import threading
import urllib.request
from typing import NamedTuple
from urllib.parse import urlsplit

from papayu_git import output
from papayu_git.errors import PapayuError
from papayu_git.llm import local
from papayu_git.llm.config import LLMConfig, Provider, load_config, require_api_key

CONNECT_TIMEOUT_SEC = 1.0


class Reach(NamedTuple):
    problem: str  # "" when a connection opened
    certain: bool  # the problem is a definite no (refused, no such host), not a probe that ran out of time


def reach(base_url: str, timeout: float = CONNECT_TIMEOUT_SEC) -> Reach:
    """Whether a TCP connection opens within ``timeout`` to where a request for the URL goes: its
    host, or the proxy the environment names for it (as httpx does)."""
    try:
        host, port = _first_hop(base_url)
    except ValueError:
        return Reach("the URL has an invalid port", True)
    outcome: list[Reach] = []

    def attempt() -> None:
        try:
            with socket.create_connection((host, port), timeout=timeout):
                outcome.append(Reach("", True))
        except ConnectionRefusedError as exc:
            outcome.append(Reach(str(exc), True))
        except socket.gaierror as exc:  # no such name is certain; a resolver that failed this time is not
            outcome.append(Reach(f"{host}: {exc}", exc.errno != socket.EAI_AGAIN))
        except OSError as exc:
            outcome.append(Reach(str(exc) or type(exc).__name__, False))

    # Name resolution has no timeout of its own: the attempt runs aside and is given up on.
    worker = output.start_thread(threading.Thread(target=attempt, daemon=True))
    worker.join(timeout + 0.2)
    return outcome[0] if outcome else Reach(f"no answer within {timeout:g} s", False)


def _first_hop(base_url: str) -> tuple[str, int]:
    parts = urlsplit(base_url)
    proxies = urllib.request.getproxies()
    proxy = proxies.get(parts.scheme) or proxies.get("all")
    if proxy and not urllib.request.proxy_bypass(parts.hostname or ""):
        parts = urlsplit(proxy if "://" in proxy else f"http://{proxy}")
    return parts.hostname or "", parts.port or (443 if parts.scheme == "https" else 80)


def require_model(cwd: str | None = None) -> LLMConfig:
    """The model configuration once a model can answer as far as can be told at once; else the
    PapayuError naming what to configure."""
    config = load_config(cwd)
    require_api_key(config)
    if config.provider is Provider.LOCAL:
        local.require_installed(cwd)
        return config
    found = reach(config.base_url)
    if found.problem and found.certain:
        raise PapayuError(
            "ERR_LLM_CONNECT",
            f"nothing answers at {config.base_url} ({found.problem}); nothing was sent and nothing was started",
            hint="Start that server, or point papayu at another: PAPAYU_LLM_BASE_URL (git config papayu.llm.baseUrl); "
            "unset both it and PAPAYU_LLM_PROVIDER for the embedded model (README: Providers).",
        )
    return config
