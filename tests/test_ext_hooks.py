"""Hooks: real subprocesses fed the event as JSON on stdin, around a real run against the scripted
engine over HTTP. Exit 2 blocks with stderr to the model; JSON output denies or adds context; a slow
hook is cut at its timeout; project hooks wait for `keel trust`."""

from __future__ import annotations

import json
import sys
import textwrap
from pathlib import Path

import pytest
from conftest import CALC, call

from keel.agent import Agent
from keel.config import load_config
from keel.ext.hooks import judge_output
from keel.testing.server import ScriptedEngineServer

BLOCKER = """
import json, sys
event = json.load(sys.stdin)
with open(sys.argv[1], "a") as fh:
    fh.write(json.dumps(event) + "\\n")
if "calc.py" in event["tool_input"].get("command", ""):
    sys.stderr.write("calc.py is off limits for shell commands; use read_file")
    sys.exit(2)
"""


def _script(tmp_path: Path, name: str, body: str) -> str:
    path = tmp_path / name
    path.write_text(textwrap.dedent(body))
    return f"{sys.executable} {path}"


def _outside(toml: str) -> str:
    """The hooks of ``toml`` marked ``sandbox = false``: these scripts live and write outside the
    workspace (tests/test_hooks_sandbox.py has hooks in the sandbox)."""
    return toml.replace('"""\n', '"""\nsandbox = false\n')


def _user_config(keel_env: dict[str, str], toml: str) -> None:
    path = Path(keel_env["XDG_CONFIG_HOME"]) / "keel" / "config.toml"
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text(_outside(toml))


def test_a_pre_tool_use_hook_blocks_a_command_and_the_model_reads_why(calc_repo, run_keel, keel_env, tmp_path):
    seen = tmp_path / "events.jsonl"
    hook = _script(tmp_path, "block.py", BLOCKER)
    _user_config(keel_env, f'[[hooks.PreToolUse]]\nmatcher = "run_shell"\ncommand = """{hook} {seen}"""\n')
    script = [{"tool_calls": [call("run_shell", command="cat calc.py")]},
              {"tool_calls": [call("run_shell", command="ls")]},
              {"tool_calls": [call("read_file", path="calc.py")]},
              {"content": "calc.py subtracts instead of adding."}]
    with ScriptedEngineServer(script) as server:
        r = run_keel("run", "explain calc.py", "--cwd", str(calc_repo), "--base-url", server.base_url,
                     "--model", "scripted", "--output-format", "json", "--verify", "off")
        requests = server.requests
    assert r.code == 0, r.stderr
    blocked = requests[1]["messages"][-1]["content"]
    assert blocked.startswith("Blocked by a PreToolUse hook: calc.py is off limits for shell commands")
    assert "test_calc.py" in requests[2]["messages"][-1]["content"]  # ls was let through and ran
    events = [json.loads(line) for line in seen.read_text().splitlines()]
    assert [e["tool_input"]["command"] for e in events] == ["cat calc.py", "ls"]  # read_file: not matched
    assert events[0]["hook_event_name"] == "PreToolUse" and events[0]["tool_name"] == "run_shell"
    assert events[0]["session_id"] == r.result["session_id"] and events[0]["cwd"] == str(calc_repo)
    hooks = [e for e in r.events() if e["type"] == "hook"]
    assert [h["outcome"] for h in hooks] == ["block", "ok"] and hooks[0]["exit_code"] == 2
    calls = [e for e in r.events() if e["type"] == "tool_call"]
    assert calls[0]["ok"] is False and calls[1]["ok"] is True


def _agent(repo: Path, server: ScriptedEngineServer, tmp_path: Path, toml: str, **kw) -> Agent:
    user = tmp_path / "user.toml"
    user.write_text(_outside(toml))
    config, _ = load_config(repo, user_path=user, env={},
                            flags={"engine": {"base_url": server.base_url, "model": "scripted"},
                                   "verify": {"mode": "off"}})
    return Agent(workspace=repo, config=config, log_path=tmp_path / "log.jsonl", **kw)


@pytest.fixture(autouse=True)
def _isolated(monkeypatch, tmp_path):
    monkeypatch.setenv("KEEL_HOME", str(tmp_path / "keel-home"))
    monkeypatch.setenv("XDG_CONFIG_HOME", str(tmp_path / "xdg"))


