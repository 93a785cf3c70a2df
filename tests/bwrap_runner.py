"""Run one command the way keel's shell tool does (keel.policy.runner, the one door), as the
user running the tests or as an unprivileged user, in a separate process whose pid stands for
keel's own. Shared by the bubblewrap escape tests."""

from __future__ import annotations

import functools
import json
import os
import pwd
import shlex
import shutil
import subprocess
import sys
import tempfile
from dataclasses import dataclass
from pathlib import Path

UNPRIVILEGED = "kuser"

# argv: workspace, command, mode ("bwrap" | "landlock" | "off"), network ("1" | "0"), timeout seconds,
# SandboxPolicy fields as JSON
DRIVER = """
import json, os, sys
from pathlib import Path
from keel.policy.sandbox import SandboxPolicy
from keel.policy.runner import Job, run
ws, command, mode, network, timeout = Path(sys.argv[1]), sys.argv[2], sys.argv[3], sys.argv[4] == "1", float(sys.argv[5])
fields = json.loads(sys.argv[6])
policy = (SandboxPolicy(tier="bubblewrap", **fields) if mode == "bwrap" else SandboxPolicy(tier="landlock", **fields)
          if mode == "landlock" else SandboxPolicy(enabled=False, **fields))
r = run(Job(ws, command=command, policy=policy, network=network, timeout_s=timeout))
print(json.dumps({"kind": r.sandbox, "exit": r.exit_code, "output": r.output, "timed_out": r.timed_out,
                  "keel_pid": os.getpid(), "notes": r.notes(), "stopped": r.stopped, "bounds": r.bounds}))
"""


@dataclass
class Ran:
    kind: str
    exit: int | None
    output: str
    timed_out: bool
    keel_pid: int
    notes: list[str] | None = None      # what keel said after the command (put back, stripped, stopped)
    stopped: str | None = None
    bounds: str = ""                    # how the tree's memory was bounded ("cgroup" or "watch")


def ensure_unprivileged_user() -> str | None:
    """The unprivileged user's name, made if missing; None unless root and unless that user can run
    this Python with keel (a pyenv under /root is closed to others: .ci/run opens the path)."""
    if os.geteuid() != 0:
        return None
    try:
        pwd.getpwnam(UNPRIVILEGED)
    except KeyError:
        subprocess.run(["useradd", "--create-home", UNPRIVILEGED], check=True, capture_output=True)
    return UNPRIVILEGED if _can_run_keel(UNPRIVILEGED) else None


@functools.cache
def _can_run_keel(user: str) -> bool:
    # Both ways the tests switch user: setpriv kept a root-only path (a mktemp venv, mode 0700) reachable
    # where `su` was refused, so a probe by setpriv alone let the su-based tests run and fail.
    command = f"{shlex.quote(sys.executable)} -c 'import keel'"
    probes = ([*as_user(user), sys.executable, "-c", "import keel"], ["su", user, "-s", "/bin/sh", "-c", command])
    return all(subprocess.run(argv, env=user_env(user), cwd="/", capture_output=True, timeout=60,
                              check=False).returncode == 0 for argv in probes)


def as_user(user: str | None) -> list[str]:
    """An argv prefix that runs a program as ``user`` (None: as the test runner)."""
    if user is None:
        return []
    return ["setpriv", f"--reuid={user}", f"--regid={user}", "--init-groups"]


def user_env(user: str | None) -> dict[str, str]:
    env = {k: v for k, v in os.environ.items() if not k.startswith("KEEL_")}
    if user is not None:
        entry = pwd.getpwnam(user)
        env.update(HOME=entry.pw_dir, USER=user, LOGNAME=user)
    return env


def make_workspace(user: str | None) -> Path:
    """A workspace outside /tmp (which the sandbox replaces) that ``user`` owns."""
    path = Path(tempfile.mkdtemp(prefix="keel-esc-", dir="/var/tmp"))
    if user is not None:
        entry = pwd.getpwnam(user)
        os.chown(path, entry.pw_uid, entry.pw_gid)
    return path


def remove_workspace(path: Path) -> None:
    shutil.rmtree(path, ignore_errors=True)


def run_as(user: str | None, ws: Path, command: str, *, mode: str = "bwrap", network: bool = False,
           timeout: float = 20, policy: dict[str, object] | None = None) -> Ran:
    argv = [*as_user(user), sys.executable, "-c", DRIVER, str(ws), command, mode, "1" if network else "0",
            str(timeout), json.dumps(policy or {})]
    proc = subprocess.run(argv, capture_output=True, text=True, env=user_env(user), timeout=timeout + 30)
    assert proc.returncode == 0, proc.stderr[-2000:]
    data = json.loads(proc.stdout.strip().splitlines()[-1])
    if mode in ("bwrap", "landlock"):
        assert data["kind"] == {"bwrap": "bubblewrap"}.get(mode, mode), data
    return Ran(data["kind"], data["exit"], data["output"], data["timed_out"], data["keel_pid"], data["notes"],
               data["stopped"], data["bounds"])


def run_plain(user: str | None, ws: Path, command: str, timeout: float = 60) -> subprocess.CompletedProcess[str]:
    """The control: ``command`` as ``user`` with no keel at all (bash in the workspace)."""
    return subprocess.run([*as_user(user), "bash", "-c", command], cwd=ws, env=user_env(user), capture_output=True,
                          text=True, timeout=timeout)
