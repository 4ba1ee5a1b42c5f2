"""`doctor`: the embedded model (started and asked for one token when it is the provider) and the
LLM provider (a key is only ever reported as set or not)."""

from __future__ import annotations

import importlib.util
import time
from dataclasses import replace
from pathlib import Path
from typing import Any

from papayu_git import settings
from papayu_git.commands.doctor.items import FAIL, INFO, OK, PROBE_TIMEOUT_SEC, WARN, Here, Item
from papayu_git.errors import PapayuError
from papayu_git.llm.config import LLMConfig, Provider, api_key_source, load_config
from papayu_git.llm.local import MODEL_PACKAGE, SERVER_PACKAGE
from papayu_git.llm.readiness import reach, require_model
from papayu_git.secrets import mask


def _size(path: Path) -> int:
    try:
        return path.stat().st_size
    except OSError:
        return 0


def _mb(size: int) -> str:
    return f"{size / 1e6:.0f} MB"


def model_item() -> Item:
    """Decided as `plan` and `fix` decide it before they start (llm/readiness.py): nothing is
    started or sent here; the local model and llm provider items below try more."""
    name = "model"
    try:
        config = require_model()
    except PapayuError as exc:
        return Item(name, FAIL, f"no model can answer: {exc.reason}", exc.hint or "", exc.code, {"can_answer": False})
    data = {"can_answer": True, "provider": config.provider.value}
    if config.provider is Provider.LOCAL:
        return Item(name, OK, f"the embedded model ({config.model}) is installed: asked below", data=data)
    return Item(name, OK, f"{config.provider.value} at {mask(config.base_url)} accepts connections", data=data)


def local_model_item(here: Here) -> Item:
    """Located the way llm/local.py does, without assembling or starting anything."""
    name = "local model"
    used = here.provider == "local"
    missing = WARN if used else INFO
    install = "`pip install 'papayu-git[local]'` into papayu's environment, then `git papayu doctor`."
    server = [m for m in (SERVER_PACKAGE,) if importlib.util.find_spec(m) is None]
    configured = settings.get("local_model", str(here.root) if here.root else None)
    data: dict[str, Any] = {"used": used, "server_installed": not server}
    if configured:
        path = Path(configured).expanduser()
        data.update(path=str(path), size=_size(path) if path.is_file() else None, source="PAPAYU_LOCAL_MODEL")
        if not path.is_file():
            return Item(
                name,
                missing,
                f"PAPAYU_LOCAL_MODEL points at {path}, which is not a file",
                "Point PAPAYU_LOCAL_MODEL at a GGUF file, then `git papayu doctor`.",
                data=data,
            )
        detail = f"{path} ({_mb(_size(path))}, PAPAYU_LOCAL_MODEL)"
    else:
        if importlib.util.find_spec(MODEL_PACKAGE) is None:
            return Item(
                name,
                missing,
                f"the model package {MODEL_PACKAGE.replace('_', '-')} is not installed",
                install,
                data=data,
            )
        from importlib import import_module

        try:
            package = import_module(MODEL_PACKAGE)
            chunks = [Path(p) for p in package.chunk_paths()]
            model_name = str(package.MODEL_NAME)
        except (ImportError, OSError, AttributeError) as exc:
            return Item(name, missing, f"the model package is broken: {exc}", install, data=data)
        absent = [str(p) for p in chunks if not p.is_file()]
        if absent:
            return Item(name, missing, f"model chunks missing: {', '.join(absent)}", install, data=data)
        # The GGUF is assembled into the user cache on first use (llm/model_file.py): only look.
        assembled = Path.home() / ".cache" / MODEL_PACKAGE / model_name
        size = sum(_size(p) for p in chunks)
        data.update(
            path=str(chunks[0].parent.parent),
            size=size,
            source=MODEL_PACKAGE,
            assembled=str(assembled) if assembled.is_file() else None,
        )
        where = f"assembled at {assembled}" if assembled.is_file() else "assembled on first use"
        detail = f"{model_name} ({_mb(size)}, package {MODEL_PACKAGE.replace('_', '-')}; {where})"
    if server:
        return Item(name, missing, f"{detail}; but {SERVER_PACKAGE} (llama.cpp) is not installed", install, data=data)
    if not used:
        return Item(name, INFO, detail + "; not used (another provider is set)", data=data)
    return _one_token(name, detail, data, here)


