"""The interactive terminal, driven in a real pseudo-terminal against the scripted engine (real HTTP).

Every wait is on output the person would see; the timeouts are generous for a loaded machine.
"""

from __future__ import annotations

import json
import signal
import sys
from pathlib import Path

import pexpect
import pytest
from conftest import CALC, assert_tool_messages_answer_calls, call, git

from keel.testing.server import ScriptedEngineServer

TIMEOUT = 60
PROMPT = "keel>"
# `install` asks under every OS tier (unlike `touch`, a workspace write a confining tier allows).
MAKE_MARKER = "install -m 644 /dev/null marker.txt"


@pytest.fixture
def repo(calc_repo: Path) -> Path:
    """calc_repo with a pinned one-line check: the gate runs it in a blink (pytest would take seconds)."""
    (calc_repo / ".keel").mkdir()
    (calc_repo / ".keel" / "config.toml").write_text(
        '[[verify.plan]]\ncategory = "test"\ncommand = "python3 -c \'import calc\'"\n')
    git(calc_repo, "add", "-A")
    git(calc_repo, "commit", "-qm", "pin the check")
    return calc_repo


def spawn(server: ScriptedEngineServer, repo: Path, env: dict[str, str], *flags: str) -> pexpect.spawn:
    env = {**env, "KEEL_BASE_URL": server.base_url, "KEEL_MODEL": "scripted",
           "PROMPT_TOOLKIT_NO_CPR": "1"}   # nobody answers cursor-position requests in a test pty
    child = pexpect.spawn(sys.executable, ["-m", "keel.cli.main", "--cwd", str(repo), *flags],
                          env=env, encoding="utf-8", timeout=TIMEOUT, dimensions=(50, 160),
                          # Ctrl-C as from a terminal, also when pytest runs as a background job (SIGINT ignored)
                          preexec_fn=lambda: signal.signal(signal.SIGINT, signal.SIG_DFL))
    import os
    if os.environ.get("REPL_LOG"):
        child.logfile_read = open(os.environ["REPL_LOG"], "w")  # noqa: SIM115
    child.expect(PROMPT)
    return child


def ctrl_d_exits(child: pexpect.spawn) -> int:
    child.sendeof()
    child.expect(pexpect.EOF)
    child.close()
    return child.exitstatus


def test_a_task_shows_steps_and_a_diff_asks_approval_then_stats_and_undo(repo, keel_env):
    script = [{"content": "Let me **fix** it.",
               "tool_calls": [call("edit_file", path="calc.py", old_text="return a - b", new_text="return a + b")]},
              {"tool_calls": [call("run_shell", command=MAKE_MARKER)]},
              {"content": "Fixed `add`: it now adds."}]
    with ScriptedEngineServer(script) as server:
        child = spawn(server, repo, keel_env)
        child.sendline("fix the add function")
        child.expect("keel wants to edit calc.py")
        child.expect(r"-    return a - b")       # the coloured diff of the edit, before the question
        child.expect(r"\+    return a \+ b")
        child.expect(r"\[a\] always")
        child.expect(">")
        assert "return a - b" in (repo / "calc.py").read_text()   # nothing changed while asking
        child.send("a")                            # one key, no Enter
        child.expect("edit_file calc.py")
        child.expect("keel wants to run: " + MAKE_MARKER)
        assert "-    return a - b" not in child.before   # the diff is not shown a second time
        child.expect("needs approval: ")           # and why
        child.expect(">")
        child.send("y")
        child.expect("run_shell " + MAKE_MARKER)
        child.expect("it now adds")                # the answer, rendered as markdown
        child.expect("■ complete · 3 steps")
        child.expect(PROMPT)
        assert (repo / "marker.txt").exists()
        assert "return a + b" in (repo / "calc.py").read_text()

        child.send("/sta\t")                       # slash-command completion shows the command and its help
        child.expect("tokens, cache, tools, cost")
        child.sendline("")                          # a unique prefix runs the command
        child.expect("tool calls by name")
        child.expect("edit_file")
        child.expect(PROMPT)
        child.sendline("/undo")
        child.expect("restored: calc.py")
        child.expect(PROMPT)
        assert ctrl_d_exits(child) == 0
    assert (repo / "calc.py").read_text() == CALC   # byte for byte
    assert not (repo / "marker.txt").exists()


