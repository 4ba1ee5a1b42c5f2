"""`make demo`: papayu-git end to end on a built-in sample repository.

Grows with the product: today it validates a good and a bad plan; the apply and
LLM issues extend it to plan -> apply -> land / roll back.
"""

from __future__ import annotations

import json
import shutil
import subprocess
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
WORK = ROOT / "demo-work"


def step(text: str) -> None:
    print(f"\n==> {text}", flush=True)


def sh(*args: str, cwd: Path = WORK, check: bool = True) -> subprocess.CompletedProcess[str]:
    print("$ " + " ".join(args), flush=True)
    proc = subprocess.run(args, cwd=cwd, text=True, capture_output=True)
    sys.stdout.write(proc.stdout)
    sys.stdout.write(proc.stderr)
    if check and proc.returncode != 0:
        raise SystemExit(f"demo step failed: {' '.join(args)} (exit {proc.returncode})")
    return proc


def main() -> None:
    shutil.rmtree(WORK, ignore_errors=True)
    WORK.mkdir()
    papayu = [sys.executable, "-m", "papayu_git"]
    step("A good plan validates")
    good = {"actions": [{"kind": "CREATE_FILE", "path": "hello.py", "content": "print('hi')\n"}],
            "summary": "add hello.py"}
    (WORK / "good.json").write_text(json.dumps(good))
    sh(*papayu, "validate", "good.json")
    step("A plan that writes into .git and a secret is rejected with ERR codes")
    bad = {"actions": [{"kind": "CREATE_FILE", "path": "src/.GIT/config", "content": "x"},
                       {"kind": "UPDATE_FILE", "path": ".env", "content": "TOKEN=1"}]}
    (WORK / "bad.json").write_text(json.dumps(bad))
    proc = sh(*papayu, "validate", "bad.json", check=False)
    assert proc.returncode == 1, "the bad plan must be rejected"
    print("\ndemo finished: good plan accepted, bad plan rejected (exit 1)")


if __name__ == "__main__":
    main()
