"""The tools agent mode offers the model (OpenAI function-calling format).

The definitions live in `schemas/agent_tools.json` (installed as `papayu_git/schema_data/`), so
they ship with the package and can be read without importing Python code. They are sent as they
are: OpenAI, OpenAI-compatible servers and Ollama's /api/chat all take this format
(docs/DESIGN.md, "Providers"). The model's arguments are not trusted: the agent validates them
against each tool's `parameters`.
"""

from __future__ import annotations

import copy
import json
from functools import cache
from typing import Any

from papayu_git.schemas import schema_bytes

TOOLS_FILE = "agent_tools"


@cache
def _definitions() -> tuple[dict[str, Any], ...]:
    return tuple(json.loads(schema_bytes(TOOLS_FILE)))


def agent_tools() -> list[dict[str, Any]]:
    """The tool definitions, read once per process; each call gets its own copy to change freely."""
    return copy.deepcopy(list(_definitions()))


def tool_names() -> list[str]:
    return [tool["function"]["name"] for tool in _definitions()]