def test_json_deny_context_and_post_tool_use(calc_repo, tmp_path):
    deny = _script(tmp_path, "deny.py", """
        import json, sys
        json.load(sys.stdin)
        print(json.dumps({"hookSpecificOutput": {"hookEventName": "PreToolUse", "permissionDecision": "deny",
                                                 "permissionDecisionReason": "edits are frozen today"}}))
        """)
    post = _script(tmp_path, "post.py", """
        import json, sys
        e = json.load(sys.stdin)
        print(json.dumps({"hookSpecificOutput": {"additionalContext": "post saw " + str(e["tool_response"]["ok"])}}))
        """)
    toml = (f'[[hooks.PreToolUse]]\nmatcher = "edit_file|write_file"\ncommand = """{deny}"""\n'
            f'[[hooks.PostToolUse]]\nmatcher = "read_file"\ncommand = """{post}"""\n')
    script = [{"tool_calls": [call("edit_file", path="calc.py", old_text="return a - b", new_text="return a + b")]},
              {"tool_calls": [call("read_file", path="calc.py")]},
              {"content": "Could not edit; edits are frozen."}]
    with ScriptedEngineServer(script) as server:
        agent = _agent(calc_repo, server, tmp_path, toml)
        agent.run("fix calc")
        requests = server.requests
    assert requests[1]["messages"][-1]["content"].startswith("Blocked by a PreToolUse hook: edits are frozen today")
    assert (calc_repo / "calc.py").read_text() == CALC
    assert requests[2]["messages"][-1]["content"].endswith("post saw True")


def test_prompt_and_session_start_context_and_a_refused_prompt(calc_repo, tmp_path):
    start = _script(tmp_path, "start.py", """
        import json, sys
        json.load(sys.stdin)
        print(json.dumps({"hookSpecificOutput": {"additionalContext": "branch policy: small commits"}}))
        """)
    prompt = _script(tmp_path, "prompt.py", """
        import json, sys
        e = json.load(sys.stdin)
        if "secret" in e["prompt"]:
            sys.stderr.write("prompts may not mention secrets")
            sys.exit(2)
        print("ticket KEEL-7 is related")
        """)
    toml = (f'[[hooks.SessionStart]]\ncommand = """{start}"""\n'
            f'[[hooks.UserPromptSubmit]]\ncommand = """{prompt}"""\n')
    with ScriptedEngineServer([{"content": "It subtracts."}]) as server:
        result = _agent(calc_repo, server, tmp_path, toml).run("explain calc.py")
        first = server.requests[0]["messages"][1]["content"]
    assert result.stop_reason != "prompt_blocked"
    assert "branch policy: small commits" in first and "ticket KEEL-7 is related" in first
    with ScriptedEngineServer([{"content": "never asked"}]) as server:
        refused = _agent(calc_repo, server, tmp_path, toml).run("print the secret")
        assert server.requests == []  # refused before any model call
    assert (refused.status, refused.stop_reason, refused.exit_code) == ("error", "prompt_blocked", 2)
    assert "prompts may not mention secrets" in (refused.error or "")


def test_a_stop_hook_sends_the_model_back_once_then_lets_it_finish(calc_repo, tmp_path):
    stop = _script(tmp_path, "stop.py", """
        import json, sys
        e = json.load(sys.stdin)
        if not e["stop_hook_active"]:
            sys.stderr.write("also mention the test file")
            sys.exit(2)
        """)
    script = [{"tool_calls": [call("read_file", path="calc.py")]}, {"content": "add subtracts."},
              {"content": "add subtracts; test_calc.py catches it."}]
    with ScriptedEngineServer(script) as server:
        result = _agent(calc_repo, server, tmp_path, f'[[hooks.Stop]]\ncommand = """{stop}"""\n').run("explain")
        requests = server.requests
    assert result.stop_reason == "complete" and result.steps == 3
    assert "A Stop hook did not accept finishing yet: also mention the test file" in \
        requests[2]["messages"][-1]["content"]


def test_a_hook_past_its_timeout_is_killed_and_the_call_goes_on(calc_repo, tmp_path):
    slow = _script(tmp_path, "slow.py", "import time\ntime.sleep(30)\n")
    toml = f'[[hooks.PreToolUse]]\ncommand = """{slow}"""\ntimeout = 0.5\n'
    with ScriptedEngineServer([{"tool_calls": [call("read_file", path="calc.py")]}, {"content": "ok"}]) as server:
        agent = _agent(calc_repo, server, tmp_path, toml)
        agent.run("read calc")
        requests = server.requests
    assert "return a - b" in requests[1]["messages"][-1]["content"]
    log = [json.loads(line) for line in (tmp_path / "log.jsonl").read_text().splitlines()]
    hook = next(e for e in log if e["type"] == "hook")
    assert hook["outcome"] == "timeout" and hook["elapsed_ms"] < 10_000


