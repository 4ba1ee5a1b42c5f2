"""Our response schemas accept everything the upstream papa-yu schemas accept."""

from __future__ import annotations

import hashlib
import json
from typing import Any

import jsonschema
import pytest
from helpers import GOLDEN_UPSTREAM
from hypothesis import given, settings
from hypothesis import strategies as st
from test_properties import actions, responses

from papayu_git.schemas import load_schema, schema_errors

UPSTREAM = {
    1: GOLDEN_UPSTREAM / "schemas" / "llm_response_schema.json",
    2: GOLDEN_UPSTREAM / "schemas" / "llm_response_schema_v2.json",
}
OURS = {1: "llm_response_v1", 2: "llm_response_v2"}
SHA = "0123456789abcdef" * 4

# Documents at the edges of what upstream accepts (its documented examples and corner cases).
CORPUS: dict[int, list[Any]] = {
    1: [
        [],
        [{"kind": "CREATE_FILE", "path": "README.md", "content": "# P\n"}, {"kind": "CREATE_DIR", "path": "src"}],
        [{"kind": "CREATE_FILE", "path": "a"}],  # upstream schema leaves content optional
        [{"kind": "DELETE_FILE", "path": "a", "content": "x", "extra": 1}],
        {
            "actions": [{"kind": "UPDATE_FILE", "path": "src/main.py", "content": "..."}],
            "memory_patch": {"project.default_test_command": "pytest -q", "anything": [1]},
        },
        {
            "mode": "fix-plan",
            "summary": "s",
            "questions": ["q"],
            "context_requests": [
                {"type": "read_file", "path": "src/x.py", "start_line": 1, "end_line": 220},
                {"type": "search", "query": "SomeSymbol", "glob": "**/*.py"},
                {"type": "logs", "source": "runtime", "last_n": 200},
                {"type": "read_file"},
                {"type": "env", "extra": True},
            ],
            "plan": [{"step": "s", "details": "d", "x": 1}, {}],
            "proposed_changes": {
                "patch": "diff",
                "actions": [{"kind": "UPDATE_FILE", "path": "a", "content": "c"}],
                "commands_to_run": ["pytest -q"],
                "extra": 1,
            },
            "risks": ["r"],
            "memory_patch": {},
        },
        {
            "mode": "apply",
            "summary": "s",
            "patch": "diff",
            "commands_to_run": ["x"],
            "verification": ["v"],
            "rollback": ["r"],
            "memory_patch": {},
        },
        {},
        {"unknown": {"deep": [1, 2]}},
    ],
    2: [
        {"actions": []},
        {"actions": [], "summary": "NO_CHANGES: ok", "context_requests": [], "memory_patch": {}},
        {
            "actions": [
                {
                    "kind": "PATCH_FILE",
                    "path": "src/parser.py",
                    "base_sha256": SHA,
                    "patch": "--- a/x\n+++ b/x\n@@ -1 +1 @@\n-a\n+b\n",
                },
                {"kind": "CREATE_DIR", "path": "src"},
                {"kind": "DELETE_DIR", "path": "old"},
                {"kind": "DELETE_FILE", "path": "gone.py"},
                {"kind": "UPDATE_FILE", "path": "new.py", "content": ""},
                {"kind": "CREATE_FILE", "path": "README.md", "content": "x"},
            ],
            "summary": "s",
            "context_requests": [
                {"type": "read_file", "path": "a", "start_line": 1},
                {"type": "search", "query": "q"},
                {"type": "logs", "source": "s"},
                {"type": "env"},
            ],
            "memory_patch": {"user.ask_budget": 1, "project.src_roots": ["src"]},
        },
    ],
}


def golden_documents(version: int) -> list[Any]:
    return [json.loads(p.read_text())["result"]["validated_json"] for p in GOLDEN_UPSTREAM.glob(f"v{version}/*.json")]


@pytest.mark.parametrize("version", [1, 2])
def test_every_document_upstream_accepts_is_accepted(version: int) -> None:
    upstream = jsonschema.Draft7Validator(json.loads(UPSTREAM[version].read_text()))
    documents = CORPUS[version] + golden_documents(version)
    assert len(documents) >= 8
    for document in documents:
        assert upstream.is_valid(document), document  # the corpus is really upstream-valid
        assert schema_errors(OURS[version], document) == [], document
        assert jsonschema.Draft7Validator(load_schema(OURS[version])).is_valid(document)


def test_recorded_schema_hash_is_the_upstream_file_sha256() -> None:
    for version, path in UPSTREAM.items():
        digest = hashlib.sha256(path.read_bytes()).hexdigest()
        for trace in GOLDEN_UPSTREAM.glob(f"v{version}/*.json"):
            assert json.loads(trace.read_text())["protocol"]["schema_hash"] == digest


@pytest.mark.parametrize("name", ["llm_response_v1", "llm_response_v2", "project", "preferences", "golden_trace"])
def test_schemas_are_valid_draft7(name: str) -> None:
    jsonschema.Draft7Validator.check_schema(load_schema(name))


def test_fast_and_full_validators_agree_on_the_corpus() -> None:
    from papayu_git.schemas import _fast_validator, _full_validator

    samples = [d for docs in CORPUS.values() for d in docs] + [
        {"actions": [{"kind": "PATCH_FILE", "path": "a", "patch": "p"}]},
        {"actions": [{"kind": "X", "path": "a"}]},
        {"actions": [{"kind": "DELETE_FILE", "path": "a", "content": "x"}]},
        {"summary": 3},
        [1],
        5,
    ]
    for name in OURS.values():
        for sample in samples:
            try:
                _fast_validator(name)(sample)
                fast = True
            except ValueError:  # fastjsonschema's exception or the generated stand-in
                fast = False
            assert fast == _full_validator(name).is_valid(sample), (name, sample)


@settings(max_examples=60, deadline=None)
@given(document=responses | st.lists(actions, max_size=3))
def test_upstream_valid_implies_ours_valid_and_fast_matches_full(document: Any) -> None:
    from papayu_git.schemas import _fast_validator, _full_validator

    for version, name in OURS.items():
        ours = _full_validator(name).is_valid(document)
        if jsonschema.Draft7Validator(json.loads(UPSTREAM[version].read_text())).is_valid(document):
            assert ours, (version, document)
        try:
            _fast_validator(name)(document)
            fast = True
        except ValueError:  # fastjsonschema's exception or the generated stand-in
            fast = False
        assert fast == ours, (name, document)
