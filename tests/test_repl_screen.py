"""What the person's terminal ends up holding: the REPL's output fed through a terminal emulator
(pyte) with scrollback, from a real pty against the scripted engine (real HTTP)."""

from __future__ import annotations

import re

import pytest
from test_repl import PROMPT, ctrl_d_exits, spawn

from keel.testing.server import ScriptedEngineServer

pyte = pytest.importorskip("pyte", reason="the terminal emulator is a dev dependency (pip install -e '.[dev]')")
ROWS, COLS = 24, 100


class Terminal:
    """A 24x100 terminal with 5000 lines of scrollback, fed what the REPL writes."""

    def __init__(self) -> None:
        self.screen = pyte.HistoryScreen(COLS, ROWS, history=5000, ratio=0.001)
        self.stream = pyte.Stream(self.screen)

    def write(self, text: str) -> None:
        self.stream.feed(text)

    def flush(self) -> None:
        pass

    def lines(self) -> list[str]:
        """Scrollback, then the screen, as text."""
        def text(line: dict) -> str:
            return "".join(line[x].data for x in range(COLS)).rstrip()
        return [text(line) for line in self.screen.history.top] + [line.rstrip() for line in self.screen.display]


TIGHT = "\n".join(f"- item {n:03d} of a long answer" for n in range(1, 121))            # one block, 120 rows
LOOSE = "\n\n".join(f"Paragraph item {n:03d} of a long answer." for n in range(1, 121))  # 120 blocks


@pytest.mark.parametrize("body", [TIGHT, LOOSE], ids=["one-tall-block", "many-blocks"])
def test_a_long_streamed_answer_lands_in_the_scrollback_once(calc_repo, keel_env, body):
    script = [{"tool_calls": [{"name": "read_file", "arguments": {"path": "calc.py"}}]},
              {"content": f"Here is the list:\n\n{body}\n\nThat is all.", "chunk_delay_s": 0.004}]
    term = Terminal()
    with ScriptedEngineServer(script) as server:
        child = spawn(server, calc_repo, keel_env)
        child.setwinsize(ROWS, COLS)
        child.logfile_read = term
        child.sendline("list the items")
        child.expect("■ complete")
        child.expect(PROMPT)
        assert ctrl_d_exits(child) == 0
    lines = term.lines()
    shown = [n for line in lines for n in re.findall(r"item (\d{3}) of a long answer", line)]
    assert shown == [f"{n:03d}" for n in range(1, 121)]      # each line once, in order: 120 lines, not 212
    assert sum("That is all." in line for line in lines) == 1
    assert sum("Here is the list:" in line for line in lines) == 1


def test_a_commands_output_is_folded_under_its_row_and_the_summary_shown_whole(calc_repo, keel_env):
    summary = "Counted the lines.\n\n- six lines in all\n- nothing else to do"
    script = [{"tool_calls": [{"name": "run_shell",
                               "arguments": {"command": "printf 'one\\ntwo\\nthree\\nfour\\nfive\\nsix\\n'"}}]},
              {"tool_calls": [{"name": "finish", "arguments": {"summary": summary}}]}]
    term = Terminal()
    with ScriptedEngineServer(script) as server:
        child = spawn(server, calc_repo, keel_env, "--approval", "auto-edit")
        child.setwinsize(ROWS, COLS)
        child.logfile_read = term
        child.sendline("count the lines")
        child.expect("■ ")
        child.expect(PROMPT)
        assert ctrl_d_exits(child) == 0
    text = "\n".join(term.lines())
    row = re.search(r"✓ run_shell printf[^\n]*\n    one\n    two\n    three\n    four\n    … \+2 lines\n", text)
    assert row, text                                                      # first lines, then how many more
    assert re.search(r"✓ finish  \(\d+ ms\)\n", text) and "Counted the lines." in text
    assert "• six lines in all" in text                                   # the summary rendered as markdown
