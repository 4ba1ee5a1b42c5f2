"""`papayu.check.localPorts`: loopback TCP ports of the host relayed into the sandboxed check,
whose network stays off (docs/DESIGN.md, "The check's environment").

Outside, papayu listens on one unix socket per port in the checkout's slot and connects each
client to 127.0.0.1:PORT of the host. Inside, a small relay started before the check listens on
127.0.0.1:PORT of the sandbox's own network and forwards to that socket. Nothing else of the
host's network is reachable: no other port, no other address, no DNS.
"""

from __future__ import annotations

import atexit
import os
import shutil
import socket
import sys
import tempfile
import threading
from pathlib import Path

from papayu_git import output, settings
from papayu_git.errors import PapayuError

INSIDE = "/run/papayu-relay"

# Runs inside the sandbox: listen on every port, fork a server, return once listening. Written
# out whole, beside the host side's own pipe, because papayu's package need not be visible in the
# sandbox (an editable install's source is not mounted): only the interpreter is.
_INNER = r"""
import os, socket, sys, threading
ports = [int(p) for p in sys.argv[1:]]
listeners = []
for port in ports:
    s = socket.socket()
    s.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
    s.bind(("127.0.0.1", port)); s.listen(64); listeners.append((port, s))
if os.fork():
    os._exit(0)
def pipe(a, b):
    try:
        while data := a.recv(65536):
            b.sendall(data)
    except OSError:
        pass
    finally:
        for x in (a, b):
            try: x.shutdown(socket.SHUT_RDWR)
            except OSError: pass
def serve(port, s):
    while True:
        c, _ = s.accept()
        u = socket.socket(socket.AF_UNIX)
        try:
            u.connect(f"/run/papayu-relay/{port}.sock")
        except OSError:
            c.close(); continue
        threading.Thread(target=pipe, args=(c, u), daemon=True).start()
        threading.Thread(target=pipe, args=(u, c), daemon=True).start()
threads = [threading.Thread(target=serve, args=item) for item in listeners]
for t in threads: t.start()
for t in threads: t.join()
"""


def configured_ports(repo_root: Path) -> list[int]:
    ports = []
    for item in settings.get("check_local_ports", str(repo_root)).split(","):
        item = item.strip()
        if not item:
            continue
        if not item.isdigit() or not 0 < int(item) < 65536:
            raise PapayuError(
                "ERR_CONFIG_INVALID",
                f"papayu.check.localPorts has {item!r}, not a TCP port",
                path="papayu.check.localPorts",
                hint="List loopback ports separated by commas, e.g. `git config papayu.check.localPorts 5432,6379`.",
            )
        ports.append(int(item))
    return sorted(set(ports))


def start(ports: list[int]) -> Path:
    """Listen on `<private dir>/<port>.sock` for each port (daemon threads, for this process's
    life); the directory to mount at INSIDE. The directory is a short one of its own (a unix
    socket's path has at most 107 bytes), private to the user, removed when papayu exits."""
    where = Path(tempfile.mkdtemp(prefix="papayu-relay-"))
    atexit.register(shutil.rmtree, where, ignore_errors=True)
    for port in ports:
        server = socket.socket(socket.AF_UNIX)
        server.bind(str(where / f"{port}.sock"))
        server.listen(64)
        output.start_thread(threading.Thread(target=_serve, args=(server, port), daemon=True))
    return where


def _serve(server: socket.socket, port: int) -> None:
    while True:
        try:
            client, _ = server.accept()
        except OSError:
            return
        try:
            upstream = socket.create_connection(("127.0.0.1", port), timeout=5)
        except OSError:
            client.close()
            continue
        upstream.settimeout(None)
        for a, b in ((client, upstream), (upstream, client)):
            output.start_thread(threading.Thread(target=_pipe, args=(a, b), daemon=True))


def _pipe(a: socket.socket, b: socket.socket) -> None:
    try:
        while data := a.recv(65536):
            b.sendall(data)
    except OSError:
        pass
    finally:
        for end in (a, b):
            try:
                end.shutdown(socket.SHUT_RDWR)
            except OSError:
                pass


def inner_command(ports: list[int]) -> list[str]:
    """Starts the inner relay, then runs what follows (`"$@"`) once it listens."""
    python = os.path.realpath(sys.executable)
    script = '"$0" -I -S -c "$1" ' + " ".join(str(p) for p in ports) + ' && shift && exec "$@"'
    return ["/bin/sh", "-c", script, python, _INNER]
