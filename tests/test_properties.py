"""Property: whatever the model sends, validation returns a Response or raises a PapayuError
with a known ERR code -- never any other exception."""

from __future__ import annotations

import json
from typing import Any

from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from papayu_git.errors import ERROR_CODES, PapayuError, ValidationFailed
from papayu_git.protocol import Response
from papayu_git.validate import validate_response, validate_text

PROFILE = settings(max_examples=70, deadline=None, suppress_health_check=[HealthCheck.too_slow])

scalars = st.none() | st.booleans() | st.integers() | st.floats() | st.text(max_size=20)
json_values = st.recursive(
    scalars,
    lambda inner: st.lists(inner, max_size=4) | st.dictionaries(st.text(max_size=10), inner, max_size=4),
    max_leaves=20,
)

# Near-valid responses reach the semantic checks, not just the schema.
KINDS = ["CREATE_FILE", "UPDATE_FILE", "PATCH_FILE", "DELETE_FILE", "CREATE_DIR", "DELETE_DIR", "MOVE"]
path_text = st.lists(
    st.sampled_from([*list("ab./\\~:C\x00 \n"), ".git", ".env", "..", "secrets", "é"]), max_size=12
).map("".join)
actions = st.fixed_dictionaries(
    {"kind": st.sampled_from(KINDS), "path": path_text | scalars},
    optional={
        "content": st.text(max_size=30) | scalars,
        "patch": st.sampled_from(["", "@@ -1 +1 @@\n-a\n+b\n", "not a diff", "--- a\n+++ b\n"]) | scalars,
        "base_sha256": st.sampled_from(["a" * 64, "A" * 64, "x"]) | scalars,
    },
)
responses = st.fixed_dictionaries(
    {},
    optional={
        "actions": st.lists(actions, max_size=5) | json_values,
        "proposed_changes": st.fixed_dictionaries({}, optional={"actions": st.lists(actions, max_size=3)})
        | json_values,
        "summary": st.sampled_from(["", "NO_CHANGES: none", "done"]) | scalars,
        "context_requests": st.lists(
            st.fixed_dictionaries({"type": st.sampled_from(["read_file", "x"])}, optional={"path": path_text})
        )
        | json_values,
        "memory_patch": st.dictionaries(
            st.sampled_from(["user.ask_budget", "project.src_roots", "x.y"]), json_values, max_size=3
        )
        | json_values,
        "mode": st.sampled_from(["apply", "fix-plan", "weird"]) | scalars,
    },
)


def outcome(call: Any) -> str:
    try:
        result = call()
    except ValidationFailed as exc:
        assert exc.errors and all(e.code in ERROR_CODES for e in exc.errors)
        return exc.code
    except PapayuError as exc:
        assert exc.code in ERROR_CODES
        return exc.code
    assert isinstance(result, Response)
    return "ok"


@PROFILE
@given(
    data=json_values | responses | st.lists(actions, max_size=4),
    protocol=st.sampled_from([1, 2]),
    mode=st.sampled_from(["plan", "apply"]),
)
def test_any_json_value_validates_or_raises_a_papayu_error(data: Any, protocol: int, mode: str) -> None:
    outcome(lambda: validate_response(data, protocol=protocol, mode=mode))


@PROFILE
@given(text=st.text(max_size=200) | st.binary(max_size=100), protocol=st.sampled_from([1, 2]))
def test_any_text_validates_or_raises_a_papayu_error(text: str | bytes, protocol: int) -> None:
    outcome(lambda: validate_text(text, protocol=protocol, mode="plan"))


@PROFILE
@given(
    data=responses, wrap=st.sampled_from(["{}", "```json\n{}\n```", "Sure:\n{}\nDone.", "{} trailing", "{}}", "{}"[:1]])
)
def test_wrapped_json_gives_the_same_outcome_or_a_json_error(data: dict[str, Any], wrap: str) -> None:
    plain = outcome(lambda: validate_response(data, protocol=2, mode="apply"))
    text = wrap.replace("{}", json.dumps(data)) if "{}" in wrap else json.dumps(data)[:-1]
    wrapped = outcome(lambda: validate_text(text, protocol=2, mode="apply"))
    assert wrapped == plain or wrapped.startswith("ERR_JSON_")
