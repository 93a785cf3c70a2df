"""What every agent's eval job shares: the job's spec, the run it leaves, and running it as a process.

Used by keel.eval.execute (keel itself) and keel.eval.peer (mini-swe-agent), so neither imports the other.
"""

from __future__ import annotations

import json
import os
import signal
import subprocess
import time
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from keel.eval.cases import kill_group

KEEL = "keel"
HARNESS_GRACE_S = 60.0  # past --timeout, keel's own wall-clock limit should already have stopped it
TERM_GRACE_S = 15.0  # after SIGTERM, before SIGKILL


@dataclass(frozen=True)
class JobSpec:
    case_id: str
    case_dir: str
    repeat: int = 1
    agent: str = KEEL
    engine: str = "live"  # "live" (base_url + model), "scripted" (the case's script.jsonl), "local" (model: a GGUF)
    base_url: str | None = None
    model: str | None = None
    api_key_env: str | None = None
    max_steps: int = 50
    timeout_s: float = 900.0
    temperature: float = 0.0
    keep_workspace: bool = False
    assists: str = ""     # `keel run --assists SPEC` for this arm ("": as configured; keel.eval.arms)
    # The case folder packed as tar.gz, for workers that cannot see case_dir (a Ray cluster).
    case_archive: bytes | None = field(default=None, repr=False)

    @property
    def key(self) -> str:
        return result_key(self.case_id, self.agent, self.repeat)

    def settings(self) -> dict[str, Any]:
        """What must match for results in one output folder to be comparable."""
        return {"agent": self.agent, "engine": self.engine, "model": self.model if self.engine != "scripted" else "scripted",
                "base_url": self.base_url if self.engine == "live" else None,
                "max_steps": self.max_steps, "timeout_s": self.timeout_s, "temperature": self.temperature,
                **({"assists": self.assists} if self.assists else {})}


def result_key(case_id: str, agent: str, repeat: int) -> str:
    return f"{case_id}__{agent}__r{repeat}"


@dataclass
class AgentRun:
    """What any agent's run leaves for grading and metrics."""

    status: str | None            # complete | incomplete | error (None: no result at all)
    stop_reason: str | None
    result: dict[str, Any] | None  # keel's result object, or the peer's equivalent
    events: list[dict[str, Any]]
    log_text: str = ""
    error: str | None = None
    exit_code: int | None = None


def keel_pythonpath() -> str:
    """This keel first on the path, so the subprocess runs the same code from any workspace."""
    import keel

    source = str(Path(keel.__file__).resolve().parent.parent)
    rest = os.environ.get("PYTHONPATH")
    return source + (os.pathsep + rest if rest else "")


def run_process(cmd: list[str], cwd: Path, env: dict[str, str], timeout_s: float,
                stdin: str | None = None) -> tuple[int | None, str, str, bool]:
    """(exit code, stdout, stderr, timed out); the whole process group dies on a timeout."""
    proc = subprocess.Popen(cmd, cwd=cwd, env=env, stdin=subprocess.PIPE if stdin is not None else subprocess.DEVNULL,
                            stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True, start_new_session=True)
    deadline = time.monotonic() + timeout_s
    try:
        while True:
            # Short slices: a signal may be delivered to another thread of this process (a scripted
            # server's), and only a main thread that wakes up now and then runs its handler.
            try:
                out, err = proc.communicate(stdin, timeout=max(0.01, min(1.0, deadline - time.monotonic())))
                return proc.returncode, out, err, False
            except subprocess.TimeoutExpired:
                stdin = None  # already sent
                if time.monotonic() >= deadline:
                    raise
    except subprocess.TimeoutExpired:
        # SIGTERM first: keel stops like on Ctrl-C and still prints its result and writes `stop`.
        kill_group(proc, signal.SIGTERM)
        try:
            out, err = proc.communicate(timeout=TERM_GRACE_S)
        except subprocess.TimeoutExpired:
            kill_group(proc)
            out, err = proc.communicate()
        return None, out, err, True
    except BaseException:
        # Ctrl-C reaches the eval, not the agent (its own session): it must not outlive the eval.
        kill_group(proc)
        raise


def last_json_object(text: str) -> dict[str, Any] | None:
    for line in reversed(text.strip().splitlines()):
        line = line.strip()
        if line.startswith("{"):
            try:
                value = json.loads(line)
            except json.JSONDecodeError:
                continue
            if isinstance(value, dict):
                return value
    return None
