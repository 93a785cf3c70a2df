"""Small-model co-tuning, on the scripted engine over real HTTP: what a 1.5B model did wrong in
real runs, replayed, and what keel now does about it."""

from __future__ import annotations

import json
from pathlib import Path

from conftest import CALC, call

from keel.agent import Agent
from keel.config import Config
from keel.engine.client import OpenAICompatEngine
from keel.loop.limits import Limits
from keel.testing.server import ScriptedEngineServer

NO_GATE = Config.model_validate({"verify": {"mode": "off"}})


def run_script(script: list[dict], workspace: Path, limits: Limits | None = None, config: Config | None = None):
    events: list[dict] = []
    with ScriptedEngineServer(script) as server:
        engine = OpenAICompatEngine(server.base_url, "scripted", max_attempts=1)
        agent = Agent(engine, workspace=workspace, config=config or NO_GATE, sinks=[events.append], log_path=False)
        result = agent.run("Fix add in calc.py.", limits=limits or Limits(max_steps=6))
        requests = server.requests
    tool_texts = [m["content"] for m in result.messages if m["role"] == "tool"]
    return result, events, tool_texts, requests


def test_an_edits_entry_repeating_the_top_level_edit_is_applied_once(tmp_path: Path) -> None:
    (tmp_path / "calc.py").write_text(CALC)
    same = {"old_text": "    return a - b\n", "new_text": "    return a + b\n"}
    script = [{"tool_calls": [call("read_file", path="calc.py")]},
              {"tool_calls": [call("edit_file", path="calc.py", **same, edits=[same, same])]},
              {"content": "Fixed."}]
    result, _, tool_texts, _ = run_script(script, tmp_path)
    assert (tmp_path / "calc.py").read_text() == "def add(a, b):\n    return a + b\n"
    assert tool_texts[1].startswith("Edited calc.py: replaced 1 occurrence")
    assert result.files_changed == ["calc.py"]


def test_an_edits_entry_that_differs_from_the_top_level_edit_is_still_refused(tmp_path: Path) -> None:
    (tmp_path / "calc.py").write_text(CALC)
    script = [{"tool_calls": [call("edit_file", path="calc.py", old_text="    return a - b\n",
                                   new_text="    return a + b\n",
                                   edits=[{"old_text": "def add(a, b):\n", "new_text": "def add(x, y):\n"}])]},
              {"content": "Giving up."}]
    _, _, tool_texts, _ = run_script(script, tmp_path)
    assert "not both" in tool_texts[0]
    assert (tmp_path / "calc.py").read_text() == CALC  # ambiguous: nothing changed


def test_edit_of_an_unread_file_with_invented_text_gets_the_real_lines(tmp_path: Path) -> None:
    (tmp_path / "calc.py").write_text(CALC)
    script = [{"tool_calls": [call("edit_file", path="calc.py", old_text="result = a - b\nreturn result\n",
                                   new_text="result = a + b\nreturn result\n")]},
              {"tool_calls": [call("edit_file", path="calc.py", old_text="    return a - b\n",
                                   new_text="    return a + b\n")]},
              {"content": "Fixed."}]
    result, _, tool_texts, requests = run_script(script, tmp_path)
    refusal = tool_texts[0]
    assert "You had not read calc.py in this session" in refusal
    assert "     1\tdef add(a, b):\n     2\t    return a - b" in refusal  # numbered like read_file
    assert (tmp_path / "calc.py").read_text() == "def add(a, b):\n    return a + b\n"
    # the model saw it: the refusal went back to the engine in the next request
    assert any("You had not read calc.py" in (m.get("content") or "") for m in requests[1]["messages"])


def test_edit_of_a_file_already_read_gets_no_unread_note(tmp_path: Path) -> None:
    (tmp_path / "calc.py").write_text(CALC)
    script = [{"tool_calls": [call("read_file", path="calc.py")]},
              {"tool_calls": [call("edit_file", path="calc.py", old_text="nothing like it\n", new_text="x\n")]},
              {"content": "Stop."}]
    _, _, tool_texts, _ = run_script(script, tmp_path)
    assert "old_text was not found" in tool_texts[1]
    assert "You had not read" not in tool_texts[1]


def test_a_long_file_shows_the_region_near_the_closest_match(tmp_path: Path) -> None:
    lines = [f"value_{i} = {i}" for i in range(1, 201)]
    lines[149] = "def add(a, b): return a - b"
    (tmp_path / "big.py").write_text("\n".join(lines) + "\n")
    script = [{"tool_calls": [call("edit_file", path="big.py", old_text="def add(a, b): return a-b\n",
                                   new_text="def add(a, b): return a + b\n")]},
              {"content": "Stop."}]
    _, _, tool_texts, _ = run_script(script, tmp_path)
    assert "   150\tdef add(a, b): return a - b" in tool_texts[0]
    assert "of 200; read_file shows the rest" in tool_texts[0]
    assert "     1\tvalue_1 = 1" not in tool_texts[0]


def test_a_reply_that_keeps_repeating_itself_is_cut_and_asked_again(tmp_path: Path) -> None:
    (tmp_path / "calc.py").write_text(CALC)
    plan = "I will open calc.py, find the add function and change the minus sign to a plus sign. "
    script = [{"content": "Plan:\n" + plan * 60},   # ~5,400 chars of the same plan, as a 1.5B model did
              {"content": "Nothing to change."}]
    watched = NO_GATE.model_copy(deep=True)
    watched.assists.reply_watch = True   # an assist of the small profile (keel.core.assists): on by name here
    result, events, _, _ = run_script(script, tmp_path, config=watched)
    first = next(e for e in events if e["type"] == "model_call")
    assert first["finish_reason"] == "length"  # handled like a reply cut by max_tokens
    assert len(first["content"]) < 1200        # cut within a few copies, not after all 60
    decisions = [e for e in events if e["type"] == "decision"]
    assert decisions[0]["verdict"] == "continue"  # the loop asked again instead of taking it as an answer
    assert first["cut_reason"] == "repeating"
    assert "kept repeating" in decisions[0]["pushback"]   # told why, not "cut at the output-token limit"
    assert result.steps == 2


def test_a_long_reply_without_repetition_is_not_cut(tmp_path: Path) -> None:
    (tmp_path / "calc.py").write_text(CALC)
    text = " ".join(f"Step {i}: look at function number {i * 7919 % 1000} in module m{i}." for i in range(120))
    result, events, _, _ = run_script([{"content": text}], tmp_path)
    first = next(e for e in events if e["type"] == "model_call")
    assert first["finish_reason"] == "stop"
    assert result.messages[2] == {"role": "assistant", "content": text}  # all of it, uncut


def test_a_repeating_tool_call_argument_is_not_cut(tmp_path: Path) -> None:
    """A file of similar lines is legitimate content: only prose is watched for loops."""
    body = "assert add(1, 1) == 2\n" * 80
    script = [{"tool_calls": [call("write_file", path="test_many.py", content=body)]}, {"content": "Done."}]
    _, events, _, _ = run_script(script, tmp_path)
    first = next(e for e in events if e["type"] == "model_call")
    assert first["finish_reason"] != "length"
    assert (tmp_path / "test_many.py").read_text() == body


def test_script_is_json_serialisable() -> None:  # the scripts above are also usable from the CLI
    json.dumps([{"tool_calls": [call("read_file", path="calc.py")]}])
