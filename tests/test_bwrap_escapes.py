"""Escape attempts against the bubblewrap tier, each a real command through keel's real launch
path (keel.policy.runner, the one door), as the test runner (root in CI and containers) and as
an unprivileged user. Each shows the attempt failed on the host, and where the test could pass for
the wrong reason, a control run without the sandbox shows the same command does get through."""

from __future__ import annotations

import fcntl
import os
import pwd
import socket
import subprocess
import sys
import time
import uuid
from collections.abc import Iterator
from pathlib import Path

import psutil
import pytest
from bwrap_runner import Ran, ensure_unprivileged_user, make_workspace, remove_workspace, run_as

pytestmark = pytest.mark.bubblewrap
ROOT = os.geteuid() == 0


@pytest.fixture(params=["runner", "unprivileged"])
def user(request: pytest.FixtureRequest) -> str | None:
    if request.param == "runner":
        return None
    if not ROOT:
        pytest.skip("making another user's processes needs root")
    user = ensure_unprivileged_user()
    if user is None:
        reason = f"the unprivileged user cannot run {sys.executable} with keel (.ci/run opens the path)"
        if os.environ.get("KEEL_REQUIRE_SANDBOX") == "1":
            pytest.fail(reason)
        pytest.skip(reason)
    return user


@pytest.fixture
def ws(user: str | None) -> Iterator[Path]:
    path = make_workspace(user)
    yield path
    remove_workspace(path)


def run(user: str | None, ws: Path, command: str, **kw: object) -> Ran:
    return run_as(user, ws, command, **kw)  # type: ignore[arg-type]


def uid_of(user: str | None) -> int:
    return os.getuid() if user is None else pwd.getpwnam(user).pw_uid


# ---------------------------------------------------------------- network


def test_mptcp_tcp_and_udp_to_a_host_listener_fail(user: str | None, ws: Path) -> None:
    tcp = socket.socket()
    tcp.bind(("127.0.0.1", 0))
    tcp.listen(8)
    tcp.settimeout(1.5)
    udp = socket.socket(socket.AF_INET, socket.SOCK_DGRAM)
    udp.bind(("127.0.0.1", 0))
    udp.settimeout(1.5)
    tcp_port, udp_port = tcp.getsockname()[1], udp.getsockname()[1]
    command = ("python3 -c \"import socket\n"
               f"for proto in (262, 0):\n"
               f"    try:\n"
               f"        s = socket.socket(socket.AF_INET, socket.SOCK_STREAM, proto); s.settimeout(2)\n"
               f"        s.connect(('127.0.0.1', {tcp_port})); s.sendall(b'SECRET'); print('sent', proto)\n"
               f"    except OSError as e: print('refused', proto, e)\n"
               f"socket.socket(socket.AF_INET, socket.SOCK_DGRAM).sendto(b'UDP-SECRET', ('127.0.0.1', {udp_port}))\n"
               f"print('udp done')\"")
    try:
        escaped = run(user, ws, command)
        assert "refused 262" in escaped.output and "refused 0" in escaped.output, escaped.output
        assert "udp done" in escaped.output
        with pytest.raises(TimeoutError):
            tcp.accept()
        with pytest.raises(TimeoutError):
            udp.recvfrom(100)
        # Control: the same command without the sandbox reaches both listeners, MPTCP included.
        control = run(user, ws, command, mode="off")
        assert "sent 262" in control.output and "sent 0" in control.output
        assert udp.recvfrom(100)[0] == b"UDP-SECRET"
    finally:
        tcp.close()
        udp.close()


# ---------------------------------------------------------------- processes outliving the command


def test_detached_processes_do_not_outlive_the_command(user: str | None, ws: Path) -> None:
    marker = f"{time.time_ns() % 10**6}.{os.getpid()}"
    daemon = ("python3 -c \"import os, time\n"
              "if os.fork() == 0:\n"
              "    os.setsid()\n"
              "    if os.fork() == 0:\n"
              "        open('started', 'w').close(); time.sleep(2); open('survived', 'w').close()\"")
    command = (f"{daemon}; set -m; sleep {marker} & timeout 300 sleep {marker}1 & "
               f"nohup setsid sleep {marker}2 >/dev/null 2>&1 & sleep 1; echo launched")
    result = run(user, ws, command)
    assert "launched" in result.output and (ws / "started").exists(), result.output
    time.sleep(2.5)
    assert not (ws / "survived").exists()
    left = [p for p in psutil.process_iter(["cmdline"]) if marker in " ".join(p.info["cmdline"] or [])]
    assert left == []


# ---------------------------------------------------------------- code the host runs later


