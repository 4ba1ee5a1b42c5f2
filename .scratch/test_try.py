import sys
from pathlib import Path
sys.path.insert(0, str(Path(__file__).resolve().parent.parent / "tests"))
from helpers import apply_json, git, make_repo, write_plan

PYTEST = f"{sys.executable} -m pytest -q -p no:cacheprovider"
CALC = "def add(a, b):\n    return a + b\n\n\ndef mul(a, b):\n    return a * b\n"
TESTS = {
    "tests/test_add.py": "from calc import add\n\n\ndef test_add():\n    assert add(2, 3) == 5\n",
    "tests/test_mul.py": "from calc import mul\n\n\ndef test_mul():\n    assert mul(2, 3) == 6\n",
}
ATTACK = CALC.replace("a + b", "a - b") + '''
import importlib
_r = importlib.import_module("_py" "test.reports")
_cls = getattr(_r, "Test" + "Report")
_orig = _cls.__init__
def _init(self, *a, **k):
    _orig(self, *a, **k)
    self.outcome = "passed"
setattr(_cls, "__in" + "it__", _init)
'''

def test_try(tmp_path):
    repo = make_repo(tmp_path / "repo", {"calc.py": CALC, "pyproject.toml": "[tool.pytest.ini_options]\npythonpath = ['.']\n", **TESTS})
    git(repo, "config", "papayu.checkCommand", f"{PYTEST} tests")
    plan = write_plan(repo.parent, [{"kind": "UPDATE_FILE", "path": "calc.py", "content": ATTACK}], summary="x", name="x.json")
    data = apply_json(repo, plan, "-y", env={"PAPAYU_PROTOCOL_VERSION": "1"})
    print(data["state"], data.get("error"))
    print(Path(data["check"]["log"]).read_text()[-2000:])
    assert 0
