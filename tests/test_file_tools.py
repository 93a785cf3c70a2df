"""list_dir, read_file and write_file on real files in temp workspaces."""

from __future__ import annotations

import os
import subprocess
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import pytest

from keel.tools.base import Tool, ToolContext, ToolResult
from keel.tools.files import LIST_DIR, READ_FILE, WRITE_FILE
from keel.tools.session import FileSession


@pytest.fixture
def ws(tmp_path: Path) -> Path:
    root = tmp_path / "ws"
    root.mkdir()
    subprocess.run(["git", "init", "-q", str(root)], check=True)
    return root


@pytest.fixture
def ctx(ws: Path) -> ToolContext:
    return ToolContext(workspace=ws, session=FileSession())


def run(tool: Tool, ctx: ToolContext, **args: Any) -> ToolResult:
    return tool.execute(tool.spec.args(**args), ctx)


def body_lines(result: ToolResult) -> list[str]:
    """The numbered lines of a read_file result (header and notices dropped)."""
    return [line for line in result.output.split("\n")[1:] if not line.startswith("... truncated")]


# --- list_dir ----------------------------------------------------------------------------------

def test_list_dir_shows_a_sorted_tree_with_sizes_and_depth(ws: Path, ctx: ToolContext) -> None:
    (ws / "src" / "pkg" / "deep").mkdir(parents=True)
    (ws / "src" / "pkg" / "deep" / "hidden_by_depth.py").write_text("x\n")
    (ws / "src" / "pkg" / "mod.py").write_text("y\n")
    (ws / "src" / "main.py").write_text("z" * 1536)
    (ws / "README.md").write_text("hi\n")
    (ws / "zdir").mkdir()
    out = run(LIST_DIR, ctx).output.splitlines()
    assert out[1:] == ["  src/", "    pkg/ (2 entries)", "    main.py (1.5 KB)", "  zdir/", "  README.md (3 B)",
                       "1 entry ignored (.gitignore, build/cache dirs): .git/"]
    sub = run(LIST_DIR, ctx, path="src").output.splitlines()
    assert sub == ["src/ (depth 2):", "  pkg/", "    deep/ (1 entry)", "    mod.py (2 B)", "  main.py (1.5 KB)"]
    assert "      hidden_by_depth.py (2 B)" in run(LIST_DIR, ctx, path="src", depth=3).output


def test_list_dir_honours_gitignore_and_always_skipped_dirs(ws: Path, ctx: ToolContext) -> None:
    (ws / ".gitignore").write_text("*.log\nsecret_dir/\n")
    for d in ("node_modules/lib", ".venv/bin", "build", "secret_dir", "pkg.egg-info", "keep"):
        (ws / d).mkdir(parents=True)
    (ws / "debug.log").write_text("noise\n")
    (ws / "keep" / "app.log").write_text("noise\n")
    (ws / "keep" / "app.py").write_text("ok\n")
    result = run(LIST_DIR, ctx)
    shown = result.output.splitlines()
    assert "  keep/" in shown and "    app.py (3 B)" in shown
    for name in ("node_modules", ".venv", "build/", "secret_dir", "egg-info/", "debug.log", "app.log"):
        assert not any(name in line for line in shown[:-1]), name
    assert shown[-1].startswith("8 entries ignored")
    assert "node_modules/" in shown[-1] and "debug.log" in shown[-1]


def test_list_dir_caps_entries_breadth_first(ws: Path, ctx: ToolContext) -> None:
    (ws / "a_dir").mkdir()
    for i in range(30):
        (ws / "a_dir" / f"f{i:02}.txt").write_text("x")
    for i in range(20):
        (ws / f"top{i:02}.txt").write_text("x")
    result = run(LIST_DIR, ctx, max_entries=25)
    lines = result.output.splitlines()
    # All 21 top-level entries come before any deeper one; then 4 of a_dir's 30 files fit.
    assert sum(1 for line in lines if line.startswith("  top")) == 20
    assert sum(1 for line in lines if line.startswith("    f")) == 4
    assert "... 26 more entries not shown; list a subdirectory or raise max_entries." in lines


def test_list_dir_output_stays_under_the_result_cap(ws: Path, ctx: ToolContext) -> None:
    for i in range(1500):
        (ws / f"a_file_with_a_rather_long_descriptive_name_{i:05}.txt").write_text("x")
    result = run(LIST_DIR, ctx, max_entries=5000)
    assert len(result.output) < 38_000
    assert result.output.splitlines()[-2].endswith("entries to fit the output limit; list a subdirectory or lower depth.")
    assert result.output.splitlines()[-1] == "1 entry ignored (.gitignore, build/cache dirs): .git/"


