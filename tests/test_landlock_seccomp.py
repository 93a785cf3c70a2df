"""The seccomp filter the Landlock exec helper adds (keel.policy.seccomp): UDP, raw, netlink and
packet sockets fail unless the network is approved; TCP stays Landlock's, the workspace works.
For real: python children under the real helper, each denial with an approved-network control.
"""

from __future__ import annotations

import socket
from collections.abc import Iterator
from pathlib import Path

import pytest

from keel.policy import landlock, seccomp
from keel.policy.runner import Job, JobResult, run
from keel.policy.sandbox import SandboxPolicy

pytestmark = [pytest.mark.landlock,
              pytest.mark.skipif(not seccomp.supported(), reason="the seccomp filter exists for x86_64 only"),
              pytest.mark.skipif(landlock.abi_version() < 1, reason="the kernel lacks Landlock")]


def sandboxed(command: str, ws: Path, network: bool = False) -> JobResult:
    result = run(Job(ws, command=command, policy=SandboxPolicy(tier="landlock"), network=network,
                     env={"PATH": "/usr/bin:/bin", "HOME": str(ws)}, timeout_s=60))
    assert result.sandbox == "landlock"
    return result


@pytest.fixture
def udp_port() -> Iterator[tuple[socket.socket, int]]:
    server = socket.socket(socket.AF_INET, socket.SOCK_DGRAM)
    server.bind(("127.0.0.1", 0))
    server.settimeout(0.2)
    yield server, server.getsockname()[1]
    server.close()


PY = "python3 -c \"import socket; {code}; print('reached')\""
UDP_SEND = PY.format(code="socket.socket(socket.AF_INET, socket.SOCK_DGRAM).sendto(b'leak', ('127.0.0.1', {port}))")


def test_udp_sendto_fails_unless_the_network_is_approved(tmp_path: Path, udp_port: tuple[socket.socket, int]) -> None:
    server, port = udp_port
    blocked = sandboxed(UDP_SEND.format(port=port), tmp_path)
    assert blocked.exit_code != 0 and "reached" not in blocked.output and "PermissionError" in blocked.output
    with pytest.raises(TimeoutError):
        server.recvfrom(100)                   # nothing arrived
    allowed = sandboxed(UDP_SEND.format(port=port), tmp_path, network=True)
    assert "reached" in allowed.output, allowed.output
    assert server.recvfrom(100)[0] == b"leak"


@pytest.mark.parametrize("code", [
    "socket.socket(socket.AF_INET6, socket.SOCK_DGRAM)",
    "socket.socket(socket.AF_INET, socket.SOCK_DGRAM | socket.SOCK_NONBLOCK | socket.SOCK_CLOEXEC)",
    "socket.socket(socket.AF_NETLINK, socket.SOCK_RAW, 0)",
    "socket.socket(socket.AF_INET, socket.SOCK_RAW, socket.IPPROTO_ICMP)",
    "socket.socket(socket.AF_PACKET, socket.SOCK_DGRAM)",
])
def test_other_sockets_are_refused(code: str, tmp_path: Path) -> None:
    result = sandboxed(PY.format(code=code), tmp_path)
    assert "reached" not in result.output and "PermissionError" in result.output, result.output


@pytest.mark.skipif(landlock.abi_version() < 4, reason="TCP rules need Landlock ABI >= 4")
def test_tcp_to_localhost_still_fails_and_unix_sockets_and_the_workspace_work(tmp_path: Path) -> None:
    listener = socket.socket()
    listener.bind(("127.0.0.1", 0))
    listener.listen(1)
    try:
        port = listener.getsockname()[1]
        tcp = sandboxed(PY.format(code=f"socket.create_connection(('127.0.0.1', {port}), timeout=3)"), tmp_path)
        assert "reached" not in tcp.output and "PermissionError" in tcp.output
    finally:
        listener.close()
    work = sandboxed("echo x > inside.txt && python3 -c \"import socket; a, b = socket.socketpair(); "
                     "a.send(b'ok'); print(b.recv(2).decode())\"", tmp_path)
    assert work.exit_code == 0 and "ok" in work.output, work.output
    assert (tmp_path / "inside.txt").read_text() == "x\n"


def test_the_filter_program_is_well_formed() -> None:
    for allow_tcp in (True, False):
        prog = seccomp.program(allow_tcp)
        assert all(0 <= jt < len(prog) and 0 <= jf < len(prog) for _, jt, jf, _ in prog)
        assert prog[-1][3] & 0xFFFF == 1 and prog[-2][3] == 0x7FFF0000      # EPERM, allow