def test_each_task_continues_the_conversation_and_a_question_waits_for_the_answer(repo, keel_env):
    script = [{"tool_calls": [call("read_file", path="calc.py")]},
              {"content": "calc.py defines add."},
              {"tool_calls": [call("ask_user", question="Which port should the server use?")]},
              {"content": "Noted: port 8080."}]
    with ScriptedEngineServer(script) as server:
        child = spawn(server, repo, keel_env)
        child.sendline("what is in calc.py")
        child.expect("calc.py defines add")
        child.expect(PROMPT)
        child.sendline("set up the server")
        child.expect(r"\? Which port should the server use\?")
        child.expect("waiting for your answer")
        child.expect(PROMPT)
        child.sendline("8080")
        child.expect("Noted: port 8080")
        child.expect(PROMPT)
        assert ctrl_d_exits(child) == 0
        requests = server.requests
    second, third = requests[2]["messages"], requests[3]["messages"]
    assert any(m.get("content") == "calc.py defines add." for m in second)   # the first task's answer
    assert second[-1] == {"role": "user", "content": "set up the server"}
    assert third[-1] == {"role": "user", "content": "8080"}
    assert_tool_messages_answer_calls(requests[3])


def test_ctrl_c_interrupts_a_running_command_and_the_history_stays_valid(repo, keel_env):
    script = [{"content": "Waiting for the slow job.", "tool_calls": [call("run_shell", command="sleep 60")]},
              {"tool_calls": [call("list_dir")]},
              {"content": "Understood, stopping."}]
    with ScriptedEngineServer(script) as server:
        child = spawn(server, repo, keel_env, "--approval", "auto-edit")
        child.sendline("run the slow job")
        child.expect("running run_shell sleep 60")
        child.sendintr()
        child.expect("■ interrupted")
        child.expect(PROMPT)
        child.sendline("never mind")
        child.expect("Understood, stopping")
        child.expect(PROMPT)
        child.sendintr()                    # at the prompt: a hint first ...
        child.expect("Ctrl-C again")
        child.expect(PROMPT)
        child.sendintr()                    # ... a second Ctrl-C exits
        child.expect(pexpect.EOF)
        child.close()
        requests = server.requests
    assert child.exitstatus == 0
    assert len(requests) == 3
    assert_tool_messages_answer_calls(requests[1])
    tool_answers = [m["content"] for m in requests[1]["messages"] if m["role"] == "tool"]
    assert tool_answers and ("Interrupted by the user" in tool_answers[-1]   # the runner's own answer, or the
                             or "keel stopped" in tool_answers[-1])         # REPL's repair if Ctrl-C came sooner


def test_step_mode_pauses_and_abort_stops_before_the_next_step(repo, keel_env):
    script = [{"tool_calls": [call("list_dir")]},
              {"tool_calls": [call("write_file", path="new.txt", content="x\n")]},
              {"content": "done"}]
    with ScriptedEngineServer(script) as server:
        child = spawn(server, repo, keel_env, "--step")
        child.sendline("look around")
        child.expect("list_dir")
        child.expect("step 1 done")
        child.expect(">")
        child.send("a")                           # one key
        child.expect("■ interrupted")
        child.expect(PROMPT)
        assert ctrl_d_exits(child) == 0
        assert len(server.requests) == 1          # no second model call after the abort
    assert not (repo / "new.txt").exists()


def test_slash_commands_help_cost_todos_and_unknown(repo, keel_env):
    script = [{"tool_calls": [call("todo_write", todos=[{"content": "read calc", "status": "done"},
                                                           {"content": "fix add", "status": "done"}])]},
              {"content": "Working on it: add() in calc.py subtracts where it should add."}]
    with ScriptedEngineServer(script) as server:
        child = spawn(server, repo, keel_env)
        child.sendline("/help")
        child.expect("/undo")
        child.expect(PROMPT)
        child.sendline("/nope")
        child.expect("unknown command /nope")
        child.expect(PROMPT)
        child.sendline("what needs checking in calc.py")
        child.expect("Working on it")
        child.expect(PROMPT)
        child.sendline("/todos")
        child.expect("fix add")
        child.expect(PROMPT)
        child.sendline("/cost")
        child.expect(r"[\d,]+ tokens .* in 2 model calls")
        child.expect(PROMPT)
        child.sendline("/log")
        child.expect("tool     todo_write")
        child.expect("stop     complete")
        child.expect(PROMPT)
        child.sendline("/verify")
        child.expect(r"PASS \[test\] python3 -c 'import calc'")
        child.expect(PROMPT)
        child.sendline("/model other-model")
        child.expect("model: other-model")
        child.expect(PROMPT)
        child.sendline("/model")
        child.expect("model: other-model")
        child.expect(PROMPT)
        child.sendline("/exit")
        child.expect(pexpect.EOF)
        child.close()
    assert child.exitstatus == 0


