"""claim_repair (keel.loop.repair): a claim refused again with nothing changed since the last refused one
makes keel ask for the change itself, through change_file, and the pushback carries the result. Off by
default until measured; these runs switch it on."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest
from conftest import run_small

from keel.config import Config
from keel.loop.repair import repair_target

BUGGY = "def add(a, b):\n    return a - b\n"
WRONG = "def add(a, b):\n    return a * b\n"
FIXED = "def add(a, b):\n    return a + b\n"
TESTS = "from calc import add\n\n\ndef test_add():\n    assert add(2, 3) == 5\n"
TASK = "add() in calc.py gives the wrong sum. Fix it so test_calc.py passes."


def call(name: str, **args: object) -> dict[str, Any]:
    return {"tool_calls": [{"name": name, "arguments": args}]}


def fenced(text: str) -> dict[str, Any]:
    return {"content": f"```python\n{text}```\n"}


def run(tmp_path: Path, repair: bool) -> tuple[Any, list[dict[str, Any]], Path]:
    ws = tmp_path / "ws"
    ws.mkdir()
    (ws / "calc.py").write_text(BUGGY)
    (ws / "test_calc.py").write_text(TESTS)
    claim = call("finish", summary="add() is fixed.")
    script = [call("change_file", path="calc.py", change="Multiply a and b."), fenced(WRONG), fenced(WRONG),
              claim, claim]
    script += [fenced(FIXED), claim] if repair else [claim]
    result, events, _ = run_small(ws, TASK, script, callee_change=False, claim_repair=repair)
    return result, events, ws


def test_a_claim_sent_again_unchanged_gets_keel_s_own_change(tmp_path: Path) -> None:
    result, events, ws = run(tmp_path, repair=True)
    assert (ws / "calc.py").read_text() == FIXED
    assert result.status == "complete"
    pushbacks = [e["pushback"] for e in events if e["type"] == "decision" and e.get("pushback")]
    assert "keel asked for the change itself (change_file on calc.py" in pushbacks[1]
    assert "`python3 -m pytest -q` pass" in pushbacks[1] or "pass. If the task is done" in pushbacks[1]
    acted = [e["detail"] for e in events if e["type"] == "assist" and e["name"] == "claim_repair"]
    assert acted == ["calc.py: the claim came again with nothing changed"]


def test_off_by_default_the_claims_run_into_the_verification_limit(tmp_path: Path) -> None:
    result, events, ws = run(tmp_path, repair=False)
    assert (ws / "calc.py").read_text() == WRONG
    assert result.status != "complete" and result.stop_reason == "limit:verification"
    assert not [e for e in events if e["type"] == "assist" and e["name"] == "claim_repair"]
    assert "claim_repair" not in Config().assists.active("small").on


@pytest.mark.parametrize(("changed", "target"), [
    (["calc.py"], "calc.py"),
    (["calc.py", "util.py"], "util.py"),                   # the last code file the run changed
    (["calc.py", "test_calc.py"], "calc.py"),              # never a test
    (["calc.py", "NOTES.md"], "calc.py"),                  # code only
    (["test_calc.py"], None),
    ([], None),                                            # nothing started: keel does not guess where
])
def test_which_file_keel_asks_the_change_in(changed: list[str], target: str | None) -> None:
    assert repair_target(changed) == target
