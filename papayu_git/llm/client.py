"""HTTP side of the LLM layer (docs/DESIGN.md, "Providers"): the one place that owns httpx for model calls.

`ChatClient.complete` sends one chat request and returns the model's text. It speaks OpenAI
Chat Completions (OpenAI, llama.cpp server, vLLM, LM Studio, Ollama /v1) and Ollama's native
/api/chat. Generation is deterministic (temperature 0, top_p 1) unless the configuration asks for
another temperature (a best-of candidate, bestof/sampling.py). It retries under the shared
policy (net.RetryPolicy: 429, 5xx and connection errors, never a timeout), drops
`response_format` once when the server rejects it (LLM_RESPONSE_FORMAT_FALLBACK), and ends
every failure in an ERR_LLM_* code. When the model's window is known (llm/window.py) the answer
budget is what the prompt leaves of it, and a prompt that leaves too little is not sent
(ERR_LLM_CONTEXT_WINDOW). A server that dies under a request is ERR_LLM_SERVER_DIED, not a
connection problem (docs/DESIGN.md, "The model's window" and "A model server that dies").

`ChatClient.chat_with_tools` is agent mode's turn: OpenAI-style function calling over the same
transport, retry policy and error mapping. A server that refuses tools ends in ERR_LLM_NO_TOOLS.
"""

from __future__ import annotations

import itertools
import json
import time
from collections.abc import Callable
from dataclasses import dataclass, field, replace
from typing import TYPE_CHECKING, Any

from papayu_git import output
from papayu_git.errors import PapayuError
from papayu_git.llm import window as windows
from papayu_git.llm.config import LLMConfig, Provider
from papayu_git.llm.wire_schema import format_name_info, grammar_schema
from papayu_git.net import RetryPolicy, credentials_stay_home, retryable_status, send_with_retries
from papayu_git.secrets import mask

if TYPE_CHECKING:
    import httpx

    from papayu_git.llm.local import LocalServer

# Words of a server's complaint about response_format (OpenAI, vLLM, llama.cpp, LM Studio, Ollama).
LOCAL_REPEAT_PENALTY = 1.1
_FORMAT_WORDS = ("response_format", "json_schema", "json_object", "structured output")
# Words of a server's refusal of function calling: Ollama "does not support tools", vLLM "auto tool
# choice requires --enable-auto-tool-choice", llama-server "tools param requires --jinja flag", a
# strict server's 422 naming the unknown `tools` field, an old server's `functions`.
_TOOL_WORDS = ("tool", "function")
# Tool words that do not mean "no tools": OpenAI counts the tokens "in the functions" when the
# context is exceeded, and a complaint about the conversation (a tool message without its call)
# is a fault of the agent loop, not of the server.
_NOT_A_TOOL_REFUSAL = ("context length", "context_length", "context window", "messages")
# Providers whose tool calling works with papayu (named in the hint for the embedded model).
TOOL_PROVIDERS = "openai, openai-compatible (a server and model with tool calling), ollama (a model with tools)"


@dataclass(frozen=True)
class ToolCall:
    id: str  # the provider's tool_call id; Ollama gives none, so papayu numbers them ("call_<n>")
    name: str  # "" when the model left it out: the agent answers with an error tool result
    arguments: str  # the raw JSON text of the arguments, unparsed: the agent validates it


@dataclass(frozen=True)
class ToolTurn:
    content: str  # the assistant's text ("" when it only calls tools)
    tool_calls: tuple[ToolCall, ...]
    finish_reason: str
    usage: dict[str, Any]  # prompt/completion tokens when the server reports them
    model_sec: float
    # What the agent appends to the conversation for the next turn, in OpenAI's shape whatever
    # the provider (chat_with_tools converts it back for Ollama).
    assistant_message: dict[str, Any]


@dataclass(frozen=True)
class ChatReply:
    text: str
    model_sec: float
    finish_reason: str = ""
    usage: dict[str, Any] = field(default_factory=dict)
    max_tokens: int = 0  # the answer budget sent


def chat_url(config: LLMConfig) -> str:
    base = config.base_url.rstrip("/")
    if config.provider is Provider.OLLAMA:
        return base if base.endswith("/api/chat") else base.removesuffix("/v1") + "/api/chat"
    if base.endswith("/chat/completions"):
        return base
    return base + "/chat/completions" if base.endswith("/v1") else base + "/v1/chat/completions"


