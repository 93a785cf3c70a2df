"""Compaction planning and the decision record (keel.context.compaction, keel.context.record): pure."""

from __future__ import annotations

import json

import pytest

from keel.context.compaction import (
    RECORD_MARKER,
    apply_fold,
    choose_fold,
    pairing_problems,
    shrink_for_summary,
    stable_prefix_len,
    superseded_reads,
)
from keel.context.record import Facts, build_record, sections
from keel.context.tokens import chars_to_tokens, serialize

SYS = {"role": "system", "content": "You are keel."}
TASK = {"role": "user", "content": "Fix add() in calc.py; `pytest -q` must pass."}


def turn(n, *calls):
    """An assistant message with ``calls`` [(name, args, output)], then one tool message per call."""
    msg = {"role": "assistant", "content": f"step {n}", "tool_calls": [
        {"id": f"c{n}_{i}", "type": "function", "function": {"name": name, "arguments": json.dumps(args)}}
        for i, (name, args, _) in enumerate(calls)]}
    return [msg] + [{"role": "tool", "tool_call_id": f"c{n}_{i}", "content": out}
                    for i, (_, _, out) in enumerate(calls)]


def sizes(messages):
    return [chars_to_tokens(len(serialize(m))) for m in messages]


def history(n_turns, output="x" * 400):
    msgs = [SYS, TASK]
    for n in range(n_turns):
        msgs += turn(n, ("run_shell", {"command": f"cmd {n}"}, f"out {n}\n{output}"))
    return msgs


def test_prefix_kept_object_for_object_record_after_it_and_pairing_intact():
    msgs = history(20)
    plan = choose_fold(msgs, sizes(msgs), keep_last=6, room=10_000)
    new = apply_fold(msgs, plan, RECORD_MARKER + " test")
    assert new[0] is SYS and new[1] is TASK          # byte-stable prefix: the very same objects
    assert new[2]["content"].startswith(RECORD_MARKER)
    assert new[3:] == msgs[plan.fold_end:]          # the last messages verbatim
    assert len(new) - 3 == 6 and new[3]["role"] == "assistant"
    assert pairing_problems(new) == []


@pytest.mark.parametrize("keep_last", [1, 2, 3, 4, 5, 7])
def test_the_cut_never_separates_a_call_from_its_answers(keep_last):
    msgs = [SYS, TASK]
    for n in range(6):  # turns of three parallel calls
        msgs += turn(n, *[("read_file", {"path": f"f{n}{i}.py"}, "y" * 200) for i in range(3)])
    plan = choose_fold(msgs, sizes(msgs), keep_last=keep_last, room=100_000)
    new = apply_fold(msgs, plan, RECORD_MARKER)
    assert pairing_problems(new) == []
    assert msgs[plan.fold_end]["role"] == "assistant"
    assert len(new) - 3 >= keep_last


def test_room_too_small_folds_oldest_units_then_cuts_the_newest_output():
    msgs = history(10, output="z" * 4000)
    plan = choose_fold(msgs, sizes(msgs), keep_last=8, room=1500)
    kept = apply_fold(msgs, plan, RECORD_MARKER)[3:]
    assert sum(sizes(kept)) <= 1500 + 100
    assert len(kept) >= 2 and kept[-2]["content"] == "step 9"  # the newest turn survives
    assert pairing_problems([SYS, TASK, *kept]) == []
    plan = choose_fold(msgs, sizes(msgs), keep_last=8, room=300)
    kept = apply_fold(msgs, plan, RECORD_MARKER)[3:]
    assert len(kept) == 2 and "keel cut" in kept[1]["content"]  # last resort: the middle of it goes
    assert kept[1]["content"].startswith("out 9")


