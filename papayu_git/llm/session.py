"""Opening a model for one papayu command: configured server, or the embedded local one."""

from __future__ import annotations

from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path

from papayu_git.llm.client import ChatClient
from papayu_git.llm.config import LLMConfig, Provider, require_api_key
from papayu_git.llm.local import running_server
from papayu_git.llm.readiness import require_model


@contextmanager
def open_client(repo_root: Path | None = None, config: LLMConfig | None = None) -> Iterator[ChatClient]:
    """A ChatClient for the whole command; the embedded server (provider `local`) lives as long."""
    cwd = str(repo_root) if repo_root else None
    if config is None:
        config = require_model(cwd)
    else:
        require_api_key(config)
    if config.provider is Provider.LOCAL:
        with running_server(cwd) as server, ChatClient(config.with_base_url(server.base_url), server=server) as client:
            yield client
        return
    with ChatClient(config) as client:
        yield client
