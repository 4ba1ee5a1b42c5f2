"""Which model papayu talks to, and how (docs/DESIGN.md, "Providers").

Settings come from `papayu_git.settings` (environment, then `git config papayu.llm.*`).
API keys come only from the environment and are never read from git config, never written to
plans, traces or logs (``snapshot`` omits them). PAPAYU_LLM_API_KEY goes to the configured
server; OPENAI_API_KEY only to OpenAI's own API (a key for one service is not handed to whatever
URL is configured). No key crosses plain http unless the server is on this machine.
"""

from __future__ import annotations

import os
from dataclasses import dataclass, replace
from enum import StrEnum
from urllib.parse import urlsplit

from papayu_git import settings
from papayu_git.errors import PapayuError
from papayu_git.net import may_carry_credentials

OPENAI_HOST = "api.openai.com"
OPENAI_BASE_URL = f"https://{OPENAI_HOST}/v1"
OPENAI_DEFAULT_MODEL = "gpt-4o-mini"
OLLAMA_BASE_URL = "http://127.0.0.1:11434"
LOCAL_MODEL_NAME = "gemma-3-270m-q4_k_m"
SERVER_TIMEOUT_SEC = 90.0
LOCAL_TIMEOUT_SEC = 900.0

# Generation parameters: 16384 tokens, capped at 4096 when the input is > 80k chars, so a long
# prompt still leaves the server room to answer (docs/DESIGN.md, "Providers").
DEFAULT_MAX_TOKENS = 16384
LARGE_INPUT_MAX_TOKENS = 4096
LARGE_INPUT_CHARS = 80_000


class Provider(StrEnum):
    OPENAI = "openai"
    OPENAI_COMPATIBLE = "openai-compatible"
    OLLAMA = "ollama"  # native /api/chat with `format` = JSON schema
    LOCAL = "local"  # embedded llama.cpp server (papayu-git[local])


@dataclass(frozen=True)
class LLMConfig:
    provider: Provider
    base_url: str
    model: str
    api_key: str = ""
    strict_json: bool = True
    timeout_sec: float = SERVER_TIMEOUT_SEC
    retries: int = 3
    backoff_sec: float = 1.0
    max_tokens_cap: int = 0  # 0: no cap beyond the 16384/4096 rule above
    context_tokens: int = 0  # the model's window when the server does not say (llm/window.py); 0: ask it
    temperature: float = 0.0  # deterministic, but for a best-of candidate sampled wider (bestof/sampling.py)

    def with_base_url(self, base_url: str) -> LLMConfig:
        """The same settings for papayu's own embedded server at ``base_url``: no key goes there."""
        return replace(self, base_url=base_url, api_key="")

    def max_tokens(self, input_chars: int) -> int:
        budget = LARGE_INPUT_MAX_TOKENS if input_chars > LARGE_INPUT_CHARS else DEFAULT_MAX_TOKENS
        return min(budget, self.max_tokens_cap) if self.max_tokens_cap > 0 else budget


def is_openai_api(base_url: str) -> bool:
    parts = urlsplit(base_url)
    return parts.scheme.lower() == "https" and (parts.hostname or "").lower() == OPENAI_HOST


def api_key_source(provider: Provider, base_url: str) -> str | None:
    """The environment variable whose key goes to ``base_url``, None when no key is sent."""
    if provider is Provider.LOCAL:
        return None  # the embedded server is papayu's own: it needs no key
    if os.environ.get("PAPAYU_LLM_API_KEY"):
        return "PAPAYU_LLM_API_KEY"
    if os.environ.get("OPENAI_API_KEY") and is_openai_api(base_url):
        return "OPENAI_API_KEY"
    return None


def require_api_key(config: LLMConfig) -> None:
    """OpenAI's API without a key would answer 401 after a round trip: said before any request."""
    if config.api_key or not is_openai_api(config.base_url):
        return
    raise PapayuError(
        "ERR_LLM_CONFIG",
        f"provider {config.provider.value} at {config.base_url} needs an API key, and none is set",
        # Never `NAME=value`: papayu masks whatever follows a key's name, and a placeholder printed
        # as `NAME=***` reads as a real key that was hidden (secrets.mask).
        hint="Set the environment variable OPENAI_API_KEY (or PAPAYU_LLM_API_KEY) to your API key, then run "
        "`git papayu doctor`, which shows what papayu uses.",
    )


