"""Running keel for real as root or as the unprivileged user (``kuser``), on a chosen OS tier: the
harness of the issue-35 tests (secrets kept from the model, nothing lost).

- ``Person``: who runs keel, with a workspace, KEEL_HOME and config dir under /var/tmp that they own
  (the sandbox replaces /tmp, and pytest's tmp_path is root's alone);
- ``Person.keel(...)``: the real CLI (``python -m keel.cli.main``) as that user;
- ``Person.run(...)``: an unattended ``keel run`` against the scripted engine on 127.0.0.1 (real
  HTTP), returning the result, the requests the engine received and the event log's text;
- ``Person.sandboxed(...)``: one command through keel's launch path (build_sandboxed + the process
  runner) as that user, with the SandboxPolicy fields given.
"""

from __future__ import annotations

import json
import os
import shutil
import subprocess
import sys
import tempfile
from collections.abc import Iterator
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import pytest
from bwrap_runner import as_user, ensure_unprivileged_user

from keel.testing.server import ScriptedEngineServer

TIERS = [pytest.param("bubblewrap", marks=pytest.mark.bubblewrap), pytest.param("landlock", marks=pytest.mark.landlock)]


def _kuser() -> str | None:
    return ensure_unprivileged_user()


USERS = ["root", pytest.param("kuser", marks=pytest.mark.skipif(_kuser() is None,
                                                                 reason="needs root and a user kuser that can run keel"))]
DRIVER = """
import json, os, sys
from pathlib import Path
from keel.policy.runner import Job, run
from keel.policy.sandbox import SandboxPolicy
ws, command, fields, env = Path(sys.argv[1]), sys.argv[2], json.loads(sys.argv[3]), json.loads(sys.argv[4])
for key in ("env_pass", "env_block", "exposed"):
    if key in fields:
        fields[key] = tuple(fields[key])
policy = SandboxPolicy(**fields)      # kept alive: the Landlock tier's temp dir goes with it
r = run(Job(ws, command=command, policy=policy, env=env, timeout_s=60, aftercare=False))
print(json.dumps({"kind": r.sandbox, "exit": r.exit_code, "output": r.output}))
"""


@dataclass
class Ran:
    code: int
    result: dict[str, Any]
    requests: list[dict[str, Any]]
    log: str
    stdout: str
    stderr: str

    def tool_texts(self) -> list[str]:
        """What the model was shown of each tool call (in the last request)."""
        last = self.requests[-1]["messages"] if self.requests else []
        return [m["content"] for m in last if m["role"] == "tool"]

    def sent(self) -> str:
        """Everything sent to the engine, every request."""
        return json.dumps(self.requests)


@dataclass
class Person:
    name: str                       # "root" or "kuser"
    base: Path = field(default_factory=lambda: Path(tempfile.mkdtemp(prefix="keel-i35-", dir="/var/tmp")))

    def __post_init__(self) -> None:
        os.chmod(self.base, 0o755)
        self.home = self.base / "home"
        self.work = self.base / "work"
        for d in (self.home, self.work, self.base / "keel-home", self.base / "xdg"):
            d.mkdir(parents=True, exist_ok=True)
        self.own(self.base)

    @property
    def user(self) -> str | None:
        return None if self.name == "root" else self.name

    def own(self, path: Path) -> None:
        """Hand ``path`` (and everything below) to this person."""
        if self.user is None:
            return
        subprocess.run(["chown", "-R", "-h", f"{self.user}:{self.user}", str(path)], check=True)

    def env(self, **extra: str) -> dict[str, str]:
        env = {k: v for k, v in os.environ.items() if not k.startswith(("KEEL_", "OPENAI_", "XDG_"))}
        env.update(HOME=str(self.home), KEEL_HOME=str(self.base / "keel-home"), XDG_CONFIG_HOME=str(self.base / "xdg"))
        if self.user is not None:
            env.update(USER=self.user, LOGNAME=self.user)
        env.update(extra)
        return env

    def config(self, text: str) -> None:
        path = self.base / "xdg" / "keel" / "config.toml"
        path.parent.mkdir(parents=True, exist_ok=True)
        path.write_text(text)
        self.own(path.parent)

    def keel(self, *args: str, env: dict[str, str] | None = None, timeout: float = 120) -> subprocess.CompletedProcess[str]:
        self.own(self.base)
        return subprocess.run([*as_user(self.user), sys.executable, "-m", "keel.cli.main", *args], cwd="/",
                              env=env or self.env(), capture_output=True, text=True, timeout=timeout,
                              stdin=subprocess.DEVNULL)

    def run(self, script: list[dict[str, Any]], *, tier: str = "auto", args: tuple[str, ...] = (),
            env: dict[str, str] | None = None, api_key: str | None = None, task: str = "tidy up") -> Ran:
        """An unattended `keel run` against the scripted engine (one more list_dir turn at the end, so the
        last result is sent to the engine too)."""
        self.config(f'[shell]\nsandbox = "{tier}"\n' + getattr(self, "extra_config", ""))
        turns = [*script, {"tool_calls": [{"name": "list_dir", "arguments": {"path": "."}}]}]
        with ScriptedEngineServer(turns, api_key=api_key) as server:
            proc = self.keel("run", task, "--cwd", str(self.work), "--base-url", server.base_url, "--model", "scripted",
                             "--approval", "unattended", "--verify", "off", "--max-steps", str(len(turns)),
                             "--output-format", "json", *args, env=env)
            requests = list(server.requests)
        result = json.loads(proc.stdout.strip().splitlines()[-1]) if proc.stdout.strip() else {}
        log = Path(result["log"]).read_text() if result.get("log") else ""
        return Ran(proc.returncode, result, requests, log, proc.stdout, proc.stderr)

    def sandboxed(self, command: str, *, env: dict[str, str] | None = None, **fields: Any) -> dict[str, Any]:
        """One command through build_sandboxed + run_command as this person, in the workspace."""
        self.own(self.base)
        argv = [*as_user(self.user), sys.executable, "-c", DRIVER, str(self.work), command, json.dumps(fields),
                json.dumps(env or self.env())]
        proc = subprocess.run(argv, capture_output=True, text=True, env=self.env(), timeout=120, cwd="/")
        assert proc.returncode == 0, proc.stderr[-3000:]
        return dict(json.loads(proc.stdout.strip().splitlines()[-1]))

    def remove(self) -> None:
        shutil.rmtree(self.base, ignore_errors=True)


def people(name: str) -> Iterator[Person]:
    """For a fixture parametrized over USERS: the person, removed afterwards."""
    who = Person(name)
    yield who
    who.remove()
