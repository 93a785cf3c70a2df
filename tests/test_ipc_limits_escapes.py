"""Local IPC and resources (issue 34, items 6 and 7), tried as an attacker would: a real command through
keel's runner in the real sandbox, as the test runner (root) and as ``kuser``, next to a control with no
keel where the attack works.

- Landlock: the user's other terminals (/dev/pts/N) and existing host /dev/shm files are out of reach;
- bubblewrap: host unix socket files outside the workspace cannot be connected to, unless the user
  allows one by path; the workspace's own sockets work;
- both tiers: what a command and all its children use together, in memory and on disk, is bounded
  (a memory cgroup as root here, a watch of the tree as kuser), and the tier's detail line says which;
- Landlock: a test that serves on 127.0.0.1 fails with the network rule named and how to allow it.
"""

from __future__ import annotations

import os
import pwd
import socket
import subprocess
import sys
import tempfile
import threading
import uuid
from collections.abc import Iterator
from pathlib import Path

import pytest
from bwrap_runner import (
    ensure_unprivileged_user,
    make_workspace,
    remove_workspace,
    run_as,
    run_plain,
    user_env,
)

from keel.policy import landlock
from keel.policy.runner import Job, run
from keel.policy.sandbox import SandboxPolicy

ROOT = os.geteuid() == 0
MIB = 1024**2
TIERS = [pytest.param("bwrap", marks=pytest.mark.bubblewrap), pytest.param("landlock", marks=pytest.mark.landlock)]


@pytest.fixture(params=["root", "kuser"])
def user(request: pytest.FixtureRequest) -> str | None:
    if request.param == "root":
        return None
    if not ROOT:
        pytest.skip("running as another user needs root")
    name = ensure_unprivileged_user()
    if name is None:
        if os.environ.get("KEEL_REQUIRE_SANDBOX") == "1":
            pytest.fail(f"the unprivileged user cannot run {sys.executable} with keel")
        pytest.skip("the unprivileged user cannot run keel here")
    return name


@pytest.fixture
def ws(user: str | None) -> Iterator[Path]:
    path = make_workspace(user)
    yield path
    remove_workspace(path)


def uid_of(user: str | None) -> int:
    return os.getuid() if user is None else pwd.getpwnam(user).pw_uid


def py(code: str) -> str:
    return "python3 -c " + "'" + code.replace("'", "'\\''") + "'"


# ---------------------------------------------------------------- Landlock: terminals and /dev/shm


@pytest.fixture
def terminal(user: str | None) -> Iterator[tuple[int, str]]:
    """Another terminal of the user's: a pty whose slave belongs to them; (master fd, slave path)."""
    master, slave = os.openpty()
    path = os.ttyname(slave)
    os.chown(path, uid_of(user), -1)
    os.set_blocking(master, False)
    yield master, path
    os.close(master)
    os.close(slave)


def _typed(master: int) -> bytes:
    try:
        return os.read(master, 4096)
    except BlockingIOError:
        return b""


@pytest.mark.landlock
def test_the_users_other_terminals_are_out_of_reach(user: str | None, ws: Path, terminal: tuple[int, str]) -> None:
    master, path = terminal
    ran = run_as(user, ws, f"echo INJECTED > {path}; echo write=$?; " + py(
        f"import os\ntry: os.open('{path}', os.O_RDONLY); print('read=0')\nexcept OSError as e: print('read', e.errno)"),
                 mode="landlock", timeout=60)
    assert "write=1" in ran.output and "read 13" in ran.output, ran.output
    assert b"INJECTED" not in _typed(master)


def test_control_without_keel_a_command_types_into_the_terminal(user: str | None, ws: Path,
                                                                 terminal: tuple[int, str]) -> None:
    master, path = terminal
    run_plain(user, ws, f"echo INJECTED > {path}")
    assert b"INJECTED" in _typed(master)


@pytest.fixture
def host_shm(user: str | None) -> Iterator[Path]:
    """A shared-memory file another program of the user's keeps in /dev/shm."""
    path = Path("/dev/shm") / f"keel-victim-{uuid.uuid4().hex}"
    path.write_text("the host's data\n")
    os.chown(path, uid_of(user), -1)
    yield path
    path.unlink(missing_ok=True)


@pytest.mark.landlock
def test_existing_host_shared_memory_is_out_of_reach(user: str | None, ws: Path, host_shm: Path) -> None:
    ran = run_as(user, ws, f"echo EVIL > {host_shm}; echo write=$?; cat {host_shm}; echo read=$?; "
                           f"rm -f {host_shm}; echo rm=$?", mode="landlock", timeout=60)
    assert "write=1" in ran.output and "read=1" in ran.output and "rm=1" in ran.output, ran.output
    assert host_shm.read_text() == "the host's data\n"


def test_control_without_keel_the_host_shared_memory_is_overwritten(user: str | None, ws: Path,
                                                                    host_shm: Path) -> None:
    run_plain(user, ws, f"echo EVIL > {host_shm}")
    assert host_shm.read_text() == "EVIL\n"


