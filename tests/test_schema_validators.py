"""papayu_git/schema_validators/ (fastjsonschema code generated ahead of time for start-up): up to
date with schemas/, used only for the exact schema bytes it came from, light to import."""

from __future__ import annotations

import json
import re
import shutil
import subprocess
import sys
from pathlib import Path

import pytest
from helpers import ROOT

from papayu_git import schemas

NAMES = sorted(p.stem for p in (ROOT / "schemas").glob("*.json") if p.stem not in schemas.DATA_FILES)
PLAN = {
    "actions": [{"kind": "CREATE_FILE", "path": f"src/m{i}.py", "content": "x = 1\n"} for i in range(10)],
    "summary": "a summary longer than twelve characters",
    "memory_patch": {},
}


def _recorded_version(text: str) -> str:
    match = re.search(r"^# fastjsonschema (\S+):", text, re.M)
    assert match, "generated module without the fastjsonschema version in its header"
    return match.group(1)


def test_generated_validators_are_up_to_date() -> None:
    import fastjsonschema

    expected = schemas.generated_files()
    generated = sorted(p for p in schemas.GENERATED.glob("*.py") if p.name != "__init__.py")  # hand-written
    assert generated == sorted(expected), "run: python -m papayu_git.schemas --write"
    for path, text in expected.items():
        current = path.read_text(encoding="utf-8")
        assert f'SCHEMA_SHA256 = "{schemas.schema_hash(path.stem)}"' in current, (
            f"{path.name} is stale: run: python -m papayu_git.schemas --write"
        )
        if _recorded_version(current) != fastjsonschema.VERSION:
            continue  # another fastjsonschema writes other code; the hash above still guards the rule
        assert current == text, f"{path.name} is stale: run: python -m papayu_git.schemas --write"


@pytest.mark.parametrize("name", NAMES)
def test_every_schema_is_checked_by_its_generated_validator(name: str) -> None:
    from papayu_git.schema_validators import JsonSchemaValueException

    validator = schemas._fast_validator(name)
    assert validator.__module__ == f"papayu_git.schema_validators.{name}"
    with pytest.raises(JsonSchemaValueException):
        validator(["not", "an", "object"])
    action = schemas._action_validator(name)
    assert (action is not None) == name.startswith("llm_response")


def _probe(pythonpath: Path, code: str) -> dict:
    proc = subprocess.run(
        [sys.executable, "-c", code],
        cwd=pythonpath,
        capture_output=True,
        text=True,
        timeout=60,
        env={"PYTHONPATH": str(pythonpath), "PATH": "/usr/bin:/bin"},
    )
    assert proc.returncode == 0, proc.stderr
    return json.loads(proc.stdout.splitlines()[-1])


VALIDATE_PROBE = f"""
import json, sys
from papayu_git import schemas
from papayu_git.validate import validate_response
from papayu_git.errors import ValidationFailed
try:
    validate_response({PLAN!r}, protocol=2, mode="apply")
    codes = []
except ValidationFailed as exc:
    codes = [e.code for e in exc.errors]
print(json.dumps({{"module": schemas._fast_validator("llm_response_v2").__module__, "codes": codes,
                   "heavy": sorted(m for m in ("fastjsonschema", "decimal", "jsonschema") if m in sys.modules)}}))
"""


def test_validating_a_plan_imports_neither_fastjsonschema_nor_decimal() -> None:
    result = _probe(ROOT, VALIDATE_PROBE)
    assert result == {"module": "papayu_git.schema_validators.llm_response_v2", "codes": [], "heavy": []}


def test_an_edited_schema_falls_back_to_runtime_compiling_until_regenerated(tmp_path: Path) -> None:
    shutil.copytree(ROOT / "papayu_git", tmp_path / "papayu_git", ignore=shutil.ignore_patterns("__pycache__"))
    shutil.copytree(ROOT / "schemas", tmp_path / "schemas")
    schema_file = tmp_path / "schemas" / "llm_response_v2.json"
    schema = json.loads(schema_file.read_text(encoding="utf-8"))
    schema["properties"]["summary"]["maxLength"] = 12  # a rule the generated code does not know
    schema_file.write_text(json.dumps(schema, indent=2), encoding="utf-8")

    stale = _probe(tmp_path, VALIDATE_PROBE)
    assert stale["module"] != "papayu_git.schema_validators.llm_response_v2"  # compiled at runtime
    assert "fastjsonschema" in stale["heavy"] and stale["codes"] == ["ERR_SCHEMA"]

    run = [sys.executable, "-m", "papayu_git.schemas"]
    env = {"PYTHONPATH": str(tmp_path), "PATH": "/usr/bin:/bin"}
    check = subprocess.run([*run, "--check"], cwd=tmp_path, capture_output=True, text=True, env=env)
    assert check.returncode == 1 and "out of date" in check.stderr and "llm_response_v2.py" in check.stderr
    assert "llm_response_v1.py" not in check.stderr
    assert subprocess.run([*run, "--write"], cwd=tmp_path, capture_output=True, env=env).returncode == 0
    assert subprocess.run([*run, "--check"], cwd=tmp_path, capture_output=True, env=env).returncode == 0

    fresh = _probe(tmp_path, VALIDATE_PROBE)
    assert fresh["module"] == "papayu_git.schema_validators.llm_response_v2" and fresh["codes"] == ["ERR_SCHEMA"]
    assert "fastjsonschema" not in fresh["heavy"]  # jsonschema (and decimal through it) only to report the error


def test_decimal_stand_in_matches_real_decimals_only() -> None:
    import decimal

    from papayu_git.schema_validators import Decimal

    assert isinstance(decimal.Decimal("1.5"), Decimal)
    assert not isinstance(1.5, Decimal) and not isinstance("1.5", Decimal)
