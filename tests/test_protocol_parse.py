"""Parsing model answers (docs/DESIGN.md, "Accepted answers"): accepted forms, extraction, and hostile input."""

from __future__ import annotations

import json
import time
from typing import Any

import pytest

from papayu_git.errors import ERROR_CODES, PapayuError, ValidationFailed
from papayu_git.protocol import MAX_INPUT_BYTES, ActionKind, parse_json_text, raw_actions
from papayu_git.validate import MAX_FILE_BYTES, validate_response, validate_text

GOOD = {"actions": [{"kind": "CREATE_FILE", "path": "hello.py", "content": "print('hi')\n"}], "summary": "add hello.py"}
GOOD_TEXT = json.dumps(GOOD)


def text_code(text: str | bytes, **kwargs: Any) -> str:
    with pytest.raises(ValidationFailed) as info:
        validate_text(text, **{"protocol": 2, "mode": "apply", **kwargs})
    assert info.value.code in ERROR_CODES
    return info.value.code


# --- accepted forms ---------------------------------------------------------------------------


def test_object_form() -> None:
    response = validate_text(GOOD_TEXT, protocol=2, mode="apply")
    assert response.actions[0].kind is ActionKind.CREATE_FILE
    assert response.actions[0].content == "print('hi')\n"
    assert response.summary == "add hello.py" and response.data == GOOD


def test_v1_array_form() -> None:
    response = validate_text(json.dumps(GOOD["actions"]), protocol=1, mode="apply")
    assert [a.path for a in response.actions] == ["hello.py"]
    assert response.protocol == 1 and response.summary == ""


def test_v2_rejects_the_array_form() -> None:
    assert text_code(json.dumps(GOOD["actions"]), protocol=2) == "ERR_SCHEMA"


def test_json_inside_a_fence() -> None:
    text = f"Here is the plan:\n\n```json\n{GOOD_TEXT}\n```\n\nApply it when ready."
    assert validate_text(text, protocol=2, mode="apply").data == GOOD
    assert parse_json_text(f"```\n{GOOD_TEXT}\n```") == GOOD
    assert parse_json_text(f"```JSON\r\n{GOOD_TEXT}\r\n```") == GOOD


def test_prose_around_the_json() -> None:
    assert parse_json_text(f"Sure! {GOOD_TEXT}\nLet me know.") == GOOD
    assert parse_json_text(f"Use {{braces}} carefully. Answer: {GOOD_TEXT}") == GOOD
    assert parse_json_text(f"{GOOD_TEXT}\n\nThis creates hello.py.") == GOOD


def test_bom_and_bytes_are_accepted() -> None:
    assert parse_json_text(b"\xef\xbb\xbf" + GOOD_TEXT.encode()) == GOOD


def test_proposed_changes_actions_win_over_root_actions() -> None:
    data = {
        "actions": [{"kind": "CREATE_FILE", "path": "../ignored", "content": "x"}],
        "proposed_changes": {
            "actions": [{"kind": "CREATE_FILE", "path": "chosen.py", "content": "x"}],
            "commands_to_run": ["pytest -q"],
        },
        "summary": "s",
        "mode": "fix-plan",
        "questions": ["q?"],
        "risks": ["r"],
        "plan": [{"step": "edit", "details": "d"}],
    }
    assert raw_actions(data) == data["proposed_changes"]["actions"]
    response = validate_response(data, protocol=2, mode="plan")
    assert [a.path for a in response.actions] == ["chosen.py"]
    assert response.commands_to_run == ("pytest -q",)
    assert response.questions == ("q?",) and response.risks == ("r",)
    assert response.plan == ({"step": "edit", "details": "d"},)


def test_root_actions_are_used_without_proposed_actions() -> None:
    data = {**GOOD, "proposed_changes": {"patch": "--- a\n+++ b\n"}}
    assert [a.path for a in validate_response(data, protocol=2, mode="apply").actions] == ["hello.py"]


# --- bad input ----------------------------------------------------------------------------------


@pytest.mark.parametrize(
    "text", ["hello there", "", "   \n ", "{not json}", "{'a': 1}", "[1, 2,, 3]", "no json ``` here"]
)
def test_non_json(text: str) -> None:
    assert text_code(text) == "ERR_JSON_INVALID"


def test_non_utf8_bytes() -> None:
    assert text_code(b'{"summary": "\xff\xfe"}') == "ERR_JSON_INVALID"


@pytest.mark.parametrize(
    "text",
    [
        GOOD_TEXT[:-1],
        GOOD_TEXT[:40],
        '{"actions": [',
        '{"summary": "cut',
        "```json\n" + GOOD_TEXT[:30] + "\n```",
        "Here it is: " + GOOD_TEXT[:-2],
    ],
)
def test_truncated_json(text: str) -> None:
    assert text_code(text) == "ERR_JSON_TRUNCATED"


