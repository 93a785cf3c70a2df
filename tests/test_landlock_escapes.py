"""Escapes tried against the Landlock tier (no user namespaces), each through keel's real launch
path (build_sandboxed -> the exec helper -> bash), as root and as the unprivileged ``kuser`` where
the class differs: network by any socket family, terminal injection, device nodes, kernel-wide
calls, other processes' limits, SysV IPC, processes that outlive the command, memory and process
limits, /dev/shm leftovers, root-only secrets in /etc. The seccomp program is also table-tested.
"""

from __future__ import annotations

import errno
import json
import os
import pwd
import shutil
import socket
import subprocess
import sys
import tempfile
import textwrap
import time
from collections.abc import Iterator
from pathlib import Path

import pytest

from keel.policy import landlock, seccomp
from keel.policy.process import CommandResult
from keel.policy.runner import Job, run
from keel.policy.sandbox import GIB, SandboxPolicy, build_sandboxed

pytestmark = [pytest.mark.landlock,
              pytest.mark.skipif(not seccomp.supported(), reason="the seccomp filter exists for x86_64 only")]
ROOT = os.geteuid() == 0


def _kuser() -> bool:
    from bwrap_runner import ensure_unprivileged_user  # made if missing, when root

    return ensure_unprivileged_user() is not None


USERS = ["self", pytest.param("kuser", marks=pytest.mark.skipif(not _kuser(), reason="needs root and a kuser"))]
RUNNER = textwrap.dedent("""
    import json, sys
    from pathlib import Path
    from keel.policy.sandbox import SandboxPolicy
    from keel.policy.runner import Job, run
    command, ws, network, policy = sys.argv[1], Path(sys.argv[2]), sys.argv[3] == "1", json.loads(sys.argv[4])
    r = run(Job(ws, command=command, policy=SandboxPolicy(tier="landlock", **policy), network=network,
                env={"PATH": "/usr/bin:/bin", "HOME": str(ws)}, timeout_s=60))
    assert r.sandbox == "landlock", r
    print(json.dumps({"exit_code": r.exit_code, "output": r.output, "timed_out": r.timed_out}))
""")


@pytest.fixture
def ws() -> Iterator[Path]:
    """A workspace both root and kuser can use (pytest's tmp_path is root's alone)."""
    path = Path(tempfile.mkdtemp(prefix="keel-esc-"))
    os.chmod(path, 0o777)
    if _kuser():
        os.chown(path, pwd.getpwnam("kuser").pw_uid, -1)
    yield path
    shutil.rmtree(path, ignore_errors=True)


def sandboxed(command: str, ws: Path, user: str = "self", network: bool = False, timeout: float = 60,
              **policy: object) -> CommandResult:
    if user == "self":
        result = run(Job(ws, command=command, policy=SandboxPolicy(tier="landlock", **policy),  # type: ignore[arg-type]
                         network=network, env={"PATH": "/usr/bin:/bin", "HOME": str(ws)}, timeout_s=timeout))
        assert result.sandbox == "landlock"
        return result
    script = ws / ".runner.py"
    script.write_text(RUNNER)
    argv = [sys.executable, str(script), command, str(ws), "1" if network else "0", json.dumps(policy)]
    proc = subprocess.run(["su", user, "-s", "/bin/sh", "-c", " ".join(map(_quote, argv))], cwd="/",
                          capture_output=True, text=True, timeout=timeout + 60,
                          env={**os.environ, "PYTHONPATH": str(Path(__file__).resolve().parents[1])})
    assert proc.returncode == 0, proc.stderr
    data = json.loads(proc.stdout.strip().splitlines()[-1])
    return CommandResult(data["exit_code"], data["output"], data["timed_out"], False, 0, 0.0, None)


def _quote(arg: str) -> str:
    return "'" + arg.replace("'", "'\\''") + "'"


def py(code: str) -> str:
    return "python3 -c " + _quote(textwrap.dedent(code))


ERRNO = """
import ctypes, os
libc = ctypes.CDLL(None, use_errno=True)
libc.syscall.restype = ctypes.c_long
def call(nr, *args):
    r = libc.syscall(ctypes.c_long(nr), *[ctypes.c_ulong(a) for a in args])
    return 0 if r >= 0 else ctypes.get_errno()
"""


# ---------------------------------------------------------------- the program, as a table


