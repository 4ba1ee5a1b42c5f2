"""The wheel carries the 5 JSON schemas and the man page; schema_hash is sha256 of the installed bytes.
Every library the package imports is a declared dependency, and the wheel installed into a clean
venv (the user's way: its own pip, the registry, no test extras) runs every command once."""

from __future__ import annotations

import ast
import hashlib
import importlib.metadata
import json
import os
import re
import shutil
import subprocess
import sys
import time
import tomllib
import zipfile
from pathlib import Path
from typing import Any

import anyio
import pytest
from helpers import ROOT, git, make_repo, patch_action
from llm_server import ScriptedLLM, chat, plan_answer
from mcp import ClientSession, StdioServerParameters, stdio_client
from test_research import Web, online_env, summary
from tiers import PACKAGING, uses

from papayu_git import schemas
from papayu_git.cli import LAZY_COMMANDS

# One worker builds the wheel and the clean venv once for every test here (make test runs pytest -n).
pytestmark = pytest.mark.xdist_group("wheel")

SCHEMAS = ["golden_trace", "llm_response_v1", "llm_response_v2", "preferences", "project"]
# Read before the hermetic fixture moves HOME, so a clean install reuses the downloads of earlier runs.
PIP_CACHE = os.environ.get("PIP_CACHE_DIR") or str(Path.home() / ".cache" / "pip")


@pytest.fixture(scope="session")
@uses(PACKAGING)
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
        # What the check runs inside the sandbox, and how it reads the package scripts.
        assert {"papayu_git/check/results/node_reports.cjs", "papayu_git/check/results/inside.py"} <= set(names)
        assert "papayu_git/check/scripts/walk.py" in names
        entry_points = zf.read(next(n for n in names if n.endswith("entry_points.txt"))).decode()
    assert "git-papayu = papayu_git.__main__:main" in entry_points
    assert "papayu = papayu_git.__main__:main" in entry_points


def test_wheel_carries_every_module_of_the_package(wheel: Path) -> None:
    """pyproject.toml lists the subpackages by hand: one left out (a new room such as bestof/)
    would be missing from every install while the checkout works."""
    with zipfile.ZipFile(wheel) as zf:
        names = set(zf.namelist())
    modules = sorted(str(p.relative_to(ROOT)) for p in (ROOT / "papayu_git").rglob("*.py"))
    assert [m for m in modules if m not in names] == []


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


def distribution_name(requirement: str) -> str:
    """The normalized project name a requirement line starts with (`lxml_html_clean>=0.4` -> lxml-html-clean)."""
    match = re.match(r"[A-Za-z0-9._-]+", requirement)
    assert match, requirement
    return re.sub(r"[-_.]+", "-", match.group(0)).lower()


def imported_libraries(package: Path) -> dict[str, str]:
    """Top-level name of every module the package imports that is neither ours nor the standard
    library -> one file importing it (lazy imports inside functions included)."""
    found: dict[str, str] = {}
    from papayu_git.check.results.channel import CHECK_SIDE_FILES

    check_side = {package / "check" / "results" / name for name in CHECK_SIDE_FILES}
    for path in sorted(set(package.rglob("*.py")) - check_side):
        for node in ast.walk(ast.parse(path.read_text(encoding="utf-8"))):
            if isinstance(node, ast.Import):
                names = [alias.name for alias in node.names]
            elif isinstance(node, ast.ImportFrom) and node.level == 0 and node.module:
                names = [node.module]
            else:
                continue
            for name in names:
                top = name.split(".")[0]
                if top != "papayu_git" and top not in sys.stdlib_module_names:
                    found.setdefault(top, str(path.relative_to(package.parent)))
    return found


def test_every_library_the_package_imports_is_a_declared_dependency() -> None:
    project = tomllib.loads((ROOT / "pyproject.toml").read_text())["project"]
    declared = {distribution_name(r) for r in project["dependencies"]}
    # The embedded model is an extra of its own: llm/local.py imports it only when asked to run it.
    declared |= {distribution_name(r) for r in project["optional-dependencies"]["local"]}
    providers = importlib.metadata.packages_distributions()
    imported = imported_libraries(ROOT / "papayu_git")
    assert {"click", "pygit2", "mcp", "trafilatura"} <= set(imported)  # the scan sees imports at all
    undeclared = {
        module: where
        for module, where in imported.items()
        if not {distribution_name(d) for d in providers.get(module, [module])} & declared
    }
    assert undeclared == {}, f"imported but not declared in pyproject.toml: {undeclared}"


