"""`make demo` judges the hostile plan's escapes on this machine, outside the sandbox, and runs
from a clone under /tmp whose path (and interpreter's path) holds a space."""

from __future__ import annotations

import importlib.util
import os
import re
import shutil
import subprocess
import sys
from pathlib import Path
from types import ModuleType

from papayu_git.check.sandbox import unavailable_reason

ROOT = Path(__file__).resolve().parent.parent


def load_demo() -> ModuleType:
    spec = importlib.util.spec_from_file_location("run_demo", ROOT / "demo" / "run_demo.py")
    assert spec and spec.loader
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


def clone_with_python(dest: Path) -> Path:
    """The repository's tracked files (as they are in the work tree) copied to ``dest``, with a
    venv inside it that sees this interpreter's packages; returns that venv's python."""
    listed = subprocess.run(["git", "ls-files", "-z"], cwd=ROOT, check=True, capture_output=True).stdout
    for name in filter(None, listed.decode().split("\0")):
        if (ROOT / name).is_file():
            (dest / name).parent.mkdir(parents=True, exist_ok=True)
            shutil.copy2(ROOT / name, dest / name)
    venv = dest / ".venv"
    subprocess.run([sys.executable, "-m", "venv", "--without-pip", str(venv)], check=True)
    site = next((venv / "lib").glob("python*/site-packages"))
    ours = [p for p in sys.path if p.endswith("site-packages") and Path(p).is_dir()]
    (site / "papayu_test_packages.pth").write_text("\n".join(ours) + "\n")
    return venv / "bin" / "python"


def test_reached_host_flags_exactly_the_targets_holding_the_marker(tmp_path: Path) -> None:
    demo = load_demo()
    repo = tmp_path / "repo"
    (repo / ".git" / "hooks").mkdir(parents=True)
    marker = f"papayu-demo-escape-{os.urandom(8).hex()}"
    targets = demo.escape_targets(repo, marker)
    try:
        (repo / "NOTES.md").write_text("my notes\n")  # there, but untouched by the attack
        (repo / "calc.py").write_text(f"import os\n{marker}\n")  # the attack got into the user's file
        targets["write into your HOME"].write_text(marker + "\n")
        targets["write into the machine's /tmp"].mkdir()  # not a file: nothing written
        assert demo.reached_host(targets, marker) == ["edit your calc.py", "write into your HOME"]
        assert demo.reached_host(targets, "papayu-demo-escape-other") == []
    finally:
        targets["write into your HOME"].unlink(missing_ok=True)
        targets["write into the machine's /tmp"].rmdir()


def test_escape_targets_lie_outside_the_sandbox_view_and_name_the_marker(tmp_path: Path) -> None:
    demo = load_demo()
    marker = "papayu-demo-escape-0123"
    targets = demo.escape_targets(tmp_path / "repo", marker)
    assert targets["write into your HOME"].parent == Path.home()
    assert targets["write into the machine's /tmp"].parent == Path("/tmp")
    assert targets["write outside the repository"].parent == tmp_path
    new_files = [p for what, p in targets.items() if what not in ("overwrite your notes", "edit your calc.py")]
    assert all(marker in p.name for p in new_files if ".git" not in p.parts)


def run_step(clone: Path, step: str) -> subprocess.CompletedProcess[str]:
    """`run_demo.py STEP` from a copy of the repository at ``clone``."""
    python = clone_with_python(clone)
    return subprocess.run(
        [str(python), str(clone / "demo" / "run_demo.py"), step],
        cwd=clone,
        capture_output=True,
        text=True,
        timeout=180,
        # The clone's interpreter uses this venv's packages: the check must see them too.
        env={**os.environ, "PYTHONPATH": str(clone), "VIRTUAL_ENV": sys.prefix},
    )


def test_hostile_step_passes_from_a_clone_under_tmp_with_a_space(tmp_path: Path) -> None:
    clone = tmp_path / "a clone with space"
    proc = run_step(clone, "hostile")
    out = proc.stdout + proc.stderr
    assert proc.returncode == 0, out[-4000:]
    assert "Traceback" not in out and "demo finished: hostile" in out
    verdicts = re.findall(r"^(ESCAPED|contained): (.+) \((.+)\)$", proc.stdout, re.MULTILINE)
    assert len(verdicts) == 6, out[-4000:]
    assert str(clone) in proc.stdout  # the sample repository lives in the clone under /tmp
    if unavailable_reason() is None:
        assert {verdict for verdict, _, _ in verdicts} == {"contained"}, verdicts
        assert "Blocked: the plan was rolled back" in proc.stdout
    else:  # unsandboxed, the writes are real, and the demo reports them as escapes
        escaped = {what for verdict, what, _ in verdicts if verdict == "ESCAPED"}
        assert {"write into your HOME", "write into the machine's /tmp"} <= escaped, verdicts
    for _, _, path in verdicts:  # whatever the attack created beside the repository, in HOME or /tmp is gone
        if "papayu-demo-escape-" in Path(path).name:
            assert not Path(path).exists(), path


def test_apply_step_passes_from_a_clone(tmp_path: Path) -> None:
    """The demo's core story on its own: the wrong plan kept from landing, the fix landed with its
    verdict (the demo asserts each, so a change of papayu's behaviour fails here, not in `make demo`)."""
    proc = run_step(tmp_path / "clone", "apply")
    out = proc.stdout + proc.stderr
    assert proc.returncode == 0 and "Traceback" not in out, out[-4000:]
    assert "Papayu-Check: passed 1, fixed 1, already failing 0" in proc.stdout