def test_list_dir_errors_are_clear(ws: Path, ctx: ToolContext) -> None:
    (ws / "file.txt").write_text("x")
    assert "is a file" in run(LIST_DIR, ctx, path="file.txt").output
    assert not run(LIST_DIR, ctx, path="nope").ok
    assert "outside the workspace" in run(LIST_DIR, ctx, path="..").output


# --- read_file ---------------------------------------------------------------------------------

def test_read_file_keeps_tabs_and_trailing_spaces_exactly(ws: Path, ctx: ToolContext) -> None:
    lines = ["def f():", "\treturn 1   ", "    x = 'a\tb'  \t", "", "last  "]
    (ws / "code.py").write_text("\n".join(lines) + "\n")
    result = run(READ_FILE, ctx, path="code.py")
    assert result.output.splitlines()[0] == "File: code.py (5 lines); showing lines 1-5."
    shown = body_lines(result)
    assert [row.split("\t", 1)[1] for row in shown] == lines
    assert [row.split("\t", 1)[0] for row in shown] == [f"{n:>6}" for n in range(1, 6)]


def test_read_file_names_crlf_instead_of_showing_it(ws: Path, ctx: ToolContext) -> None:
    (ws / "win.txt").write_bytes(b"one \r\ntwo\r\n")
    result = run(READ_FILE, ctx, path="win.txt")
    assert "uses CRLF line endings" in result.output.splitlines()[0]
    assert "\r" not in result.output
    assert [row.split("\t", 1)[1] for row in body_lines(result)] == ["one ", "two"]


def test_read_file_offset_and_limit(ws: Path, ctx: ToolContext) -> None:
    (ws / "n.txt").write_text("".join(f"line {i}\n" for i in range(1, 51)))
    result = run(READ_FILE, ctx, path="n.txt", offset=10, limit=5)
    assert result.output.splitlines()[0] == "File: n.txt (50 lines); showing lines 10-14."
    assert [row.split("\t", 1)[1] for row in body_lines(result)] == [f"line {i}" for i in range(10, 15)]
    assert result.output.splitlines()[-1] == "... truncated: showing lines 10-14 of 50. Read more with offset=15"
    past = run(READ_FILE, ctx, path="n.txt", offset=51)
    assert not past.ok and "offset 51 is past the end of n.txt, which has 50 lines" in past.output


def test_read_file_default_limit_truncates_with_the_next_offset(ws: Path, ctx: ToolContext) -> None:
    (ws / "long.txt").write_text("".join(f"{i}\n" for i in range(1, 2501)))
    result = run(READ_FILE, ctx, path="long.txt")
    assert result.output.splitlines()[-1] == "... truncated: showing lines 1-2000 of 2500. Read more with offset=2001"
    rest = run(READ_FILE, ctx, path="long.txt", offset=2001)
    assert body_lines(rest)[-1] == "  2500\t2500" and "truncated" not in rest.output


def test_read_file_byte_cap_truncates_with_the_right_offset(ws: Path, ctx: ToolContext) -> None:
    (ws / "wide.txt").write_text("".join(f"{i:04} " + "x" * 95 + "\n" for i in range(1, 1001)))
    result = run(READ_FILE, ctx, path="wide.txt")
    shown = body_lines(result)
    last = int(shown[-1].split("\t")[0])
    assert 300 < last < 1000 and len(result.output.encode()) < 40_000
    assert result.output.splitlines()[-1] == f"... truncated: showing lines 1-{last} of 1000. Read more with offset={last + 1}"
    nxt = run(READ_FILE, ctx, path="wide.txt", offset=last + 1)
    assert body_lines(nxt)[0].split("\t")[1].startswith(f"{last + 1:04} ")


def test_read_file_cuts_very_long_lines_with_a_marker(ws: Path, ctx: ToolContext) -> None:
    (ws / "min.js").write_text("a" * 5000 + "\nshort\n")
    rows = body_lines(run(READ_FILE, ctx, path="min.js"))
    assert rows[0] == "     1\t" + "a" * 2000 + "… [line cut: 5000 chars]"
    assert rows[1] == "     2\tshort"


