"""The REPL over a session: what its first line says, an engine that cannot answer said at start,
/stats over several tasks, /resume's default — in a real pty against the scripted engine (real HTTP)."""

from __future__ import annotations

import json
import re
import socket
import sys
from pathlib import Path

import pexpect
from conftest import call
from test_repl import PROMPT, TIMEOUT, ctrl_d_exits, spawn

from keel.testing.server import ScriptedEngineServer


def _closed_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


def test_the_first_line_names_the_sandbox_tier(calc_repo, keel_env):
    with ScriptedEngineServer([{"content": "hi"}]) as server:
        child = spawn(server, calc_repo, keel_env)
        first = child.before
        assert ctrl_d_exits(child) == 0
    assert re.search(r"keel · scripted · .* · sandbox: (bubblewrap|landlock|none)", first), first


def test_an_engine_that_does_not_answer_is_said_at_start(calc_repo, keel_env):
    env = {**keel_env, "KEEL_BASE_URL": f"http://127.0.0.1:{_closed_port()}/v1", "KEEL_MODEL": "m",
           "PROMPT_TOOLKIT_NO_CPR": "1"}
    child = pexpect.spawn(sys.executable, ["-m", "keel.cli.main", "--cwd", str(calc_repo)], env=env,
                          encoding="utf-8", timeout=TIMEOUT, dimensions=(50, 160))
    child.expect(PROMPT)
    assert "does not answer" in child.before and "keel doctor" in child.before   # before any task is typed
    assert ctrl_d_exits(child) == 0


def test_stats_counts_the_steps_of_every_task_and_resume_skips_plan_sessions(calc_repo, keel_env):
    script = [{"tool_calls": [call("read_file", path="calc.py")]}, {"content": "calc.py defines add."},
              {"tool_calls": [call("list_dir")]}, {"tool_calls": [call("read_file", path="test_calc.py")]},
              {"content": "One test, of add."},
              # /plan: the planner's turn and plan, then the carried-out plan's answer
              {"tool_calls": [call("read_file", path="calc.py")]}, {"content": "1. Say hello"},
              {"content": "Hello."}]
    with ScriptedEngineServer(script) as server:
        child = spawn(server, calc_repo, keel_env, "--approval", "auto-edit")
        child.sendline("what is in calc.py?")
        child.expect("defines add")
        child.expect(PROMPT)
        child.sendline("and in test_calc.py?")
        child.expect("One test, of add")
        child.expect(PROMPT)
        child.sendline("/stats")
        child.expect(r"steps\s+│\s+(\d+)")
        steps = int(child.match.group(1))
        child.expect(PROMPT)
        child.sendline("/plan say hello")
        child.expect("approve this plan")
        child.send("y")
        child.expect("Hello.")
        child.expect(PROMPT)
        assert ctrl_d_exits(child) == 0
    assert steps == 5                                            # 2 + 3, not the larger task's 3
    with ScriptedEngineServer([{"content": "Yes."}]) as server:
        child = spawn(server, calc_repo, keel_env)
        child.sendline("/resume")
        child.expect(r"resumed session (\S+) \((\w+)\)")
        resumed, status = child.match.group(1), child.match.group(2)
        child.expect(PROMPT)
        assert ctrl_d_exits(child) == 0
    state = json.loads((Path(keel_env["KEEL_HOME"]) / "sessions" / resumed / "state.json").read_text())
    assert status in ("complete", "incomplete") and state["stop_reason"] != "awaiting_plan_approval"   # not the planner's
    assert "what is in calc.py?" in json.dumps(state["messages"])   # this REPL session's own conversation