def test_shared_memory_is_granted_only_while_it_holds_nothing_the_command_could_write(tmp_path: Path) -> None:
    shm = tmp_path / "shm"
    shm.mkdir()
    assert landlock.shared_memory_free(str(shm))
    (shm / "theirs").write_text("x")
    os.chmod(shm / "theirs", 0o644)
    assert landlock.shared_memory_free(str(shm)) is (os.geteuid() != 0 and (shm / "theirs").stat().st_uid != 0)
    os.chmod(shm / "theirs", 0o666)                     # world-writable: anyone's to overwrite
    assert not landlock.shared_memory_free(str(shm))


# ---------------------------------------------------------------- bubblewrap: host unix sockets


@pytest.fixture
def listener(user: str | None) -> Iterator[tuple[Path, list[bytes]]]:
    """A unix socket a host daemon listens on, outside the workspace (and outside /tmp, which is
    private anyway): (its path, what it received)."""
    folder = Path(tempfile.mkdtemp(prefix="keel-daemon-", dir="/var/tmp"))
    os.chmod(folder, 0o755)
    path = folder / "daemon.sock"
    server = socket.socket(socket.AF_UNIX)
    server.bind(str(path))
    os.chmod(path, 0o777)
    server.listen(4)
    server.settimeout(0.5)
    received: list[bytes] = []
    stop = threading.Event()

    def serve() -> None:
        while not stop.is_set():
            try:
                conn, _ = server.accept()
            except OSError:
                continue
            with conn:
                received.append(conn.recv(100))

    thread = threading.Thread(target=serve, daemon=True)
    thread.start()
    yield path, received
    stop.set()
    thread.join(2)
    server.close()
    remove_workspace(folder)


CONNECT = ("import socket,sys\ns = socket.socket(socket.AF_UNIX)\ntry:\n    s.connect(sys.argv[1]); "
           "s.sendall(b'SECRET-COMMAND'); print('connected')\nexcept OSError as e: print('refused', e.errno)")


def _connect(path: Path) -> str:
    return "python3 -c " + "'" + CONNECT.replace("'", "'\\''") + "' " + str(path)


@pytest.mark.bubblewrap
def test_host_unix_sockets_outside_the_workspace_are_unreachable(user: str | None, ws: Path,
                                                                 listener: tuple[Path, list[bytes]]) -> None:
    path, received = listener
    ran = run_as(user, ws, _connect(path), mode="bwrap", timeout=60)
    assert "refused" in ran.output and b"SECRET-COMMAND" not in b"".join(received), ran.output


@pytest.mark.bubblewrap
def test_sockets_under_run_are_unreachable_and_the_workspaces_own_work(user: str | None, ws: Path) -> None:
    """Variant: a daemon's socket in /run (the whole of /run is an empty tmpfs for commands), and a
    socket the command makes in the workspace, which it may use."""
    if not ROOT:
        pytest.skip("making a socket in /run needs root")
    path = Path("/run") / f"keel-test-{uuid.uuid4().hex}.sock"
    server = socket.socket(socket.AF_UNIX)
    server.bind(str(path))
    os.chmod(path, 0o777)
    server.listen(1)
    try:
        own = ("import socket,os\na = socket.socket(socket.AF_UNIX); a.bind('own.sock'); a.listen(1)\n"
               "b = socket.socket(socket.AF_UNIX); b.connect('own.sock'); print('own ok')")
        ran = run_as(user, ws, _connect(path) + "; " + py(own), mode="bwrap", timeout=60)
        assert "refused" in ran.output and "own ok" in ran.output, ran.output
    finally:
        server.close()
        path.unlink(missing_ok=True)


@pytest.mark.bubblewrap
def test_a_socket_the_user_allows_by_path_is_reachable(tmp_path: Path, listener: tuple[Path, list[bytes]]) -> None:
    path, received = listener
    ws = make_workspace(None)
    try:
        ran = run(Job(ws, command=_connect(path), policy=SandboxPolicy(tier="bubblewrap", allow_sockets=[str(path)])))
        assert "connected" in ran.output, ran.output
    finally:
        remove_workspace(ws)


def test_control_without_keel_the_host_socket_is_reachable(user: str | None, ws: Path,
                                                           listener: tuple[Path, list[bytes]]) -> None:
    path, received = listener
    done = run_plain(user, ws, _connect(path))
    assert "connected" in done.stdout, done.stdout + done.stderr


# ---------------------------------------------------------------- memory and disk of the whole tree

# Four children, each well under the per-process limit, together over the tree's: each holds its
# memory for 3 s, so all four hold it at once unless the bound stops them; "ok=N" counts those that did.
CHILDREN = ("import os, time\nfor _ in range(4):\n    if os.fork() == 0:\n"
            "        b = b'x' * ({each} * 1024 * 1024); time.sleep(3); os._exit(0)\n"
            "ok = sum(os.waitstatus_to_exitcode(os.wait()[1]) == 0 for _ in range(4))\nprint(f'ok={{ok}}')")