def test_read_file_refuses_binary_files_naming_size_and_type(ws: Path, ctx: ToolContext) -> None:
    (ws / "blob.bin").write_bytes(b"abc\x00def" * 200)
    (ws / "logo.png").write_bytes(b"\x89PNG\r\n\x1a\n" + b"\x00" * 100)
    (ws / "image.dat").write_bytes(b"\x89PNG\r\n\x1a\n\x00\x00")
    blob = run(READ_FILE, ctx, path="blob.bin")
    assert not blob.ok and "binary file (binary data, 1.4 KB)" in blob.output
    assert "binary file (image, 108 B)" in run(READ_FILE, ctx, path="logo.png").output
    assert "PNG image" in run(READ_FILE, ctx, path="image.dat").output


def test_read_file_decodes_undecodable_bytes_as_edit_file_does_and_says_so(ws: Path, ctx: ToolContext) -> None:
    (ws / "latin.txt").write_bytes(b"caf\xe9 ok\nfine\n")
    result = run(READ_FILE, ctx, path="latin.txt")
    assert "not valid UTF-8; it was read as latin-1" in result.output.splitlines()[0]
    assert body_lines(result)[0] == "     1\tcaf\u00e9 ok"


def test_read_file_reports_bom_missing_final_newline_and_empty_files(ws: Path, ctx: ToolContext) -> None:
    (ws / "bom.txt").write_bytes(b"\xef\xbb\xbfhello\nend")
    result = run(READ_FILE, ctx, path="bom.txt")
    assert "byte-order mark" in result.output and "no newline at the end" in result.output
    assert body_lines(result) == ["     1\thello", "     2\tend"]
    (ws / "empty.txt").write_text("")
    assert run(READ_FILE, ctx, path="empty.txt").output == "File: empty.txt is empty (0 lines)."


def test_read_file_missing_file_suggests_close_names(ws: Path, ctx: ToolContext) -> None:
    (ws / "settings.py").write_text("x\n")
    result = run(READ_FILE, ctx, path="setings.py")
    assert not result.ok and "Did you mean: settings.py?" in result.output
    assert "use list_dir" in run(READ_FILE, ctx, path=".git").output


def test_read_file_records_the_read_in_the_session(ws: Path, ctx: ToolContext) -> None:
    (ws / "a.txt").write_text("x\n")
    run(READ_FILE, ctx, path="a.txt", limit=1)
    assert ctx.session.was_read((ws / "a.txt").resolve())
    assert not ctx.session.changed_since_seen((ws / "a.txt").resolve())


@dataclass
class Outcome:
    allowed: bool
    message: str


class RecordingApprover:
    """Answers authorize_read like keel.policy.approval.Approver, remembering what it was asked."""

    def __init__(self, allow: bool) -> None:
        self.allow, self.asked = allow, []

    def authorize_read(self, path: str) -> Outcome:
        self.asked.append(path)
        return Outcome(self.allow, "" if self.allow else f"The user declined reading {path}.")


def test_secret_files_need_approval(ws: Path, ctx: ToolContext) -> None:
    (ws / ".env").write_text("API_KEY=abc123\n")
    (ws / "cfg").mkdir()
    (ws / "cfg" / "settings").symlink_to("../.env")
    refused = run(READ_FILE, ctx, path=".env")
    assert not refused.ok and ".env" in refused.output and "requires approval" in refused.output
    assert "abc123" not in run(READ_FILE, ctx, path="cfg/settings").output
    ctx.approval = RecordingApprover(allow=False)
    declined = run(READ_FILE, ctx, path=".env")
    assert not declined.ok and declined.output == "The user declined reading .env."
    ctx.approval = approver = RecordingApprover(allow=True)
    assert "API_KEY=abc123" in run(READ_FILE, ctx, path=".env").output
    assert approver.asked == [".env"]


# --- write_file --------------------------------------------------------------------------------

def test_write_file_creates_new_files_and_parent_dirs(ws: Path, ctx: ToolContext) -> None:
    result = run(WRITE_FILE, ctx, path="pkg/sub/new.py", content="print('hi')\nx = 1\n")
    assert result.ok and result.files_changed == ["pkg/sub/new.py"]
    assert result.output == "Created pkg/sub/new.py: 2 lines, 18 bytes."
    assert (ws / "pkg/sub/new.py").read_text() == "print('hi')\nx = 1\n"
    assert oct((ws / "pkg/sub/new.py").stat().st_mode & 0o777) == oct(0o666 & ~_current_umask())


def _current_umask() -> int:
    mask = os.umask(0)
    os.umask(mask)
    return mask