def models_url(config: LLMConfig) -> str:
    """Where an OpenAI-compatible server lists the models it serves."""
    return chat_url(config).removesuffix("/chat/completions") + "/models"


def _body_excerpt(response: httpx.Response) -> str:
    try:
        text = response.text
    except Exception:  # undecodable body: the status alone must do
        return ""
    return mask(" ".join(text.split()))[:400]


class ChatClient:
    """One client per plan cycle: keeps the connection and what the server turned out to support."""

    def __init__(
        self, config: LLMConfig, transport: httpx.BaseTransport | None = None, server: LocalServer | None = None
    ) -> None:
        import httpx

        self.config = config
        # The capability ladder (docs/DESIGN.md, "Providers"): OpenAI `json_schema`, then `json_object`
        # + schema (some servers know only that form), then no response_format. The embedded
        # llama.cpp gets `json_object` with the bounded grammar schema, which a small model can finish.
        # Ollama's native API has one rung: `format` = the schema.
        ladder = {Provider.LOCAL: ["json_object"], Provider.OLLAMA: ["format"]}.get(
            config.provider, ["json_schema", "json_object"]
        )
        self.formats: list[str] = ladder if config.strict_json else []
        self.format_fallback = False
        headers = {"Authorization": f"Bearer {config.api_key}"} if config.api_key else {}
        timeout = httpx.Timeout(config.timeout_sec, connect=min(10.0, config.timeout_sec))
        hooks = {"request": [credentials_stay_home(config.base_url, ["Authorization"])]}
        self._http = httpx.Client(timeout=timeout, headers=headers, transport=transport, event_hooks=hooks)
        self.server = server  # the embedded server's process, whose death explains a lost connection
        self.window = windows.ModelWindow(self._http, config, server.spec.n_ctx if server else 0)
        self._model = config.model
        self._call_ids = itertools.count(1)  # ids for tool calls the server gave none

    def close(self) -> None:
        self._http.close()

    def _timed_out(self, url: str) -> PapayuError:
        after = f"{self.config.timeout_sec:g} s"
        if self.server is None:
            return PapayuError(
                "ERR_LLM_TIMEOUT",
                f"no answer from {url} within {after}",
                hint="Raise PAPAYU_LLM_TIMEOUT_SEC, or use a faster model.",
            )
        # The embedded server's address is papayu's own business: what the user can change is named.
        return PapayuError(
            "ERR_LLM_TIMEOUT",
            f"the embedded model ({self.config.model} on this machine's CPU) did not finish its answer within {after}",
            hint="A small model on a busy or slow CPU takes minutes: raise PAPAYU_LLM_TIMEOUT_SEC (e.g. 1800), "
            "lower PAPAYU_LLM_MAX_TOKENS (e.g. 400), or point papayu at a faster model (README: Providers).",
        )

    def __enter__(self) -> ChatClient:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()

    # --- request bodies --------------------------------------------------------------
    def _payload(
        self, messages: list[dict[str, str]], response_format: dict[str, Any] | None, max_tokens: int
    ) -> dict[str, Any]:
        schema = response_format["json_schema"]["schema"] if response_format else None
        if self.config.provider is Provider.OLLAMA:
            body: dict[str, Any] = {
                "model": self.model(),
                "messages": messages,
                "stream": False,
                "options": {"temperature": self.config.temperature, "top_p": 1, "num_predict": max_tokens},
            }
            if self.window.tokens:  # Ollama cuts a longer prompt silently: it runs with the window fitted to
                body["options"]["num_ctx"] = self.window.tokens
            if schema is not None and self.formats:
                body["format"] = schema
            return body
        body = {
            "model": self.model(),
            "messages": messages,
            "temperature": self.config.temperature,
            "top_p": 1,
            "max_tokens": max_tokens,
            "presence_penalty": 0,
            "frequency_penalty": 0,
            "stream": False,
        }
        if self.config.provider is Provider.LOCAL:
            body["messages"] = _system_into_user(messages)
            # Greedy decoding makes a 270M model repeat one sentence until the budget ends; llama.cpp's
            # server applies no repeat penalty unless asked (llama-cpp-python's used 1.1).
            body["repeat_penalty"] = LOCAL_REPEAT_PENALTY
        if response_format is not None and self.formats:
            protocol, shape = format_name_info(response_format["json_schema"]["name"])
            body["response_format"] = (
                response_format
                if self.formats[0] == "json_schema"
                else {"type": "json_object", "schema": grammar_schema(protocol, shape)}
            )
        return body

    def model(self) -> str:
        if not self._model:
            self._model = self._discover_model()
        return self._model

    def _discover_model(self) -> str:
        import httpx

        url = models_url(self.config)
        try:
            response = self._http.get(url)
        except httpx.TimeoutException:
            raise PapayuError(
                "ERR_LLM_TIMEOUT",
                f"no answer from {url} within {self.config.timeout_sec:g} s (asked which model it serves)",
            ) from None
        except httpx.TransportError as exc:  # nothing listens there: not a question of the model's name
            raise PapayuError("ERR_LLM_CONNECT", f"cannot reach {url}: {type(exc).__name__}: {exc}") from None
        if response.status_code in (401, 403):
            raise PapayuError("ERR_LLM_AUTH", f"{url} answered {response.status_code}: {_body_excerpt(response)}")
        try:
            served = [str(m["id"]) for m in response.json()["data"]]
        except Exception as exc:  # any other failure here is a configuration problem to explain
            raise PapayuError(
                "ERR_LLM_CONFIG",
                f"no PAPAYU_LLM_MODEL and {url} lists no model ({exc})",
                hint="Set PAPAYU_LLM_MODEL to a model the server serves.",
            ) from None
        if len(served) != 1:  # the only one is the one; among several, papayu does not guess
            listed = ", ".join(served[:20]) or "none"
            raise PapayuError(
                "ERR_LLM_CONFIG",
                f"no PAPAYU_LLM_MODEL, and {url} serves {len(served)} models: {listed}",
                hint="Set PAPAYU_LLM_MODEL (or git config papayu.llm.model) to one of them.",
            )
        return served[0]

    # --- sending ---------------------------------------------------------------------
    def complete(
        self,
        messages: list[dict[str, str]],
        response_format: dict[str, Any] | None,
        *,
        input_chars: int,
        max_tokens: int | None = None,
    ) -> ChatReply:
        """One answer; ``max_tokens`` overrides the configured answer budget (doctor asks for one token)."""
        max_tokens, window = self._answer_budget(messages, max_tokens or self.config.max_tokens(input_chars))
        output.event(
            "LLM_REQUEST_SENT",
            provider=self.config.provider.value,
            model=self.model(),
            input_chars=input_chars,
            token_budget=max_tokens,
            response_format=self._format_name(response_format),
            **window,
        )
        started = time.monotonic()
        with output.progress(f"waiting for {self.model()}"):  # a spinner on a TTY only
            response = self._send_with_retries(self._payload(messages, response_format, max_tokens))
            while (
                response_format is not None
                and self._format_name(response_format) != "none"
                and _rejects_format(response)
            ):
                rejected = self._format_name(response_format)
                self._drop_format()
                output.event(
                    "LLM_RESPONSE_FORMAT_FALLBACK",
                    status=response.status_code,
                    rejected=rejected,
                    next=self._format_name(response_format),
                )
                response = self._send_with_retries(self._payload(messages, response_format, max_tokens))
        self._raise_for_status(response)
        reply = replace(self._reply(response, time.monotonic() - started), max_tokens=max_tokens)
        output.event(
            "LLM_RESPONSE_OK",
            chars=len(reply.text),
            model_sec=round(reply.model_sec, 3),
            finish_reason=reply.finish_reason,
        )
        return reply

    def _answer_budget(self, messages: list[dict[str, str]], wanted: int) -> tuple[int, dict[str, int]]:
        """The answer budget the prompt leaves of a known window, and the numbers for the event."""
        if not self.window.tokens:
            return wanted, {}
        prompt = self.window.count_messages(messages)
        room = self.window.tokens - prompt
        if room < min(wanted, windows.MIN_ANSWER_TOKENS):
            raise windows.too_small(prompt, min(wanted, windows.MIN_ANSWER_TOKENS), self.window.get(), cut=False)
        return min(wanted, room), {"prompt_tokens": prompt, "window_tokens": self.window.tokens}

    def _format_name(self, response_format: dict[str, Any] | None) -> str:
        return self.formats[0] if response_format is not None and self.formats else "none"

    def _drop_format(self) -> None:
        """Remember for this cycle that the server cannot do the current rung."""
        self.format_fallback = True
        self.formats.pop(0)

    def _send_with_retries(
        self, payload: dict[str, Any], rejects: Callable[[httpx.Response], bool] | None = None
    ) -> httpx.Response:
        """One request under the shared retry policy (net.RetryPolicy); a response that rejects
        the format (or, for a tool request, ``rejects``) is returned at once: a refusal is an
        answer about the server, which a retry would only repeat."""
        import httpx

        refused = rejects or _rejects_format

        url = chat_url(self.config)
        policy = RetryPolicy(self.config.retries, self.config.backoff_sec)
        dropped: list[str] = []  # connections the server closed while answering

        def on_retry(attempt: int, delay: float) -> None:
            output.event("LLM_RETRY", attempt=attempt + 1, delay_sec=round(delay, 3))

        def send() -> httpx.Response:
            try:
                return self._http.post(url, json=payload)
            except httpx.TimeoutException:
                raise
            except httpx.TransportError as exc:
                died = self.server.death() if self.server else None
                if died is not None:  # retrying a dead process only hides why it died
                    raise died from None
                if not isinstance(exc, httpx.ConnectError):
                    dropped.append(f"{type(exc).__name__}: {exc}")
                raise

        try:
            # A model that did not answer in timeout_sec will not answer faster on a retry.
            return send_with_retries(
                policy,
                send,
                on_retry=on_retry,
                retry_response=lambda r: retryable_status(r.status_code) and not refused(r),
                no_retry=(httpx.TimeoutException,),
            )
        except httpx.TimeoutException:
            output.event("LLM_REQUEST_TIMEOUT", timeout_sec=self.config.timeout_sec)
            raise self._timed_out(url) from None
        except httpx.ConnectError as exc:
            if dropped:  # it closed a request mid-answer, then stopped listening: it died
                raise lost_server(url, dropped[0]) from None
            raise PapayuError("ERR_LLM_CONNECT", f"{url}: {type(exc).__name__}: {exc}") from None
        except httpx.TransportError as exc:
            raise PapayuError("ERR_LLM_CONNECT", f"{url}: {type(exc).__name__}: {exc}") from None

    def _raise_for_status(self, response: httpx.Response) -> None:
        if response.status_code == 400:
            told = windows.server_rejection(_body_excerpt(response))
            if told is not None:
                raise windows.rejected(str(response.request.url), *told, self.config)
        _raise_for_status(response)

    def _unexpected_shape(self, response: httpx.Response) -> PapayuError:
        return PapayuError(
            "ERR_LLM_HTTP",
            f"unexpected answer shape from {chat_url(self.config)}: {_body_excerpt(response)[:200]}",
            hint="Is the base URL an OpenAI-compatible (or Ollama) chat API?",
        )

    def _reply(self, response: httpx.Response, elapsed: float) -> ChatReply:
        try:
            data = response.json()
            if self.config.provider is Provider.OLLAMA:
                text, finish = data["message"]["content"], str(data.get("done_reason", ""))
                usage = {"prompt_tokens": data.get("prompt_eval_count"), "completion_tokens": data.get("eval_count")}
            else:
                choice = data["choices"][0]
                text, finish, usage = (
                    choice["message"]["content"],
                    str(choice.get("finish_reason") or ""),
                    data.get("usage") or {},
                )
        except (ValueError, KeyError, IndexError, TypeError):
            raise self._unexpected_shape(response) from None
        if not isinstance(text, str):
            text = "" if text is None else json.dumps(text)
        return ChatReply(text=text, model_sec=elapsed, finish_reason=finish, usage=dict(usage))

    # --- agent mode: function calling ---------------------------------------------------
    def chat_with_tools(self, messages: list[dict[str, Any]], tools: list[dict[str, Any]], max_tokens: int) -> ToolTurn:
        """One turn of a tool-calling conversation. ``messages`` are OpenAI-shaped (system, user,
        assistant with `tool_calls`, and {"role": "tool", "tool_call_id", "content"}); ``tools``
        are OpenAI function tools (papayu_git.llm.tools). Deterministic like `complete`, same
        retries and ERR_LLM_* codes; ERR_LLM_NO_TOOLS when the server refuses tools."""
        require_tools(self.config)
        ollama = self.config.provider is Provider.OLLAMA
        output.event(
            "LLM_REQUEST_SENT",
            provider=self.config.provider.value,
            model=self.model(),
            input_chars=sum(len(str(m.get("content") or "")) for m in messages),
            token_budget=max_tokens,
            tools=len(tools),
        )
        payload: dict[str, Any]
        if ollama:
            # Ollama's native API: no tool_choice (the model decides), tool results by tool name.
            payload = {
                "model": self.model(),
                "messages": _ollama_messages(messages),
                "tools": tools,
                "stream": False,
                "options": {"temperature": 0, "top_p": 1, "num_predict": max_tokens},
            }
        else:
            payload = {
                "model": self.model(),
                "messages": messages,
                "tools": tools,
                "tool_choice": "auto",
                "temperature": 0,
                "top_p": 1,
                "max_tokens": max_tokens,
                "stream": False,
            }
        started = time.monotonic()
        with output.progress(f"waiting for {self.model()}"):
            response = self._send_with_retries(payload, rejects=_rejects_tools)
        if _rejects_tools(response):
            raise PapayuError(
                "ERR_LLM_NO_TOOLS",
                f"{response.request.url} refused tool calling ({response.status_code}): {_body_excerpt(response)}",
            )
        self._raise_for_status(response)
        turn = self._tool_turn(response, time.monotonic() - started)
        output.event(
            "LLM_RESPONSE_OK",
            chars=len(turn.content),
            tool_calls=len(turn.tool_calls),
            model_sec=round(turn.model_sec, 3),
            finish_reason=turn.finish_reason,
        )
        return turn

    def _tool_turn(self, response: httpx.Response, elapsed: float) -> ToolTurn:
        try:
            data = response.json()
            if self.config.provider is Provider.OLLAMA:
                message, finish = data["message"], str(data.get("done_reason") or "")
                usage = {"prompt_tokens": data.get("prompt_eval_count"), "completion_tokens": data.get("eval_count")}
            else:
                choice = data["choices"][0]
                message, finish, usage = choice["message"], str(choice.get("finish_reason") or ""), data.get("usage")
            if not isinstance(message, dict):
                raise TypeError("message is not an object")
        except (ValueError, KeyError, IndexError, TypeError):
            raise self._unexpected_shape(response) from None
        content = message.get("content")
        if not isinstance(content, str):
            content = "" if content is None else json.dumps(content, ensure_ascii=False)
        raw_calls = message.get("tool_calls")
        if not raw_calls and isinstance(message.get("function_call"), dict):
            raw_calls = [{"function": message["function_call"]}]  # the pre-tools form of one call
        calls = tuple(self._tool_call(raw) for raw in (raw_calls if isinstance(raw_calls, list) else []))
        assistant: dict[str, Any] = {"role": "assistant", "content": content}
        if calls:  # OpenAI refuses an empty tool_calls list
            assistant["tool_calls"] = [
                {"id": c.id, "type": "function", "function": {"name": c.name, "arguments": c.arguments}} for c in calls
            ]
        return ToolTurn(
            content=content,
            tool_calls=calls,
            finish_reason=finish,
            usage={k: v for k, v in (usage if isinstance(usage, dict) else {}).items() if v is not None},
            model_sec=elapsed,
            assistant_message=assistant,
        )

    def _tool_call(self, raw: Any) -> ToolCall:
        """Whatever the entry looks like, a ToolCall: a model's malformed call gets an error
        result from the agent, so the conversation goes on instead of the run crashing."""
        entry = raw if isinstance(raw, dict) else {}
        function = entry.get("function")
        if not isinstance(function, dict):
            function = {}
        name = function.get("name")
        arguments = function.get("arguments")
        if arguments is None:
            arguments = "{}" if entry else json.dumps(raw, ensure_ascii=False)  # no arguments: none given
        elif not isinstance(arguments, str):  # Ollama sends an object; some servers do too
            arguments = json.dumps(arguments, ensure_ascii=False)
        call_id = entry.get("id")
        if not isinstance(call_id, str) or not call_id:
            call_id = f"call_{next(self._call_ids)}"
        return ToolCall(id=call_id, name=name if isinstance(name, str) else "", arguments=arguments)


