"""The exec helper of the Landlock tier: ``python -m keel.policy.landlock_exec PLAN_JSON -- PROGRAM ARGS...``.

The helper is the child subreaper of the command and stays outside the sandbox itself:

1. it marks itself ``PR_SET_CHILD_SUBREAPER``, so whatever the command starts and orphans
   (``setsid`` double forks, ``nohup``, ``setsid -f``, ``set -m; x &``) is re-parented to it, not
   to init;
2. it forks; the child drops root's dangerous capabilities, sets the address-space limit,
   applies the Landlock ruleset and the seccomp filter of ``keel.policy.seccomp``, and execs the
   program. Being outside the Landlock domain, the helper cannot be signalled or traced by the
   command (signals from ABI 6, ptrace on every ABI);
3. it waits for that child, forwarding SIGTERM/SIGINT/SIGHUP to every descendant (and SIGKILLing
   them all if the child is not gone ``STOP_GRACE_S`` later: keel's own kill follows 1 s after
   its SIGTERM), then SIGKILLs every descendant left, reaps them, removes the /dev/shm files the
   command created (``keel.policy.shm``) and exits with the child's status (killed by signal n:
   128 + n, as a shell reports it).

What remains: if the helper itself is SIGKILLed, the child dies with it (``PR_SET_PDEATHSIG``)
but the other descendants are re-parented to init; keel's process-tree kill (keel.policy.process)
collects them from /proc just before, so only a process forked in that instant escapes.

keel is threaded, and running Python between fork and exec in a threaded process can deadlock;
the helper is a fresh single-threaded ``python -I -S`` (no ``.pth`` file, ``PYTHONPATH`` or user
site from the command's environment runs before the rules) importing only the standard library.

If the rules cannot be applied the program is not run (exit 126): a command believed to be
confined never runs unconfined.
"""

from __future__ import annotations

import contextlib
import ctypes
import os
import resource
import signal
import sys
import time

from keel.policy import seccomp, shm
from keel.policy.landlock import LandlockError, LandlockPlan, abi_version, restrict

EXIT_CANNOT_CONFINE = 126
STOP_GRACE_S = 0.5
_PR_SET_PDEATHSIG, _PR_CAPBSET_DROP, _PR_SET_CHILD_SUBREAPER = 1, 24, 36
_PR_CAP_AMBIENT, _PR_CAP_AMBIENT_CLEAR_ALL = 47, 4
# Capabilities root keeps: owning and reading files the rules already bound, becoming another
# user (still confined), low ports. Everything else is dropped from the bounding set, so neither
# modules, raw I/O, mounts nor raising a hard rlimit (CAP_SYS_RESOURCE) is possible.
_KEPT_CAPS = frozenset({0, 1, 2, 3, 4, 6, 7, 10})   # CHOWN, DAC_OVERRIDE, DAC_READ_SEARCH, FOWNER, FSETID,
#                                                     SETGID, SETUID, NET_BIND_SERVICE
_FORWARDED = (signal.SIGTERM, signal.SIGINT, signal.SIGHUP)
_WATCHED = {signal.SIGCHLD, *_FORWARDED}


def _prctl(option: int, arg: int, arg3: int = 0) -> int:
    libc = ctypes.CDLL(None, use_errno=True)
    libc.prctl.argtypes = [ctypes.c_int, ctypes.c_ulong, ctypes.c_ulong, ctypes.c_ulong, ctypes.c_ulong]
    return int(libc.prctl(option, arg, arg3, 0, 0))


def _drop_capabilities() -> None:
    """Root only: shrink the bounding set and clear inheritable/ambient capabilities, so the
    program root execs gets only ``_KEPT_CAPS``. (Other users have none to drop.)"""
    if os.geteuid() != 0:
        return
    for cap in range(64):
        if cap not in _KEPT_CAPS and _prctl(_PR_CAPBSET_DROP, cap) != 0 and ctypes.get_errno() == 22:
            break                                       # EINVAL: past the kernel's last capability
    _prctl(_PR_CAP_AMBIENT, _PR_CAP_AMBIENT_CLEAR_ALL)
    header = (ctypes.c_uint32 * 2)(0x20080522, 0)        # _LINUX_CAPABILITY_VERSION_3, this process
    data = (ctypes.c_uint32 * 6)()                       # 2 x {effective, permitted, inheritable}
    libc = ctypes.CDLL(None, use_errno=True)
    if libc.capget(header, data) == 0:
        data[2] = data[5] = 0                            # inheritable: nothing crosses exec
        if libc.capset(header, data) != 0:
            raise OSError(ctypes.get_errno(), "capset")


def _join_cgroups(plan: LandlockPlan) -> None:
    """The helper joins the command's cgroups (memory, pids: keel.policy.limits) before it forks, so
    the command is in them from its first instruction."""
    for cgroup in plan.cgroups:
        with open(os.path.join(cgroup, "cgroup.procs"), "w", encoding="ascii") as fh:
            fh.write("0")


def _set_limits(plan: LandlockPlan) -> None:
    for rid, soft, hard in plan.rlimits:      # CPU, data, file size, core, processes (keel.policy.limits)
        resource.setrlimit(rid, (soft, hard))
    if plan.address_space:            # counts shared mappings too, which RLIMIT_DATA does not
        _, hard = resource.getrlimit(resource.RLIMIT_AS)
        limit = plan.address_space if hard == resource.RLIM_INFINITY else min(plan.address_space, hard)
        resource.setrlimit(resource.RLIMIT_AS, (limit, limit))


