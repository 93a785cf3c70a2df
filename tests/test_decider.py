"""Table-driven tests for the pure stop decider: every branch, no I/O."""

from __future__ import annotations

import pytest

from keel.core.state import TaskState, Todo
from keel.loop.decider import TurnOutcome, decide, is_question
from keel.loop.limits import Consumed, Limits


def state(*, calls=1, changed=False, check=None, todos=(), streak=0, strikes=0, counts=None, idle=0,
          task="") -> TaskState:
    s = TaskState(task=task)
    for _ in range(calls):
        s.record_tool_call()
    if changed:
        s.record_file_change("a.py")
    if check is not None:
        s.record_check("python -m pytest -q", check, "test")
    s.set_todos([Todo(c, st) for c, st in todos])
    s.pushback_streak = streak
    s.repetition_strikes = strikes
    s.idle_turns = idle
    for k, v in (counts or {}).items():
        s.pushback_counts[k] = v
    return s


WORKING = TurnOutcome(text="", tool_calls=1, progress=True)
DONE_TEXT = TurnOutcome(text="I fixed the bug and the tests pass.")
FINISH = TurnOutcome(text="", tool_calls=1, progress=True, finished=True)
QUESTION = TurnOutcome(text="Should I also update the docs?")
PERMISSION = TurnOutcome(text="I can refactor the module. Let me know if you want me to proceed.")
ASK_TOOL = TurnOutcome(tool_calls=1, progress=True, asked_user="Which database?")
EMPTY = TurnOutcome(text="   ")
STANDS = TurnOutcome(text="", tool_calls=1, progress=True, claim_stands=True)
L = Limits(max_steps=50)
U = Consumed(steps=3)

