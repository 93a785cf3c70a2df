"""A small seccomp filter that covers what Landlock does not: sockets other than TCP.

Landlock (up to ABI 7) confines TCP connect/bind only; a command could still send UDP (DNS
names built from stolen data), talk netlink, or open raw sockets. The Landlock exec helper
installs this filter after ``no_new_privs`` when the network was not approved. It makes these
calls fail with EPERM, for the process and everything it starts:

- ``socket(AF_INET/AF_INET6, anything but SOCK_STREAM)`` — UDP, raw, ICMP sockets; with a Landlock
  ABI below 4 (no TCP rules) SOCK_STREAM too, so no IP socket at all;
- ``socket(AF_NETLINK)`` and ``socket(AF_PACKET)``;
- ``io_uring_setup``: io_uring can open sockets without the socket syscall this filter sees;
- every syscall of another ABI (i386 ``int 0x80``, x32), whose numbers this filter does not read.

Not covered: ``connect`` on an existing unix socket file (a seccomp filter cannot read the path
it is given) and socketpair. Only x86_64 has a filter; elsewhere ``supported()`` is False and
the tier's description says UDP is not confined.
"""

from __future__ import annotations

import ctypes
import errno
import os
import platform

_PR_SET_SECCOMP, _SECCOMP_MODE_FILTER = 22, 2
_AUDIT_ARCH_X86_64 = 0xC000003E
_NR_SOCKET, _NR_IO_URING_SETUP = 41, 425
_X32_BIT = 0x40000000
_AF_INET, _AF_INET6, _AF_NETLINK, _AF_PACKET = 2, 10, 16, 17
_SOCK_STREAM, _SOCK_TYPE_MASK = 1, 0xF
# struct seccomp_data: nr at 0, arch at 4, args[i] at 16 + 8 * i (low 32 bits first, little-endian).
_OFF_NR, _OFF_ARCH, _OFF_ARG0, _OFF_ARG1 = 0, 4, 16, 24
# Classic BPF opcodes.
_LD_ABS, _JEQ, _JGE, _AND, _RET = 0x20, 0x15, 0x35, 0x54, 0x06
_ALLOW = 0x7FFF0000
_DENY = 0x00050000 | errno.EPERM            # SECCOMP_RET_ERRNO | EPERM


class _SockFilter(ctypes.Structure):
    _fields_ = [("code", ctypes.c_uint16), ("jt", ctypes.c_uint8), ("jf", ctypes.c_uint8), ("k", ctypes.c_uint32)]


class _SockFprog(ctypes.Structure):
    _fields_ = [("len", ctypes.c_ushort), ("filter", ctypes.POINTER(_SockFilter))]


def supported() -> bool:
    return platform.machine() in ("x86_64", "amd64")


def program(allow_tcp: bool) -> list[tuple[int, int, int, int]]:
    """The filter as (code, jt, jf, k); jumps are resolved from the labels below."""
    stream = "allow" if allow_tcp else "deny"
    source: list[tuple[str, int, str | None, str | None, int] | str] = [
        ("ld", _LD_ABS, None, None, _OFF_ARCH),
        ("jeq", _JEQ, None, "deny", _AUDIT_ARCH_X86_64),
        ("ld", _LD_ABS, None, None, _OFF_NR),
        ("jge", _JGE, "deny", None, _X32_BIT),
        ("jeq", _JEQ, "deny", None, _NR_IO_URING_SETUP),
        ("jeq", _JEQ, None, "allow", _NR_SOCKET),
        ("ld", _LD_ABS, None, None, _OFF_ARG0),
        ("jeq", _JEQ, "deny", None, _AF_NETLINK),
        ("jeq", _JEQ, "deny", None, _AF_PACKET),
        ("jeq", _JEQ, "inet", None, _AF_INET),
        ("jeq", _JEQ, "inet", "allow", _AF_INET6),
        "inet",
        ("ld", _LD_ABS, None, None, _OFF_ARG1),
        ("and", _AND, None, None, _SOCK_TYPE_MASK),
        ("jeq", _JEQ, stream, "deny", _SOCK_STREAM),
        "allow",
        ("ret", _RET, None, None, _ALLOW),
        "deny",
        ("ret", _RET, None, None, _DENY),
    ]
    labels: dict[str, int] = {}
    index = 0
    for item in source:
        if isinstance(item, str):
            labels[item] = index
        else:
            index += 1
    out: list[tuple[int, int, int, int]] = []
    for item in source:
        if isinstance(item, str):
            continue
        _, code, jt, jf, k = item
        here = len(out) + 1                   # jumps count from the next instruction
        out.append((code, labels[jt] - here if jt else 0, labels[jf] - here if jf else 0, k))
    return out


def install(allow_tcp: bool) -> None:
    """Apply the filter to this process (irreversible). Needs no_new_privs set first (Landlock's
    restrict() does that). Raises OSError when the kernel refuses it."""
    instructions = program(allow_tcp)
    array = (_SockFilter * len(instructions))(*[_SockFilter(*ins) for ins in instructions])
    prog = _SockFprog(len(instructions), ctypes.cast(array, ctypes.POINTER(_SockFilter)))
    libc = ctypes.CDLL(None, use_errno=True)
    libc.prctl.argtypes = [ctypes.c_int, ctypes.c_ulong, ctypes.c_void_p, ctypes.c_ulong, ctypes.c_ulong]
    if libc.prctl(_PR_SET_SECCOMP, _SECCOMP_MODE_FILTER, ctypes.byref(prog), 0, 0) != 0:
        code = ctypes.get_errno()
        raise OSError(code, f"seccomp filter: {os.strerror(code)}")