def run_bpf(prog: list[tuple[int, int, int, int]], nr: int, args: tuple[int, ...] = (),
            arch: int = seccomp.AUDIT_ARCH_X86_64) -> int:
    """A classic-BPF interpreter for the few opcodes the filter uses, over struct seccomp_data."""
    words = {0: nr, 4: arch}
    for i, value in enumerate((*args, 0, 0, 0, 0, 0, 0)[:6]):
        words[16 + 8 * i], words[20 + 8 * i] = value & 0xFFFFFFFF, value >> 32
    acc, pc = 0, 0
    while True:
        code, jt, jf, k = prog[pc]
        pc += 1
        if code == 0x20:
            acc = words[k]
        elif code == 0x54:
            acc &= k
        elif code in (0x15, 0x35):
            pc += jt if (acc == k if code == 0x15 else acc >= k) else jf
        elif code == 0x06:
            return k
        else:
            raise AssertionError(f"opcode {code:#x}")


N = seccomp.NR
HIGH = 0xFFFFFFFF00000000
TABLE = [  # (syscall, args, denied without network, denied with network)
    ("socket", (2, 1, 0), True, False), ("socket", (2, 1, 262), True, False), ("socket", (10, 2, 0), True, False),
    ("socket", (16, 3, 0), True, False), ("socket", (45, 1, 0), True, False), ("socket", (1, 1, 0), False, False),
    ("socket", (HIGH | 1, 1, 0), False, False),          # the kernel reads the int: AF_UNIX
    ("socket", (HIGH | 2, 1, 0), True, False),
    ("ioctl", (0, 0x5412), True, True), ("ioctl", (0, HIGH | 0x5412), True, True), ("ioctl", (0, 0x541C), True, True),
    ("ioctl", (0, 0x5401), False, False),                # TCGETS
    ("mknod", (0, 0o020600), True, True), ("mknod", (0, 0o060600), True, True), ("mknod", (0, 0o010600), False, False),
    ("mknod", (0, 0o100600), False, False), ("mknodat", (0, 0, 0o020600), True, True),
    ("mknodat", (0, 0, HIGH | 0o060600), True, True), ("mknodat", (0, 0, 0o010600), False, False),
    *[(name, (), True, True) for name in seccomp.ALWAYS_DENIED],
    ("prlimit64", (0, 7), False, False), ("prlimit64", (1, 7), True, True), ("prlimit64", (HIGH, 7), False, False),
    ("setpriority", (0, 0, 5), False, False), ("setpriority", (0, 1, 5), True, True),
    ("setpriority", (2, 0, 5), True, True), ("setpriority", (1, 0, 5), True, True),
]


@pytest.mark.parametrize("network", [False, True])
def test_the_program_decides_each_call_as_the_table_says(network: bool) -> None:
    prog = seccomp.program(network)
    for name, args, denied, denied_net in TABLE:
        want = seccomp.DENY if (denied_net if network else denied) else seccomp.ALLOW
        assert run_bpf(prog, N[name], args) == want, (name, args, network)
    assert run_bpf(prog, 0) == seccomp.ALLOW                                  # read
    assert run_bpf(prog, 0, arch=0x40000003) == seccomp.DENY                  # i386
    assert run_bpf(prog, seccomp.X32_BIT | 41, (1,)) == seccomp.DENY          # x32


# ---------------------------------------------------------------- network


@pytest.fixture
def listener() -> Iterator[tuple[socket.socket, int]]:
    server = socket.socket()
    server.bind(("127.0.0.1", 0))
    server.listen(4)
    server.settimeout(0.5)
    yield server, server.getsockname()[1]
    server.close()


@pytest.mark.parametrize("user", USERS)
def test_mptcp_and_every_non_unix_socket_fail_unless_the_network_is_approved(
        ws: Path, user: str, listener: tuple[socket.socket, int]) -> None:
    server, port = listener
    send = py(f"""
        import socket
        s = socket.socket(socket.AF_INET, socket.SOCK_STREAM, 262)
        s.connect(('127.0.0.1', {port})); s.sendall(b'SECRET'); print('sent')
    """)
    blocked = sandboxed(send, ws, user)
    assert "sent" not in blocked.output and "PermissionError" in blocked.output, blocked.output
    with pytest.raises(TimeoutError):
        server.accept()
    others = sandboxed(py("""
        import socket
        for fam, typ in ((10, 1), (2, 2), (16, 3), (17, 2), (40, 1), (44, 1)):   # ... vsock, xdp, and later ones
            try: socket.socket(fam, typ); print('opened', fam)
            except OSError as e: print('refused', fam, e.errno)
        a, b = socket.socketpair(); a.send(b'ok'); print(b.recv(2).decode())
    """), ws, user)
    assert "opened" not in others.output and others.output.count("refused") == 6 and "ok" in others.output
    try:
        allowed = sandboxed(send, ws, user, network=True)
    except AssertionError:
        pytest.skip("MPTCP is not enabled in this kernel")
    if "Protocol not available" in allowed.output or "not supported" in allowed.output:
        pytest.skip("MPTCP is not enabled in this kernel")
    assert "sent" in allowed.output, allowed.output