def lost_server(url: str, dropped: str) -> PapayuError:
    """A server papayu did not start closed a request while answering and then refused connections."""
    return PapayuError(
        "ERR_LLM_SERVER_DIED",
        f"{url} closed the connection in the middle of an answer ({dropped}) and now refuses connections: "
        "the server died (crashed or was killed)",
        hint="Read the server's own log for why (a crash, or the out-of-memory killer), restart it, then retry; "
        "a server that dies on large requests wants a smaller context (-c / num_ctx) or more memory.",
    )


def require_tools(config: LLMConfig) -> None:
    """ERR_LLM_NO_TOOLS for a provider that cannot do agent mode, before anything is started.

    The embedded model cannot: Gemma 3's chat template has no tool role, and Gemma 3 270M asked
    for tool calls invents arguments or only echoes the prompt (docs/DESIGN.md, "Providers")."""
    if config.provider is Provider.LOCAL:
        raise PapayuError(
            "ERR_LLM_NO_TOOLS",
            "the embedded model (provider local) cannot call tools",
            hint=f"Use 'git papayu fix' instead, or agent mode with one of: {TOOL_PROVIDERS}.",
        )


def _system_into_user(messages: list[dict[str, str]]) -> list[dict[str, str]]:
    """Gemma has no system role: the instructions go in front of the first user turn, as Gemma's
    own chat template does, whichever template the server applies."""
    system = "\n\n".join(m["content"] for m in messages if m["role"] == "system")
    rest = [dict(m) for m in messages if m["role"] != "system"]
    if system and rest and rest[0]["role"] == "user":
        rest[0]["content"] = f"{system}\n\n{rest[0]['content']}"
    return rest