def test_superseded_reads_fold_first():
    msgs = [SYS, TASK]
    msgs += turn(0, ("read_file", {"path": "calc.py"}, "v1 of calc"))
    msgs += turn(1, ("read_file", {"path": "./calc.py"}, "v1 again"))         # same file, normalised path
    msgs += turn(2, ("read_file", {"path": "util.py"}, "util"))
    msgs += turn(3, ("edit_file", {"path": "util.py", "old_text": "a", "new_text": "b"}, "Edited util.py"))
    msgs += turn(4, ("read_file", {"path": "calc.py", "offset": 10}, "a slice"))  # another slice: not stale
    stale = superseded_reads(msgs)
    assert stale == {3: "calc.py", 7: "util.py"}
    plan = choose_fold(msgs, sizes(msgs), keep_last=100, room=100_000)
    new = apply_fold(msgs, plan, RECORD_MARKER)
    contents = [m["content"] for m in new if m["role"] == "tool"]
    assert "superseded" in contents[0] and "v1 of calc" not in contents[0]
    assert contents[1] == "v1 again" and "superseded" in contents[2] and contents[4] == "a slice"
    assert pairing_problems(new) == []


def test_an_earlier_record_always_folds_into_the_new_one():
    msgs = history(4)
    first = apply_fold(msgs, choose_fold(msgs, sizes(msgs), keep_last=4, room=10_000), RECORD_MARKER + " one")
    assert stable_prefix_len(first) == 2  # the record is not part of the stable prefix
    more = first + turn(9, ("run_shell", {"command": "ls"}, "a b"))
    plan = choose_fold(more, sizes(more), keep_last=100, room=100_000)
    assert 2 in plan.folded
    second = apply_fold(more, plan, RECORD_MARKER + " two")
    assert [m["content"] for m in second if str(m.get("content", "")).startswith(RECORD_MARKER)] == \
        [RECORD_MARKER + " two"]


def test_budget_components_over_their_share_become_stubs_before_units_fold():
    msgs = [SYS, TASK]
    for n in range(4):
        msgs += turn(n, ("read_file", {"path": f"f{n}.py"}, "r" * 2000))
        msgs += turn(10 + n, ("run_shell", {"command": f"echo {n}"}, "s" * 200))
    plan = choose_fold(msgs, sizes(msgs), keep_last=100, room=1200, over_share=["file_reads"])
    new = apply_fold(msgs, plan, RECORD_MARKER)
    reads = [m for m in new if m["role"] == "tool" and m["content"].startswith(("r", "[keel"))]
    assert all("over its share" in m["content"] for m in reads[:-1])
    assert reads[-1]["content"] == "r" * 2000       # the newest read stays whole
    assert all(m["content"] == "s" * 200 for m in new if m["role"] == "tool" and m["content"].startswith("s"))


def test_shrink_for_summary_stubs_oldest_outputs_only_until_it_fits():
    msgs = history(10, output="q" * 2000)
    s = sizes(msgs)
    shrunk = shrink_for_summary(msgs, s, room=sum(s) - 1000)
    changed = [i for i, (a, b) in enumerate(zip(msgs, shrunk, strict=True)) if a is not b]
    assert changed and changed == sorted(changed) and changed[0] == 3  # the first tool output first
    assert shrunk[-1] is msgs[-1]
    assert pairing_problems(shrunk) == []


@pytest.mark.parametrize(("messages", "problem"), [
    ([SYS, TASK, *turn(0, ("ls", {}, "a"))], None),
    ([SYS, TASK, *turn(0, ("ls", {}, "a"))[:1]], "answered by []"),
    ([SYS, TASK, *turn(0, ("ls", {}, "a"), ("ls", {}, "b"))[::-1][:1]], "answers no call"),
    ([SYS, TASK, turn(0, ("ls", {}, "a"))[0], {"role": "user", "content": "hi"}, turn(0, ("ls", {}, "a"))[1]],
     "answered by [None]"),
])
def test_pairing_problems(messages, problem):
    found = pairing_problems(messages)
    assert (found == []) if problem is None else any(problem in p for p in found)