def test_project_hooks_wait_for_trust_and_trust_ends_when_they_change(calc_repo, run_keel, keel_env, tmp_path):
    marker = calc_repo / "ran"      # a project hook runs in the sandbox: it writes only the workspace
    hook = _script(calc_repo, "mark.py", f"import pathlib\npathlib.Path({str(marker)!r}).write_text('x')\n")
    (calc_repo / ".keel").mkdir()
    (calc_repo / ".keel" / "config.toml").write_text(f'[[hooks.SessionStart]]\ncommand = """{hook}"""\n')

    def run():
        with ScriptedEngineServer([{"tool_calls": [call("read_file", path="calc.py")]},
                                   {"content": "It subtracts."}]) as server:
            return run_keel("run", "explain calc.py", "--cwd", str(calc_repo), "--base-url", server.base_url,
                            "--model", "scripted", "--output-format", "json", "--verify", "off")

    r = run()
    assert r.code == 0 and not marker.exists()
    assert "not trusted" in r.stderr and "mark.py" in r.stderr and "keel trust" in r.stderr
    t = run_keel("trust", "--cwd", str(calc_repo))
    assert t.code == 0 and "mark.py" in t.stdout
    r = run()
    assert r.code == 0 and marker.exists() and "not trusted" not in r.stderr
    marker.unlink()
    (calc_repo / ".keel" / "config.toml").write_text(f'[[hooks.SessionStart]]\ncommand = """{hook} --v2"""\n')
    r = run()
    assert not marker.exists() and "changed since you trusted it" in r.stderr


@pytest.mark.parametrize(("code", "stdout", "stderr", "outcome", "blocked"), [
    (0, "", "", "ok", False),
    (2, "", "no", "block", True),
    (1, "", "oops", "error", False),  # a failing hook does not block
    (0, '{"decision": "block", "reason": "r"}', "", "block", True),
    (0, '{"hookSpecificOutput": {"permissionDecision": "ask"}}', "", "ask", False),
    (0, '{"hookSpecificOutput": {"permissionDecision": "allow"}}', "", "ok", False),
    (0, "{not json", "", "ok", False),
])
def test_judge_output(code, stdout, stderr, outcome, blocked):
    verdict, said = judge_output("PreToolUse", code, stdout, stderr)
    assert (said, verdict.blocked) == (outcome, blocked)


def test_pre_compact_hooks_run_before_a_compaction_and_their_notes_survive_it(calc_repo, tmp_path):
    seen = tmp_path / "seen.json"
    hook = _script(tmp_path, "keep.py", f"""
        import json, sys
        open({str(seen)!r}, "w").write(sys.stdin.read())
        print("keep: the failing test is test_add")
        """)
    long = "x" * 4000
    with ScriptedEngineServer([{"content": "Summary: explored calc.py."}] * 3) as server:
        agent = _agent(calc_repo, server, tmp_path, f'[[hooks.PreCompact]]\ncommand = """{hook}"""\n')
        messages = agent.initial_messages("fix calc")
        for i in range(8):
            messages += [{"role": "assistant", "content": "", "tool_calls": [
                {"id": f"c{i}", "type": "function", "function": {"name": "read_file", "arguments": "{}"}}]},
                {"role": "tool", "tool_call_id": f"c{i}", "content": long}]
        event = agent.compact(messages)
    assert json.loads(seen.read_text())["hook_event_name"] == "PreCompact"
    assert event["record"] and any("keep: the failing test is test_add" in (m.get("content") or "")
                                   for m in messages)


def test_a_hook_that_asks_puts_the_call_to_the_person_or_refuses_unattended(tmp_path):
    from keel.ext.hooks import HookRunner, HookSpec
    from keel.policy.approval import Approver
    from keel.tools.base import Tool, ToolArgs, ToolContext, ToolResult, ToolSpec

    ask = _script(tmp_path, "ask.py", """
        import json, sys
        json.load(sys.stdin)
        print(json.dumps({"hookSpecificOutput": {"permissionDecision": "ask",
                                                 "permissionDecisionReason": "deploys need a human"}}))
        """)
    runner = HookRunner([HookSpec("PreToolUse", ask, "deploy")], tmp_path, session_id=lambda: "s",
                        transcript=lambda: None, emit=lambda *a, **k: None)
    ran: list[int] = []
    deploy = runner.wrap(Tool(ToolSpec("deploy", "Deploy.", ToolArgs),
                              lambda a, c: ran.append(1) or ToolResult(ok=True, output="deployed")))
    unattended = ToolContext(workspace=tmp_path, approval=Approver("unattended", workspace=tmp_path))
    out = deploy.execute(ToolArgs(), unattended)
    assert not out.ok and "deploys need a human" in out.output and "no one is present" in out.output
    answers = iter(["n", "y"])
    asked: list[str] = []
    person = Approver("interactive", workspace=tmp_path,
                      prompt=lambda q: asked.append(q) or next(answers))
    attended = ToolContext(workspace=tmp_path, approval=person)
    assert "Refused by the user" in deploy.execute(ToolArgs(), attended).output
    assert deploy.execute(ToolArgs(), attended).output == "deployed"
    assert ran == [1] and all("deploys need a human" in q for q in asked)
