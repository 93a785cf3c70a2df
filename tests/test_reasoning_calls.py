"""Calls a model drafts while reasoning never run: the real `keel run` against a scripted engine over
real HTTP whose replies keep Qwen3's `<think>…</think>` in the content (a server without a reasoning
parser), next to the control that shows the same call text runs when it is the answer."""

from __future__ import annotations

from conftest import call

from keel.engine.reasoning import recover_reply, split_reasoning
from keel.testing.server import ScriptedEngineServer

DRAFT = ("<tool_call>\n<function=write_file>\n<parameter=path>\nPWNED.txt\n</parameter>\n"
         "<parameter=content>\nx\n</parameter>\n</function>\n</tool_call>")
READ = "<tool_call>\n<function=read_file>\n<parameter=path>\ncalc.py\n</parameter>\n</function>\n</tool_call>"
TASK = "explain the bug in calc.py"


def _run(run_keel, repo, first_reply: str, *, complete: bool = True, task: str = TASK):
    script = [{"content": first_reply},
              {"tool_calls": [call("finish", summary="add() subtracts: it returns a - b.")]}]
    with ScriptedEngineServer(script) as server:
        r = run_keel("run", task, "--cwd", str(repo), "--base-url", server.base_url, "--model", "scripted",
                     "--output-format", "json")
    assert (r.code == 0) == complete, r.stdout + r.stderr
    return r, r.events()


def test_a_call_drafted_inside_think_never_runs_and_the_answer_call_does(calc_repo, run_keel):
    reply = f"<think>\nI could write a file: {DRAFT} but first I read the code.\n</think>\n\n{READ}"
    r, events = _run(run_keel, calc_repo, reply)
    assert not (calc_repo / "PWNED.txt").exists()
    ran = [e["name"] for e in events if e["type"] == "tool_call"]
    assert ran[0] == "read_file" and "write_file" not in ran
    first = next(e for e in events if e["type"] == "model_call")
    assert "I could write a file" in first["reasoning"] and "<think>" not in first["content"]
    assert first["tool_call_format"] == "qwen3_coder" and first["tool_calls"] == 1


def test_control_the_same_call_text_as_the_answer_runs(calc_repo, run_keel):
    # a change request (keel's file writers are not run for an answer-only one); the write really happens,
    # and the bug is still there, so the run is not complete
    _r, events = _run(run_keel, calc_repo, DRAFT, complete=False, task="Fix the bug in calc.py.")
    assert (calc_repo / "PWNED.txt").read_text() == "x"
    assert [e["name"] for e in events if e["type"] == "tool_call"][0] == "write_file"


def test_reasoning_the_template_opened_ends_at_the_close_tag_outside_any_call():
    # The template opened <think>; the reply holds only the close, after a drafted call.
    reasoning, answer = split_reasoning(f"maybe {DRAFT} no.</think>\n{READ}", {"read_file", "write_file"})
    assert reasoning.startswith("maybe") and answer == READ
    _r, _a, calls, _f = recover_reply(f"maybe {DRAFT} no.</think>\n{READ}", {"read_file", "write_file"})
    assert [c.name for c in calls] == ["read_file"]
    # A </think> that is a written file's text is no reasoning end: the file is written whole.
    code = ("<tool_call>\n<function=write_file>\n<parameter=path>\nstrip.py\n</parameter>\n<parameter=content>\n"
            "TAG = '</think>'\n</parameter>\n</function>\n</tool_call>")
    reasoning, rest, calls, _f = recover_reply(code, {"write_file"})
    assert reasoning == "" and [c.name for c in calls] == ["write_file"]
    assert "TAG = '</think>'" in calls[0].arguments


def test_a_reply_cut_while_thinking_runs_nothing():
    reasoning, rest, calls, _f = recover_reply(f"<think>\nfirst {READ} then", {"read_file"})
    assert calls == [] and rest == "" and "first" in reasoning