@pytest.mark.parametrize(
    "text",
    [
        GOOD_TEXT + " }",
        GOOD_TEXT + "]",
        GOOD_TEXT + ', {"a": 1}',
        GOOD_TEXT + '\n{"actions": []}',
        GOOD_TEXT + "xyz",
        GOOD_TEXT + " 42",
        "```json\n" + GOOD_TEXT + "}\n```",
    ],
)
def test_trailing_garbage(text: str) -> None:
    assert text_code(text) == "ERR_JSON_TRAILING_GARBAGE"


@pytest.mark.parametrize(
    "text",
    [
        "[" * 100_000 + "]" * 100_000,
        '{"a": ' * 100_000 + "1" + "}" * 100_000,
        "[" * 100_000,
        "prose " + "[" * 100_000 + "]" * 100_000,
        '{"actions": [' + "[" * 70 + "]" * 70 + "]}",
    ],
)
def test_deep_nesting_is_rejected_without_recursion_error(text: str) -> None:
    assert text_code(text) == "ERR_JSON_TOO_DEEP"


def test_deep_python_value_is_rejected_without_recursion_error() -> None:
    deep: Any = []
    for _ in range(100_000):
        deep = [deep]
    with pytest.raises(ValidationFailed) as info:
        validate_response({"actions": [], "summary": "NO_CHANGES: x", "memory_patch": {"k": deep}})
    assert info.value.code == "ERR_JSON_TOO_DEEP"


def test_ten_megabyte_answer_is_rejected_in_bounded_time() -> None:
    big = json.dumps(
        {"actions": [{"kind": "CREATE_FILE", "path": "big.txt", "content": "a" * 10_000_000}], "summary": "s"}
    )
    started = time.monotonic()
    with pytest.raises(ValidationFailed) as info:
        validate_text(big, protocol=2, mode="apply")
    assert [e.code for e in info.value.errors] == ["ERR_FILE_TOO_LARGE", "ERR_TOTAL_TOO_LARGE"]
    assert str(MAX_FILE_BYTES) in info.value.errors[0].reason
    # Generous bound: linear work takes well under a second; a quadratic scan would take minutes.
    assert time.monotonic() - started < 30


def test_ten_megabytes_of_brace_prose_is_bounded() -> None:
    started = time.monotonic()
    assert text_code("x " + "{ " * 5_000_000) == "ERR_JSON_INVALID"
    assert text_code("x " + '{"a": [' * 1_000_000) == "ERR_JSON_TOO_DEEP"
    assert time.monotonic() - started < 30


def test_input_over_the_read_limit() -> None:
    with pytest.raises(PapayuError) as info:
        parse_json_text(" " * (MAX_INPUT_BYTES + 1))
    assert info.value.code == "ERR_INPUT_TOO_LARGE"
    assert text_code(b" " * (MAX_INPUT_BYTES + 1)) == "ERR_INPUT_TOO_LARGE"


@pytest.mark.parametrize("value", [None, 1, "text", True, 1.5])
def test_scalar_json_is_not_a_response(value: Any) -> None:
    assert text_code(json.dumps(value)) == "ERR_JSON_INVALID"  # an answer is an object or an array
    for protocol in (1, 2):
        with pytest.raises(ValidationFailed) as info:
            validate_response(value, protocol=protocol, mode="plan")
        assert info.value.code == "ERR_SCHEMA"


# --- strict JSON: duplicate keys, huge integers, lone surrogates ------------------------------


@pytest.mark.parametrize(
    "text, code",
    [
        ('{"summary": "a", "summary": "b", "actions": []}', "ERR_JSON_DUPLICATE_KEY"),
        (
            'Here: ```json\n{"actions": [{"kind": "DELETE_FILE", "path": "a", "path": "b"}]}\n```',
            "ERR_JSON_DUPLICATE_KEY",
        ),
        ('The plan {"summary": "s", "n": ' + "9" * 4301 + "} ok", "ERR_JSON_NUMBER_TOO_LARGE"),
        ('{"n": -' + "9" * 4301 + "}", "ERR_JSON_NUMBER_TOO_LARGE"),
        ('{"summary": "\\udfff", "actions": []}', "ERR_JSON_INVALID_UNICODE"),
        ('{"\\ud800": 1}', "ERR_JSON_INVALID_UNICODE"),
        ('{"summary": "s\ud800", "actions": []}', "ERR_JSON_INVALID_UNICODE"),  # a str already holding one
    ],
)
def test_strict_json_refusals(text: str, code: str) -> None:
    with pytest.raises(PapayuError) as info:
        parse_json_text(text)
    assert info.value.code == code
    assert text_code(text) == code  # as a model answer: a ValidationFailed, so the repair retry runs


def test_strict_json_accepts_what_is_fine() -> None:
    assert parse_json_text('{"a": {"k": 1}, "b": {"k": 2}, "n": ' + "9" * 4300 + "}")["b"] == {"k": 2}
    assert parse_json_text('{"s": "\\ud83d\\ude00 \\\\ud800"}') == {"s": "\U0001f600 \\ud800"}
