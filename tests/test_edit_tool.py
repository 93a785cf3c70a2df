"""edit_file end to end on real files: arguments as the model sends them, bytes on disk, the jail."""

from __future__ import annotations

import json
import os
import re
from pathlib import Path

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from keel.engine.types import ToolCall
from keel.tools.base import ToolContext, ToolResult
from keel.tools.edit import EDIT_FILE
from keel.tools.registry import ToolRegistry
from keel.tools.session import FileSession
from keel.tools.textfile import TextFile

REGISTRY = ToolRegistry([EDIT_FILE])
PY = "def area(w, h):\n    return w + h\n\n\ndef perimeter(w, h):\n    return 2 * (w + h)\n"


def call(ws: Path, session: FileSession | None = None, **arguments) -> ToolResult:
    ctx = ToolContext(workspace=ws, session=session)
    return REGISTRY.execute(ToolCall(id="c1", name="edit_file", arguments=json.dumps(arguments)), ctx)


@pytest.fixture
def ws(tmp_path: Path) -> Path:
    root = tmp_path / "ws"
    root.mkdir()
    (root / "geo.py").write_text(PY)
    return root


def test_exact_edit_writes_the_file_and_shows_a_numbered_snippet(ws: Path):
    res = call(ws, path="geo.py", old_text="    return w + h\n", new_text="    return w * h\n")
    assert res.ok, res.output
    assert (ws / "geo.py").read_text() == PY.replace("w + h\n", "w * h\n", 1)
    assert res.files_changed == ["geo.py"]
    assert "matched by: exact" in res.output
    # read_file's format: line number right-aligned in 6 columns, a TAB, the text; ±3 lines around
    assert "     1\tdef area(w, h):\n     2\t    return w * h\n     3\t\n     4\t\n     5\tdef perimeter" in res.output
    assert "     6\t" not in res.output


def test_session_snapshot_and_record(ws: Path):
    session = FileSession()
    before = (ws / "geo.py").read_bytes()
    assert call(ws, session, path="geo.py", old_text="w + h\n", new_text="w * h\n").ok
    real = (ws / "geo.py").resolve()
    assert session.snapshots[real] == before
    assert not session.changed_since_seen(real)
    session.restore(real)
    assert (ws / "geo.py").read_bytes() == before


def test_ambiguous_edit_lists_candidates_and_leaves_the_file(ws: Path):
    (ws / "dup.py").write_text("x = 1\nprint(x)\n\nx = 1\nprint(x)\n")
    before = (ws / "dup.py").read_bytes()
    res = call(ws, path="dup.py", old_text="x = 1\nprint(x)\n", new_text="x = 2\nprint(x)\n", line_hint=4)
    assert not res.ok
    assert "lines 1, 4" in res.output and res.meta["candidates"] == [1, 4]
    assert (ws / "dup.py").read_bytes() == before


def test_not_found_hint_shows_the_region_and_whitespace(ws: Path):
    res = call(ws, path="geo.py", old_text="def perimeter(w, h):\n\treturn 2 * (w - h)\n", new_text="pass\n")
    assert not res.ok
    assert "lines 5-6" in res.output and res.meta["closest"] == [5, 6]
    assert "→return·2·*·(w·-·h)" in res.output and "····return·2·*·(w·+·h)" in res.output
    assert (ws / "geo.py").read_text() == PY


def test_already_applied_edit_is_reported(ws: Path):
    res = call(ws, path="geo.py", old_text="    return w - h\n", new_text="    return w + h\n")
    assert not res.ok and "already" in res.output and res.meta["already_applied_at"] == 2


def test_crlf_file_keeps_crlf_and_untouched_bytes(ws: Path):
    data = PY.replace("\n", "\r\n").encode()
    (ws / "win.py").write_bytes(data)
    res = call(ws, path="win.py", old_text="def area(w, h):\n    return w + h\n",
               new_text="def area(w, h):\n    # product\n    return w * h\n")
    assert res.ok, res.output
    out = (ws / "win.py").read_bytes()
    assert out == data.replace(b"    return w + h\r\n", b"    # product\r\n    return w * h\r\n", 1)
    assert b"\n" not in out.replace(b"\r\n", b"")