# ---------------------------------------------------------------- terminals, devices, kernel-wide calls


@pytest.mark.parametrize("user", USERS)
def test_terminal_injection_devices_and_kernel_wide_calls_are_refused(ws: Path, user: str) -> None:
    result = sandboxed(py(ERRNO + textwrap.dedent(f"""
        import fcntl, os, stat
        try: os.openpty(); print('openpty 0')        # a new pty's other end is under /dev/pts: out of reach
        except OSError as e: print('openpty', e.errno)
        s = os.open('/dev/null', os.O_RDWR)          # the filter refuses these on any descriptor
        print('TIOCSTI', call({N['ioctl']}, s, 0x5412, ctypes.addressof(ctypes.c_char(b'x'))))
        print('TIOCSTI-high', call({N['ioctl']}, s, 0xFFFFFFFF00005412, ctypes.addressof(ctypes.c_char(b'x'))))
        print('TIOCLINUX', call({N['ioctl']}, s, 0x541C, ctypes.addressof(ctypes.c_char(b'\\x06'))))
        print('TCGETS', call({N['ioctl']}, s, 0x5401, ctypes.addressof(ctypes.create_string_buffer(64))))
        for kind, mode in (('chr', stat.S_IFCHR), ('blk', stat.S_IFBLK)):
            try: os.mknod('kmsg-' + kind, mode | 0o600, os.makedev(1, 11)); print('mknod', kind, 0)
            except OSError as e: print('mknod', kind, e.errno)
        os.mkfifo('fifo'); os.mknod('plain', stat.S_IFREG | 0o600); print('fifo+file ok')
        print('bpf', call({N['bpf']}, 0, 0, 0))
        print('perf', call({N['perf_event_open']}, 0, 0, -1 & 0xFFFFFFFF, -1 & 0xFFFFFFFF, 0))
        print('add_key', call({N['add_key']}, ctypes.addressof(ctypes.create_string_buffer(b'user')),
              ctypes.addressof(ctypes.create_string_buffer(b'k')), 0, 0, 0xFFFFFFFD))
        print('keyctl', call({N['keyctl']}, 0, 0xFFFFFFFD, 0))
        print('request_key', call({N['request_key']}, 0, 0, 0, 0))
        print('shmget', call({N['shmget']}, 0, 4096, 0o1600))
        print('semget', call({N['semget']}, 0, 1, 0o1600))
        print('msgget', call({N['msgget']}, 0, 0o1600))
    """)), ws, user)
    lines = dict(line.rsplit(" ", 1) for line in result.output.splitlines() if line.count(" ") in (1, 2))
    eperm = str(errno.EPERM)
    for name in ("TIOCSTI", "TIOCSTI-high", "TIOCLINUX", "mknod chr", "mknod blk", "bpf", "perf", "add_key",
                 "keyctl", "request_key", "shmget", "semget", "msgget"):
        assert lines.get(name) == eperm, (name, result.output)
    # an ordinary ioctl reaches the kernel (not a tty: ENOTTY, not the filter's EPERM)
    assert lines.get("TCGETS") == str(errno.ENOTTY) and "fifo+file ok" in result.output, result.output
    assert lines.get("openpty") == str(errno.EACCES), result.output
    assert not (ws / "kmsg-chr").exists() and not (ws / "kmsg-blk").exists()


