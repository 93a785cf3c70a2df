"""The handoff note a limit stop leaves in the session directory, and its path in the result JSON."""

from __future__ import annotations

from pathlib import Path

from conftest import call

from keel.context.handoff import HandoffFacts, facts_from, next_step, render_handoff
from keel.core.state import TaskState, Todo
from keel.testing.server import ScriptedEngineServer

FAST_PYTEST = "PYTEST_DISABLE_PLUGIN_AUTOLOAD=1 python -m pytest -q -p no:cacheprovider"


def state_with(files: tuple[str, ...] = (), checks: tuple[tuple[str, int, str], ...] = (),
               todos: tuple[tuple[str, str], ...] = ()) -> TaskState:
    """A TaskState built the way the runner builds it: files first, then checks, in that order."""
    state = TaskState(task="add a --verbose flag")
    for path in files:
        state.record_file_change(path)
    for command, code, kind in checks:
        state.record_check(command, code, kind)
    state.set_todos([Todo(content, status) for content, status in todos])  # type: ignore[arg-type]
    return state


def facts(state: TaskState, verification: dict | None = None, messages: list | None = None) -> HandoffFacts:
    return facts_from("add a --verbose flag", "limit:steps", 7, "s-1", state, verification, messages or [])


def test_next_step_follows_the_facts() -> None:
    assert next_step(facts(state_with())).startswith("Start on the goal")
    assert next_step(facts(state_with(files=("cli.py",)))).startswith("Run the project's checks on the changed "
                                                                      "files (cli.py)")
    failing = state_with(files=("cli.py",), checks=(("pytest -q", 1, "test"),))
    assert next_step(facts(failing)) == "Make `pytest -q` pass (its latest run exited 1), then rerun it."
    doing = state_with(files=("cli.py",), checks=(("pytest -q", 0, "test"),),
                       todos=(("parse the flag", "done"), ("print details when verbose", "in_progress")))
    assert next_step(facts(doing)) == "Continue the todo in progress: print details when verbose"
    gate = {"status": "failed", "checks": [{"command": "ruff check .", "passed": False}]}
    assert "`ruff check .`" in next_step(facts(state_with(files=("cli.py",), checks=(("pytest -q", 0, "test"),)),
                                               verification=gate))


def test_note_names_goal_done_left_and_last_activity() -> None:
    state = state_with(files=("cli.py",), checks=(("pytest -q", 0, "test"), ("ruff check .", 1, "lint")),
                       todos=(("parse the flag", "done"), ("document it", "pending")))
    messages = [{"role": "assistant", "content": "Now the docs.", "tool_calls": [
                    {"id": "c1", "type": "function",
                     "function": {"name": "run_shell", "arguments": '{"command": "ruff check ."}'}}]},
                {"role": "tool", "tool_call_id": "c1", "content": "exit code: 1\nF401 unused import"}]
    note = render_handoff(facts(state, messages=messages))
    assert note.startswith("# Handoff: add a --verbose flag\n")
    assert "Stopped at the step limit (`limit:steps`) after 7 steps" in note
    done = note.split("## Done")[1].split("## Left")[0]
    left = note.split("## Left")[1].split("## Last activity")[0]
    assert "Files changed: cli.py" in done and "Check passed (test, after the last change): `pytest -q`" in done
    assert "[x] parse the flag" in done
    assert "[ ] document it" in left and "Failing check (lint): `ruff check .` exited 1" in left
    assert "F401 unused import" in left            # what the failing run showed, summarised
    assert "The model last said: Now the docs." in note
    assert "run_shell `ruff check .` → exit code: 1" in note
    assert "## Next step\n\nMake `ruff check .` pass (its latest run exited 1), then rerun it." in note
    assert "`keel run --resume s-1`" in note


def test_a_run_stopped_by_max_steps_leaves_a_handoff_note(calc_repo: Path, run_keel) -> None:
    script = [
        {"tool_calls": [call("todo_write", todos=[{"content": "fix add()", "status": "in_progress"},
                                                  {"content": "add a test for negatives", "status": "pending"}])]},
        {"tool_calls": [call("edit_file", path="calc.py", old_text="a - b", new_text="a + b")]},
        {"content": "Now I will run the tests.", "tool_calls": [call("run_shell", command=FAST_PYTEST)]},
        {"tool_calls": [call("finish", summary="never reached")]},
    ]
    with ScriptedEngineServer(script) as server:
        r = run_keel("run", "fix add() in calc.py", "--cwd", str(calc_repo), "--base-url", server.base_url,
                     "--model", "scripted", "--output-format", "json", "--max-steps", "3")
    result = r.result
    assert (result["status"], result["stop_reason"]) == ("incomplete", "limit:steps"), r.stderr
    note_path = Path(result["handoff"])
    assert note_path == Path(result["log"]).with_suffix("") / "handoff.md"
    note = note_path.read_text()
    assert "## Goal\n\nfix add() in calc.py" in note
    assert "Files changed: calc.py" in note
    assert "Check passed (test, after the last change)" in note and "pytest" in note
    assert "[~] fix add()" in note and "[ ] add a test for negatives" in note
    assert "The model last said: Now I will run the tests." in note
    assert "## Next step\n\nContinue the todo in progress: fix add()" in note


def test_a_completed_run_leaves_no_note(calc_repo: Path, run_keel) -> None:
    script = [{"tool_calls": [call("list_dir", path=".")]}, {"content": "It is a calculator project."}]
    with ScriptedEngineServer(script) as server:
        r = run_keel("run", "explain the bug in calc.py", "--cwd", str(calc_repo), "--base-url", server.base_url,
                     "--model", "scripted", "--output-format", "json")
    assert r.result["stop_reason"] == "complete", r.stderr
    assert "handoff" not in r.result
    assert not (Path(r.result["log"]).with_suffix("") / "handoff.md").exists()