def test_without_a_terminal_bare_keel_says_to_use_run(run_keel):
    r = run_keel()
    assert r.code == 2 and "keel run TASK" in r.stderr


def test_stream_json_tool_call_carries_the_edit_diff(repo, run_keel):
    script = [{"tool_calls": [call("edit_file", path="calc.py", old_text="return a - b", new_text="return a + b")]},
              {"content": "Fixed."}]
    with ScriptedEngineServer(script) as server:
        r = run_keel("run", "fix add", "--cwd", str(repo), "--base-url", server.base_url, "--model", "scripted",
                     "--output-format", "stream-json")
    events = [json.loads(line) for line in r.stdout.splitlines()]
    edit = next(e for e in events if e["type"] == "tool_call")
    assert "-    return a - b\n+    return a + b\n" in edit["diff"]


def test_attended_run_stops_for_the_question(repo, run_keel):
    script = [{"tool_calls": [call("ask_user", question="Which port?")]}, {"content": "unreached"}]
    with ScriptedEngineServer(script) as server:
        r = run_keel("run", "set up", "--cwd", str(repo), "--base-url", server.base_url, "--model", "scripted",
                     "--output-format", "json", "--attended")
    assert r.result["stop_reason"] == "needs_user"


def test_resume_carries_an_earlier_conversation_on(repo, keel_env):
    first = [{"tool_calls": [call("read_file", path="calc.py")]}, {"content": "add subtracts: a bug."}]
    with ScriptedEngineServer(first) as server:
        child = spawn(server, repo, keel_env)
        child.sendline("what is wrong in calc.py")
        child.expect("a bug")
        child.expect(PROMPT)
        assert ctrl_d_exits(child) == 0
    second = [{"tool_calls": [call("list_dir")]}, {"content": "As I said: add subtracts."}]
    with ScriptedEngineServer(second) as server:
        child = spawn(server, repo, keel_env)
        child.sendline("/resume")
        child.expect("resumed session .* \\(complete\\): what is wrong in calc.py")
        child.expect(PROMPT)
        child.sendline("remind me")
        child.expect("As I said")
        child.expect(PROMPT)
        assert ctrl_d_exits(child) == 0
        request = server.requests[0]
    assert any(m.get("content") == "add subtracts: a bug." for m in request["messages"])
    assert request["messages"][-1] == {"role": "user", "content": "remind me"}


def test_keel_run_step_mode_stop_stepping_runs_to_the_end(repo, keel_env, tmp_path):
    script = [{"tool_calls": [call("list_dir")]}, {"tool_calls": [call("read_file", path="calc.py")]},
              {"content": "calc.py holds add."}]
    with ScriptedEngineServer(script) as server:
        child = pexpect.spawn(sys.executable, ["-m", "keel.cli.main", "run", "look", "--cwd", str(repo), "--step",
                                               "--base-url", server.base_url, "--model", "scripted"],
                              env={**keel_env, "PROMPT_TOOLKIT_NO_CPR": "1"}, encoding="utf-8", timeout=TIMEOUT)
        child.expect("step 1 done")
        child.expect(">")
        child.sendline("s")
        child.expect("complete")
        child.expect(pexpect.EOF)
        child.close()
        assert len(server.requests) == 3
    assert child.exitstatus == 0


def test_plan_then_approve_carries_the_plan_out(repo, keel_env):
    plan = "1. Change `a - b` to `a + b` in calc.py\n2. Run the check"
    script = [{"tool_calls": [call("read_file", path="calc.py")]},
              {"content": plan},
              {"tool_calls": [call("edit_file", path="calc.py", old_text="a - b", new_text="a + b")]},
              {"tool_calls": [call("todo_write", todos=[{"content": "Change it", "status": "done"},
                                                        {"content": "Run the check", "status": "done"}])]},
              {"content": "Done."}]
    with ScriptedEngineServer(script) as server:
        child = spawn(server, repo, keel_env, "--approval", "auto-edit")
        child.sendline("/plan")
        child.expect("plan mode for the next task")
        child.expect(PROMPT)
        child.sendline("fix add")
        child.expect("approve this plan")
        child.expect(">")
        assert "return a - b" in (repo / "calc.py").read_text()    # nothing changed while planning
        child.sendline("y")
        child.expect("■ complete")
        child.expect(PROMPT)
        assert ctrl_d_exits(child) == 0
        execute = server.requests[2]["messages"]
    assert "approved this plan" in execute[1]["content"]
    assert "return a + b" in (repo / "calc.py").read_text()
