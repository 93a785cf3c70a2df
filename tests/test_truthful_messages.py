"""What keel tells the model and the user is what happened (issue 22, item 3): the real `keel run` CLI
against a scripted engine over real HTTP on 127.0.0.1, on real files."""

from __future__ import annotations

import json
from pathlib import Path

import pytest
from conftest import assert_tool_messages_answer_calls, call, make_repo

from keel.cli.render import TextRenderer
from keel.testing.server import ScriptedEngineServer

APPEND = call("run_shell", command="echo hello >> notes.txt")
CALC_BUG = "def add(a, b):\n    return a - b\n"
CHECK = "from calc import add\n\nassert add(2, 3) == 5, add(2, 3)\nprint('OK')\n"
FIX = call("edit_file", path="calc.py", old_text="return a - b", new_text="return a + b")


@pytest.fixture
def notes_repo(tmp_path: Path) -> Path:
    return make_repo(tmp_path / "notes", {"README.md": "notes\n"})


@pytest.fixture
def check_repo(tmp_path: Path) -> Path:
    """A project with no tests keel can detect: only the script the task names."""
    return make_repo(tmp_path / "calc", {"calc.py": CALC_BUG, "check.py": CHECK})


def run(run_keel, server, repo: Path, task: str):
    return run_keel("run", task, "--cwd", str(repo), "--base-url", server.base_url, "--model", "scripted",
                    "--output-format", "json", timeout=120)


def tool_answers(request) -> list[str]:
    return [m["content"] for m in request["messages"] if m["role"] == "tool"]


def pushbacks(requests) -> list[str]:
    return [r["messages"][-1]["content"] for r in requests if r["messages"][-1]["role"] == "user"][1:]


def test_a_repeated_command_that_changed_a_file_is_not_run_again_and_the_model_is_told_so(notes_repo, run_keel):
    with ScriptedEngineServer([{"tool_calls": [APPEND]}] * 3 + [{"content": "unreachable"}]) as server:
        r = run(run_keel, server, notes_repo, "append the line hello to notes.txt")
        requests = server.requests
    assert (notes_repo / "notes.txt").read_text() == "hello\n"      # appended once, not three times
    assert r.result["stop_reason"] == "limit:repetition" and len(requests) == 3
    second = tool_answers(requests[2])[-1]
    assert second.startswith("Not run: you already called run_shell with these exact arguments; it changed "
                             "notes.txt, and nothing has changed since")
    assert not any("Refused" in a for q in requests for a in tool_answers(q))
    calls = [e for e in r.events() if e["type"] == "tool_call"]
    assert [(c["repeat"], c["not_run"]) for c in calls] == [(0, False), (1, True), (2, True)]
    out: list[str] = []
    renderer = TextRenderer(out=_Sink(out), err=_Sink([]))
    renderer(calls[1])
    assert "run_shell echo hello >> notes.txt → not run (repeat)" in "".join(out)


def test_a_repeat_that_ran_is_reported_as_having_run(tmp_path, run_keel, calc_repo):
    read = {"tool_calls": [call("read_file", path="calc.py")]}
    with ScriptedEngineServer([read, read, {"content": "add subtracts: it returns a - b."}]) as server:
        r = run(run_keel, server, calc_repo, "explain the bug in calc.py")
        requests = server.requests
    assert r.result["stop_reason"] == "complete"
    again = tool_answers(requests[2])[-1]
    assert again.startswith("This ran again: you already called read_file with these exact arguments, and it "
                            "gave the identical result")
    [first, second] = [e for e in r.events() if e["type"] == "tool_call"]
    assert (second["repeat"], second["not_run"]) == (1, False)


def test_calls_in_a_cut_reply_never_run_and_the_model_is_told(notes_repo, run_keel):
    """A reply cut at the output-token limit may carry a call cut too (issue 33): none of its calls
    run, each is answered as cut; the complete call the model sends next runs once."""
    cut = {"tool_calls": [APPEND, APPEND], "finish_reason": "length"}
    with ScriptedEngineServer([cut, {"tool_calls": [APPEND]}, {"content": "Appended hello to notes.txt."}]) as server:
        r = run(run_keel, server, notes_repo, "append the line hello to notes.txt")
        requests = server.requests
    assert (notes_repo / "notes.txt").read_text() == "hello\n"
    assert_tool_messages_answer_calls(requests[1])
    assert all(a.startswith("This call was cut off before it ended (the reply hit the output-token limit), so "
                            "it did not run.") for a in tool_answers(requests[1]))
    assert [e["not_run"] for e in r.events() if e["type"] == "tool_call"] == [True, True, False]