def git(ws: Path, *args: str, user: str | None = None) -> str:
    prefix = [] if user is None else ["setpriv", f"--reuid={user}", f"--regid={user}", "--init-groups"]
    env = {**os.environ, "HOME": str(ws)}
    return subprocess.run([*prefix, "git", "-c", "user.email=t@t", "-c", "user.name=t", *args], cwd=ws,
                          check=True, capture_output=True, text=True, env=env).stdout


def test_git_hooks_config_and_keel_dir_are_read_only(user: str | None, ws: Path) -> None:
    git(ws, "init", "-q", user=user)
    (ws / ".keel").mkdir()
    (ws / "a.txt").write_text("a\n")
    if user is not None:
        pw = pwd.getpwnam(user)
        for path in (ws / ".keel", ws / "a.txt"):
            os.chown(path, pw.pw_uid, pw.pw_gid)
    config_before = (ws / ".git" / "config").read_text()
    command = ("python3 -c \"open('.git/hooks/pre-commit', 'w').write('#!/bin/sh\\ntouch /tmp/pwn\\n')\"; "
               "echo hook=$?; printf '[core]\\n\\tfsmonitor = touch fsm\\n' >> .git/config; echo config=$?; "
               "echo x > .keel/config.toml; echo keel=$?; "
               "echo b >> a.txt; echo ws=$?; git status --short; echo status=$?")
    result = run(user, ws, command)
    for blocked in ("hook=1", "config=1", "keel=1"):
        assert blocked in result.output, result.output
    assert "ws=0" in result.output and "status=0" in result.output and "a.txt" in result.output
    assert not (ws / ".git" / "hooks" / "pre-commit").exists()
    assert (ws / ".git" / "config").read_text() == config_before
    assert not (ws / ".keel" / "config.toml").exists() and (ws / "a.txt").read_text() == "a\nb\n"


def test_a_gitdir_file_target_is_read_only(user: str | None, ws: Path) -> None:
    """``.git`` as a file (``gitdir: store``, as in submodules and worktrees): the repository it
    names is inside the writable workspace, and still read-only."""
    git(ws, "init", "-q", "--separate-git-dir", str(ws / "store"), str(ws), user=user)
    assert (ws / ".git").is_file()
    command = ("python3 -c \"\n"
               "for target in ('store/hooks/post-checkout', 'store/config', '.git'):\n"
               "    try: open(target, 'a').write('x'); print('wrote', target)\n"
               "    except OSError as e: print('refused', e.strerror)\"; "
               "echo ok > new.txt; cat new.txt; git status --short")
    result = run(user, ws, command)
    assert "wrote" not in result.output and result.output.count("refused") == 3, result.output
    assert "ok" in result.output and "new.txt" in result.output
    assert not (ws / "store" / "hooks" / "post-checkout").exists()


# ---------------------------------------------------------------- root's reach


@pytest.mark.skipif(not ROOT, reason="TIOCSTI into another terminal needs CAP_SYS_ADMIN: root only")
def test_tiocsti_cannot_type_into_a_host_terminal(ws: Path) -> None:
    master, slave = os.openpty()
    name = os.ttyname(slave)
    command = (f"python3 -c \"import fcntl, termios, os\n"
               f"try:\n"
               f"    fd = os.open('{name}', os.O_RDWR | os.O_NOCTTY)\n"
               f"    for c in b'id\\n': fcntl.ioctl(fd, termios.TIOCSTI, bytes([c]))\n"
               f"    print('injected')\n"
               f"except OSError as e: print('refused', e.strerror)\"")
    try:
        result = run(None, ws, command)
        assert "refused" in result.output and "injected" not in result.output
        fcntl.fcntl(slave, fcntl.F_SETFL, os.O_NONBLOCK)
        with pytest.raises(BlockingIOError):
            os.read(slave, 100)
        control = run(None, ws, command, mode="off")     # root outside any sandbox: keystrokes land
        assert "injected" in control.output and b"id" in os.read(slave, 100)
    finally:
        os.close(master)
        os.close(slave)


def test_mknod_and_root_only_secrets(user: str | None, ws: Path) -> None:
    command = ("mknod kmsg c 1 11; echo mknod=$?; mknod /dev/shm/kvm c 10 232; echo mknod2=$?; "
               "cat /etc/shadow /etc/gshadow; ls /etc/sudoers.d; ls /etc/ssh; cat /etc/ssh/ssh_host_*_key; "
               "echo end")
    result = run(user, ws, command)
    assert "mknod=0" not in result.output and "mknod2=0" not in result.output and "end" in result.output
    assert not (ws / "kmsg").exists()
    assert "root:" not in result.output and "PRIVATE KEY" not in result.output
    if ROOT and user is None:
        assert "root:" in Path("/etc/shadow").read_text()       # control: root reads it on the host