def _ollama_messages(messages: list[dict[str, Any]]) -> list[dict[str, Any]]:
    """OpenAI-shaped messages in Ollama's /api/chat shape: a call's arguments are an object, not
    JSON text; a tool result names its tool (`tool_name`) instead of a call id."""
    names: dict[str, str] = {}  # tool_call id -> name, from the assistant turns so far
    converted: list[dict[str, Any]] = []
    for message in messages:
        role = message.get("role")
        if role not in ("assistant", "tool"):
            converted.append(dict(message))  # system and user messages are the same in both APIs
            continue
        content = message.get("content")
        out: dict[str, Any] = {"role": role, "content": content if isinstance(content, str) else ""}
        if role == "tool":
            tool = message.get("tool_name") or message.get("name") or names.get(str(message.get("tool_call_id")))
            if tool:
                out["tool_name"] = tool
        elif message.get("tool_calls"):
            out["tool_calls"] = []
            for call in message["tool_calls"]:
                call = call if isinstance(call, dict) else {}
                function = call.get("function")
                function = function if isinstance(function, dict) else {}
                name = str(function.get("name") or "")
                names[str(call.get("id"))] = name
                out["tool_calls"].append({"function": {"name": name, "arguments": _arguments_object(function)}})
        converted.append(out)
    return converted