def test_record_names_every_modified_file_with_content_or_pointer():
    msgs = [SYS, TASK]
    msgs += turn(0, ("read_file", {"path": "calc.py"}, "old calc"))
    msgs += turn(1, ("edit_file", {"path": "calc.py", "old_text": "-", "new_text": "+"}, "Edited calc.py"))
    msgs += turn(2, ("write_file", {"path": "docs/notes.md", "content": "n"}, "Created docs/notes.md"))
    msgs += turn(3, ("write_file", {"path": "big.txt", "content": "b"}, "Created big.txt"))
    msgs += turn(4, ("run_shell", {"command": "pytest -q"}, "FAILED test_calc.py::test_add - assert -1 == 5"))
    msgs += turn(5, ("read_file", {"path": "test_calc.py"}, "def test_add(): ..."))
    msgs += turn(6, ("run_shell", {"command": "ls"}, "calc.py"))
    plan = choose_fold(msgs, sizes(msgs), keep_last=2, room=10_000)
    facts = Facts(task=TASK["content"], acceptance=("pytest -q",), files_changed=("calc.py", "docs/notes.md"),
                  todos=(("fix add", "done"), ("run tests", "in_progress")),
                  checks=(("pytest -q", 1, "test"),),
                  contents={"calc.py": "def add(a, b):\n    return a + b\n", "docs/notes.md": None})
    record = build_record(msgs, plan, facts, None, number=1, max_chars=6000, file_chars=2000)
    assert record.startswith(RECORD_MARKER)
    parts = sections(record)
    files = parts["## Files modified"]
    assert "calc.py — current content:" in files and "return a + b" in files
    assert "docs/notes.md — not on disk now" in files
    assert "big.txt — read_file it" in files  # named by its write call, content unknown: a pointer
    assert "`pytest -q` must pass" in parts["## Acceptance"]
    assert "[in_progress] run tests" in parts["## Open todos"] and "fix add" not in parts["## Open todos"]
    assert "test: `pytest -q` → exit 1" in parts["## Verification (latest run of each kind)"]
    failures = next(v for k, v in parts.items() if k.startswith("## Attempts that failed"))
    assert "pytest -q" in failures and "assert -1 == 5" in failures
    assert "test_calc.py" in next(v for k, v in parts.items() if k.startswith("## Files read earlier"))
    steps = next(v for k, v in parts.items() if k.startswith("## Folded steps"))
    assert steps.count("\n- ") + 1 == 6


def test_record_with_a_summary_and_a_second_compaction_carries_what_matters():
    msgs = history(6)
    plan = choose_fold(msgs, sizes(msgs), keep_last=2, room=10_000)
    summary = "## Approaches ruled out\n- patching the test: the task forbids it"
    one = build_record(msgs, plan, Facts(task="t"), summary, number=1, max_chars=8000, file_chars=0)
    assert "patching the test: the task forbids it" in one
    again = apply_fold(msgs, plan, one) + turn(7, ("run_shell", {"command": "ls"}, "x"))
    plan2 = choose_fold(again, sizes(again), keep_last=2, room=10_000)
    two = build_record(again, plan2, Facts(task="t"), None, number=2, max_chars=8000, file_chars=0)
    assert "patching the test: the task forbids it" in two      # the earlier summary is kept
    steps = next(v for k, v in sections(two).items() if k.startswith("## Folded steps"))
    assert "cmd 0" in steps and "cmd 5" in steps               # steps folded the first time are listed too
    assert two.count(RECORD_MARKER) == 1


def test_record_respects_its_size_cap():
    msgs = history(200, output="w" * 50)
    plan = choose_fold(msgs, sizes(msgs), keep_last=2, room=10_000)
    record = build_record(msgs, plan, Facts(task="t" * 5000), None, number=1, max_chars=3000, file_chars=500)
    assert len(record) <= 3000
    assert "earlier steps" in record and "cmd 198" in record  # the newest folded steps are the ones kept


def test_a_huge_refused_call_has_its_arguments_cut_and_stays_valid_json():
    content = "x = 1\n" * 200_000
    msgs = [SYS, TASK, *turn(0, ("write_file", {"path": "big.py", "content": content}, "too big; nothing was run"))]
    plan = choose_fold(msgs, sizes(msgs), keep_last=8, room=2000)
    new = apply_fold(msgs, plan, RECORD_MARKER)
    args = json.loads(new[3]["tool_calls"][0]["function"]["arguments"])
    assert args["path"] == "big.py" and "keel cut" in args["content"] and len(args["content"]) < 10_000
    assert new[4]["content"] == "too big; nothing was run"            # the answer the model needs, whole
    assert sum(sizes(new[3:])) <= 2000 and pairing_problems(new) == []
    assert msgs[2]["tool_calls"][0]["function"]["arguments"].count("x = 1") == 200_000  # caller's dict untouched
