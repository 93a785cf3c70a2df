"""A crashed session whose pid now belongs to another process (a restarted container hands out the
same small pids) can still be continued; a session whose process really runs cannot."""

from __future__ import annotations

import json
import subprocess
import time
from pathlib import Path

from conftest import call

from keel.testing.server import ScriptedEngineServer

FIX = call("edit_file", path="calc.py", old_text="return a - b", new_text="return a + b")


def _crashed_session(calc_repo: Path, run_keel) -> Path:
    with ScriptedEngineServer([{"tool_calls": [FIX]}]) as server:
        r = run_keel("run", "fix add", "--cwd", str(calc_repo), "--base-url", server.base_url, "--model", "scripted",
                     "--verify", "off", "--max-steps", "1", "--output-format", "json")
    state = Path(r.result["log"]).with_suffix("") / "state.json"
    assert state.is_file(), r.stderr
    return state


def _mark_running(state: Path, pid: int, updated: float) -> None:
    data = json.loads(state.read_text())
    data.update(status="running", pid=pid, updated=updated)   # as a kill -9 leaves it
    state.write_text(json.dumps(data))


def test_a_pid_reused_by_a_later_process_does_not_pin_the_session_as_running(calc_repo, keel_env, run_keel):
    state = _crashed_session(calc_repo, run_keel)
    other = subprocess.Popen(["sleep", "30"])
    try:
        _mark_running(state, other.pid, time.time() - 60)          # saved a minute before `other` started
        with ScriptedEngineServer([{"tool_calls": [call("run_shell", command="python -m pytest -q")]},
                                   {"tool_calls": [call("finish", summary="fixed; pytest passes")]}]) as server:
            # a carried-on run keeps the stopped run's limits (--max-steps 1 was spent): raised here
            r = run_keel("run", "--continue", "--cwd", str(calc_repo), "--base-url", server.base_url,
                         "--model", "scripted", "--verify", "off", "--max-steps", "5", "--output-format", "json")
        assert "still running" not in r.stderr and r.result["status"] == "complete", r.stderr

        _mark_running(state, other.pid, time.time() + 60)          # `other` could have written it: alive
        again = run_keel("run", "--continue", "--cwd", str(calc_repo), "--model", "scripted",
                         "--base-url", "http://127.0.0.1:9/v1")
        assert again.code == 2 and "still running" in again.stderr
    finally:
        other.kill()
        other.wait()