def test_finishing_again_after_running_the_requested_check_is_not_a_repetition(tmp_path, run_keel):
    repo = make_repo(tmp_path / "greet", {"greet.py": "def greet():\n    return 'bye'\n", "other.py": "print(1)\n"})
    summary = call("finish", summary="greet() now returns 'hi'.")
    script = [{"tool_calls": [call("edit_file", path="greet.py", old_text="'bye'", new_text="'hi'")]},
              {"tool_calls": [summary]},
              {"tool_calls": [call("run_shell", command="python3 other.py")]},   # not evidence: told why
              {"tool_calls": [summary]},
              {"tool_calls": [call("run_shell", command="python3 -c 'import greet; print(greet.greet())'")]},
              {"tool_calls": [summary]}]
    with ScriptedEngineServer(script) as server:
        r = run(run_keel, server, repo, "make greet() in greet.py return 'hi'")
        requests = server.requests
    assert (r.result["status"], r.result["stop_reason"]) == ("complete", "complete"), pushbacks(requests)
    assert not any(a.startswith(("Refused", "This ran again", "Not run")) for a in tool_answers(requests[-1]))
    said = pushbacks(requests)
    assert "No check has run since your last change." in said[0]
    # what ran is named, and why it is not evidence
    assert ("Since your last change: `python3 other.py` exited 0. That is not evidence: keel found no tests or "
            "checks of this project to run, so the evidence must run the code you changed (greet.py); this "
            "command does not run a changed file or import its module.") in said[1]


def test_an_identical_finish_with_nothing_done_between_is_no_progress(tmp_path, run_keel):
    repo = make_repo(tmp_path / "greet", {"greet.py": "def greet():\n    return 'bye'\n"})
    edit = {"tool_calls": [call("edit_file", path="greet.py", old_text="'bye'", new_text="'hi'")]}
    finish = {"tool_calls": [call("finish", summary="done")]}
    with ScriptedEngineServer([edit] + [finish] * 12) as server:
        r = run(run_keel, server, repo, "make greet() in greet.py return 'hi'")
        requests = server.requests
    assert r.result["stop_reason"] == "limit:no_progress" and len(requests) < 8


def test_a_script_the_task_says_to_run_is_its_acceptance_check(check_repo, run_keel):
    script = [{"tool_calls": [FIX]}, {"tool_calls": [call("run_shell", command="python3 check.py")]},
              {"tool_calls": [call("finish", summary="add() adds; check.py prints OK.")]}]
    with ScriptedEngineServer(script) as server:
        r = run(run_keel, server, check_repo, "Fix add() in calc.py, then run check.py.")
        requests = server.requests
    assert (r.result["status"], r.result["stop_reason"]) == ("complete", "complete"), pushbacks(requests)
    assert pushbacks(requests) == []          # never "No check has run since your last change"
    [check] = r.result["verification"]["checks"]
    assert check["category"] == "acceptance" and check["command"].endswith(" check.py") and check["passed"]


def test_the_named_script_blocks_a_finish_that_leaves_it_failing(check_repo, run_keel):
    wrong = call("edit_file", path="calc.py", old_text="return a - b", new_text="return a * b")
    finish = {"tool_calls": [call("finish", summary="fixed")]}
    with ScriptedEngineServer([{"tool_calls": [wrong]}, finish, finish, finish, finish]) as server:
        r = run(run_keel, server, check_repo, "Fix add() in calc.py, then run check.py.")
        requests = server.requests
    assert r.result["status"] == "incomplete"
    assert "[acceptance] `python" in pushbacks(requests)[0] and "check.py` exited 1" in pushbacks(requests)[0]


class _Sink:
    def __init__(self, into: list[str]) -> None:
        self.into = into

    def write(self, text: str) -> None:
        self.into.append(text)

    def flush(self) -> None:
        pass

    def isatty(self) -> bool:
        return False



def test_a_check_failing_before_the_run_is_labelled_so_on_the_verify_line(tmp_path, run_keel, keel_env):
    repo = make_repo(tmp_path / "mixed", {"calc.py": CALC_BUG, "test_calc.py": "from calc import add\n\n\n"
                                          "def test_add():\n    assert add(2, 3) == 5\n",
                                          "greet.py": "def greet():\n    return 'bye'\n"})
    script = [{"tool_calls": [call("edit_file", path="greet.py", old_text="'bye'", new_text="'hi'")]},
              {"tool_calls": [call("run_shell", command="python3 -c 'import greet; print(greet.greet())'")]},
              {"tool_calls": [call("finish", summary="greet() returns 'hi'.")]}]
    with ScriptedEngineServer(script) as server:
        r = run_keel("run", "make greet() in greet.py return 'hi'", "--cwd", str(repo), "--base-url",
                     server.base_url, "--model", "scripted", "--output-format", "stream-json", timeout=120)
    session = next(json.loads(ln) for ln in r.stdout.splitlines() if '"session_start"' in ln)["session_id"]
    text = run_keel("log", session).stdout   # keel log says a gate run as keel run does
    [line] = [ln for ln in text.splitlines() if "verify " in ln]
    # nothing of the project's passed, so the gate says so (was "→ passed", or "verify passed {}"); the
    # run's own check of greet() is the evidence
    assert "-m pytest -q ✗ exit 1 (failing before this run) → failing_before" in line, text
    assert '"status": "complete"' in r.stdout.replace('"status":"complete"', '"status": "complete"'), r.stdout
    assert (repo / "calc.py").read_text() == CALC_BUG    # the old failure is not this run's: left alone
