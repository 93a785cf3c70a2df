"""The event schema three ways kept in step: keel.core.event_types, docs/events.md, and a real run's log."""

from __future__ import annotations

import re
from pathlib import Path

from conftest import call

from keel.core.event_types import EVENT_TYPES, fields_of, problems
from keel.testing.server import ScriptedEngineServer

DOC = Path(__file__).resolve().parent.parent / "docs" / "events.md"


def _top_level(text: str) -> str:
    """``text`` without what is inside (), {} and []: nested fields and explanations."""
    out, depth = [], 0
    for ch in text:
        depth += ch in "({["
        if depth == 0:
            out.append(ch)
        depth -= ch in ")}]" and depth > 0
    return "".join(out)


def documented() -> dict[str, set[str]]:
    """type -> fields, from the table under "## Event types"."""
    table = DOC.read_text(encoding="utf-8").split("## Event types", 1)[1].split("\n## ", 1)[0]
    found: dict[str, set[str]] = {}
    for line in table.splitlines():
        cells = [c.strip() for c in line.strip().strip("|").split("|")]
        if len(cells) != 3 or not cells[0].startswith("`"):
            continue
        fields = set(re.findall(r"`([a-z_]+)`", _top_level(cells[2])))
        for kind in re.findall(r"`([a-z_]+)`", cells[0]):
            found[kind] = fields
    return found


def test_every_documented_kind_has_a_typed_dict_with_the_same_fields_and_back():
    docs = documented()
    assert len(docs) >= 20
    assert sorted(docs) == sorted(EVENT_TYPES)
    for kind, fields in docs.items():
        assert fields_of(kind) == fields, kind


def test_problems_names_a_missing_field_an_unknown_one_and_a_wrong_type():
    ok = {"type": "plan_saved", "schema": 1, "ts": 1.0, "session_id": "s", "step": 2, "path": "PLAN.md"}
    assert problems(ok) == []
    assert problems({**ok, "path": 3}) == ["plan_saved: 'path' is int, not <class 'str'>"]
    assert problems({k: v for k, v in ok.items() if k != "path"}) == ["plan_saved: missing field 'path'"]
    assert problems({**ok, "extra": 1}) == ["plan_saved: unknown field 'extra'"]
    assert problems({**ok, "type": "no_such"}) == ["unknown event type 'no_such'"]


def test_every_event_of_a_real_run_fits_its_typed_dict(calc_repo, run_keel):
    script = [
        {"content": "Let me look.", "tool_calls": [call("read_file", path="calc.py")]},
        {"tool_calls": [call("edit_file", path="calc.py", old_text="return a - b", new_text="return a + b")]},
        {"tool_calls": [call("run_shell", command="python -m pytest -q && touch made.txt")]},
        {"tool_calls": [call("read_file", path="nope.py", bogus=1)]},
        {"tool_calls": [call("finish", summary="Fixed add(); pytest passes.")]},
    ]
    with ScriptedEngineServer(script) as server:
        r = run_keel("run", "fix the failing test", "--cwd", str(calc_repo), "--base-url", server.base_url,
                     "--model", "scripted", "--output-format", "stream-json")
    assert r.code == 0, r.stderr
    events = r.events()
    kinds = {e["type"] for e in events}
    assert {"session_start", "context_window", "model_call", "tool_call", "workspace_change", "decision",
            "verification_plan", "verification", "changes", "stop"} <= kinds
    assert [p for e in events for p in problems(e)] == []