def test_overwrite_without_reading_is_refused_and_changes_nothing(ws: Path, ctx: ToolContext) -> None:
    (ws / "app.py").write_text("original\n")
    result = run(WRITE_FILE, ctx, path="app.py", content="clobbered\n")
    assert not result.ok and "read_file(path='app.py') first" in result.output
    assert (ws / "app.py").read_text() == "original\n"


def test_overwrite_after_reading_works_and_reports_it(ws: Path, ctx: ToolContext) -> None:
    (ws / "app.py").write_text("a\nb\nc\n")
    (ws / "app.py").chmod(0o755)
    run(READ_FILE, ctx, path="app.py")
    result = run(WRITE_FILE, ctx, path="app.py", content="new\n")
    assert result.ok and result.output == "Overwrote app.py: 1 line, 4 bytes; it had 3 lines."
    assert (ws / "app.py").read_text() == "new\n"
    assert (ws / "app.py").stat().st_mode & 0o777 == 0o755
    again = run(WRITE_FILE, ctx, path="app.py", content="newer\n")  # its own write counts as seen
    assert again.ok and (ws / "app.py").read_text() == "newer\n"
    assert not [p for p in ws.iterdir() if p.name.endswith(".keel-tmp")]


def test_overwrite_after_the_file_changed_on_disk_is_refused(ws: Path, ctx: ToolContext) -> None:
    (ws / "app.py").write_text("v1\n")
    run(READ_FILE, ctx, path="app.py")
    (ws / "app.py").write_text("v2 by someone else\n")
    result = run(WRITE_FILE, ctx, path="app.py", content="mine\n")
    assert not result.ok and "changed on disk since you last read it" in result.output
    assert (ws / "app.py").read_text() == "v2 by someone else\n"


def test_snapshot_restores_the_old_bytes_exactly(ws: Path, ctx: ToolContext) -> None:
    original = b"\xef\xbb\xbfline one \t\r\nline two\r\n\xff tail"
    (ws / "odd.txt").write_bytes(original)
    run(READ_FILE, ctx, path="odd.txt")
    assert run(WRITE_FILE, ctx, path="odd.txt", content="replaced\n").ok
    assert run(WRITE_FILE, ctx, path="brand_new.txt", content="x").ok
    ctx.session.restore((ws / "odd.txt").resolve())
    ctx.session.restore((ws / "brand_new.txt").resolve())
    assert (ws / "odd.txt").read_bytes() == original
    assert not (ws / "brand_new.txt").exists()


def test_write_keeps_crlf_and_bom_conventions(ws: Path, ctx: ToolContext) -> None:
    (ws / "win.txt").write_bytes(b"\xef\xbb\xbfa\r\nb\r\n")
    run(READ_FILE, ctx, path="win.txt")
    result = run(WRITE_FILE, ctx, path="win.txt", content="x\ny\n")
    assert "kept CRLF line endings" in result.output and "byte-order mark" in result.output
    assert (ws / "win.txt").read_bytes() == b"\xef\xbb\xbfx\r\ny\r\n"


def test_write_refuses_git_internals_escapes_and_directories(ws: Path, ctx: ToolContext) -> None:
    assert ".git" in run(WRITE_FILE, ctx, path=".git/hooks/pre-commit", content="evil").output
    assert "outside the workspace" in run(WRITE_FILE, ctx, path="../escape.txt", content="x").output
    assert not (ws.parent / "escape.txt").exists()
    (ws / "d").mkdir()
    assert "not a regular file" in run(WRITE_FILE, ctx, path="d", content="x").output
    (ws / "f.txt").write_text("x")
    blocked = run(WRITE_FILE, ctx, path="f.txt/inner.txt", content="x")
    assert not blocked.ok and "Could not write" in blocked.output


def test_write_through_a_symlink_writes_its_target_inside(ws: Path, ctx: ToolContext) -> None:
    (ws / "real.txt").write_text("old\n")
    (ws / "alias.txt").symlink_to("real.txt")
    run(READ_FILE, ctx, path="alias.txt")
    result = run(WRITE_FILE, ctx, path="alias.txt", content="new\n")
    assert result.ok and result.files_changed == ["real.txt"]
    assert (ws / "alias.txt").is_symlink() and (ws / "real.txt").read_text() == "new\n"


def test_tools_work_without_a_session_object(ws: Path) -> None:
    ctx = ToolContext(workspace=ws)
    (ws / "a.txt").write_text("x\n")
    run(READ_FILE, ctx, path="a.txt")
    assert run(WRITE_FILE, ctx, path="a.txt", content="y\n").ok