def test_the_same_calls_work_without_the_sandbox(ws: Path) -> None:
    """The control: outside the sandbox add_key and shmget succeed, so EPERM above is the filter."""
    code = ERRNO + textwrap.dedent(f"""
        r = libc.syscall(ctypes.c_long({N['shmget']}), 0, 4096, 0o1600)
        print('shmget', 'ok' if r >= 0 else ctypes.get_errno())
        if r >= 0: libc.syscall(ctypes.c_long({N['shmctl']}), r, 0, 0)     # IPC_RMID
    """)
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True).stdout
    assert "shmget ok" in out


@pytest.mark.parametrize("user", USERS)
def test_limits_and_priority_of_other_processes_cannot_be_changed(ws: Path, user: str) -> None:
    outsider = subprocess.Popen(["sleep", "60"], preexec_fn=(lambda: os.setuid(pwd.getpwnam(user).pw_uid))
                                if user != "self" else None)
    try:
        result = sandboxed(py(f"""
            import os, resource
            for name, f in (('prlimit', lambda: resource.prlimit({outsider.pid}, resource.RLIMIT_NOFILE, (1, 1))),
                            ('renice', lambda: os.setpriority(os.PRIO_PROCESS, {outsider.pid}, 19)),
                            ('renice-user', lambda: os.setpriority(os.PRIO_USER, 0, 19)),
                            ('own', lambda: (resource.setrlimit(resource.RLIMIT_NOFILE, (256, 256)), os.nice(1)))):
                try: f(); print(name, 'done')
                except OSError as e: print(name, 'refused', e.errno)
        """), ws, user)
        assert f"prlimit refused {errno.EPERM}" in result.output and f"renice refused {errno.EPERM}" in result.output
        assert f"renice-user refused {errno.EPERM}" in result.output and "own done" in result.output, result.output
        assert resource_nofile(outsider.pid) != "1" and os.getpriority(os.PRIO_PROCESS, outsider.pid) == 0
    finally:
        outsider.kill()
        outsider.wait()


def resource_nofile(pid: int) -> str:
    for line in Path(f"/proc/{pid}/limits").read_text().splitlines():
        if line.startswith("Max open files"):
            return line.split()[3]
    return ""


# ---------------------------------------------------------------- root-only secrets and capabilities


@pytest.mark.skipif(not ROOT, reason="only root can read /etc/shadow at all")
def test_root_cannot_read_shadow_or_host_keys_or_lift_its_limits(ws: Path) -> None:
    keys = [p for p in Path("/etc/ssh").glob("ssh_host_*_key")] if Path("/etc/ssh").is_dir() else []
    targets = ["/etc/shadow", "/etc/gshadow", *map(str, keys)]
    result = sandboxed(f"cat /etc/passwd >/dev/null && echo passwd-ok; for f in {' '.join(targets)}; do "
                       "cat $f >/dev/null 2>&1 && echo READ $f; done; " + py("""
        import resource
        try: resource.setrlimit(resource.RLIMIT_AS, (resource.RLIM_INFINITY,) * 2); print('LIFTED')
        except (ValueError, OSError) as e: print('limit held')
    """), ws)
    assert "passwd-ok" in result.output and "READ" not in result.output and "limit held" in result.output, \
        result.output
    assert Path("/etc/shadow").read_bytes()                   # readable outside: the sandbox did it
    plan = landlock.plan(str(ws), str(ws), {"PATH": "/usr/bin"}, network=False)
    assert "/etc/shadow" not in plan.read_exec and "/etc" not in plan.read_exec and "/etc/passwd" in plan.read_exec


# ---------------------------------------------------------------- processes that outlive the command


def _alive_with(marker: str) -> list[int]:
    found = []
    for entry in os.listdir("/proc"):
        if entry.isdigit():
            try:
                cmdline = Path(f"/proc/{entry}/cmdline").read_bytes()
                state = Path(f"/proc/{entry}/stat").read_bytes().rsplit(b")", 1)[1].split()[0]
            except OSError:
                continue
            if marker.encode() in cmdline and state != b"Z":
                found.append(int(entry))
    return found


DETACHING = {
    "setsid double fork": "setsid sh -c 'sleep {m} & exit 0'; sleep 0.3",
    "job control": "set -m; sleep {m} & sleep 0.3",
    "timeout": "timeout 300 sleep {m} & sleep 0.3",
    "nohup": "nohup sleep {m} >/dev/null 2>&1 & sleep 0.3",
    "setsid -f": "setsid -f sleep {m}; sleep 0.3",
    "python daemon": py("import os\nif os.fork() == 0:\n os.setsid()\n if os.fork() == 0: os.execvp('sleep', "
                        "['sleep', '{m}'])\n") + "; sleep 0.3",
}


