"""The seccomp filter of the Landlock tier: the system calls Landlock does not confine.

The Landlock exec helper installs it after ``no_new_privs``, for the command and everything it
starts. Each rule below makes the call fail with EPERM:

- network (only while the network is not approved): ``socket()`` of every family but AF_UNIX, so
  UDP, raw, netlink, packet, MPTCP (``socket(AF_INET, SOCK_STREAM, 262)``, which Landlock's TCP
  rule does not see) and any family a later kernel adds;
- always: ``io_uring_setup`` (io_uring opens sockets and files without the syscalls seen here);
  every syscall of another ABI (i386 ``int 0x80``, x32), whose numbers this filter does not read;
- always: ``ioctl(TIOCSTI)`` and ``ioctl(TIOCLINUX)``, which type keystrokes into a terminal that a
  shell outside the sandbox reads;
- always: ``mknod``/``mknodat`` of a character or block device (root could make /dev/kmsg or a raw
  disk node in the workspace and open it; FIFOs, sockets and regular files are still made);
- always: ``bpf``, ``perf_event_open``, ``keyctl``, ``add_key``, ``request_key`` (kernel-wide state
  and the user's keyrings, which outlive the command);
- always: ``prlimit64`` unless its pid is 0 and ``setpriority`` unless it is ``PRIO_PROCESS`` with
  who 0: the filter cannot know the caller's pid, so "this process" is only the 0 spelling;
  ``prlimit(getpid(), ...)`` fails too (glibc's setrlimit/getrlimit pass 0 and work);
- always: System V IPC (``shmget``/``shmat``/``shmctl``/``shmdt``, ``semget``/``semop``/
  ``semtimedop``/``semctl``, ``msgget``/``msgsnd``/``msgrcv``/``msgctl``): without an IPC
  namespace its objects are shared with the host and outlive the command, and ids are guessable.
  POSIX shared memory and semaphores (files in /dev/shm, Python's multiprocessing) still work.

- always, on both confining tiers (bubblewrap loads ``setid_program`` with ``--seccomp``): a
  setuid or setgid bit in a mode: ``chmod``/``fchmod``/``fchmodat``/``fchmodat2``, ``creat`` and
  ``open``/``openat`` with ``O_CREAT`` or ``O_TMPFILE``, ``mknod``/``mknodat`` of a regular file. A
  file that another user runs as its owner (root, for a root keel) cannot be made here.
  ``openat2`` answers ENOSYS (its mode sits in a struct a filter cannot read; callers fall back to
  ``openat``), and so does ``io_uring_setup`` under bubblewrap (its opens are not syscalls).

Arguments are compared on their low 32 bits only, and that is deliberate: every argument checked
here (family, ioctl request, mode, pid, which/who) is declared ``int``/``unsigned int``/``umode_t``
in the kernel, which truncates the 64-bit register. Comparing all 64 bits would let a caller set
the high half to slip past a rule while the kernel still acts on the low half.

Left to Landlock, not to this filter: ``ptrace`` and ``process_vm_*`` (Landlock refuses them
toward any process outside the command's own domain; debuggers inside it keep working), and
signals (scoped from ABI 6). Not covered: ``connect`` to an existing unix socket file (a filter
cannot read the path). Only x86_64 has a filter; elsewhere ``supported()`` is False and the
tier's description says so.
"""

from __future__ import annotations

import ctypes
import errno
import os
import platform
import struct

_PR_SET_SECCOMP, _SECCOMP_MODE_FILTER = 22, 2
AUDIT_ARCH_X86_64 = 0xC000003E
X32_BIT = 0x40000000
# x86_64 syscall numbers.
NR = {
    "ioctl": 16, "shmget": 29, "shmat": 30, "shmctl": 31, "socket": 41, "semget": 64, "semop": 65, "semctl": 66,
    "shmdt": 67, "msgget": 68, "msgsnd": 69, "msgrcv": 70, "msgctl": 71, "mknod": 133, "setpriority": 141,
    "semtimedop": 220, "add_key": 248, "request_key": 249, "keyctl": 250, "mknodat": 259,
    "perf_event_open": 298, "prlimit64": 302, "bpf": 321, "io_uring_setup": 425,
    "open": 2, "creat": 85, "chmod": 90, "fchmod": 91, "openat": 257, "fchmodat": 268, "openat2": 437,
    "fchmodat2": 452,
}
ALWAYS_DENIED = ("io_uring_setup", "bpf", "perf_event_open", "keyctl", "add_key", "request_key",
                 "shmget", "shmat", "shmctl", "shmdt", "semget", "semop", "semtimedop", "semctl",
                 "msgget", "msgsnd", "msgrcv", "msgctl")
