"""The reply after a repeated turn is sampled warmer; every other reply keeps the set temperature."""

from __future__ import annotations

from typing import Any

import pytest

from keel.engine.sampling import repeats_itself, temperature_for


def calls(*pairs: tuple[str, str]) -> dict[str, Any]:
    return {"role": "assistant", "content": "",
            "tool_calls": [{"id": f"c{i}", "type": "function", "function": {"name": n, "arguments": a}}
                           for i, (n, a) in enumerate(pairs)]}


EDIT = ("edit_file", '{"path": "a.py", "old_text": "x", "new_text": "x"}')
EDIT_REORDERED = ("edit_file", '{"new_text": "x", "old_text": "x",  "path": "a.py"}')
READ = ("read_file", '{"path": "a.py"}')
TOOL = {"role": "tool", "tool_call_id": "c0", "content": "refused"}
SYSTEM = [{"role": "system", "content": "s"}, {"role": "user", "content": "task"}]


@pytest.mark.parametrize(("history", "repeats"), [
    ([], False),
    ([calls(EDIT), TOOL], False),
    ([calls(EDIT), TOOL, calls(EDIT), TOOL], True),                 # the measured loop
    ([calls(EDIT), TOOL, calls(EDIT_REORDERED), TOOL], True),       # same call, other key order
    ([calls(EDIT), TOOL, calls(READ), TOOL, calls(EDIT), TOOL], True),  # back to a call made before
    ([calls(EDIT), TOOL, calls(READ), TOOL], False),
    ([{"role": "assistant", "content": "Done."}, {"role": "assistant", "content": " Done. "}], True),
    ([{"role": "assistant", "content": ""}, {"role": "assistant", "content": ""}], False),  # empty: its own pushback
])
def test_repeats_itself(history: list[dict[str, Any]], repeats: bool) -> None:
    assert repeats_itself(SYSTEM + history) is repeats


def test_temperature_rises_only_after_a_repeat_and_only_upwards() -> None:
    looped = SYSTEM + [calls(EDIT), TOOL, calls(EDIT), TOOL]
    fresh = SYSTEM + [calls(EDIT), TOOL]
    assert temperature_for(looped, 0.0, 0.7) == 0.7
    assert temperature_for(fresh, 0.0, 0.7) == 0.0
    assert temperature_for(looped, 0.0, 0.0) == 0.0      # 0 turns it off
    assert temperature_for(looped, 0.9, 0.7) == 0.9      # never lower than configured
