"""The wheel carries the 5 JSON schemas and the man page; schema_hash is sha256 of the installed bytes."""

from __future__ import annotations

import hashlib
import json
import subprocess
import sys
import zipfile
from pathlib import Path

import pytest
from helpers import ROOT

from papayu_git import schemas

SCHEMAS = ["golden_trace", "llm_response_v1", "llm_response_v2", "preferences", "project"]


@pytest.fixture(scope="module")
def wheel(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """Build from a copy of the tracked files, so the checkout gets no build/ or egg-info."""
    src = tmp_path_factory.mktemp("src")
    files = subprocess.run(
        ["git", "ls-files", "-z", "--cached", "--others", "--exclude-standard"],
        cwd=ROOT,
        capture_output=True,
        text=True,
        check=True,
    ).stdout.split("\0")
    for name in filter(None, files):
        if (ROOT / name).is_file():
            (src / name).parent.mkdir(parents=True, exist_ok=True)
            (src / name).write_bytes((ROOT / name).read_bytes())
    out = tmp_path_factory.mktemp("dist")
    proc = subprocess.run(
        [sys.executable, "-m", "pip", "wheel", "--no-deps", "-q", "-w", str(out), str(src)],
        capture_output=True,
        text=True,
        timeout=600,
    )
    assert proc.returncode == 0, proc.stderr[-3000:]
    (built,) = out.glob("papayu_git-*.whl")
    return built


def test_wheel_contains_the_schemas_man_page_and_entry_points(wheel: Path) -> None:
    with zipfile.ZipFile(wheel) as zf:
        names = zf.namelist()
        for name in SCHEMAS:
            data = zf.read(f"papayu_git/schema_data/{name}.json")
            assert data == (ROOT / "schemas" / f"{name}.json").read_bytes()
            json.loads(data)
        assert any(n.endswith(".data/data/share/man/man1/git-papayu.1") for n in names)
        entry_points = zf.read(next(n for n in names if n.endswith("entry_points.txt"))).decode()
    assert "git-papayu = papayu_git.cli:main" in entry_points
    assert "papayu = papayu_git.cli:main" in entry_points


def run_installed(wheel: Path, site: Path, probe: str) -> str:
    """Run ``probe`` against the wheel unpacked into ``site`` (nothing of this checkout on the
    path); its stdout."""
    with zipfile.ZipFile(wheel) as zf:
        zf.extractall(site)
    proc = subprocess.run(
        [sys.executable, "-c", probe],
        cwd=site.parent,
        capture_output=True,
        text=True,
        env={"PYTHONPATH": str(site), "PATH": "/usr/bin:/bin"},
        timeout=60,
    )
    assert proc.returncode == 0, proc.stderr
    return proc.stdout


def test_installed_wheel_finds_its_schemas_and_hashes_their_bytes(wheel: Path, tmp_path: Path) -> None:
    target = tmp_path / "site"
    probe = (
        "import json; from papayu_git import schemas; "
        f"print(json.dumps({{n: [str(schemas.schema_dir()), schemas.schema_hash(n)] for n in {SCHEMAS!r}}}))"
    )
    stdout = run_installed(wheel, target, probe)
    for name, (directory, digest) in json.loads(stdout).items():
        installed = Path(directory) / f"{name}.json"
        assert installed.parent == target / "papayu_git" / "schema_data"
        assert digest == hashlib.sha256(installed.read_bytes()).hexdigest()


def test_installed_wheel_validates_with_its_generated_validators(wheel: Path, tmp_path: Path) -> None:
    probe = (
        "import json; from papayu_git import schemas; "
        f"print(json.dumps([schemas._fast_validator(n).__module__ for n in {SCHEMAS!r}]))"
    )
    stdout = run_installed(wheel, tmp_path / "site", probe)
    assert json.loads(stdout) == [f"papayu_git.schema_validators.{name}" for name in SCHEMAS]


def test_schema_hash_of_this_install_is_the_file_sha256() -> None:
    for name in SCHEMAS:
        path = schemas.schema_dir() / f"{name}.json"
        assert schemas.schema_hash(name) == hashlib.sha256(path.read_bytes()).hexdigest()
        assert schemas.load_schema(name)["$schema"].startswith("http://json-schema.org/")


def test_installed_wheel_carries_the_git_hook_shim(wheel: Path, tmp_path: Path) -> None:
    with zipfile.ZipFile(wheel) as zf:
        assert zf.read("papayu_git/hook_data/pre-commit") == (ROOT / "hooks" / "pre-commit").read_bytes()
    probe = "from papayu_git import hooks; print(hooks.shim_source()); print(hooks.shim_text('/x/python'))"
    stdout = run_installed(wheel, tmp_path / "site", probe)
    source, text = stdout.split("\n", 1)
    assert Path(source) == tmp_path / "site" / "papayu_git" / "hook_data" / "pre-commit"
    assert "PAPAYU_PYTHON='/x/python'" in text and "PAPAYU_FILES_RE='(^|/)" in text