CASES = [
    # id, outcome, state, limits, usage, attended, plan_mode, verdict, reason
    ("working continues", WORKING, state(), L, U, False, False, "continue", ""),
    ("complete with fresh passing check", FINISH, state(changed=True, check=0), L, U, False, False, "stop", "complete"),
    ("complete by text reply", DONE_TEXT, state(changed=True, check=0), L, U, False, False, "stop", "complete"),
    ("read-only task needs no check", DONE_TEXT, state(), L, U, False, False, "stop", "complete"),
    ("no check after change", FINISH, state(changed=True), L, U, False, False, "continue", "unverified"),
    ("failing check", FINISH, state(changed=True, check=1), L, U, False, False, "continue", "unverified"),
    ("did nothing", DONE_TEXT, state(calls=0), L, U, False, False, "continue", "did_nothing"),
    ("a follow-up question answered in the REPL", TurnOutcome(text="You changed calc.py: add() now adds."),
     state(calls=0, task="what did you just change?"), L, U, True, False, "stop", "complete"),
    ("a change asked in the REPL still needs work", DONE_TEXT, state(calls=0, task="fix add() in calc.py"), L, U,
     True, False, "continue", "did_nothing"),
    ("the same question unattended is pushed back", TurnOutcome(text="You changed calc.py."),
     state(calls=0, task="what did you just change?"), L, U, False, False, "continue", "did_nothing"),
    ("unfinished todos", FINISH, state(todos=[("fix", "in_progress")]), L, U, False, False, "continue",
     "unfinished_todos"),
    ("todos all done", FINISH, state(todos=[("fix", "done")]), L, U, False, False, "stop", "complete"),
    ("question unattended", QUESTION, state(), L, U, False, False, "continue", "question_unattended"),
    ("permission unattended", PERMISSION, state(), L, U, False, False, "continue", "question_unattended"),
    ("question attended", QUESTION, state(), L, U, True, False, "stop", "needs_user"),
    ("ask_user attended", ASK_TOOL, state(), L, U, True, False, "stop", "needs_user"),
    ("ask_user unattended", ASK_TOOL, state(), L, U, False, False, "continue", "question_unattended"),
    ("plan attended", TurnOutcome(text="Plan: 1. ...", plan_submitted=True), state(), L, U, True, True,
     "stop", "awaiting_plan_approval"),
    ("plan unattended", TurnOutcome(text="Plan: 1. ...", plan_submitted=True), state(), L, U, False, True,
     "stop", "awaiting_plan_approval"),
    ("plan via finish", TurnOutcome(finished=True, tool_calls=1, plan_submitted=True), state(), L, U, False,
     True, "stop", "awaiting_plan_approval"),
    ("plan cut off", TurnOutcome(text="Plan: 1. Fix", plan_submitted=True, truncated=True), state(), L, U,
     False, True, "continue", "truncated"),
    ("plan mode, broken call", TurnOutcome(text='<tool_call>{"name": "grep"', plan_submitted=True,
                                           malformed_call=True), state(), L, U, False, True,
     "continue", "malformed_call"),
    ("empty reply", EMPTY, state(), L, U, False, False, "continue", "empty_reply"),
    ("truncated reply", TurnOutcome(text="Here is a very long", truncated=True), state(), L, U, False, False,
     "continue", "truncated"),
    ("a call cut off mid-way is too long, not text", TurnOutcome(
        text='{"name": "edit_file", "arguments": {"new_text": "x\\nx\\nx', truncated=True, malformed_call=True,
        cut_reason="repeating"), state(), L, U, False, False, "continue", "truncated"),
    ("steps limit", WORKING, state(), Limits(max_steps=3), Consumed(steps=3), False, False, "stop", "limit:steps"),
    ("complete beats step limit", FINISH, state(), Limits(max_steps=3), Consumed(steps=3), False, False,
     "stop", "complete"),
    ("wall clock", WORKING, state(), Limits(max_seconds=10), Consumed(steps=1, elapsed_s=11), False, False,
     "stop", "limit:wall_clock"),
    ("tokens", WORKING, state(), Limits(max_tokens=100), Consumed(steps=1, tokens=150), False, False,
     "stop", "limit:tokens"),
    ("cost", WORKING, state(), Limits(max_cost_usd=0.5), Consumed(steps=1, cost_usd=0.6), False, False,
     "stop", "limit:cost"),
    ("repetition", WORKING, state(strikes=2), L, U, False, False, "stop", "limit:repetition"),
    # a claim the gate passed and the contract review held, with the workspace as it was then: it stands
    ("a reviewed claim stands at the wall clock", STANDS, state(), Limits(max_seconds=10),
     Consumed(steps=1, elapsed_s=11), False, False, "stop", "complete"),
    ("a reviewed claim stands at the step limit", STANDS, state(), Limits(max_steps=3), Consumed(steps=3), False,
     False, "stop", "complete"),
    ("a reviewed claim stands when the run loops", STANDS, state(strikes=2), L, U, False, False, "stop", "complete"),
    ("a reviewed claim stands when the engine fails", TurnOutcome(engine_failure="retries", claim_stands=True),
     state(), L, U, False, False, "stop", "complete"),
    ("before a limit a reviewed claim is no reason to stop", STANDS, state(), L, U, False, False, "continue", ""),
    ("one repeat is only refused", WORKING, state(strikes=1), L, U, False, False, "continue", ""),
    ("no progress after pushbacks", QUESTION, state(streak=3), L, U, False, False, "stop", "limit:no_progress"),
    ("progress resets the streak", FINISH, state(changed=True, streak=3), L, U, False, False, "continue",
     "unverified"),
    ("broken calls turn after turn", TurnOutcome(tool_calls=1, progress=False), state(idle=5), L, U, False,
     False, "stop", "limit:no_progress"),
    ("a few broken calls are only fed back", TurnOutcome(tool_calls=1, progress=False), state(idle=4), L, U,
     False, False, "continue", ""),
    ("a valid call ends an idle run", WORKING, state(idle=5), L, U, False, False, "continue", ""),
    ("completion still wins after idle turns", DONE_TEXT, state(idle=5), L, U, False, False, "stop",
     "complete"),
    ("call written as text", TurnOutcome(text="functions.list_dir: shows files", malformed_call=True), state(),
     L, U, False, False, "continue", "malformed_call"),
    ("context error", TurnOutcome(engine_failure="context"), state(), L, U, False, False, "stop",
     "limit:context"),
    ("retries exhausted", TurnOutcome(engine_failure="retries"), state(), L, U, False, False, "stop",
     "limit:retries"),
]