# --- a directory where a file was wanted --------------------------------------------------------

def test_a_directory_given_as_a_file_is_answered_with_the_files_it_holds(ws: Path) -> None:
    """Measured on the 1.5B (Exercism dominoes): the workspace's own path, given to read_file and four
    times to change_file, was refused without naming dominoes.py, and the run ended with it unchanged."""
    import json

    from keel.engine.types import ToolCall
    from keel.policy.approval import Approver
    from keel.policy.rules import RuleSet
    from keel.tools.catalog import default_tools
    from keel.tools.registry import ToolRegistry

    (ws / "dominoes.py").write_text("def can_chain(dominoes):\n    pass\n")
    (ws / "dominoes_test.py").write_text("from dominoes import can_chain\n")
    (ws / ".env").write_text("TOKEN=x\n")
    (ws / "id_rsa").write_text("key\n")
    (ws / "internal.md").write_text("not for the model\n")
    (ws / ".gitignore").write_text("notes.log\n")
    (ws / "notes.log").write_text("ignored, as list_dir leaves it\n")
    (ws / "lib").mkdir()
    (ws / "lib" / "util.py").write_text("x = 1\n")
    rules = RuleSet.from_config([], [], ["read(internal.md)"])
    ctx = ToolContext(workspace=ws, session=FileSession(), approval=Approver("unattended", rules, workspace=ws))

    def call(name: str, **args: Any) -> ToolResult:
        return ToolRegistry(default_tools()).execute(ToolCall("c", name, json.dumps(args)), ctx)
    named = "; it holds the files dominoes.py, dominoes_test.py: give one of them as the path."
    for name, args in [("read_file", {}), ("write_file", {"content": "x\n"}),
                       ("edit_file", {"old_text": "pass", "new_text": "return True"})]:
        for path in (str(ws), "."):
            result = call(name, path=path, **args)
            assert not result.ok and result.output.endswith(named), (name, path, result.output)
    assert call("read_file", path="lib").output == "lib is a directory, not a file; it holds the files lib/util.py: " \
                                                  "give one of them as the path."
    (ws / "empty").mkdir()
    assert call("read_file", path="empty").output.endswith("is a directory, not a file; use list_dir to see what it contains.")
    assert (ws / "dominoes.py").read_text() == "def can_chain(dominoes):\n    pass\n"   # nothing written


def test_a_missing_files_close_names_are_only_those_the_model_may_see(ws: Path) -> None:
    """not_found listed the directory by path: it suggested a git-ignored name and a name a read rule
    hides, each a file the model would then be refused or never shown by list_dir."""
    from keel.policy.approval import Approver
    from keel.policy.rules import RuleSet

    (ws / ".gitignore").write_text("settings.log\n")
    (ws / "settings.log").write_text("ignored\n")
    (ws / "settings.toml").write_text("hidden by a rule\n")
    (ws / "settings.env").write_text("TOKEN=x\n")
    rules = RuleSet.from_config([], [], ["read(settings.toml)"])
    ctx = ToolContext(workspace=ws, session=FileSession(), approval=Approver("unattended", rules, workspace=ws))
    result = run(READ_FILE, ctx, path="settings.py")
    assert not result.ok and "Did you mean" not in result.output, result.output
    (ws / "settings.pyi").write_text("x: int\n")
    assert "Did you mean: settings.pyi?" in run(READ_FILE, ctx, path="settings.py").output


def test_a_link_to_a_directory_outside_is_refused_without_naming_what_it_holds(ws: Path, tmp_path: Path) -> None:
    """An attacker's link planted in the workspace: the directory hint and the close-name hint list only
    the workspace, so neither names a file of the directory the link points to. The control shows the
    outside directory does hold a file the hints would have named."""
    outside = tmp_path / "outside"
    outside.mkdir()
    (outside / "private_notes.txt").write_text("not the model's\n")
    (ws / "docs").symlink_to(outside, target_is_directory=True)
    ctx = ToolContext(workspace=ws, session=FileSession())
    assert [p.name for p in (ws / "docs").iterdir()] == ["private_notes.txt"]   # the control: reachable by path
    for path in ("docs", "docs/private_note.txt", str(outside), str(outside / "private_note.txt")):
        for tool, args in ((READ_FILE, {}), (WRITE_FILE, {"content": "x\n"})):
            result = run(tool, ctx, path=path, **args)
            assert not result.ok and "private_notes" not in result.output, (path, result.output)
    assert (outside / "private_notes.txt").read_text() == "not the model's\n"
