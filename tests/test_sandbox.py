"""The OS sandbox, exercised with real bubblewrap and real processes.

Each protection is shown to hold, and where the test could pass for the wrong reason a
control run (protection off) shows the same command does reach the thing otherwise.
"""

from __future__ import annotations

import os
import shutil
import socket
import subprocess
import tempfile
import uuid
from collections.abc import Iterator
from pathlib import Path

import psutil
import pytest

from keel.policy.hide import find_secret_files
from keel.policy.runner import Job, JobResult
from keel.policy.runner import run as run_job
from keel.policy.sandbox import (
    SandboxPolicy,
    build_sandboxed,
    command_environment,
    detect_sandbox,
    scrub_env,
)


@pytest.fixture
def ws(tmp_path: Path) -> Path:
    workspace = tmp_path / "ws"
    workspace.mkdir()
    return workspace


@pytest.fixture
def home() -> Iterator[Path]:
    # Outside /tmp on purpose: the sandbox replaces /tmp wholesale, which would hide a HOME
    # there for the wrong reason.
    path = Path(tempfile.mkdtemp(prefix="keel-home-", dir="/var/tmp"))
    yield path
    shutil.rmtree(path, ignore_errors=True)


def base_env(home: Path | None = None, **extra: str) -> dict[str, str]:
    env = {k: v for k, v in os.environ.items() if not k.startswith(("KEEL_", "XDG_CONFIG_HOME"))}
    if home is not None:
        env["HOME"] = str(home)
    env.update(extra)
    return env


def sandboxed(command: str, ws: Path, *, policy: SandboxPolicy | None = None, network: bool = False,
              env: dict[str, str] | None = None, timeout: float = 20) -> JobResult:
    return run_job(Job(ws, command=command, policy=policy or SandboxPolicy(), network=network, env=env or base_env(),
                   timeout_s=timeout))


@pytest.mark.bubblewrap
def test_bubblewrap_is_detected_and_described() -> None:
    info = detect_sandbox()
    assert info.kind == "bubblewrap", info.detail
    assert "read-only" in info.detail and "network" in info.detail


@pytest.mark.bubblewrap
def test_writes_outside_the_workspace_fail_and_inside_succeed(ws: Path) -> None:
    name = f"keel_test_{uuid.uuid4().hex}"
    result = sandboxed(f"touch /usr/{name}; echo usr=$?; echo x > /etc/{name}; echo etc=$?; "
                       f"touch inside.txt && echo inside=ok", ws)
    assert "usr=1" in result.output and "etc=1" in result.output
    assert "inside=ok" in result.output
    assert not Path(f"/usr/{name}").exists() and not Path(f"/etc/{name}").exists()
    assert (ws / "inside.txt").exists()


@pytest.mark.bubblewrap
def test_root_without_capabilities_cannot_remount_or_mount(ws: Path) -> None:
    name = f"keel_test_{uuid.uuid4().hex}"
    result = sandboxed(f"mount -o remount,rw /; echo remount=$?; mount -t tmpfs none /mnt; echo mount=$?; "
                       f"touch /usr/{name}; echo touch=$?", ws)
    assert "remount=0" not in result.output and "remount=" in result.output
    assert "mount=0" not in result.output
    assert "touch=1" in result.output
    assert not Path(f"/usr/{name}").exists()


@pytest.fixture
def loopback_server() -> Iterator[int]:
    server = socket.socket()
    server.bind(("127.0.0.1", 0))
    server.listen(8)
    yield server.getsockname()[1]
    server.close()


CONNECT = ("python3 -c \"import socket; socket.create_connection(('127.0.0.1', {port}), timeout=3); "
           "print('connected')\"")


@pytest.mark.bubblewrap
def test_network_is_off_unless_allowed(ws: Path, loopback_server: int) -> None:
    blocked = sandboxed(CONNECT.format(port=loopback_server), ws)
    assert blocked.exit_code != 0 and "connected" not in blocked.output
    assert "Connection refused" in blocked.output  # a fresh namespace: nothing listens on its loopback

    allowed = sandboxed(CONNECT.format(port=loopback_server), ws, network=True)
    assert allowed.exit_code == 0 and "connected" in allowed.output

    by_policy = sandboxed(CONNECT.format(port=loopback_server), ws, policy=SandboxPolicy(network=True))
    assert by_policy.exit_code == 0


def make_secrets(home: Path) -> None:
    (home / ".ssh").mkdir()
    (home / ".ssh" / "id_test").write_text("PRIVATE-KEY-MATERIAL\n")
    (home / ".netrc").write_text("machine x login me password NETRC-PASSWORD\n")
    (home / ".config" / "keel").mkdir(parents=True)
    (home / ".config" / "keel" / "keys.toml").write_text("api_key = 'KEEL-KEY'\n")