@pytest.mark.parametrize(("outcome", "st", "limits", "used", "attended", "plan_mode", "verdict", "reason"),
                         [c[1:] for c in CASES], ids=[c[0] for c in CASES])
def test_decide(outcome, st, limits, used, attended, plan_mode, verdict, reason):
    d = decide(outcome, st, limits, used, attended=attended, plan_mode=plan_mode)
    assert (d.verdict, d.reason) == (verdict, reason)
    if verdict == "continue" and reason:
        assert d.pushback  # every pushback carries text for the next request
    if verdict == "stop":
        assert d.pushback is None


def test_tool_failures_never_stop():
    failed = TurnOutcome(text="", tool_calls=2, progress=False)
    assert decide(failed, state(), L, U, attended=False).verdict == "continue"


def test_pushback_wording_escalates_and_names_specifics():
    s = state(changed=True, check=1)
    texts = []
    for n in range(3):
        s.pushback_counts["unverified"] = n
        texts.append(decide(FINISH, s, L, U, attended=False).pushback)
    assert len(set(texts)) == 3
    assert "python -m pytest -q" in texts[0] and "exited 1" in texts[0]
    todo_state = state(todos=[("write the migration", "pending")])
    assert "write the migration" in decide(FINISH, todo_state, L, U, attended=False).pushback


def test_a_later_failing_check_of_the_same_kind_cancels_an_earlier_pass():
    s = state(changed=True, check=0)
    s.record_check("python -m pytest -q", 1, "test")
    assert decide(FINISH, s, L, U, attended=False).reason == "unverified"


def test_a_change_after_the_passing_check_makes_it_stale():
    s = state(changed=True, check=0)
    s.record_file_change("b.py")
    assert decide(FINISH, s, L, U, attended=False).reason == "unverified"


@pytest.mark.parametrize(("text", "expected"), [
    ("Done. All tests pass.", False),
    ("Would you like me to add tests?", True),
    ("I fixed it.\nShall I commit the change", True),
    ("What is the fix? The off-by-one in range(). Fixed it.", False),
    ("", False),
    ("Done. Let me know if you want anything else.", False),
    ("I can refactor it. Let me know if you want me to proceed.", True),
    ("Please confirm the target version before I proceed.", True),
])
def test_is_question(text, expected):
    assert is_question(text) is expected



def test_repeated_pushback_restates_the_task_with_a_concrete_next_call():
    s = state(calls=0)
    s.task = "Fix the bug in calc.py so that test_calc.py passes."
    first = decide(DONE_TEXT, s, L, U, attended=False).pushback
    assert "The task is" not in first
    s.pushback_counts["did_nothing"] = 1
    second = decide(DONE_TEXT, s, L, U, attended=False).pushback
    assert "The task is: Fix the bug in calc.py" in second
    assert 'read_file with {"path": "calc.py"}' in second
    s.pushback_counts["did_nothing"] = 2
    third = decide(DONE_TEXT, s, L, U, attended=False).pushback
    s.pushback_counts["did_nothing"] = 3
    fourth = decide(DONE_TEXT, s, L, U, attended=False).pushback
    assert len({first, second, third, fourth}) == 4  # never the same text twice in a row


SMALL_TOOLS = frozenset({"read_file", "change_file", "edit_file", "run_shell", "finish"})