def test_prlimit_setpriority_and_signals_cannot_reach_host_processes(user: str | None, ws: Path) -> None:
    prefix = [] if user is None else ["setpriv", f"--reuid={user}", f"--regid={user}", "--init-groups"]
    sleeper = subprocess.Popen([*prefix, "sleep", "300"])
    try:
        host = psutil.Process(sleeper.pid)
        pid = sleeper.pid
        command = (f"prlimit --pid {pid} --nofile=3:3; echo prlimit=$?; renice -n 19 -p {pid}; echo renice=$?; "
                   f"kill -STOP {pid}; echo kill=$?; cat /proc/{pid}/environ; echo environ=$?; "
                   "cat /proc/$KEEL_PID/environ; echo keel=$?")
        result = run(user, ws, command.replace("$KEEL_PID", str(os.getpid())))
        for verb in ("prlimit", "renice", "kill", "environ", "keel"):
            assert f"{verb}=0" not in result.output, result.output
        assert host.nice() == 0 and "Max open files            3 " not in Path(f"/proc/{pid}/limits").read_text()
        assert host.status() != psutil.STATUS_STOPPED
        control = run(user, ws, f"renice -n 19 -p {pid}; echo renice=$?", mode="off")
        assert "renice=0" in control.output and host.nice() == 19
    finally:
        sleeper.kill()
        sleeper.wait()


# ---------------------------------------------------------------- shared memory and process count


def shm_segments(ipcs_output: str) -> dict[str, str]:
    """key -> shmid of each segment `ipcs -m` lists. Segments are told apart by their random keys:
    ids are small counters (this kernel gives 0, 1, 2 … in each namespace), so an id alone also
    matches another namespace's segment, or the nattch column's 0."""
    rows = (line.split() for line in ipcs_output.splitlines())
    return {row[0]: row[1] for row in rows if len(row) >= 5 and row[0].startswith("0x")}


def test_dev_shm_and_sysv_shm_are_private(user: str | None, ws: Path) -> None:
    name = f"keel-shm-{uuid.uuid4().hex}"
    prefix = [] if user is None else ["setpriv", f"--reuid={user}", f"--regid={user}", "--init-groups"]
    host_seg = subprocess.run([*prefix, "ipcmk", "-M", "4096"], capture_output=True, text=True, check=True)
    host_id = host_seg.stdout.split()[-1]
    try:
        host_key = next(k for k, v in shm_segments(subprocess.run(["ipcs", "-m"], capture_output=True,
                                                                   text=True).stdout).items() if v == host_id)
        result = run(user, ws, f"echo x > /dev/shm/{name}; echo w=$?; ipcmk -M 12347; echo m=$?; ipcs -m")
        assert "w=0" in result.output and "m=0" in result.output, result.output
        inside = shm_segments(result.output)
        assert len(inside) == 1 and host_key not in inside, result.output   # only its own; the host's unseen
        assert not Path(f"/dev/shm/{name}").exists()
        host = shm_segments(subprocess.run(["ipcs", "-m"], capture_output=True, text=True).stdout)
        assert host_key in host and not set(inside) & set(host)             # its segment went with it
        again = run(user, ws, f"ls /dev/shm; test -e /dev/shm/{name}; echo seen=$?")
        assert "seen=1" in again.output
    finally:
        subprocess.run(["ipcrm", "-m", host_id], capture_output=True)


def test_the_process_budget_bounds_a_command(user: str | None, ws: Path) -> None:
    spawner = ("python3 -c \"import os, time\n"
               "n = 0\n"
               "while True:\n"
               "    try: pid = os.fork()\n"
               "    except OSError as e: print('refused after', n, e.strerror); break\n"
               "    if pid == 0: time.sleep(60); os._exit(0)\n"
               "    n += 1\"")
    result = run(user, ws, spawner, timeout=60)
    assert "refused after" in result.output, result.output
    # The default budget is 512 processes more than the user ran at the start (bwrap and bash count;
    # processes of the user's that end meanwhile, e.g. an earlier test's, leave room for a few more).
    assert 400 <= int(result.output.split("refused after")[1].split()[0]) <= 600
    # The command's end takes its PID namespace, and every sleeping child, with it.
    assert run(user, ws, "echo alive").output.strip() == "alive"


def test_a_fork_bomb_ends_with_its_timeout_and_the_host_survives(user: str | None, ws: Path) -> None:
    before = len(psutil.pids())
    result = run(user, ws, "python3 -c \"import os\nwhile True: os.fork()\"", timeout=4)
    # Ended by the budget (every process refused a fork, and exiting) or else by the timeout.
    assert result.timed_out or "Resource temporarily unavailable" in result.output, result.output
    time.sleep(1)
    assert len(psutil.pids()) < before + 20
    assert subprocess.run(["true"]).returncode == 0 and run(user, ws, "echo alive").output.strip() == "alive"