AF_UNIX = 1
TIOCSTI, TIOCLINUX = 0x5412, 0x541C
S_IFMT, S_IFCHR, S_IFBLK = 0o170000, 0o020000, 0o060000
SETID = 0o6000                              # S_ISUID | S_ISGID
O_CREAT, O_TMPFILE_BIT = 0o100, 0o20000000   # the flags under which open's mode is used
# (syscall, index of its mode argument, index of its flags argument or None)
SETID_CALLS = (("chmod", 1, None), ("fchmod", 1, None), ("fchmodat", 2, None), ("fchmodat2", 2, None),
               ("creat", 1, None), ("open", 2, 1), ("openat", 3, 2))
PRIO_PROCESS = 0
# struct seccomp_data: nr at 0, arch at 4, args[i] at 16 + 8 * i (low 32 bits first, little-endian).
_OFF_NR, _OFF_ARCH = 0, 4


def _arg(i: int) -> int:
    return 16 + 8 * i


# Classic BPF opcodes.
_LD_ABS, _JEQ, _JGE, _AND, _RET = 0x20, 0x15, 0x35, 0x54, 0x06
ALLOW = 0x7FFF0000
DENY = 0x00050000 | errno.EPERM            # SECCOMP_RET_ERRNO | EPERM
NOSYS = 0x00050000 | errno.ENOSYS          # "not implemented": the caller uses the older call


class _SockFilter(ctypes.Structure):
    _fields_ = [("code", ctypes.c_uint16), ("jt", ctypes.c_uint8), ("jf", ctypes.c_uint8), ("k", ctypes.c_uint32)]


class _SockFprog(ctypes.Structure):
    _fields_ = [("len", ctypes.c_ushort), ("filter", ctypes.POINTER(_SockFilter))]


def supported() -> bool:
    return platform.machine() in ("x86_64", "amd64")


_Source = list[tuple[int, str | None, str | None, int] | str]


def _ld(off: int) -> tuple[int, str | None, str | None, int]:
    return (_LD_ABS, None, None, off)


def _jeq(k: int, t: str | None, f: str | None) -> tuple[int, str | None, str | None, int]:
    return (_JEQ, t, f, k)


def _preamble() -> _Source:
    """Another ABI is denied (its numbers are not the ones read here), x32 too."""
    return [_ld(_OFF_ARCH), _jeq(AUDIT_ARCH_X86_64, None, "deny"), _ld(_OFF_NR), (_JGE, "deny", None, X32_BIT)]


def _setid_jumps() -> _Source:
    jumps: _Source = [_jeq(NR[name], f"setid_{name}", None) for name, _, _ in SETID_CALLS]
    return [*jumps, _jeq(NR["openat2"], "nosys", None)]


def _setid_blocks() -> _Source:
    """Each mode-setting call: denied when its mode has S_ISUID or S_ISGID (open: only with O_CREAT or
    O_TMPFILE, when the kernel uses the mode)."""
    src: _Source = []
    for name, mode, flags in SETID_CALLS:
        src.append(f"setid_{name}")
        if flags is not None:
            src += [_ld(_arg(flags)), (_AND, None, None, O_CREAT | O_TMPFILE_BIT), _jeq(0, "allow", None)]
        src += [_ld(_arg(mode)), (_AND, None, None, SETID), _jeq(0, "allow", "deny")]
    return src