@pytest.mark.bubblewrap
def test_secrets_under_home_are_hidden(ws: Path, home: Path) -> None:
    make_secrets(home)
    command = "cat ~/.ssh/id_test; echo ssh_entries=$(ls -A ~/.ssh | wc -l); cat ~/.netrc; cat ~/.config/keel/keys.toml"
    control = sandboxed(command, ws, env=base_env(home), policy=SandboxPolicy(hide_paths=[]))
    assert "PRIVATE-KEY-MATERIAL" in control.output and "NETRC-PASSWORD" in control.output

    hidden = sandboxed(command + "; echo y >> ~/.netrc; echo append=$?", ws, env=base_env(home))
    for secret in ("PRIVATE-KEY-MATERIAL", "NETRC-PASSWORD", "KEEL-KEY"):
        assert secret not in hidden.output
    assert "ssh_entries=0" in hidden.output and "append=1" in hidden.output
    assert "NETRC-PASSWORD" in (home / ".netrc").read_text()  # the real file is untouched


@pytest.mark.bubblewrap
def test_keel_home_from_the_environment_is_hidden(ws: Path, home: Path) -> None:
    keel_home = home / "elsewhere"
    keel_home.mkdir()
    (keel_home / "config.toml").write_text("api_key = 'KEEL-HOME-KEY'\n")
    result = sandboxed(f"cat {keel_home}/config.toml; echo end", ws, env=base_env(home, KEEL_HOME=str(keel_home)))
    assert "KEEL-HOME-KEY" not in result.output and "end" in result.output


@pytest.mark.bubblewrap
def test_daemon_socket_is_hidden(ws: Path, home: Path) -> None:
    path = home / "daemon.sock"
    server = socket.socket(socket.AF_UNIX)
    server.bind(str(path))
    server.listen(4)
    try:
        command = (f"python3 -c \"import socket; s = socket.socket(socket.AF_UNIX); s.connect('{path}'); "
                   f"print('connected')\"")
        # Read-only mounts do not stop connect(): this is why sockets must be hidden.
        assert "connected" in sandboxed(command, ws, policy=SandboxPolicy(hide_paths=[])).output
        hidden = sandboxed(command, ws, policy=SandboxPolicy(hide_paths=[str(path)]))
        assert hidden.exit_code != 0 and "connected" not in hidden.output
    finally:
        server.close()


@pytest.mark.bubblewrap
def test_env_files_in_the_workspace_are_hidden(ws: Path) -> None:
    (ws / ".env").write_text("DB_PASSWORD=ROOT-ENV\n")
    (ws / "svc" / "deep").mkdir(parents=True)
    (ws / "svc" / "deep" / ".env.local").write_text("SECRET=DEEP-ENV\n")
    (ws / ".env.example").write_text("DB_PASSWORD=changeme\n")
    (ws / ".envrc").write_text("export API_TOKEN=DIRENV-TOKEN\n")
    (ws / ".env.d").mkdir()  # a directory (e.g. a virtualenv named .env*) is not a secret file
    (ws / "node_modules" / "pkg").mkdir(parents=True)
    (ws / "node_modules" / "pkg" / ".env").write_text("x=1\n")
    found = find_secret_files(os.path.realpath(ws))
    assert sorted(os.path.relpath(p, os.path.realpath(ws)) for p in found.files) == [".env", ".envrc", "svc/deep/.env.local"]

    result = sandboxed("cat .env .envrc svc/deep/.env.local; echo read=$?; cat .env.example; "
                       "echo HACKED > .env; echo write=$?", ws)
    for secret in ("ROOT-ENV", "DEEP-ENV", "DIRENV-TOKEN"):
        assert secret not in result.output
    assert "read=0" in result.output  # empty, not an error that breaks dotenv loaders
    assert "changeme" in result.output
    assert "write=1" in result.output
    assert (ws / ".env").read_text() == "DB_PASSWORD=ROOT-ENV\n"


@pytest.mark.bubblewrap
def test_tmp_is_private(ws: Path) -> None:
    host_file = Path(f"/tmp/keel-host-{uuid.uuid4().hex}")
    host_file.write_text("host\n")
    inner_name = f"keel-inner-{uuid.uuid4().hex}"
    try:
        result = sandboxed(f"ls /tmp; test -e {host_file}; echo seen=$?; touch /tmp/{inner_name}; echo w=$?", ws)
        assert host_file.name not in result.output and "seen=1" in result.output
        assert "w=0" in result.output
        assert not Path(f"/tmp/{inner_name}").exists()
    finally:
        host_file.unlink()


