"""Which distributions of the project's virtualenvs are copies of the project, and what stands in
for them (check/project_copies.py): real directories laid out as pip and tox leave them."""

from __future__ import annotations

import json
from pathlib import Path

from papayu_git.check import project_copies


def _dist(venv: Path, name: str, url: str, record: list[str], editable: bool = False) -> None:
    site = venv / "lib" / "python3.11" / "site-packages"
    info = site / f"{name}-1.0.dist-info"
    info.mkdir(parents=True)
    (venv / "pyvenv.cfg").write_text("home = /usr/bin\n")
    data: dict[str, object] = {"url": url}
    data["dir_info" if url.startswith("file:") and not url.endswith(".tar.gz") else "archive_info"] = (
        {"editable": True} if editable else {}
    )
    (info / "direct_url.json").write_text(json.dumps(data))
    (info / "RECORD").write_text("".join(f"{path},sha256=x,1\n" for path in record))


def test_a_copy_built_from_the_tree_is_stood_in_for_by_the_checkouts_source(tmp_path: Path) -> None:
    repo, work = tmp_path / "repo", tmp_path / "work"
    (work / "src" / "tomlet").mkdir(parents=True)
    (work / "src" / "tomlet" / "__init__.py").write_text("")
    (work / "helper.py").write_text("")
    tox = repo / ".tox"
    sdist = f"file://{repo}/.tox/.tmp/package/1/tomlet-1.0.tar.gz"
    _dist(
        tox / "py", "tomlet", sdist, ["tomlet/__init__.py", "helper.py", "tomlet-1.0.dist-info/RECORD", "../../bin/x"]
    )
    _dist(tox / "py", "editable", f"file://{repo}", ["__editable__.editable-1.0.pth"], editable=True)
    _dist(tox / "py", "other", "file:///elsewhere/other", ["other/__init__.py"])
    _dist(tox / "py", "pypi", "https://files.example/pypi-1.0.whl", ["pypi/__init__.py"])

    venvs = project_copies.virtualenvs([tox])
    assert venvs == [tox / "py"]  # one level inside .tox
    found = project_copies.copies(repo, work, venvs)
    assert [(c.name, c.roots, c.missing) for c in found] == [("tomlet 1.0", ("", "src"), ())]
    assert project_copies.python_path(found, "/r") == ["/r", "/r/src"]
    notes = project_copies.notes(found, repo, work)
    assert notes == [
        ".tox/py holds tomlet 1.0 installed as a copy of the tree: the check imports it from the checkout (the root, src/, first on PYTHONPATH), not from that copy"
    ]


def test_a_compiled_copy_and_changed_packaging_name_the_setting_that_rebuilds(tmp_path: Path) -> None:
    repo, work = tmp_path / "repo", tmp_path / "work"
    (work / "fast").mkdir(parents=True)
    (work / "fast" / "__init__.py").write_text("")
    (work / "pyproject.toml").write_text('[project]\nname = "fast"\nversion = "2"\n')
    repo.mkdir()
    (repo / "pyproject.toml").write_text('[project]\nname = "fast"\nversion = "1"\n')
    record = ["fast/__init__.py", "fast/_speedups.cpython-311-x86_64-linux-gnu.so"]
    _dist(repo / ".venv", "fast", f"file://{repo}", record)

    found = project_copies.copies(repo, work, project_copies.virtualenvs([repo / ".venv"]))
    assert [(c.name, c.compiled) for c in found] == [("fast 1.0", ("fast",))]
    assert project_copies.python_path(found, "/r") == []  # source cannot stand in for compiled code
    notes = project_copies.notes(found, repo, work)
    assert notes[0].startswith("the checkout's pyproject.toml differ from your tree's")
    assert "compiled modules (fast)" in notes[1] and "papayu.check.reinstall true" in notes[1]
