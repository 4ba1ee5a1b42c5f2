"""One exchange with the model: send, extract, validate locally, repair once (docs/DESIGN.md, "Providers").

Every answer goes through `protocol.parse_json_text` (fence/prose tolerated) and
`validate.validate_response` — also in strict mode, because a server may ignore the schema.
A rejected answer gets exactly one repair retry that carries the validation errors and
their hints (`errors.repair_text`); a second rejection ends in ERR_LLM_INVALID_RESPONSE
naming the underlying codes.
"""

from __future__ import annotations

import time
from collections.abc import Callable, Mapping
from dataclasses import dataclass, field
from typing import Any

from papayu_git import output, settings
from papayu_git.errors import PapayuError, ValidationFailed, repair_text
from papayu_git.llm.client import ChatClient
from papayu_git.llm.prompts import repair_message
from papayu_git.llm.wire_schema import drop_nulls, response_format
from papayu_git.memory import MEMORY_WHITELIST
from papayu_git.protocol import Mode, Response, parse_json_text
from papayu_git.validate import validate_response

# Codes a repair cannot fix within the same protocol: non-UTF-8 falls back to v1 at once.
NO_REPAIR_CODES = frozenset({"ERR_NON_UTF8_FILE"})
# Failures of the repository or the environment, not of the answer: never sent back to the model.
ENVIRONMENT_CODES = frozenset(
    {
        "ERR_NOT_A_GIT_REPO",
        "ERR_DETACHED_HEAD",
        "ERR_BRANCH_NOT_FOUND",
        "ERR_GIT_COMMAND",
        "ERR_LOCKED",
        "ERR_DELETE_NOT_CONFIRMED",
        "ERR_INTERNAL",
        "ERR_USAGE",
    }
)


class InvalidAnswer(PapayuError):
    """The answer stayed invalid after the repair; ``causes`` keeps the underlying problems."""

    def __init__(self, causes: list[PapayuError], *, repaired: bool) -> None:
        self.causes = causes
        when = "after the repair retry" if repaired else "and cannot be repaired"
        codes = ", ".join(dict.fromkeys(c.code for c in causes))
        super().__init__(
            "ERR_LLM_INVALID_RESPONSE", f"the model's answer is invalid {when} ({codes}):\n" + repair_text(causes)
        )

    @property
    def cause_code(self) -> str:
        return self.causes[0].code


@dataclass
class CallLog:
    """Per-cycle accounting for traces and bench/plan_bench.py (mutable on purpose)."""

    model_sec: float = 0.0
    validation_sec: float = 0.0
    preflight_sec: float = 0.0
    calls: int = 0
    repairs: int = 0
    repair_reason: str | None = None
    input_chars: int = 0
    token_budget: int = 0
    raw: list[str] = field(default_factory=list)
    notes: list[str] = field(default_factory=list)
    last_json: Any = None  # the last answer that parsed (a rejected one: its trace's validated_json)
    usage: list[dict[str, Any]] = field(default_factory=list)


def _drop_unknown_memory_keys(data: Any, log: CallLog) -> Any:
    """memory_patch keys outside the whitelist are dropped (wrong types stay errors): docs/DESIGN.md, "Memory"."""
    if not isinstance(data, dict) or not isinstance(data.get("memory_patch"), dict):
        return data
    patch = data["memory_patch"]
    unknown = [k for k in patch if k not in MEMORY_WHITELIST]
    if not unknown:
        return data
    log.notes.append("memory_patch keys dropped (not in the whitelist): " + ", ".join(unknown))
    return {**data, "memory_patch": {k: v for k, v in patch.items() if k in MEMORY_WHITELIST}}


class Conversation:
    def __init__(
        self,
        client: ChatClient,
        system: str,
        *,
        protocol: int,
        mode: Mode,
        read_files: Mapping[str, str] | None,
        log: CallLog,
        check: Callable[[Response], None] | None = None,
        shape: str = "response",
    ) -> None:
        self.client, self.protocol, self.mode, self.read_files = client, protocol, mode, read_files
        self.shape = shape  # wire_schema.SHAPES: what a grammar-based server may let the model write
        self.log, self.check = log, check
        self.messages: list[dict[str, str]] = [{"role": "system", "content": system}]
        self.keep_raw = settings.get_bool("trace_raw")

    def ask(self, user_text: str) -> Response:
        self.messages.append({"role": "user", "content": user_text})
        text = self._call()
        try:
            return self._accept(text)
        except PapayuError as exc:
            errors = list(getattr(exc, "errors", [exc]))
            if exc.code in ENVIRONMENT_CODES:
                raise
            self._report(errors)
            if any(e.code in NO_REPAIR_CODES for e in errors):
                raise InvalidAnswer(errors, repaired=False) from None
        output.event("LLM_RESPONSE_REPAIR", codes=",".join(dict.fromkeys(e.code for e in errors)))
        self.log.repairs += 1
        self.log.repair_reason = errors[0].code
        self.messages.append({"role": "user", "content": repair_message(repair_text(errors), self.protocol)})
        text = self._call()
        try:
            return self._accept(text)
        except PapayuError as exc:
            if exc.code in ENVIRONMENT_CODES:
                raise
            errors = list(getattr(exc, "errors", [exc]))
            self._report(errors)
            raise InvalidAnswer(errors, repaired=True) from None

    def _call(self) -> str:
        input_chars = sum(len(m["content"]) for m in self.messages)
        self.log.input_chars, self.log.token_budget = input_chars, self.client.config.max_tokens(input_chars)
        reply = self.client.complete(self.messages, response_format(self.protocol, self.shape), input_chars=input_chars)
        self.log.token_budget = reply.max_tokens or self.log.token_budget  # what the window left for the answer
        self.log.calls += 1
        self.log.model_sec += reply.model_sec
        self.log.usage.append(reply.usage)
        if self.keep_raw:
            self.log.raw.append(reply.text)
        self.messages.append({"role": "assistant", "content": reply.text})
        return reply.text

    def _accept(self, text: str) -> Response:
        started = time.perf_counter()
        try:
            try:
                data = parse_json_text(text)
            except PapayuError as exc:
                raise ValidationFailed([exc]) from None
            data = _drop_unknown_memory_keys(drop_nulls(data), self.log)
            self.log.last_json = data
            response = validate_response(data, protocol=self.protocol, mode=self.mode, read_files=self.read_files)
        finally:
            self.log.validation_sec += time.perf_counter() - started
        if self.check is not None:
            started = time.perf_counter()
            try:
                self.check(response)
            finally:
                self.log.preflight_sec += time.perf_counter() - started
        return response

    def _report(self, errors: list[PapayuError]) -> None:
        first = errors[0]
        output.event("VALIDATION_FAILED", code=first.code, path=first.path, count=len(errors), protocol=self.protocol)
