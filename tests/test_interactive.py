"""Interactive approval through a real pseudo-terminal: the person is asked, and the answer counts."""

from __future__ import annotations

import json
import sys

import pexpect
from conftest import call

from keel.testing.server import ScriptedEngineServer


def spawn(server, repo, env, log, task="make a marker"):
    args = ["-m", "keel.cli.main", "run", task, "--cwd", str(repo), "--base-url", server.base_url,
            "--model", "scripted", "--approval", "interactive", "--log", str(log)]
    return pexpect.spawn(sys.executable, args, env=env, encoding="utf-8", timeout=30, dimensions=(40, 200))


def answer(server, repo, env, log, question: str, reply: str, task: str = "make a marker") -> int:
    """Run keel in a pty, wait for ``question``, type ``reply``, and return the exit status."""
    child = spawn(server, repo, env, log, task)
    child.expect(question)
    child.expect(">")
    child.sendline(reply)
    child.expect(pexpect.EOF)
    child.close()
    return child.exitstatus


# `install` asks under every OS tier (unlike `touch`, a workspace write that a confining tier allows).
MAKE_MARKER = "install -m 644 /dev/null marker.txt"


def script():
    return [{"tool_calls": [call("run_shell", command=MAKE_MARKER)]},
            {"tool_calls": [call("run_shell", command="ls")]},
            {"content": "Done."}]


def test_yes_runs_the_command(calc_repo, keel_env, tmp_path):
    with ScriptedEngineServer(script()) as server:
        status = answer(server, calc_repo, keel_env, tmp_path / "log.jsonl", "keel wants to run: " + MAKE_MARKER, "y")
    assert status == 0
    assert (calc_repo / "marker.txt").exists()


def test_no_refuses_and_the_model_is_told(calc_repo, keel_env, tmp_path):
    with ScriptedEngineServer(script()) as server:
        answer(server, calc_repo, keel_env, tmp_path / "log.jsonl", "keel wants to run: " + MAKE_MARKER, "n")
        told = server.requests[1]["messages"][-1]["content"]
    assert not (calc_repo / "marker.txt").exists()
    assert "refused by the user" in told
    events = [json.loads(line) for line in (tmp_path / "log.jsonl").read_text().splitlines()]
    assert [e["ok"] for e in events if e["type"] == "tool_call"] == [False, True]


def test_ask_user_gets_the_persons_answer_inline(calc_repo, keel_env, tmp_path):
    s = [{"tool_calls": [call("ask_user", question="Which port should the server use?")]},
         {"tool_calls": [call("list_dir")]}, {"content": "Noted: port 8080."}]
    with ScriptedEngineServer(s) as server:
        status = answer(server, calc_repo, keel_env, tmp_path / "log.jsonl", "Which port should the server use", "8080",
                        task="find out which port the server should use")
        reply = server.requests[1]["messages"][-1]["content"]
    assert reply == "The user answered: 8080"
    assert status == 0


def test_interactive_without_a_terminal_is_a_usage_error(calc_repo, run_keel):
    r = run_keel("run", "x", "--cwd", str(calc_repo), "--base-url", "http://127.0.0.1:9/v1", "--model", "m",
                 "--approval", "interactive")
    assert r.code == 2 and "terminal" in r.stderr
