"""The packaged model's first assembly into the user cache (papayu_git/llm/model_file.py): two
papayu processes starting the embedded model at once, a truncated model file, a papayu killed
while assembling. Each ends with the right GGUF, never with a file every later run refuses.

Real processes through the real CLI, the real model package, a HOME of the test's own (the
hermetic fixture), so the model is assembled anew in each test.
"""

from __future__ import annotations

import hashlib
import importlib.util
import json
import os
import signal
from importlib import import_module
from pathlib import Path
from types import ModuleType

import pytest
from helpers import make_repo, run_papayu_bg, wait_for_marker

from papayu_git.llm import local

pytestmark = [
    pytest.mark.local_llm,
    pytest.mark.skipif(
        importlib.util.find_spec(local.MODEL_PACKAGE) is None, reason="the model package is not installed"
    ),
]


def _package() -> ModuleType:
    return import_module(local.MODEL_PACKAGE)


def _target() -> Path:
    return Path.home() / ".cache" / local.MODEL_PACKAGE / str(_package().MODEL_NAME)


def _sha256(path: Path) -> str:
    digest = hashlib.sha256()
    with open(path, "rb") as file:
        while block := file.read(1 << 20):
            digest.update(block)
    return digest.hexdigest()


def test_two_processes_starting_the_local_model_at_once_both_get_a_working_model(tmp_path: Path) -> None:
    if importlib.util.find_spec(local.SERVER_PACKAGE) is None:
        pytest.skip("papayu-git[local] is not installed")
    repo = make_repo(tmp_path / "repo")
    procs = [run_papayu_bg(["doctor", "--json"], repo, env={"PAPAYU_LOG": "1"}) for _ in range(2)]
    outputs = [proc.communicate(timeout=600) for proc in procs]
    for out, err in outputs:
        model = {c["name"]: c for c in json.loads(out)["checks"]}["local model"]
        assert model["status"] == "ok" and model["data"]["answered"] is True, (model, err[-2000:])
    # One of them assembled the model; the other waited for it (or found it done).
    assert sum(err.count("LOCAL_MODEL_ASSEMBLING") for _, err in outputs) == 1, [e[-2000:] for _, e in outputs]
    assert _sha256(_target()) == _package().EXPECTED_SHA256
    assert list(_target().parent.glob("*.tmp")) == []


def test_a_truncated_model_file_is_rebuilt_not_an_error() -> None:
    target = _target()
    target.parent.mkdir(parents=True, exist_ok=True)
    first_part = Path(_package().chunk_paths()[0])
    target.write_bytes(first_part.read_bytes()[: 5 << 20])  # what an interrupted first run left
    assert local.model_path() == target
    assert target.stat().st_size == sum(Path(p).stat().st_size for p in _package().chunk_paths())
    assert _sha256(target) == _package().EXPECTED_SHA256
    # Verified once: the next start does not hash 250 MB again, but a changed file is seen.
    stamp = target.with_name(f".{target.name}.verified")
    assert stamp.read_text().split()[-1] == _package().EXPECTED_SHA256
    with open(target, "r+b") as model:
        model.truncate(1 << 20)
    assert local.model_path() == target and _sha256(target) == _package().EXPECTED_SHA256


def test_a_papayu_killed_while_assembling_leaves_no_model_file_and_the_next_run_builds_it(tmp_path: Path) -> None:
    if importlib.util.find_spec(local.SERVER_PACKAGE) is None:
        pytest.skip("papayu-git[local] is not installed")
    target = _target()
    proc = run_papayu_bg(["local-server"], tmp_path, env={"PAPAYU_TEST_PAUSE_AT": "model_assembly"})
    try:
        wait_for_marker(proc, timeout=120)  # the first part is written to the temporary file
        [partial] = target.parent.glob(f".{target.name}.*.tmp")
        assert partial.stat().st_size > 0 and not target.exists()
    finally:
        os.kill(proc.pid, signal.SIGKILL)
        proc.wait(timeout=30)
    assert not target.exists()  # nothing at the final path: no later run finds a corrupt model

    # The next start takes over the dead one's lock, drops its leftover, and builds the model.
    assert local.model_path() == target
    assert _sha256(target) == _package().EXPECTED_SHA256
    assert not partial.exists() and list(target.parent.glob("*.tmp")) == []