@pytest.mark.parametrize("user", USERS)
@pytest.mark.parametrize("how", sorted(DETACHING))
def test_no_process_outlives_the_command(ws: Path, user: str, how: str) -> None:
    marker = f"{300 + time.monotonic_ns() % 1000000 / 1e7:.7f}"
    result = sandboxed(DETACHING[how].format(m=marker), ws, user)
    assert result.exit_code == 0, result.output
    time.sleep(0.2)
    assert _alive_with(marker) == [], how


def test_the_helper_alone_kills_the_tree_and_reports_the_status(ws: Path) -> None:
    """Without keel.policy.process around it: the helper itself, the subreaper, does it."""
    marker = f"{301 + time.monotonic_ns() % 1000000 / 1e7:.7f}"
    launch = build_sandboxed({"PATH": "/usr/bin:/bin", "HOME": str(ws)}, ws, SandboxPolicy(tier="landlock"), False)
    proc = subprocess.run([*launch.argv_prefix, "bash", "-c", f"setsid sh -c 'sleep {marker} &'; sleep 0.3; exit 7"],
                          cwd=ws, env=launch.env, capture_output=True, timeout=60)
    assert proc.returncode == 7 and _alive_with(marker) == []
    killed = subprocess.run([*launch.argv_prefix, "bash", "-c", "kill -TERM $$"], cwd=ws, env=launch.env, timeout=60)
    assert killed.returncode == 128 + 15


def test_a_timeout_kills_the_helper_and_every_descendant(ws: Path) -> None:
    marker = f"{302 + time.monotonic_ns() % 1000000 / 1e7:.7f}"
    result = sandboxed(f"setsid sh -c 'sleep {marker} &'; trap '' TERM; sleep {marker}", ws, timeout=2)
    assert result.timed_out
    time.sleep(0.3)
    assert _alive_with(marker) == []


# ---------------------------------------------------------------- limits and /dev/shm


@pytest.mark.parametrize("user", USERS)
def test_shared_memory_counts_against_the_memory_limit(ws: Path, user: str) -> None:
    big = 3 * GIB // 2            # more than 2 x 512 MiB, the address-space limit below
    code = f"import mmap; m = mmap.mmap(-1, {big}, flags=mmap.MAP_SHARED); print('mapped')"
    held = sandboxed(py(code), ws, user, memory_bytes=GIB // 2)
    assert "mapped" not in held.output and ("MemoryError" in held.output or "Cannot allocate" in held.output), \
        held.output
    assert "mapped" in subprocess.run([sys.executable, "-c", code], capture_output=True, text=True).stdout
    tools = sandboxed("python3 -c 'import json' && git --version && (command -v node >/dev/null && node -e 1 || true) "
                      "&& echo tools-ok", ws, user)
    assert "tools-ok" in tools.output, tools.output


@pytest.mark.parametrize("user", USERS)
def test_a_fork_bomb_stops_at_the_process_budget(ws: Path, user: str) -> None:
    result = sandboxed("for i in $(seq 80); do sleep 2 & done 2>&1 | grep -c -m1 'fork' ; wait; echo done", ws, user,
                       nproc_budget=30)
    assert "done" in result.output and result.output.split()[0] != "0", result.output


@pytest.mark.parametrize("user", USERS)
def test_dev_shm_files_are_removed_and_posix_semaphores_work(ws: Path, user: str) -> None:
    """With nothing of the host's the command could write in /dev/shm, POSIX shared memory works
    (multiprocessing's locks) and what the command leaves there is removed."""
    name = f"keel-shm-{os.getpid()}-{time.monotonic_ns()}"
    result = sandboxed(py(f"""
        import multiprocessing as mp
        open('/dev/shm/{name}', 'w').write('left behind')
        lock = mp.Lock(); sem = mp.Semaphore(2)
        with lock: sem.acquire(); sem.release(); print('sem-ok')
    """), ws, user)
    uid = os.geteuid() if user == "self" else pwd.getpwnam(user).pw_uid
    if not landlock.shared_memory_free(uid=uid):    # a file of this user's is there: withheld, as it must be
        pytest.skip("/dev/shm holds a file of this user's now (another program's)")
    assert "sem-ok" in result.output, result.output
    assert not (Path("/dev/shm") / name).exists()