@pytest.fixture(scope="session")
def clean_venv(wheel: Path, tmp_path_factory: pytest.TempPathFactory) -> Path:
    """The wheel installed as a user installs it: a new venv with the pip it comes with, the
    declared dependencies from the registry, no extras. Built once per session."""
    venv = tmp_path_factory.mktemp("clean-venv")
    subprocess.run([sys.executable, "-m", "venv", str(venv)], check=True, capture_output=True, timeout=300)
    proc = subprocess.run(
        [str(venv / "bin" / "python"), "-m", "pip", "install", "-q", "--disable-pip-version-check", str(wheel)],
        capture_output=True,
        text=True,
        timeout=1200,
        env={**os.environ, "PIP_CACHE_DIR": PIP_CACHE},
    )
    assert proc.returncode == 0, proc.stderr[-3000:]
    return venv


def clean_env(venv: Path, **extra: str) -> dict[str, str]:
    """The test's hermetic environment with the clean venv first on PATH and nothing of this checkout."""
    env = {k: v for k, v in os.environ.items() if k not in ("PYTHONPATH", "VIRTUAL_ENV")}
    return {**env, "PATH": f"{venv / 'bin'}{os.pathsep}{env.get('PATH', '')}", **extra}


def run_clean(venv: Path, *args: str, cwd: Path, env: dict[str, str] | None = None) -> subprocess.CompletedProcess[str]:
    """The installed `papayu ARGS`; fails on a traceback or a bug's exit code (3), whatever the command."""
    proc = subprocess.run(
        [str(venv / "bin" / "papayu"), *args],
        cwd=cwd,
        capture_output=True,
        text=True,
        timeout=300,
        env=clean_env(venv, **(env or {})),
    )
    said = proc.stdout + proc.stderr
    assert proc.returncode != 3 and "Traceback" not in said and "ERR_INTERNAL" not in said, (
        f"papayu {' '.join(args)} exited {proc.returncode}:\n{said[-4000:]}"
    )
    return proc


CALC = "def add(a, b):\n    return a - b\n"
FIX = "--- a/calc.py\n+++ b/calc.py\n@@ -1,2 +1,2 @@\n def add(a, b):\n-    return a - b\n+    return a + b\n"
CHECK = 'python -c "import calc; assert calc.add(2, 3) == 5"'


@pytest.fixture
def calc_repo(tmp_path: Path) -> Path:
    return make_repo(tmp_path / "repo", {"calc.py": CALC})


@pytest.mark.slow
def test_clean_install_is_the_wheel_alone(clean_venv: Path, tmp_path: Path) -> None:
    probe = "import importlib.util, papayu_git; print(papayu_git.__file__, importlib.util.find_spec('pytest'))"
    proc = subprocess.run(
        [str(clean_venv / "bin" / "python"), "-c", probe],
        cwd=tmp_path,
        capture_output=True,
        text=True,
        env=clean_env(clean_venv),
        timeout=60,
    )
    where, pytest_spec = proc.stdout.split()
    assert Path(where).is_relative_to(clean_venv) and pytest_spec == "None"


@pytest.mark.slow
def test_clean_install_prints_every_help(clean_venv: Path, tmp_path: Path) -> None:
    assert "Commands:" in run_clean(clean_venv, "--help", cwd=tmp_path).stdout
    for name in LAZY_COMMANDS:
        proc = run_clean(clean_venv, name, "--help", cwd=tmp_path)
        assert proc.returncode == 0 and "Usage:" in proc.stdout, name


@pytest.mark.slow
@pytest.mark.skipif(shutil.which("man") is None, reason="no man here (Debian: apt-get install man-db)")
def test_clean_install_answers_git_papayu_help_with_its_man_page(clean_venv: Path, calc_repo: Path) -> None:
    """pip puts the page in <venv>/share/man/man1, where man looks for a <venv>/bin on PATH."""
    env = {k: v for k, v in clean_env(clean_venv).items() if k != "MANPATH"}
    proc = subprocess.run(
        ["git", "papayu", "--help"],
        cwd=calc_repo,
        capture_output=True,
        text=True,
        timeout=120,
        env={**env, "MANPAGER": "cat", "PAGER": "cat"},
    )
    assert proc.returncode == 0 and "GIT-PAPAYU(1)" in proc.stdout, proc.stderr
    where = subprocess.run(["man", "-w", "git-papayu"], capture_output=True, text=True, env=env).stdout.strip()
    assert Path(where) == clean_venv / "share/man/man1/git-papayu.1"


