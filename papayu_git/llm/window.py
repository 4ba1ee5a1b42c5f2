"""The model's context window and what a request takes of it (docs/DESIGN.md, "The model's window").

Where the window comes from: the embedded server's own `n_ctx` (papayu started it), else
`papayu.llm.contextTokens`, else what the server says (llama.cpp `GET /props`, Ollama
`POST /api/show`); 0 means unknown and nothing is fitted. Tokens are counted by the server when
it offers a tokenizer (llama.cpp `/tokenize`, llama-cpp-python `/extras/tokenize/count`), else
estimated on the safe side from the UTF-8 length. Every server call here is cheap and cached
for the client's life; a failing one only means "unknown" or "estimated".
"""

from __future__ import annotations

import re
from collections.abc import Sequence
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any

from papayu_git.context.diet import TokenBudget
from papayu_git.errors import PapayuError
from papayu_git.llm.config import LLMConfig, Provider

if TYPE_CHECKING:
    import httpx

# Code and prose take 3.5-4.5 UTF-8 bytes per token in the tokenizers papayu meets (Gemma 3: 3.7
# on Python source); 3 over-counts, so an estimated request is cut a little more than it needs.
ESTIMATE_BYTES_PER_TOKEN = 3
# A chat template's turn markers (Gemma: `<start_of_turn>user\n` … `<end_of_turn>\n`, 5 tokens).
MESSAGE_OVERHEAD_TOKENS = 8
# The answer keeps a quarter of the window (or less when PAPAYU_LLM_MAX_TOKENS says so); a
# request whose prompt leaves less than MIN_ANSWER_TOKENS for the answer is not sent.
ANSWER_SHARE = 4
MIN_ANSWER_TOKENS = 256
# Ollama runs a model with whatever num_ctx it was given: papayu asks for the window it fits to,
# the model's own context_length at most this much (its memory grows with the window).
OLLAMA_MAX_NUM_CTX = 32768
_PROBE_TIMEOUT_SEC = 5.0

# Servers' words for a prompt over the window: llama-cpp-python, vLLM and OpenAI ("maximum context
# length is W tokens. However, you requested N tokens"), llama-server (exceed_context_size_error
# with n_prompt_tokens and n_ctx).
_OPENAI_STYLE = re.compile(r"maximum context length is (\d+) tokens.*?requested (\d+) tokens", re.S)
_LLAMA_SERVER = ("exceed_context_size_error", "exceeds the available context size")


@dataclass(frozen=True)
class ContextWindow:
    tokens: int  # 0: unknown
    source: str  # where the number came from, for messages and doctor
    tokenizer: str = ""  # the server's tokenize URL, "" when tokens are estimated