def _confine_and_exec(plan: LandlockPlan, abi: int, argv: list[str], parent: int) -> int:
    """In the forked child: confine, then exec (returns only on failure)."""
    signal.pthread_sigmask(signal.SIG_UNBLOCK, _WATCHED)
    for sig in (signal.SIGPIPE, signal.SIGXFSZ, signal.SIGINT):   # Python's own dispositions
        signal.signal(sig, signal.SIG_DFL)
    try:
        if _prctl(_PR_SET_PDEATHSIG, signal.SIGKILL) != 0 or os.getppid() != parent:
            raise OSError(0, "the keel helper ended before the command started")
        _drop_capabilities()
        _set_limits(plan)
        restrict(plan, abi)
        if seccomp.supported():
            seccomp.install(plan.network)
    except (LandlockError, ValueError, OSError) as exc:
        print(f"keel: could not apply the Landlock sandbox, command not run: {exc}", file=sys.stderr)
        return EXIT_CANNOT_CONFINE
    try:
        os.execvp(argv[0], argv)
    except OSError as exc:
        print(f"keel: {argv[0]}: {exc.strerror}", file=sys.stderr)
    return 127


def _children(pid: int) -> list[int]:
    found: list[int] = []
    with contextlib.suppress(OSError):
        for task in os.listdir(f"/proc/{pid}/task"):
            with contextlib.suppress(OSError), open(f"/proc/{pid}/task/{task}/children", encoding="ascii") as fh:
                found += [int(p) for p in fh.read().split()]
    return found


def signal_descendants(sig: int) -> int:
    """Send ``sig`` to every descendant of this process. Each is pinned with a pidfd and checked
    to still be its parent's child before the signal, so a reused pid is never hit."""
    sent, stack = 0, [os.getpid()]
    while stack:
        parent = stack.pop()
        for pid in _children(parent):
            stack.append(pid)
            try:
                fd = os.pidfd_open(pid)
            except OSError:
                continue
            try:
                if pid in _children(parent):
                    signal.pidfd_send_signal(fd, sig)
                    sent += 1
            except OSError:
                pass
            finally:
                os.close(fd)
    return sent


def kill_descendants() -> None:
    """SIGKILL every descendant and reap them, until this process has no children left (being
    the subreaper, it inherits every orphan, so no children means no descendants)."""
    while True:
        signal_descendants(signal.SIGKILL)
        try:
            os.waitpid(-1, 0)
        except ChildProcessError:
            return


def _reap(child: int) -> int | None:
    """Reap every exited child; the wait status of ``child`` if it was among them."""
    status = None
    while True:
        try:
            pid, code = os.waitpid(-1, os.WNOHANG)
        except ChildProcessError:
            return status
        if pid == 0:
            return status
        if pid == child:
            status = code


def _supervise(child: int) -> int:
    """Wait for ``child``; forward stop signals to the whole tree. Returns its wait status."""
    deadline: float | None = None
    while True:
        info: signal.struct_siginfo | None
        if deadline is None:
            info = signal.sigwaitinfo(_WATCHED)
        else:
            info = signal.sigtimedwait(_WATCHED, max(deadline - time.monotonic(), 0.0))
        if info is None:                                 # the grace after a stop signal is over
            signal_descendants(signal.SIGKILL)
            deadline = None
        elif info.si_signo == signal.SIGCHLD:
            status = _reap(child)
            if status is not None:
                return status
        else:
            signal_descendants(info.si_signo)
            deadline = deadline or time.monotonic() + STOP_GRACE_S


def main(argv: list[str] | None = None) -> int:
    args = sys.argv[1:] if argv is None else argv
    if len(args) < 3 or args[1] != "--":
        print("usage: landlock_exec PLAN_JSON -- PROGRAM [ARGS...]", file=sys.stderr)
        return 2
    try:
        plan = LandlockPlan.from_json(args[0])
        abi = abi_version()
        if abi < 1:
            raise LandlockError(0, "landlock is not available on this kernel")
        if _prctl(_PR_SET_CHILD_SUBREAPER, 1) != 0:
            raise OSError(ctypes.get_errno(), "prctl(PR_SET_CHILD_SUBREAPER)")
        _join_cgroups(plan)
    except (LandlockError, ValueError, KeyError, OSError) as exc:
        print(f"keel: could not apply the Landlock sandbox, command not run: {exc}", file=sys.stderr)
        return EXIT_CANNOT_CONFINE
    shm_before = shm.owned_names() if plan.shm_cleanup else None
    signal.pthread_sigmask(signal.SIG_BLOCK, _WATCHED)   # before fork: no SIGCHLD can be missed
    parent = os.getpid()
    child = os.fork()
    if child == 0:
        code = _confine_and_exec(plan, abi, args[2:], parent)
        sys.stderr.flush()
        os._exit(code)
    status = _supervise(child)
    kill_descendants()
    if shm_before is not None:
        shm.remove_new(shm_before)
    return os.WEXITSTATUS(status) if os.WIFEXITED(status) else 128 + os.WTERMSIG(status)


if __name__ == "__main__":
    sys.exit(main())