def _arguments_object(function: dict[str, Any]) -> dict[str, Any]:
    """Ollama takes only an object; a model's unparseable arguments become {} (the agent has
    already answered that call with an error, which the model sees next)."""
    arguments = function.get("arguments")
    if isinstance(arguments, str):
        try:
            arguments = json.loads(arguments)
        except ValueError:
            return {}
    return arguments if isinstance(arguments, dict) else {}


def _rejects_tools(response: httpx.Response) -> bool:
    """The server cannot do function calling: 501, or a 400/404/422 whose body names tools or
    functions (not a context-length or conversation complaint that happens to mention them)."""
    status = response.status_code
    if status == 501:
        return True
    if status not in (400, 404, 422):
        return False
    body = _body_excerpt(response).lower()
    return any(w in body for w in _TOOL_WORDS) and not any(w in body for w in _NOT_A_TOOL_REFUSAL)


def _rejects_format(response: httpx.Response) -> bool:
    """A 4xx/5xx naming response_format/json_schema: the server cannot do this rung of the ladder.
    A plain 4xx that mentions "format" counts too (Ollama: `invalid format`); 429 never does."""
    status = response.status_code
    if status < 400 or status == 429:
        return False
    body = _body_excerpt(response).lower()
    return any(word in body for word in _FORMAT_WORDS) or (status < 500 and "format" in body)


def _raise_for_status(response: httpx.Response) -> None:
    status = response.status_code
    if status < 400:
        return
    url, excerpt = str(response.request.url), _body_excerpt(response)
    if status in (401, 403):
        raise PapayuError("ERR_LLM_AUTH", f"{url} answered {status}: {excerpt}")
    if status == 429:
        raise PapayuError("ERR_LLM_RATE_LIMITED", f"{url} still answered 429 after retries: {excerpt}")
    hint = "Check PAPAYU_LLM_MODEL: the server does not know it." if status == 404 else None
    raise PapayuError("ERR_LLM_HTTP", f"{url} answered {status}: {excerpt}", hint=hint)