@pytest.mark.parametrize(("kind", "times", "detail", "small", "full"), [
    ("no_change", 0, "", "Make the change with change_file,", "Make the change with edit_file or write_file,"),
    ("no_change", 2, "", "Call change_file on the file", "Call edit_file (or write_file) on the file"),
    ("did_nothing", 0, "", "Inspect the workspace (read_file)", "Inspect the workspace (list_dir, read_file, grep)"),
    ("did_nothing", 2, "", "Call a tool now. Read the files", "Begin with list_dir(path=\".\")"),
    ("truncated", 0, "repeating", "change_file's change is a sentence or two", "old_text is only the lines"),
])
def test_pushback_names_only_the_tools_the_model_is_offered(kind: str, times: int, detail: str, small: str,
                                                          full: str) -> None:
    from keel.loop.pushback import pushback_text

    in_small = pushback_text(kind, times, TaskState(task="t", tools=SMALL_TOOLS), detail)
    in_full = pushback_text(kind, times, TaskState(task="t"), detail)
    assert small in in_small and full in in_full
    assert "write_file" not in in_small and "list_dir" not in in_small


# -- an all-clear answer to a request about flaws (keel issue 32, py-review-pagination on the 1.5B) ----------
ALL_CLEAR = TurnOutcome(tool_calls=1, progress=True, finished=True, summary="pagination.py is correct.")
ASKS = "Review pagination.py: any bugs? Don't change any files."
PRESUMES = "Review pagination.py and tell me what is wrong with it. Don't change any files."


def _answer_state(task: str, *, gate: bool, rechecked: int = 0) -> TaskState:
    s = state(task=task, counts={"recheck_answer": rechecked})
    s.gate_on = gate
    return s


@pytest.mark.parametrize(("task", "gate", "rechecked", "verdict", "reason"), [
    (ASKS, False, 0, "continue", "recheck_answer"),        # asked whether: looked at once more…
    (ASKS, False, 1, "stop", "complete"),                  # …then it stands
    (ASKS, True, 0, "continue", "recheck_answer"),
    (ASKS, True, 1, "verify", "verify"),                   # the gate's checks may still contradict it
    (PRESUMES, False, 0, "continue", "recheck_answer"),    # told there is a flaw, the gate off: once more
    (PRESUMES, True, 0, "verify", "verify"),               # the gate on: the gate refuses it (answer_unfounded)
])
def test_an_all_clear_to_a_request_about_flaws(task: str, gate: bool, rechecked: int, verdict: str, reason: str):
    d = decide(ALL_CLEAR, _answer_state(task, gate=gate, rechecked=rechecked), L, U, attended=False)
    assert (d.verdict, d.reason) == (verdict, reason)


WRITE_TESTS = "Please write node:test tests for humanDuration() in test/duration.test.js. Don't touch duration.js."


@pytest.mark.parametrize(("task", "changed", "theirs"), [
    (WRITE_TESTS, ["test/duration.test.js"], True),
    (WRITE_TESTS, ["test/duration.test.js", "duration.js"], False),   # it changed code too: the usual words
    ("Fix humanDuration() in duration.js.", ["test/duration.test.js"], False),   # tests not asked for
    (WRITE_TESTS, [], False),
])
def test_failing_checks_after_writing_only_tests_point_at_the_tests(task: str, changed: list[str], theirs: bool):
    """js-write-tests on the 1.5B: its new test expected humanDuration(-1) to return where the code throws;
    told to fix the code (which the task keeps), it claimed done three times with its test failing."""
    from keel.loop.pushback import pushback_text

    state = TaskState(task=task, files_changed=changed)
    for level in range(3):
        text = pushback_text("verification_failed", level, state, "1 test failed: negative seconds")
        said = ("tests you wrote fail", "your tests still fail", "your tests fail")
        assert any(words in text.lower() for words in said) is theirs, text
        assert "1 test failed: negative seconds" in text