def _source(network: bool) -> _Source:
    """The filter with symbolic jump targets; a bare string marks a label."""
    src = _preamble() + [_jeq(NR[name], "deny", None) for name in ALWAYS_DENIED]
    if not network:
        src.append(_jeq(NR["socket"], "socket", None))
    for name, label in (("ioctl", "ioctl"), ("mknod", "mknod"), ("mknodat", "mknodat"),
                        ("prlimit64", "pid0"), ("setpriority", "prio")):
        src.append(_jeq(NR[name], label, None))
    src += _setid_jumps()
    src.append((_RET, None, None, ALLOW))               # every other syscall
    if not network:
        src += ["socket", _ld(_arg(0)), _jeq(AF_UNIX, "allow", "deny")]
    src += ["ioctl", _ld(_arg(1)), _jeq(TIOCSTI, "deny", None), _jeq(TIOCLINUX, "deny", "allow")]
    for label, index in (("mknod", 1), ("mknodat", 2)):
        src += [label, _ld(_arg(index)), (_AND, None, None, S_IFMT), _jeq(S_IFCHR, "deny", None),
                _jeq(S_IFBLK, "deny", None), _ld(_arg(index)), (_AND, None, None, SETID), _jeq(0, "allow", "deny")]
    src += ["pid0", _ld(_arg(0)), _jeq(0, "allow", "deny")]
    src += ["prio", _ld(_arg(0)), _jeq(PRIO_PROCESS, None, "deny"), _ld(_arg(1)), _jeq(0, "allow", "deny")]
    src += _setid_blocks()
    # Classic BPF jumps only forward: the verdicts come last.
    return [*src, "nosys", (_RET, None, None, NOSYS), "allow", (_RET, None, None, ALLOW),
            "deny", (_RET, None, None, DENY)]


def _setid_source() -> _Source:
    """bubblewrap's filter: no new setuid/setgid file (it has its own namespaces for the rest)."""
    src = _preamble() + _setid_jumps()
    src += [_jeq(NR["io_uring_setup"], "nosys", None), _jeq(NR["mknod"], "mknod", None),
            _jeq(NR["mknodat"], "mknodat", None), (_RET, None, None, ALLOW)]
    for label, index in (("mknod", 1), ("mknodat", 2)):
        src += [label, _ld(_arg(index)), (_AND, None, None, SETID), _jeq(0, "allow", "deny")]
    src += _setid_blocks()
    return [*src, "nosys", (_RET, None, None, NOSYS), "allow", (_RET, None, None, ALLOW),
            "deny", (_RET, None, None, DENY)]


def program(network: bool) -> list[tuple[int, int, int, int]]:
    """The Landlock tier's filter as (code, jt, jf, k)."""
    return _assemble(_source(network))


def setid_program() -> list[tuple[int, int, int, int]]:
    """The bubblewrap tier's filter as (code, jt, jf, k)."""
    return _assemble(_setid_source())


def setid_filter_bytes() -> bytes:
    """``setid_program`` as the struct sock_filter array ``bwrap --seccomp FD`` reads."""
    return b"".join(struct.pack("<HBBI", *ins) for ins in setid_program())


def _assemble(source: _Source) -> list[tuple[int, int, int, int]]:
    """Jumps resolved from the labels of ``source``."""
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
        code, jt, jf, k = item
        here = len(out) + 1                   # jumps count from the next instruction
        out.append((code, labels[jt] - here if jt else 0, labels[jf] - here if jf else 0, k))
    assert all(0 <= jt < 256 and 0 <= jf < 256 for _, jt, jf, _ in out)   # forward, 8-bit offsets
    return out


def install(network: bool) -> None:
    """Apply the filter to this process (irreversible). Needs no_new_privs set first (Landlock's
    restrict() does that). Raises OSError when the kernel refuses it."""
    instructions = program(network)
    array = (_SockFilter * len(instructions))(*[_SockFilter(*ins) for ins in instructions])
    prog = _SockFprog(len(instructions), ctypes.cast(array, ctypes.POINTER(_SockFilter)))
    libc = ctypes.CDLL(None, use_errno=True)
    libc.prctl.argtypes = [ctypes.c_int, ctypes.c_ulong, ctypes.c_void_p, ctypes.c_ulong, ctypes.c_ulong]
    if libc.prctl(_PR_SET_SECCOMP, _SECCOMP_MODE_FILTER, ctypes.byref(prog), 0, 0) != 0:
        code = ctypes.get_errno()
        raise OSError(code, f"seccomp filter: {os.strerror(code)}")
