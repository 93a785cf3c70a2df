"""The REPL's pure parts: edit diffs, slash completion, --step answers, the running tally."""

from __future__ import annotations

from pathlib import Path

from prompt_toolkit.completion import CompleteEvent
from prompt_toolkit.document import Document

from keel.cli.repl.commands import COMMANDS
from keel.cli.repl.input import SlashCompleter
from keel.cli.repl.render import Tally, diff_text
from keel.cli.repl.stepping import StepPauser
from keel.engine.types import ToolCall
from keel.loop.limits import Prices
from keel.tools.base import ToolContext
from keel.tools.catalog import default_tools
from keel.tools.diffs import MAX_DIFF_CHARS, add_diffs, unified_diff
from keel.tools.registry import ToolRegistry
from keel.tools.session import FileSession


def run_tool(workspace: Path, name: str, arguments: str):
    registry = ToolRegistry(add_diffs(default_tools()))
    return registry.execute(ToolCall("c1", name, arguments), ToolContext(workspace=workspace, session=FileSession()))


def test_edit_file_result_carries_the_unified_diff(tmp_path):
    (tmp_path / "calc.py").write_text("def add(a, b):\n    return a - b\n")
    result = run_tool(tmp_path, "edit_file", '{"path": "calc.py", "old_text": "a - b", "new_text": "a + b"}')
    assert result.ok
    assert result.meta["diff"].splitlines() == ["--- a/calc.py", "+++ b/calc.py", "@@ -1,2 +1,2 @@",
                                                " def add(a, b):", "-    return a - b", "+    return a + b"]


def test_write_file_of_a_new_file_diffs_against_nothing(tmp_path):
    result = run_tool(tmp_path, "write_file", '{"path": "new.txt", "content": "hello\\n"}')
    assert result.ok and result.meta["diff"].startswith("--- /dev/null\n+++ b/new.txt\n")
    assert "+hello" in result.meta["diff"]


def test_no_diff_for_a_binary_file_or_a_failed_edit(tmp_path):
    (tmp_path / "blob.bin").write_bytes(b"\0\1\2")
    result = run_tool(tmp_path, "write_file", '{"path": "blob.bin", "content": "text now"}')
    assert "diff" not in result.meta
    (tmp_path / "a.txt").write_text("x\n")
    failed = run_tool(tmp_path, "edit_file", '{"path": "a.txt", "old_text": "missing", "new_text": "y"}')
    assert not failed.ok and "diff" not in failed.meta


def test_a_huge_diff_is_cut_with_a_note():
    diff = unified_diff("", "".join(f"line {i}\n" for i in range(5000)), "big.txt")
    assert len(diff) < MAX_DIFF_CHARS + 100 and diff.endswith("characters\n")


def test_diff_text_colours_additions_and_removals():
    text = diff_text("--- a/x\n+++ b/x\n@@ -1 +1 @@\n-old\n+new\n")
    styles = {str(text)[span.start:span.end].strip(): span.style for span in text.spans}
    assert styles["-old"] == "red" and styles["+new"] == "green" and styles["@@ -1 +1 @@"] == "cyan"


def test_slash_completion_offers_matching_commands_only_at_the_start():
    completer = SlashCompleter({name: c.help for name, c in COMMANDS.items()})

    def names(text: str) -> list[str]:
        return [c.text for c in completer.get_completions(Document(text), CompleteEvent())]

    assert names("/st") == ["stats"]
    assert set(names("/c")) == {"cost", "compact", "clear"}
    assert names("fix /st") == [] and names("/stats now") == []


def test_step_pauser_answers():
    answers = iter(["", "c", "x", "s"])
    pauser = StepPauser(lambda _q: next(answers))
    assert pauser(1) and pauser(2)       # Enter and c go on
    assert pauser(3)                     # an unknown answer asks again; s stops stepping
    assert not pauser.enabled and pauser(4)
    assert not StepPauser(lambda _q: "a")(1)

    def interrupted(_q: str) -> str:
        raise KeyboardInterrupt
    assert not StepPauser(interrupted)(1)


def test_tally_counts_calls_live_and_takes_the_runs_total_at_its_stop():
    tally = Tally(Prices(input_per_m=1.0, cached_input_per_m=0.0, output_per_m=2.0), prices_known=True)
    tally.model_call({"prompt_tokens": 1000, "completion_tokens": 100, "cached_tokens": 0})
    assert tally.tokens == 1100 and tally.cost == "$0.0012"
    tally.stop({"usage": {"prompt_tokens": 1500, "completion_tokens": 100}, "cost_usd": 0.0017})
    assert tally.tokens == 1600 and tally.cost == "$0.0017"    # the summarising call of a compaction too
    assert Tally(Prices(), prices_known=False).cost == "cost unknown"


def test_an_answer_settles_at_blank_lines_outside_code_fences():
    from keel.cli.repl.stream import settled

    assert settled("one paragraph, still being writ") == 0
    assert settled("First.\n\nSecond, being writ") == len("First.\n\n")
    code = "Look:\n\n```python\nx = 1\n\ny = 2\n"          # a blank line inside an open fence settles nothing
    assert settled(code) == len("Look:\n\n")
    assert settled(code + "```\n\nAfter.") == len(code + "```\n\n")


def test_an_approval_question_splits_into_what_why_the_diff_and_the_answers():
    from keel.policy.approval import question, question_parts

    command = "cat > a.py <<'EOF'\n    indented = 1\nEOF"   # a command's own indented lines are not a diff
    asked = question(f"keel wants to run: {command}\n  needs approval: writes a file (part: cat)", "",
                     "[y] yes, once   [a] always allow `cat …` this session   [n] no")
    head, preview, options = question_parts(asked)
    assert head.startswith("keel wants to run: cat > a.py") and "    indented = 1" in head and preview == ""
    assert options.startswith("[y] yes, once")
    diff = "--- a/calc.py\n+++ b/calc.py\n@@ -1 +1 @@\n-    return a - b\n+    return a + b\n"
    head, preview, options = question_parts(question("keel wants to edit calc.py (file edits need approval)", diff,
                                                     "[y] yes, once   [a] always allow edits this session   [n] no"))
    assert head == "keel wants to edit calc.py (file edits need approval)" and preview == diff.rstrip("\n")