def estimate_tokens(text: str) -> int:
    return -(-len(text.encode("utf-8", "surrogatepass")) // ESTIMATE_BYTES_PER_TOKEN)


def server_root(config: LLMConfig) -> str:
    """The server's address without the API path: where /props, /tokenize and /api/show live."""
    base = config.base_url.rstrip("/")
    for suffix in ("/chat/completions", "/api/chat", "/v1"):
        base = base.removesuffix(suffix)
    return base


class ModelWindow:
    """One client's view of its model's window; the server is asked once, lazily."""

    def __init__(self, http: httpx.Client, config: LLMConfig, n_ctx: int = 0) -> None:
        self._http, self._config, self._n_ctx = http, config, n_ctx
        self._window: ContextWindow | None = None
        self._counts: dict[str, int] = {}

    def get(self) -> ContextWindow:
        if self._window is None:
            self._window = self._discover()
        return self._window

    @property
    def tokens(self) -> int:
        return self.get().tokens

    @property
    def known(self) -> ContextWindow | None:
        """The window if the server was already asked (for traces: never asks)."""
        return self._window

    def answer_reserve(self) -> int:
        """Tokens kept free for the answer when a request is fitted (0 when the window is unknown)."""
        return min(self._config.max_tokens(0), self.tokens // ANSWER_SHARE) if self.tokens else 0

    def count(self, text: str) -> int:
        if text not in self._counts:
            self._counts[text] = self._server_count(text) if self.get().tokenizer else estimate_tokens(text)
        return self._counts[text]

    def count_messages(self, messages: Sequence[dict[str, Any]]) -> int:
        return MESSAGE_OVERHEAD_TOKENS * (len(messages) + 1) + sum(
            self.count(str(m.get("content") or "")) for m in messages
        )

    # --- asking the server ------------------------------------------------------------
    def _discover(self) -> ContextWindow:
        root = server_root(self._config)
        provider = self._config.provider
        if provider is Provider.LOCAL and self._n_ctx:
            return ContextWindow(self._n_ctx, "the embedded server's n_ctx", root + "/tokenize")
        configured = self._config.context_tokens
        if provider is Provider.OLLAMA:
            told = configured or self._ollama_num_ctx(root)
            return ContextWindow(told, "papayu.llm.contextTokens" if configured else "Ollama /api/show")
        props = self._json("GET", root + "/props") if provider is Provider.OPENAI_COMPATIBLE else None
        n_ctx = _props_n_ctx(props)
        tokenizer = root + "/tokenize" if n_ctx else ""
        if configured:
            return ContextWindow(configured, "papayu.llm.contextTokens", tokenizer)
        return ContextWindow(n_ctx, "llama.cpp /props" if n_ctx else "unknown", tokenizer)

    def _ollama_num_ctx(self, root: str) -> int:
        shown = self._json("POST", root + "/api/show", {"model": self._config.model})
        if not isinstance(shown, dict):
            return 0
        found = re.search(r"^\s*num_ctx\s+(\d+)", str(shown.get("parameters") or ""), re.M)
        if found:
            return int(found.group(1))
        info = shown.get("model_info")
        lengths = [v for k, v in (info.items() if isinstance(info, dict) else []) if k.endswith(".context_length")]
        return min(int(lengths[0]), OLLAMA_MAX_NUM_CTX) if lengths and isinstance(lengths[0], int) else 0

    def _server_count(self, text: str) -> int:
        url = self.get().tokenizer
        body = {"input": text} if url.endswith("/count") else {"content": text}
        data = self._json("POST", url, body)
        if isinstance(data, dict) and isinstance(data.get("count"), int):
            return int(data["count"])
        if isinstance(data, dict) and isinstance(data.get("tokens"), list):
            return len(data["tokens"])
        return estimate_tokens(text)

    def _json(self, method: str, url: str, body: dict[str, Any] | None = None) -> Any:
        import httpx

        try:
            response = self._http.request(method, url, json=body, timeout=_PROBE_TIMEOUT_SEC)
            return response.json() if response.status_code == 200 else None
        except (httpx.HTTPError, ValueError):
            return None


def _props_n_ctx(props: Any) -> int:
    if not isinstance(props, dict):
        return 0
    settings = props.get("default_generation_settings")
    for value in (settings.get("n_ctx") if isinstance(settings, dict) else None, props.get("n_ctx")):
        if isinstance(value, int) and not isinstance(value, bool) and value > 0:
            return value
    return 0


@dataclass(frozen=True)
class Room:
    """What one context may take of the window: the rest of the request and the answer's reserve
    stay free (docs/DESIGN.md, "The model's window")."""

    window: ModelWindow
    fixed: int  # the request's tokens without the context
    reserve: int  # kept for the answer

    @property
    def free(self) -> int:
        return self.window.tokens - self.reserve - self.fixed

    def budget(self, share: int = 1) -> TokenBudget:
        return TokenBudget(max(self.free // share, 0), self.window.count)

    def check(self, context: str) -> None:
        """ERR_LLM_CONTEXT_WINDOW when the context, cut as far as the diet goes, still does not fit."""
        used = self.window.count(context)
        if used > self.free:
            raise too_small(self.fixed + used, self.reserve, self.window.get())


def room(window: ModelWindow, messages: Sequence[dict[str, Any]], skeleton: str) -> Room | None:
    """The room for a context that goes into ``skeleton``, the next user message, after ``messages``;
    None when the window is unknown (nothing is fitted)."""
    if not window.tokens:
        return None
    fixed = window.count_messages([*messages, {"role": "user", "content": skeleton}])
    return Room(window, fixed, window.answer_reserve())


def too_small(prompt: int, answer: int, window: ContextWindow, *, cut: bool = True) -> PapayuError:
    """``cut``: the context is at the diet's floor; else the conversation grew (a repair) past the window."""
    how = " with the context cut to its minimum" if cut else " as the conversation stands"
    return PapayuError(
        "ERR_LLM_CONTEXT_WINDOW",
        f"the request needs {prompt + answer} tokens ({prompt} prompt, {answer} for the answer){how}, "
        f"but the model's window is {window.tokens} tokens ({window.source})",
    )


def server_rejection(body: str) -> tuple[int, int] | None:
    """(requested tokens, window) from a server's "too long" answer, None when it is not one."""
    found = _OPENAI_STYLE.search(body)
    if found:
        return int(found.group(2)), int(found.group(1))
    if any(words in body for words in _LLAMA_SERVER):
        prompt, n_ctx = re.search(r'n_prompt_tokens"?:\s*(\d+)', body), re.search(r'n_ctx"?:\s*(\d+)', body)
        return (int(prompt.group(1)) if prompt else 0), (int(n_ctx.group(1)) if n_ctx else 0)
    return None


def rejected(url: str, requested: int, window: int, config: LLMConfig) -> PapayuError:
    """A server refused the request as too long for its window, which papayu did not know."""
    return PapayuError(
        "ERR_LLM_CONTEXT_WINDOW",
        f"{url} refused a request of {requested or 'more'} tokens: its window is {window or 'smaller'} tokens",
        hint=f"Tell papayu the window so that it fits the request: PAPAYU_LLM_CONTEXT_TOKENS={window or 'N'} "
        f"(git config papayu.llm.contextTokens) for {config.provider.value} at {config.base_url}.",
    )