def test_mixed_line_endings_outside_the_edit_are_kept(ws: Path):
    data = b"a = 1\r\nb = 2\nc = 3\r\nd = 4\r\n"
    (ws / "mixed.py").write_bytes(data)
    assert call(ws, path="mixed.py", old_text="c = 3\n", new_text="c = 30\n").ok
    assert (ws / "mixed.py").read_bytes() == b"a = 1\r\nb = 2\nc = 30\r\nd = 4\r\n"


def test_bom_and_utf16_files_keep_their_encoding(ws: Path):
    (ws / "bom.py").write_bytes(b"\xef\xbb\xbf" + "s = 'caf\u00e9'\n".encode())
    assert call(ws, path="bom.py", old_text="s = 'caf\u00e9'", new_text="s = 'th\u00e9'").ok
    assert (ws / "bom.py").read_bytes() == b"\xef\xbb\xbf" + "s = 'th\u00e9'\n".encode()

    (ws / "u16.txt").write_bytes("\ufeffline one\r\nline two\r\n".encode("utf-16-le"))
    assert call(ws, path="u16.txt", old_text="line two\n", new_text="line 2\n").ok
    assert (ws / "u16.txt").read_bytes() == "\ufeffline one\r\nline 2\r\n".encode("utf-16-le")


def test_latin1_file_is_edited_as_latin1_and_refuses_what_it_cannot_store(ws: Path):
    data = "# r\u00e9sum\u00e9\nname = 'Jos\u00e9'\n".encode("latin-1")
    (ws / "old.py").write_bytes(data)
    res = call(ws, path="old.py", old_text="name = 'Jos\u00e9'", new_text="name = 'Ren\u00e9'")
    assert res.ok and "latin-1" in res.output
    assert (ws / "old.py").read_bytes() == "# r\u00e9sum\u00e9\nname = 'Ren\u00e9'\n".encode("latin-1")
    res = call(ws, path="old.py", old_text="name = 'Ren\u00e9'", new_text="name = '\u20ac'")
    assert not res.ok and "latin-1" in res.output
    assert (ws / "old.py").read_bytes() == "# r\u00e9sum\u00e9\nname = 'Ren\u00e9'\n".encode("latin-1")


def test_tab_indented_file_edited_with_space_indented_text(ws: Path):
    (ws / "Makefile").write_text("all:\n\tcc -o app main.c\n\tstrip app\n")
    res = call(ws, path="Makefile", old_text="    cc -o app main.c\n", new_text="    cc -O2 -o app main.c\n")
    assert res.ok and "whitespace" in res.output
    assert (ws / "Makefile").read_text() == "all:\n\tcc -O2 -o app main.c\n\tstrip app\n"


def test_final_newline_state_is_kept(ws: Path):
    (ws / "nofinal.txt").write_bytes(b"alpha\nbeta")
    assert call(ws, path="nofinal.txt", old_text="beta", new_text="gamma").ok
    assert (ws / "nofinal.txt").read_bytes() == b"alpha\ngamma"
    (ws / "final.txt").write_bytes(b"alpha\nbeta\n")
    assert call(ws, path="final.txt", old_text="beta\n", new_text="gamma").ok
    assert (ws / "final.txt").read_bytes() == b"alpha\ngamma\n"


def test_multi_edit_is_atomic(ws: Path):
    edits = [{"old_text": "    return w + h\n", "new_text": "    return w * h\n"},
             {"old_text": "    return 3 * (w + h)\n", "new_text": "    return 2 * w + 2 * h\n"}]
    res = call(ws, path="geo.py", edits=edits)
    assert not res.ok
    assert "edit 2 of 2 failed" in res.output and "NO edit was applied" in res.output
    assert (ws / "geo.py").read_text() == PY

    edits[1]["old_text"] = "    return 2 * (w + h)\n"
    res = call(ws, path="geo.py", edits=json.dumps(edits))   # a JSON string is accepted too
    assert res.ok, res.output
    assert (ws / "geo.py").read_text() == PY.replace("w + h\n", "w * h\n", 1).replace("2 * (w + h)", "2 * w + 2 * h")
    assert "applied 2 edits" in res.output


def test_replace_all_reports_the_count(ws: Path):
    res = call(ws, path="geo.py", old_text="(w, h)", new_text="(width, height)", replace_all=True)
    assert res.ok and "replaced 2 occurrences" in res.output and res.meta["replacements"] == 2