def _api_key(provider: Provider, base_url: str) -> str:
    source = api_key_source(provider, base_url)
    if source is None:
        return ""
    if not may_carry_credentials(base_url):
        raise PapayuError(
            "ERR_LLM_INSECURE_KEY",
            f"{source} would be sent over plain http to {urlsplit(base_url).hostname}",
            hint="Use an https:// base URL (plain http only to a server on this machine), "
            f"or unset {source} for a server that needs no key.",
        )
    return os.environ[source]


def _provider(raw: str, base_url: str) -> Provider:
    if not raw:
        # Nothing configured: the embedded model, unless a server URL was given, so `plan` works
        # without a key or a network (docs/DESIGN.md, "Providers").
        return Provider.OPENAI_COMPATIBLE if base_url else Provider.LOCAL
    aliases = {
        "compatible": "openai-compatible",
        "openai_compatible": "openai-compatible",
        "llamacpp": "openai-compatible",
        "llama.cpp": "openai-compatible",
        "vllm": "openai-compatible",
        "lmstudio": "openai-compatible",
    }
    try:
        return Provider(aliases.get(raw.strip().lower(), raw.strip().lower()))
    except ValueError:
        raise PapayuError(
            "ERR_LLM_CONFIG",
            f"unknown provider {raw!r}",
            hint="PAPAYU_LLM_PROVIDER is one of: openai, openai-compatible, ollama, local.",
        ) from None


def _float(name: str, cwd: str | None) -> float:
    try:
        return float(settings.get(name, cwd))
    except ValueError:
        raise PapayuError("ERR_LLM_CONFIG", f"{name} must be a number, got {settings.get(name, cwd)!r}") from None


def _timeout_sec(provider: Provider, cwd: str | None) -> float:
    """A server's answer is waited for 90 s; the embedded model's, generated on this machine's CPU,
    takes minutes on a busy one (docs/FEATURES.md, "The local model")."""
    if settings.get("llm_timeout_sec", cwd).strip():
        return _float("llm_timeout_sec", cwd)
    return LOCAL_TIMEOUT_SEC if provider is Provider.LOCAL else SERVER_TIMEOUT_SEC


def load_config(cwd: str | None = None) -> LLMConfig:
    return config_for(
        settings.get("llm_provider", cwd), settings.get("llm_model", cwd), settings.get("llm_base_url", cwd), cwd
    )


def config_for(provider_name: str, model: str, base_url: str, cwd: str | None = None) -> LLMConfig:
    """The configuration of one model: ``provider_name``/``model`` at ``base_url`` (each may be
    empty, as in the settings), with every other setting and the key rules as for the configured
    one. `load_config` is this with the settings; best-of asks several (papayu.candidates.models)."""
    base_url = base_url.strip().rstrip("/")
    provider = _provider(provider_name, base_url)
    model = model.strip()
    if provider is Provider.OPENAI:
        # OpenAI's own default model only for OpenAI; another server is asked what it serves.
        own = not base_url or base_url == OPENAI_BASE_URL
        base_url, model = base_url or OPENAI_BASE_URL, model or (OPENAI_DEFAULT_MODEL if own else "")
    elif provider is Provider.OLLAMA:
        base_url = base_url or OLLAMA_BASE_URL
    elif provider is Provider.LOCAL:
        model = model or LOCAL_MODEL_NAME
    if provider is Provider.OPENAI_COMPATIBLE and not base_url:
        raise PapayuError(
            "ERR_LLM_CONFIG",
            "provider openai-compatible needs a base URL",
            hint="Set PAPAYU_LLM_BASE_URL, e.g. http://127.0.0.1:8080/v1.",
        )
    # An OpenAI-compatible server without a model name: the client asks its /models (llama.cpp,
    # vLLM, LM Studio and Ollama /v1 all list what they serve). Ollama's native API cannot.
    if provider is Provider.OLLAMA and not model:
        raise PapayuError(
            "ERR_LLM_CONFIG",
            f"provider {provider.value} needs a model name",
            hint="Set PAPAYU_LLM_MODEL (or git config papayu.llm.model).",
        )
    return LLMConfig(
        provider=provider,
        base_url=base_url,
        model=model,
        api_key=_api_key(provider, base_url),
        strict_json=settings.get_bool("llm_strict_json", cwd),
        timeout_sec=_timeout_sec(provider, cwd),
        retries=max(0, settings.get_int("llm_retries", cwd)),
        backoff_sec=_float("llm_backoff_sec", cwd),
        max_tokens_cap=max(0, settings.get_int("llm_max_tokens", cwd)),
        context_tokens=max(0, settings.get_int("llm_context_tokens", cwd)),
    )
