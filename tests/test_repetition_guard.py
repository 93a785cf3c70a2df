"""The repetition guard's rules (keel/loop/repetition.py), call by call: pure, no model."""

from __future__ import annotations

from keel.loop.repetition import RepetitionGuard


def test_a_call_that_changed_files_is_not_run_again_unless_its_tool_said_a_repeat_is_another_try():
    guard = RepetitionGuard()
    args = '{"path": "rle.py", "change": "implement encode"}'
    guard.observe("change_file", args, "Overwrote rle.py; the checks fail", ["rle.py"])
    skip = guard.before("change_file", args)
    assert skip is not None and skip.text.startswith("Not run") and skip.strikes == 1

    guard = RepetitionGuard()
    guard.observe("change_file", args, "Overwrote rle.py; the checks fail", ["rle.py"], again=True)
    assert guard.before("change_file", args) is None            # one more round: it runs
    assert guard.before("change_file", args, earlier_in_reply=1) is not None   # but once per reply
    guard.observe("change_file", args, "Overwrote rle.py; the checks fail", ["rle.py"])   # no longer says again
    assert guard.before("change_file", args) is not None


def test_a_read_repeated_with_the_identical_result_strikes_and_a_change_in_between_resets_it():
    guard = RepetitionGuard()
    args = '{"path": "a.py"}'
    assert guard.observe("read_file", args, "x = 1") == 0
    assert guard.before("read_file", args) is None             # the first repeat runs ...
    assert guard.observe("read_file", args, "x = 1") == 1      # ... and strikes: identical
    assert guard.before("read_file", args) is not None         # the next is not run
    guard.observe("edit_file", '{"path": "a.py"}', "edited", ["a.py"])
    assert guard.before("read_file", args) is None             # something changed since
