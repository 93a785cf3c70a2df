"""What every agent's eval job shares: the job's spec, the run it leaves, and running it as a process.

Used by keel.eval.execute (keel itself) and keel.eval.peer (mini-swe-agent), so neither imports the other.
"""

from __future__ import annotations

import json
import os
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from keel.policy.runner import Job, run

KEEL = "keel"
HARNESS_GRACE_S = 60.0  # past --timeout, keel's own wall-clock limit should already have stopped it
TERM_GRACE_S = 15.0  # after SIGTERM, before SIGKILL
_OUTPUT_CAP = 256 * 2**20   # an agent's stdout and stderr are read whole (the result is the last line)


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
    """(exit code, stdout, stderr, timed out) of an agent (keel itself, or a peer) through keel's
    runner, as it is: its own environment, no sandbox or limits of a command. At the timeout the
    whole tree gets SIGTERM first (keel stops as on Ctrl-C and still prints its result), SIGKILL
    ``TERM_GRACE_S`` later; Ctrl-C reaches the eval, and the agent goes with it."""
    ran = run(Job(cwd, argv=cmd, sandbox=False, limits=False, scrub=False, env=env, timeout_s=timeout_s,
                  stdin=stdin.encode() if stdin else None, stderr_apart=True, output_cap=_OUTPUT_CAP,
                  aftercare=False, kill_grace_s=TERM_GRACE_S))
    return (None if ran.timed_out else ran.exit_code), ran.output, ran.stderr or "", ran.timed_out


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