@pytest.mark.parametrize("tier", [*TIERS, "off"])
def test_the_memory_of_a_command_tree_is_bounded(user: str | None, ws: Path, tier: str) -> None:
    ran = run_as(user, ws, py(CHILDREN.format(each=200)), mode=tier, timeout=60,
                 policy={"memory_bytes": 400 * MIB})
    # a cgroup's kernel kills children at the limit (the parent may go on); the watch stops the tree
    assert ran.stopped == "memory" and "ok=4" not in ran.output, (ran.output, ran.notes)
    assert ran.bounds == ("cgroup" if ROOT and user is None else "watch")
    assert any("used more memory than the limit" in note for note in ran.notes or [])


def test_control_without_keel_the_children_take_it_all(user: str | None, ws: Path) -> None:
    done = run_plain(user, ws, py(CHILDREN.format(each=200)))
    assert "ok=4" in done.stdout, done.stderr


# Four files, each under the per-file limit (RLIMIT_FSIZE), together over the tree's disk budget.
FILES = "for i in 1 2 3 4; do head -c {each}M /dev/zero > {where}/fill-$i.bin || exit 9; done; echo filled"


@pytest.mark.parametrize("tier", [*TIERS, "off"])
def test_the_disk_a_command_tree_fills_is_bounded(user: str | None, ws: Path, tier: str) -> None:
    ran = run_as(user, ws, FILES.format(each=150, where="."), mode=tier, timeout=120,
                 policy={"disk_bytes": 256 * MIB})
    assert "filled" not in ran.output, (ran.output, ran.notes)
    assert ran.stopped == "disk" or "No space left" in ran.output, (ran.output, ran.notes)
    assert sum(f.stat().st_size for f in ws.glob("fill-*.bin")) < 600 * MIB


@pytest.mark.bubblewrap
def test_bubblewraps_private_tmp_is_as_big_as_the_disk_budget(user: str | None, ws: Path) -> None:
    ran = run_as(user, ws, FILES.format(each=150, where="/tmp"), mode="bwrap", timeout=120,
                 policy={"disk_bytes": 256 * MIB})
    assert "filled" not in ran.output and "No space left" in ran.output, ran.output


def test_control_without_keel_the_files_are_all_written(user: str | None, ws: Path) -> None:
    done = run_plain(user, ws, FILES.format(each=150, where="."))
    assert "filled" in done.stdout, done.stderr


@pytest.mark.parametrize("tier", ["bubblewrap", "landlock", "auto", "off"])
def test_the_detail_line_says_how_memory_and_disk_are_bounded(user: str | None, tier: str) -> None:
    code = ("from keel.policy.sandbox import active_sandbox, detect_sandbox, SandboxPolicy\n"
            f"print(active_sandbox(SandboxPolicy(enabled=False)).detail if {tier!r} == 'off' else "
            f"detect_sandbox({tier!r}).detail)")
    from bwrap_runner import as_user

    done = subprocess.run([*as_user(user), sys.executable, "-c", code], capture_output=True, text=True,
                          env=user_env(user), timeout=60, cwd="/")
    if f"{tier} is not usable here" in done.stdout:
        pytest.skip(done.stdout)
    how = "a memory cgroup" if ROOT and user is None else "a watch of its summed memory"
    assert f"memory of the whole command tree bounded by {how}" in done.stdout, done.stdout + done.stderr
    assert "disk it fills bounded" in done.stdout


# ---------------------------------------------------------------- Landlock: a test server on 127.0.0.1


SERVER_TEST = ("import socket\ndef test_serves():\n    s = socket.socket()\n    s.bind(('127.0.0.1', 0))\n"
               "    s.listen(1)\n")


@pytest.mark.landlock
def test_a_test_server_on_loopback_fails_with_the_network_rule_named_and_how_to_allow_it(tmp_path: Path) -> None:
    from keel.tools.base import ToolContext
    from keel.tools.shell import RunShellArgs, run_shell

    class AllowAll:
        def authorize_shell(self, command: str) -> object:
            return type("Outcome", (), {"allowed": True, "message": "", "decision": "allow", "network": False})()

    (tmp_path / "test_server.py").write_text(SERVER_TEST)
    command = RunShellArgs(command=f"{sys.executable} -m pytest -q -p no:cacheprovider")
    result = run_shell(command, ToolContext(workspace=tmp_path, approval=AllowAll(),
                                            sandbox=SandboxPolicy(tier="landlock")))
    assert not result.ok and "PermissionError" in result.output
    assert "the network rule refused this" in result.output
    assert "[shell] network = true" in result.output
    allowed = run_shell(command, ToolContext(workspace=tmp_path, approval=AllowAll(),
                                             sandbox=SandboxPolicy(tier="landlock", network=True)))
    assert allowed.ok, allowed.output
    # the verification gate's feedback (and `keel checks --run`) says the same, not a bare PermissionError
    from keel.verify.plan import CheckSet, PlannedCheck
    from keel.verify.verifier import Verifier

    check = PlannedCheck(category="test", command=command.command, reason="tests/ holds tests")
    gate = Verifier(CheckSet(checks=(check,)), ToolContext(workspace=tmp_path, approval=AllowAll(),
                                                            sandbox=SandboxPolicy(tier="landlock")))
    (outcome,) = gate.run_plan()
    assert not outcome.passed and "the network rule refused this" in outcome.summary