@pytest.mark.bubblewrap
def test_a_toolchain_on_path_under_tmp_stays_visible_and_read_only(ws: Path) -> None:
    """A venv made with mktemp lives in /tmp, which the sandbox replaces: the tools on PATH there are
    bound back read-only (a check that found pytest in it ran another python3 without it), while the
    rest of the host's /tmp stays out of sight."""
    venv = Path(tempfile.mkdtemp(prefix="keel-venv-", dir="/tmp"))
    (venv / "bin").mkdir()
    tool = venv / "bin" / "keel-probe-tool"
    tool.write_text("#!/bin/sh\necho probe-ran\n")
    tool.chmod(0o755)
    neighbour = Path(tempfile.mkdtemp(prefix="keel-neighbour-", dir="/tmp"))
    try:
        env = base_env(PATH=f"{venv / 'bin'}:{os.environ['PATH']}")
        result = sandboxed(f"keel-probe-tool; touch {venv}/x; echo w=$?; test -e {neighbour}; echo seen=$?", ws, env=env)
        assert "probe-ran" in result.output and "w=1" in result.output and "seen=1" in result.output
        assert not (venv / "x").exists()
    finally:
        shutil.rmtree(venv)
        shutil.rmtree(neighbour)


@pytest.mark.bubblewrap
def test_own_pid_namespace(ws: Path) -> None:
    result = sandboxed("ls /proc | grep -c '^[0-9]'; cat /proc/1/comm", ws)
    count, init = result.output.split()
    assert int(count) < 10 and init == "bwrap"
    assert len(psutil.pids()) > int(count)


def test_environment_is_scrubbed(ws: Path) -> None:
    env = base_env(FOO_TOKEN="t1", MY_API_KEY="k1", AWS_REGION="r1", GITHUB_USER="g1",
                   DATABASE_URL="postgres://app:hunter2@db/app", KEEL_KEEP_ME="kept", VIRTUAL_ENV="/venv")
    for run in (sandboxed, lambda c, w, **kw: sandboxed(c, w, policy=SandboxPolicy(enabled=False), **kw)):
        output = run("env", ws, env=env).output
        assert "VIRTUAL_ENV=/venv" in output       # a toolchain variable: on the allow-list
        for gone in ("FOO_TOKEN", "MY_API_KEY", "AWS_REGION", "GITHUB_USER", "hunter2", "KEEL_KEEP_ME"):
            assert gone not in output


def test_scrub_env_patterns() -> None:
    kept = scrub_env({"PATH": "/bin", "HOME": "/h", "LANG": "C", "PYTHONPATH": "src", "SSL_CERT_FILE": "/c",
                      "SSH_AUTH_SOCK": "/s", "OPENAI_BASE_URL": "u", "KEEL_API_BASE": "u",
                      "GOOGLE_APPLICATION_CREDENTIALS": "/g", "NPM_AUTH": "x", "PGPASSWORD": "p",
                      "anthropic_api_key": "k", "AZURE_CLIENT_ID": "a", "GH_HOST": "h", "MY_SECRET_X": "s"})
    assert kept == {"PATH": "/bin", "HOME": "/h", "LANG": "C", "PYTHONPATH": "src", "SSL_CERT_FILE": "/c"}


def git(cwd: Path, *args: str, env: dict[str, str] | None = None) -> None:
    subprocess.run(["git", *args], cwd=cwd, check=True, capture_output=True, env=env)


def test_git_pager_and_fsmonitor_cannot_run(ws: Path) -> None:
    git(ws, "init", "-q")
    hook = ws / "hook.sh"
    hook.write_text("#!/bin/sh\ntouch \"$(dirname \"$0\")/fsmonitor_ran\"\nexit 1\n")
    hook.chmod(0o755)
    git(ws, "config", "core.fsmonitor", str(hook))
    git(ws, "config", "core.pager", "touch pager_ran; cat")
    (ws / "a.txt").write_text("a\n")
    # Control: plain git in this repo runs the fsmonitor hook.
    git(ws, "status")
    assert (ws / "fsmonitor_ran").exists()
    (ws / "fsmonitor_ran").unlink()

    result = sandboxed("git status --short; git -p log --oneline -1; echo GIT_PAGER=$GIT_PAGER", ws)
    assert "a.txt" in result.output and "GIT_PAGER=cat" in result.output
    assert not (ws / "fsmonitor_ran").exists() and not (ws / "pager_ran").exists()


