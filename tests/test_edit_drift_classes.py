"""edit_file forgives two more kinds of drift — one blank line more or fewer than the file, and
no-break/odd Unicode spaces where the file has plain ones — uniquely or not at all; and it reads
undecodable bytes exactly as read_file shows them."""

from __future__ import annotations

import json
from pathlib import Path

from keel.engine.types import ToolCall
from keel.tools.base import ToolContext
from keel.tools.catalog import default_tools
from keel.tools.edit_match import find_edit
from keel.tools.registry import ToolRegistry

FILE = "def f():\n    a = 1\n\n    b = 2\n    c = 3\n\n\ndef g():\n    return 0\n"


def apply(content: str, old: str, new: str) -> str | None:
    from keel.tools.edit_match import apply_replacements

    result = find_edit(content, old, new)
    return apply_replacements(content, result.replacements) if result.ok else None


def test_one_blank_line_fewer_than_the_file() -> None:
    result = find_edit(FILE, "    a = 1\n    b = 2\n", "    a = 1\n    b = 20\n")
    assert result.ok and result.tier == "blank_lines"
    assert apply(FILE, "    a = 1\n    b = 2\n", "    a = 1\n    b = 20\n") == FILE.replace("b = 2", "b = 20")


def test_one_blank_line_more_than_the_file() -> None:
    old, new = "    b = 2\n\n    c = 3\n", "    b = 2\n\n    c = 30\n"
    assert find_edit(FILE, old, new).tier == "blank_lines"
    assert apply(FILE, old, new) == FILE.replace("c = 3", "c = 30")


def test_an_added_line_lands_beside_the_edit_not_across_the_blank() -> None:
    old, new = "    a = 1\n    b = 2\n", "    a = 1\n    x = 9\n    b = 2\n"
    assert apply(FILE, old, new) == FILE.replace("    a = 1\n\n", "    a = 1\n    x = 9\n\n")


def test_blank_line_drift_that_fits_two_places_is_refused() -> None:
    content = "k = 1\n\nm = 2\nq = 0\nk = 1\n\nm = 2\n"
    refused = find_edit(content, "k = 1\nm = 2\n", "k = 1\nm = 3\n")
    assert not refused.ok and set(refused.candidates) == {1, 5} and "Nothing was changed" in refused.error


def test_odd_unicode_spaces_match_plain_ones_and_are_never_written() -> None:
    old = "    a\u00a0=\u00a01\n\n\u00a0\u00a0\u00a0\u00a0b\u2009= 2\n"
    new = "    a\u00a0=\u00a01\n\n\u00a0\u00a0\u00a0\u00a0b\u2009= 5\n"
    result = find_edit(FILE, old, new)
    assert result.ok and result.tier == "unicode_spaces" and any("Unicode spaces" in n for n in result.notes)
    assert apply(FILE, old, new) == FILE.replace("b = 2", "b = 5")


def test_a_file_that_holds_no_break_spaces_keeps_them() -> None:
    content = "label = 'a\u00a0b'\nother = 1\n"
    old, new = "label = 'a\u00a0b'\nother = 1\n", "label = 'a\u00a0b'\nother = 2\n"
    assert apply(content, old, new) == "label = 'a\u00a0b'\nother = 2\n"


def test_a_line_copied_from_read_file_matches_in_edit_file_and_keeps_its_bytes(tmp_path: Path) -> None:
    data = b"name = 'caf\xc3\xa9'\nbad = '\xe9t\xe9'\nx = 2\n"      # UTF-8 with stray latin-1 bytes
    (tmp_path / "m.py").write_bytes(data)
    registry, ctx = ToolRegistry(default_tools()), ToolContext(workspace=tmp_path)
    shown = registry.execute(ToolCall("1", "read_file", json.dumps({"path": "m.py"})), ctx).output
    line = next(x.split("\t", 1)[1] for x in shown.splitlines() if "bad" in x)
    assert line == "bad = '\u00e9t\u00e9'" and "not valid UTF-8" in shown
    edit = registry.execute(ToolCall("2", "edit_file", json.dumps(
        {"path": "m.py", "old_text": f"{line}\nx = 2\n", "new_text": f"{line}\nx = 3\n"})), ctx)
    assert edit.ok, edit.output
    assert (tmp_path / "m.py").read_bytes() == data.replace(b"x = 2", b"x = 3")