@pytest.mark.slow
def test_clean_install_without_the_local_extra_says_what_to_configure_before_fix_starts(
    clean_venv: Path, calc_repo: Path
) -> None:
    """Nothing configured and no embedded model: the first command says both ways to a model."""
    started = time.monotonic()
    proc = run_clean(clean_venv, "fix", "fix the failing test", "-y", "--json", cwd=calc_repo)
    assert proc.returncode == 1 and time.monotonic() - started < 30, proc.stdout + proc.stderr
    error = json.loads(proc.stdout)["errors"][0]
    assert error["code"] == "ERR_LLM_LOCAL_UNAVAILABLE" and "xllamacpp" in error["reason"], error
    for named in ("pip install 'papayu-git[local]'", "PAPAYU_LLM_PROVIDER=openai", "PAPAYU_LLM_BASE_URL="):
        assert named in error["hint"], error["hint"]
    doctor = json.loads(run_clean(clean_venv, "doctor", "--json", cwd=calc_repo).stdout)
    first = doctor["checks"][0]
    assert first["name"] == "model" and first["status"] == "fail" and first["code"] == "ERR_LLM_LOCAL_UNAVAILABLE"
    assert doctor["ok"] is False


@pytest.mark.slow
def test_clean_install_runs_doctor(clean_venv: Path, calc_repo: Path) -> None:
    proc = run_clean(clean_venv, "doctor", "--json", cwd=calc_repo)
    assert proc.returncode in (0, 1)  # 1: something here fails a check, reported as an item
    assert json.loads(proc.stdout)["checks"]


@pytest.mark.slow
def test_clean_install_researches_a_local_page(clean_venv: Path, calc_repo: Path) -> None:
    web, llm = Web(), ScriptedLLM([])
    try:
        web.page("/a", "Calc notes")
        web.page("/b", "Calc changelog")
        llm.script = [summary(web)]
        proc = run_clean(
            clean_venv, "research", "calc add semantics", "--json", cwd=calc_repo, env=online_env(web, llm)
        )
    finally:
        web.close()
        llm.close()
    assert proc.returncode == 0, proc.stderr
    found = json.loads(proc.stdout)
    assert found["stats"]["pages_ok"] == 2 and "a + b" in found["answer_md"]


@pytest.mark.slow
def test_clean_install_plans_and_applies_with_a_scripted_model(clean_venv: Path, calc_repo: Path) -> None:
    apply_answer = {"summary": "add() now adds", "actions": [patch_action("calc.py", CALC.encode(), FIX)]}
    llm = ScriptedLLM([chat(plan_answer()), chat(apply_answer)])
    try:
        planned = run_clean(clean_venv, "plan", "fix add() in calc.py", "--json", cwd=calc_repo, env=llm.env())
        assert planned.returncode == 0, planned.stderr
        plan_id = json.loads(planned.stdout)["plan_id"]
        applied = run_clean(clean_venv, "apply", plan_id, "--check", CHECK, "--json", cwd=calc_repo, env=llm.env())
    finally:
        llm.close()
    assert applied.returncode == 0, applied.stdout + applied.stderr
    assert json.loads(applied.stdout)["state"] == "landed" and len(llm.requests) == 2
    assert git(calc_repo, "show", "main:calc.py") == CALC.replace("a - b", "a + b")


@pytest.mark.slow
def test_clean_install_answers_an_mcp_handshake(clean_venv: Path, calc_repo: Path) -> None:
    errlog_path = calc_repo.parent / "mcp-server.log"

    async def handshake() -> tuple[str, list[str], Any]:
        params = StdioServerParameters(
            command=str(clean_venv / "bin" / "papayu"), args=["mcp"], cwd=str(calc_repo), env=clean_env(clean_venv)
        )
        with errlog_path.open("w") as errlog:
            async with stdio_client(params, errlog=errlog) as (read, write), ClientSession(read, write) as session:
                hello = await session.initialize()
                tools = (await session.list_tools()).tools
                listed = await session.call_tool("list_plans", {})
                return hello.server_info.name, [tool.name for tool in tools], listed

    server, tools, listed = anyio.run(handshake)
    assert server == "papayu" and {"validate_plan", "apply_plan", "list_plans", "read_file"} <= set(tools)
    assert not listed.is_error and listed.structured_content["plans"] == []
    assert "Traceback" not in errlog_path.read_text()
