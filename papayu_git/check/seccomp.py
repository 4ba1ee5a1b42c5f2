"""The check's seccomp filter: the usual container denylist, as a classic BPF program that
bubblewrap loads before it runs the check (docs/DESIGN.md, "The check's environment").

Denied with EPERM: the kernel keyring, bpf, perf events, userfaultfd, io_uring, mounting and
namespaces (mount APIs, unshare, setns, pivot_root), ptrace, module and kexec loading, handle-based
opens, swap, reboot, acct. Other ABIs of the same machine (i386 and x32 on x86-64) are denied
whole: a filter keyed on one table of numbers must not be walked around through another. No
library: the program is a few dozen instructions, written here.
"""

from __future__ import annotations

import os
import platform
import struct

_DENIED = [
    "keyctl",
    "add_key",
    "request_key",
    "bpf",
    "perf_event_open",
    "userfaultfd",
    "io_uring_setup",
    "io_uring_enter",
    "io_uring_register",
    "mount",
    "umount2",
    "unshare",
    "setns",
    "pivot_root",
    "ptrace",
    "kexec_load",
    "kexec_file_load",
    "init_module",
    "finit_module",
    "delete_module",
    "open_by_handle_at",
    "name_to_handle_at",
    "swapon",
    "swapoff",
    "reboot",
    "acct",
    "fsopen",
    "fsconfig",
    "fsmount",
    "move_mount",
    "open_tree",
    "mount_setattr",
]

# Syscall numbers per architecture (the kernel's tables).
_NUMBERS = {
    "x86_64": (
        0xC000003E,  # AUDIT_ARCH_X86_64
        dict(
            keyctl=250, add_key=248, request_key=249, bpf=321, perf_event_open=298, userfaultfd=323,
            io_uring_setup=425, io_uring_enter=426, io_uring_register=427, mount=165, umount2=166,
            unshare=272, setns=308, pivot_root=155, ptrace=101, kexec_load=246, kexec_file_load=320,
            init_module=175, finit_module=313, delete_module=176, open_by_handle_at=304,
            name_to_handle_at=303, swapon=167, swapoff=168, reboot=169, acct=163, fsopen=430,
            fsconfig=431, fsmount=432, move_mount=429, open_tree=428, mount_setattr=442,
        ),
    ),
    "aarch64": (
        0xC00000B7,  # AUDIT_ARCH_AARCH64
        dict(
            keyctl=219, add_key=217, request_key=218, bpf=280, perf_event_open=241, userfaultfd=282,
            io_uring_setup=425, io_uring_enter=426, io_uring_register=427, mount=40, umount2=39,
            unshare=97, setns=268, pivot_root=41, ptrace=117, kexec_load=104, kexec_file_load=294,
            init_module=105, finit_module=273, delete_module=106, open_by_handle_at=265,
            name_to_handle_at=264, swapon=224, swapoff=225, reboot=142, acct=89, fsopen=430,
            fsconfig=431, fsmount=432, move_mount=429, open_tree=428, mount_setattr=442,
        ),
    ),
}  # fmt: skip

_LD_W_ABS, _JEQ_K, _JGE_K, _RET_K = 0x20, 0x15, 0x35, 0x06
_ALLOW, _ERRNO_EPERM = 0x7FFF0000, 0x00050000 | 1
_X32_BIT = 0x40000000


def program(machine: str | None = None) -> bytes | None:
    """The filter for this machine as `struct sock_filter[]` bytes; None where no table is known
    (the check then runs without one, as before)."""
    known = _NUMBERS.get(machine or platform.machine())
    if known is None:
        return None
    arch, numbers = known
    denied = [numbers[name] for name in _DENIED]
    code: list[tuple[int, int, int, int]] = [
        (_LD_W_ABS, 0, 0, 4),  # seccomp_data.arch
        (_JEQ_K, 1, 0, arch),
        (_RET_K, 0, 0, _ERRNO_EPERM),  # another ABI of this machine
        (_LD_W_ABS, 0, 0, 0),  # seccomp_data.nr
        (_JGE_K, len(denied) + 1, 0, _X32_BIT),  # x32 numbers: to the deny at the end
    ]
    for index, number in enumerate(denied):
        to_deny = len(denied) - index  # jumps over the rest of the list and the allow
        code.append((_JEQ_K, to_deny, 0, number))
    code += [(_RET_K, 0, 0, _ALLOW), (_RET_K, 0, 0, _ERRNO_EPERM)]
    return b"".join(struct.pack("HBBI", *insn) for insn in code)


def program_fd() -> int | None:
    """A memory file holding the program, for `bwrap --seccomp FD` (the caller passes it to the
    child and closes it); None where there is no program or no memfd."""
    data = program()
    if data is None or not hasattr(os, "memfd_create"):
        return None
    fd = os.memfd_create("papayu-seccomp", 0)
    os.write(fd, data)
    os.lseek(fd, 0, os.SEEK_SET)
    return fd
