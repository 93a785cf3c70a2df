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


def test_esc_stops_a_running_command_and_typed_keys_are_not_echoed(calc_repo, keel_env):
    script = [{"content": "Waiting.", "tool_calls": [call("run_shell", command="sleep 60")]},
              {"content": "Stopped, as you asked."}]
    with ScriptedEngineServer(script) as server:
        child = spawn(server, calc_repo, keel_env, "--approval", "auto-edit")
        child.sendline("run the slow job")
        child.expect("running run_shell sleep 60")
        child.send("typed-during-the-run")          # not echoed, and not the next task
        child.send("\x1b")                          # Esc: as Ctrl-C
        child.expect(r"run_shell sleep 60[^\n]*\((\d+(?:\.\d)?) (ms|s)\)")   # the time it ran, not 0 ms
        ran = float(child.match.group(1)) / (1000 if child.match.group(2) == "ms" else 1)
        child.expect("■ interrupted")
        child.expect(PROMPT)
        seen = child.before
        child.sendline("go on")
        child.expect("Stopped, as you asked")
        child.expect(PROMPT)
        assert ctrl_d_exits(child) == 0
        # the request that carried "go on" (a reply that runs nothing is then sent back: the job is not done)
        last = next(r["messages"] for r in server.requests if r["messages"][-1]["content"].endswith("go on"))
    assert 0 < ran < 30
    assert "typed-during-the-run" not in seen
    user = [m["content"] for m in last if m["role"] == "user"]
    assert not any("typed-during-the-run" in u for u in user) and user[-1].endswith("go on")


def test_a_key_typed_before_the_question_does_not_answer_it(calc_repo, keel_env):
    script = [{"tool_calls": [call("list_dir")]},
              {"tool_calls": [call("edit_file", path="calc.py", old_text="return a - b", new_text="return a + b")]},
              {"content": "Done."}]
    with ScriptedEngineServer([{**script[0], "delay_s": 1.5}, *script[1:]]) as server:
        child = spawn(server, calc_repo, keel_env)
        child.sendline("fix add")
        child.expect("thinking")
        child.send("y")                              # typed while the model thinks: dropped
        child.expect(r"\[y\] yes, once")
        child.expect(">")
        assert "return a - b" in (calc_repo / "calc.py").read_text()
        child.send("n")
        child.expect(PROMPT)
        assert ctrl_d_exits(child) == 0
    assert "return a - b" in (calc_repo / "calc.py").read_text()


def test_keel_run_step_mode_does_not_echo_keys_typed_during_the_run(calc_repo, keel_env):
    script = [{"tool_calls": [call("list_dir")], "delay_s": 1.5}, {"content": "calc.py and its test."}]
    with ScriptedEngineServer(script) as server:
        child = pexpect.spawn(sys.executable, ["-m", "keel.cli.main", "run", "look", "--cwd", str(calc_repo), "--step",
                                               "--base-url", server.base_url, "--model", "scripted"],
                              env={**keel_env, "PROMPT_TOOLKIT_NO_CPR": "1"}, encoding="utf-8", timeout=TIMEOUT)
        child.expect("sandbox: ")
        child.send("zzz-typed")                       # while the model thinks
        child.expect("step 1 done")
        child.expect(">")
        assert "zzz-typed" not in child.before
        child.sendline("s")
        child.expect("complete")
        child.expect(pexpect.EOF)
        child.close()
    assert child.exitstatus == 0
