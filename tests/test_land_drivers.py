"""The user's git filter drivers never run on a plan's files (docs/DESIGN.md, "Landing"): not at
the check's checkout, not while the plan lands in the user's work tree, and the work tree gets
the very blobs the check ran on.

The driver is configured where `git lfs install` puts it (~/.gitconfig, required, with a
long-running `process` too) and is a script that leaves a marker file whenever git starts it.
"""

from __future__ import annotations

import os
import subprocess
import time
from pathlib import Path
from typing import Any

import pytest
from helpers import apply_json, blob, git, make_repo, papayu, write_plan

from papayu_git.check import sandbox

pytestmark = pytest.mark.skipif(
    sandbox.unavailable_reason() is not None, reason=f"bwrap does not work here: {sandbox.unavailable_reason()}"
)


def _configure_driver(tmp_path: Path, repo: Path) -> Path:
    """The filter driver `git lfs install` would configure, as a marker-leaving script; the
    repository's index made not racily clean first (else git would hash, and filter, the
    user's own files on its next look, before any plan)."""
    time.sleep(1.1)
    git(repo, "update-index", "-q", "--refresh")
    marker = tmp_path / "driver-ran"
    script = tmp_path / "driver.sh"
    script.write_text(f'#!/bin/sh\necho "$*" >> "{marker}"\ncat\n')
    script.chmod(0o755)
    with open(Path(os.environ["HOME"]) / ".gitconfig", "a", encoding="utf-8") as config:
        config.write(
            f'[filter "lfs"]\n\tclean = {script} clean %f\n\tsmudge = {script} smudge %f\n'
            f"\tprocess = {script} process\n\trequired = true\n"
        )
    return marker


def _land(
    repo: Path, tmp_path: Path, name: str, actions: list[dict[str, str]], check: str
) -> tuple[dict[str, Any], str]:
    """Applied and landed; the check's logs (the regression run's, then the plan's own run's: data
    files are the plan's own only there, and --allow-test-edits lets that run judge them)."""
    plan = write_plan(tmp_path, actions, name=f"{name}.json")
    flags = ("-y", "--allow-test-edits", "--check", check)
    data = apply_json(repo, plan, *flags, env={"PAPAYU_PROTOCOL_VERSION": "1"})
    check_record = data.get("check") or {}
    logs = [Path(p).read_text() for p in (check_record.get("log"), check_record.get("own_log")) if p]
    return data, "\n".join(logs)


def _same_as_blobs(repo: Path, paths: list[str]) -> None:
    for path in paths:
        assert (repo / path).read_bytes() == blob(repo, f"HEAD:{path}"), path


def _driver_would_run(repo: Path, marker: Path) -> None:
    """The probe works: the user's own git runs the driver (and fails it, required)."""
    (repo / "data.bin").unlink()
    proc = subprocess.run(["git", "checkout", "--", "data.bin"], cwd=repo, capture_output=True, text=True)
    assert marker.exists(), proc.stderr


LFSCONFIG = "[lfs]\n\turl = http://127.0.0.1:9/attacker\n"


def test_a_plan_adding_gitattributes_never_runs_the_users_filter_driver(tmp_path: Path) -> None:
    repo = make_repo(tmp_path / "repo")
    marker = _configure_driver(tmp_path, repo)
    attack = [
        {"kind": "CREATE_FILE", "path": ".gitattributes", "content": "* filter=lfs diff=lfs merge=lfs\n"},
        {"kind": "CREATE_FILE", "path": ".lfsconfig", "content": LFSCONFIG},
        {"kind": "CREATE_FILE", "path": "data.bin", "content": "raw plan bytes\n"},
    ]
    data, log = _land(repo, tmp_path, "attack", attack, "cat data.bin")
    assert not marker.exists(), (marker.read_text(), data)
    # Landed through `git merge --ff-only` (a .gitattributes change), the check saw the blob.
    assert data["state"] == "landed", (data, log)
    assert "raw plan bytes" in log, log
    _same_as_blobs(repo, [".gitattributes", ".lfsconfig", "data.bin"])
    # The honest plan after it lands the same way, and the user's driver is still theirs.
    honest = [{"kind": "UPDATE_FILE", "path": "README.md", "content": "# sample, edited\n"}]
    data, _ = _land(repo, tmp_path, "honest", honest, "true")
    assert data["state"] == "landed" and not marker.exists(), data
    _same_as_blobs(repo, ["README.md", "data.bin"])
    assert git(repo, "config", "--get", "filter.lfs.process").strip().endswith("process")
    # Taking the honest plan back rewrites files under the plan's attributes: no driver either.
    undo = papayu("undo", data["plan_id"], cwd=repo)
    assert undo.returncode == 0 and not marker.exists(), undo.stderr
    assert (repo / "README.md").read_bytes() == blob(repo, "HEAD:README.md") == b"# sample\n"
    _driver_would_run(repo, marker)


def test_a_plan_on_a_tip_with_a_filter_attribute_lands_its_blobs_unfiltered(tmp_path: Path) -> None:
    # The tip already routes *.bin through the driver: the plan's files take the fast path
    # (`git apply --index`), which writes them without it.
    repo = make_repo(
        tmp_path / "repo",
        {
            "README.md": "# sample\n",
            ".gitattributes": "*.bin filter=lfs\n",
            ".lfsconfig": LFSCONFIG,
            "data.bin": "v1\n",
        },
    )
    marker = _configure_driver(tmp_path, repo)
    plan = [
        {"kind": "UPDATE_FILE", "path": "data.bin", "content": "v2 from the plan\n"},
        {"kind": "CREATE_FILE", "path": "new.bin", "content": "new plan file\n"},
        {"kind": "UPDATE_FILE", "path": "README.md", "content": "# sample, edited\n"},
    ]
    data, log = _land(repo, tmp_path, "plan", plan, "cat data.bin new.bin")
    assert not marker.exists(), (marker.read_text(), data)
    assert data["state"] == "landed", (data, log)
    assert "v2 from the plan" in log and "new plan file" in log, log
    _same_as_blobs(repo, ["data.bin", "new.bin", "README.md"])
    _driver_would_run(repo, marker)