def test_git_config_entries_from_the_caller_are_kept() -> None:
    env = command_environment({"GIT_CONFIG_COUNT": "2", "GIT_CONFIG_KEY_0": "user.name",
                               "GIT_CONFIG_VALUE_0": "Tester", "GIT_CONFIG_KEY_1": "http.extraHeader",
                               "GIT_CONFIG_VALUE_1": "Authorization: Bearer GIT-TOKEN"})
    assert env["GIT_CONFIG_COUNT"] == "4"
    assert (env["GIT_CONFIG_KEY_0"], env["GIT_CONFIG_VALUE_0"]) == ("user.name", "Tester")
    assert (env["GIT_CONFIG_KEY_1"], env["GIT_CONFIG_VALUE_1"]) == ("http.extraHeader", "")
    assert {env["GIT_CONFIG_KEY_2"], env["GIT_CONFIG_KEY_3"]} == {"core.fsmonitor", "core.pager"}
    out = subprocess.run(["git", "config", "user.name"], env=env, capture_output=True, text=True, check=True)
    assert out.stdout.strip() == "Tester"
    # A malformed count would make every git command fail; keel starts a valid list instead.
    fixed = command_environment({"GIT_CONFIG_COUNT": "x", "GIT_CONFIG_KEY_0": "user.name"})
    assert fixed["GIT_CONFIG_COUNT"] == "2" and fixed["GIT_CONFIG_KEY_0"] == "core.fsmonitor"


@pytest.mark.parametrize("enabled", [True, False])
def test_rlimits_stop_huge_files_and_allocations(ws: Path, enabled: bool) -> None:
    policy = SandboxPolicy(enabled=enabled, file_size_bytes=1_000_000, memory_bytes=300 * 1024**2)
    big = sandboxed("head -c 3000000 /dev/zero > big.bin; echo rc=$?", ws, policy=policy)
    assert "rc=0" not in big.output
    assert (ws / "big.bin").stat().st_size <= 1_000_000
    alloc = sandboxed("python3 -c 'b = bytearray(1024**3)'", ws, policy=policy)
    assert alloc.exit_code != 0 and "MemoryError" in alloc.output


def test_disabled_sandbox_runs_without_bubblewrap(ws: Path) -> None:
    launch = build_sandboxed(base_env(), ws, SandboxPolicy(enabled=False), False)
    assert launch.argv_prefix == [] and launch.kind == "rlimits"


@pytest.mark.bubblewrap
def test_workspace_inside_a_hidden_directory_stays_usable(tmp_path: Path) -> None:
    parent = tmp_path / "secret-parent"
    workspace = parent / "ws"
    workspace.mkdir(parents=True)
    (parent / "sibling.key").write_text("SIBLING-SECRET\n")
    result = sandboxed(f"cat {parent}/sibling.key; touch made && echo made", workspace,
                       policy=SandboxPolicy(hide_paths=[str(parent)]))
    assert "SIBLING-SECRET" not in result.output and "made" in result.output
    assert (workspace / "made").exists()


def marked_processes(marker: str) -> list[psutil.Process]:
    found = []
    for proc in psutil.process_iter(["cmdline", "status"]):
        if marker in " ".join(proc.info["cmdline"] or []) and proc.info["status"] != psutil.STATUS_ZOMBIE:
            found.append(proc)
    return found


def test_timeout_kills_everything_inside_the_sandbox(ws: Path) -> None:
    marker = "314.15926"
    result = sandboxed(f"sleep {marker} & (sleep {marker} &) ; setsid sleep {marker} & sleep {marker}", ws,
                       timeout=1)
    assert result.timed_out and result.elapsed_s < 5
    assert marked_processes(marker) == []


def test_background_jobs_end_with_the_command_inside_the_sandbox(ws: Path) -> None:
    marker = "271.8281"
    result = sandboxed(f"sleep {marker} & echo started", ws, timeout=20)
    assert result.exit_code == 0 and "started" in result.output and result.elapsed_s < 5
    assert marked_processes(marker) == []


@pytest.mark.bubblewrap
@pytest.mark.skipif(os.geteuid() != 0, reason="only root can hand the workspace to another user")
def test_root_can_work_in_a_workspace_owned_by_another_user(ws: Path) -> None:
    (ws / "file.txt").write_text("a\n")
    (ws / "sub").mkdir()
    for path in (ws, ws / "file.txt", ws / "sub"):
        os.chown(path, 1000, 1000)
    result = sandboxed("echo b >> file.txt; touch sub/new; chmod 600 file.txt; echo rc=$?; "
                       "mount -o remount,rw /; echo m=$?; touch /usr/keel-x; echo u=$?", ws)
    assert "rc=0" in result.output and (ws / "file.txt").read_text() == "a\nb\n"
    assert (ws / "sub" / "new").exists()
    assert "m=0" not in result.output and "u=1" in result.output
