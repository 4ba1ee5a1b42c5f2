"""digests.py gives hashlib's digests, small inputs without loading OpenSSL."""

from __future__ import annotations

import hashlib
import subprocess
import sys

from papayu_git.digests import sha1_hex, sha256_hex


def test_the_digests_are_hashlibs_for_small_and_large_inputs() -> None:
    for data in (b"", b"x", bytes(range(256)) * 300, b"a" * (64 * 1024), b"b" * (64 * 1024 - 1)):
        assert sha1_hex(data) == hashlib.sha1(data).hexdigest()
        assert sha256_hex(data) == hashlib.sha256(data).hexdigest()


def test_small_inputs_leave_openssl_unloaded() -> None:
    script = "import sys\nfrom papayu_git.digests import sha1_hex, sha256_hex\nsha1_hex(b'x'); sha256_hex(b'x')\nprint('_hashlib' in sys.modules)"
    assert subprocess.run([sys.executable, "-c", script], capture_output=True, text=True).stdout.strip() == "False"