@pytest.mark.parametrize("arguments, message", [
    # an edits entry that differs from the top-level edit is ambiguous (an identical one is accepted:
    # tests/test_local_cotuning.py)
    ({"path": "geo.py", "old_text": "a", "new_text": "b", "edits": [{"old_text": "a", "new_text": "c"}]},
     "not both"),
    ({"path": "geo.py", "old_text": "w + h", "new_text": "w + h"}, "identical"),
    ({"path": "geo.py", "old_text": "    return w + h\n"}, "new_text required"),
    ({"path": "geo.py", "old_text": "", "new_text": "x"}, "old_text is empty"),
    ({"path": "geo.py", "edits": []}, "edits is empty"),
    ({"path": "geo.py", "old_text": "a", "new_text": "b", "bogus": 1}, "not an argument"),
])
def test_invalid_arguments_are_explained_and_change_nothing(ws: Path, arguments, message):
    res = call(ws, **arguments)
    assert not res.ok and message in res.output
    assert (ws / "geo.py").read_text() == PY


def test_missing_file_suggests_write_file(ws: Path):
    res = call(ws, path="nope.py", old_text="a", new_text="b")
    assert not res.ok and "write_file" in res.output


def test_paths_outside_the_workspace_and_git_internals_are_refused(ws: Path, tmp_path: Path):
    outside = tmp_path / "outside.py"
    outside.write_text("secret = 1\n")
    (ws / "link.py").symlink_to(outside)
    (ws / ".git").mkdir()
    (ws / ".git" / "config").write_text("[core]\n")
    for path in ("../outside.py", str(outside), "link.py"):
        res = call(ws, path=path, old_text="secret = 1", new_text="secret = 2")
        assert not res.ok and "outside the workspace" in res.output
    res = call(ws, path=".git/config", old_text="[core]", new_text="[x]")
    assert not res.ok and ".git" in res.output
    assert outside.read_text() == "secret = 1\n" and (ws / ".git" / "config").read_text() == "[core]\n"


def test_binary_file_is_refused(ws: Path):
    (ws / "blob.bin").write_bytes(b"\x00\x01abc\x00")
    res = call(ws, path="blob.bin", old_text="abc", new_text="xyz")
    assert not res.ok and "binary" in res.output


def test_file_mode_is_kept_and_no_temp_file_is_left(ws: Path):
    os.chmod(ws / "geo.py", 0o640)
    assert call(ws, path="geo.py", old_text="w + h\n", new_text="w * h\n").ok
    assert (ws / "geo.py").stat().st_mode & 0o777 == 0o640
    assert sorted(p.name for p in ws.iterdir()) == ["geo.py"]


# ---- byte faithfulness of textfile, as a property -----------------------------------------------------

_TEXT = st.lists(st.sampled_from(["a", "b", " ", "\t", "\u00e9", "\u20ac", "\n", "\r\n", "\r"]),
                 max_size=40).map("".join)


@settings(max_examples=300, deadline=None)
@given(_TEXT, st.sampled_from([b"", b"\xef\xbb\xbf"]), st.data())
def test_bytes_outside_the_edited_span_are_identical(text, bom, data):
    raw = bom + text.encode("utf-8")
    tf = TextFile.from_bytes(raw)
    assert tf.to_bytes() == raw                               # decoding then encoding is exact
    start = data.draw(st.integers(0, len(tf.text)))
    end = data.draw(st.integers(start, len(tf.text)))
    new = data.draw(st.text(st.sampled_from("xy\n"), max_size=8))
    out = tf.with_replacements([(start, end, new)]).to_bytes()
    head = bom + tf.raw[: tf.raw_offset(start)].encode()
    tail = tf.raw[tf.raw_offset(end):].encode()
    assert out.startswith(head)
    assert out.endswith(tail)
    middle = out[len(head): len(out) - len(tail)]
    inserted = new.replace("\n", tf.newline).encode()
    # the only extra byte allowed: the final newline the file had, when the edit removed it
    assert middle == inserted or (not tail and tf.final_newline and middle == inserted + tf.newline.encode())


def test_snippet_lines_match_read_file_format(ws: Path):
    (ws / "long.py").write_text("".join(f"line{i}\n" for i in range(1, 30)))
    res = call(ws, path="long.py", old_text="line15\n", new_text="LINE15\n")
    numbered = [ln for ln in res.output.splitlines() if re.match(r"^ *\d+\t", ln)]
    assert numbered == [f"{n:>6}\t{'LINE15' if n == 15 else f'line{n}'}" for n in range(12, 19)]