def _one_token(name: str, detail: str, data: dict[str, Any], here: Here) -> Item:
    """Start the embedded model and ask it for one token: found on disk is not the same as working
    (a llama.cpp built for another CPU dies on its first request)."""
    from papayu_git.llm.session import open_client

    started = time.monotonic()
    try:
        with open_client(here.root) as client:
            client.complete([{"role": "user", "content": "Say OK."}], None, input_chars=7, max_tokens=1)
            window = client.window.get()
    except PapayuError as exc:
        data.update(answered=False, error=exc.to_dict())
        return Item(name, FAIL, f"{detail}; started and asked for one token: {exc.reason}", exc.hint, exc.code, data)
    seconds = round(time.monotonic() - started, 1)
    data.update(answered=True, answer_sec=seconds, context_window=window.tokens)
    return Item(name, OK, f"{detail}; answered one token in {seconds:g} s (window {window.tokens} tokens)", data=data)


def provider_item(here: Here) -> Item:
    name = "llm provider"
    cwd = str(here.root) if here.root else None
    try:
        config = load_config(cwd)
    except PapayuError as exc:
        return Item(name, FAIL, f"{exc.code}: {exc.reason}", exc.hint, code=exc.code)
    here.provider, here.model = config.provider.value, config.model
    key_from = api_key_source(config.provider, config.base_url)
    base_url = mask(config.base_url)
    data = {
        "provider": config.provider.value,
        "base_url": base_url or None,
        "model": config.model or None,
        "api_key_set": bool(config.api_key),
        "api_key_from": key_from,
        "source": settings.resolve("llm_provider", cwd).source,
    }
    key = f"API key set ({key_from})" if key_from else "no API key"
    if config.provider is Provider.LOCAL:
        return Item(name, OK, f"local: the embedded model {config.model}, started on demand; {key}", data=data)
    model = config.model or "(asked from the server's /models)"
    detail = f"{config.provider.value} at {base_url}, model {model}; {key}"
    if config.provider is Provider.OPENAI and not config.api_key:
        return Item(
            name,
            WARN,
            detail,
            "Set the environment variable OPENAI_API_KEY (or PAPAYU_LLM_API_KEY) to your API key, then run "
            "`git papayu doctor` again.",
            data=data,
        )
    problem = reach(config.base_url).problem
    data["reachable"] = not problem
    if problem:
        return Item(
            name,
            WARN,
            f"{detail}; not reachable: {problem}",
            "Start the server, or fix PAPAYU_LLM_BASE_URL or the network, then `git papayu doctor`.",
            data=data,
        )
    if config.model:
        return Item(name, OK, f"{detail}; reachable", data=data)
    return _served_model(here, config, data, f"{config.provider.value} at {base_url}; {key}")


def _served_model(here: Here, config: LLMConfig, data: dict[str, Any], said: str) -> Item:
    """No model configured: the one the server lists at /models, asked the way a plan asks it."""
    from papayu_git.llm.client import ChatClient  # only here: httpx and the client

    try:
        with ChatClient(replace(config, timeout_sec=PROBE_TIMEOUT_SEC, retries=0)) as client:
            here.model = client.model()
    except PapayuError as exc:
        return Item("llm provider", WARN, f"{said}; no model: {exc.reason}", exc.hint, code=exc.code, data=data)
    data["model"] = here.model
    return Item("llm provider", OK, f"{said}; reachable, model {here.model} (the one it serves)", data=data)
