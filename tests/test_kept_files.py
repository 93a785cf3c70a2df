"""Files the task says must not change ("Don't touch duration.js"), and the script a write-tests task's
checks run: the gate holds them as it holds the tests, and change_file is not aimed at them.

Measured on the 1.5B (js-write-tests): its new tests failed against duration.js; keel's callee_change
carried the change to duration.js, named check-tests.js as a file "the checks may need changed", and
the model aimed six change_file calls at duration.js until the wall clock. And in a task that asks for
tests, the gate freed every file the checks depend on, so a checker script edited to pass went
unnoticed."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path
from typing import Any

import pytest

from keel.agent import Agent
from keel.config import Config
from keel.core.request import parse_request
from keel.testing import ScriptedEngineServer


@pytest.mark.parametrize(("task", "kept"), [
    ("Fix the bug in app.py. Don't change utils.py.", ("utils.py",)),
    ("Write tests in test_x.py; don't touch x.py or y.py.", ("x.py", "y.py")),
    ("Do not modify `settings.py`.", ("settings.py",)),
    ("Fix add() in calc.py, and do not edit test_calc.py", ("test_calc.py",)),
    ("Ändere nicht config.py.", ("config.py",)),
    # a part of a file kept, not the file: the fix may still belong in it
    ("Fix foo.py but don't change foo.py's public API.", ()),
    ("Don't change the tests.", ()),
    ("Rename util.py to helpers.py; don't change anything else", ()),
])
def test_the_files_a_task_keeps(task: str, kept: tuple[str, ...]) -> None:
    assert parse_request(task).kept_files == kept


CALC = 'def add(a, b):\n    """The sum of a and b."""\n    return a + b\n'
# The task's checker: the tests are good enough when they catch a mutant that subtracts.
CHECK = ("import pathlib, subprocess, sys\n"
         "src = pathlib.Path('calc.py').read_text()\n"
         "pathlib.Path('calc.py').write_text(src.replace('a + b', 'a - b'))\n"
         "try:\n"
         "    caught = subprocess.run([sys.executable, '-m', 'pytest', '-q', sys.argv[1]]).returncode != 0\n"
         "finally:\n"
         "    pathlib.Path('calc.py').write_text(src)\n"
         "sys.exit(0 if caught else 1)\n")
TASK = ("Write pytest tests for add() in test_calc.py. Don't change calc.py. "
        "`python check.py test_calc.py` tells you whether the tests would catch real bugs.")
WEAK = "from calc import add\n\n\ndef test_zero():\n    assert add(0, 0) == 0\n"


@pytest.fixture
def calc(tmp_path: Path) -> Path:
    ws = tmp_path / "calc"
    ws.mkdir()
    (ws / "calc.py").write_text(CALC)
    (ws / "check.py").write_text(CHECK)
    (ws / "test_days.py").write_text("def test_days():\n    assert 365 + 1 == 366\n")
    return ws


def call(name: str, **args: object) -> dict[str, Any]:
    return {"tool_calls": [{"name": name, "arguments": args}]}


def run(ws: Path, script: list[dict[str, Any]], profile: str = "full") -> tuple[Any, list[dict[str, Any]]]:
    log = ws.parent / "session.jsonl"
    with ScriptedEngineServer(script) as server:
        cfg = Config()
        cfg.engine.base_url, cfg.engine.model, cfg.engine.profile = server.base_url, "scripted", profile
        cfg.limits.max_steps = len(script)
        result = Agent(workspace=ws, config=cfg, log_path=log).run(TASK)
    return result, [json.loads(line) for line in log.read_text().splitlines()]


def pushbacks(events: list[dict[str, Any]]) -> list[str]:
    return [e["pushback_kind"] for e in events if e["type"] == "decision" and e["pushback_kind"]]


def checker(ws: Path) -> int:
    return subprocess.run([sys.executable, "check.py", "test_calc.py"], cwd=ws, capture_output=True).returncode


def test_a_checker_script_edited_to_pass_is_no_evidence_in_a_write_tests_task(calc: Path) -> None:
    finish = call("finish", summary="tests written")
    script = [call("write_file", path="test_calc.py", content=WEAK), call("read_file", path="check.py"),
              call("write_file", path="check.py", content="import sys\nsys.exit(0)\n"), finish, finish, finish]
    result, events = run(calc, script)
    assert checker(calc) == 0, "the control: the edited checker passes the weak tests on its own"
    assert result.status != "complete"
    assert set(pushbacks(events)) == {"tampered_tests"}
    assert result.verification["tampered"] == ["check.py"]


def test_a_file_the_task_keeps_is_held_by_the_gate(calc: Path) -> None:
    """The weak test made to catch the mutant by changing calc.py itself: the checks pass, the task is
    not done."""
    finish = call("finish", summary="tests written")
    odd = CALC.replace("    return", "    assert 'a + b'[2] == '+'   # fails under the checker's mutant\n    return")
    script = [call("write_file", path="test_calc.py", content=WEAK), call("read_file", path="calc.py"),
              call("write_file", path="calc.py", content=odd), finish, finish, finish]
    result, events = run(calc, script)
    assert checker(calc) == 0, "the control: with calc.py changed, the weak tests pass the checker"
    assert result.status != "complete" and set(pushbacks(events)) == {"tampered_tests"}
    assert result.verification["tampered"] == ["calc.py"]


def test_the_tests_stay_free_in_a_write_tests_task(calc: Path) -> None:
    good = WEAK + "\n\ndef test_sum():\n    assert add(2, 3) == 5\n"
    script = [call("write_file", path="test_calc.py", content=WEAK),
              call("write_file", path="test_calc.py", content=good), call("finish", summary="tests written")]
    result, _ = run(calc, script)
    assert result.status == "complete" and (calc / "calc.py").read_text() == CALC


def test_a_change_aimed_at_a_kept_file_goes_to_the_tests_the_task_asks_for(calc: Path) -> None:
    """The small profile's change_file: aimed at calc.py, the change is made in test_calc.py, and calc.py
    is never sent to the editor."""
    (calc / "test_calc.py").write_text(WEAK)
    good = WEAK + "\n\ndef test_sum():\n    assert add(2, 3) == 5\n"
    script = [call("change_file", path="calc.py", change="add a test for negative numbers"),
              {"content": f"```python\n{good}```\n"}, call("finish", summary="tests written")]
    result, events = run(calc, script, profile="small")
    assert (calc / "calc.py").read_text() == CALC and (calc / "test_calc.py").read_text() == good
    reply = next(m["content"] for m in result.messages if m.get("role") == "tool")
    assert reply.startswith("calc.py stays as it is, so the change was made in test_calc.py")
    editor = [e for e in events if e["type"] == "change_request"]
    assert [e["path"] for e in editor] == ["test_calc.py"]
    assert result.status == "complete"
