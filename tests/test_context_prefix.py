"""Prefix reuse and cache-break causes (keel.context.prefix), as tables of request pairs."""

from __future__ import annotations

import pytest

from keel.context.prefix import TOOLS_INDEX, RequestShape, common_prefix_len, compare, overall_reuse
from keel.context.tokens import serialize


def shape(messages, tools=("read_file",), ephemeral=0):
    return RequestShape(serialize(list(tools)), tuple(serialize(m) for m in messages), ephemeral)


SYS = {"role": "system", "content": "You are keel."}
TASK = {"role": "user", "content": "fix the bug"}
A1 = {"role": "assistant", "content": "", "tool_calls": [{"id": "c1", "type": "function",
                                                         "function": {"name": "read_file", "arguments": "{}"}}]}
T1 = {"role": "tool", "tool_call_id": "c1", "content": "x" * 300}
PUSH = {"role": "user", "content": "You have not run the tests."}
RECORD = {"role": "user", "content": "[keel context record] ..."}


@pytest.mark.parametrize(("prev", "cur", "compacted", "reuse", "index", "cause"), [
    # the history only grew: the whole previous request is repeated
    (shape([SYS, TASK]), shape([SYS, TASK, A1, T1]), False, 1.0, None, None),
    # the previous request's pushback is replaced by the model's reply: by design, not a break
    (shape([SYS, TASK, PUSH], ephemeral=1), shape([SYS, TASK, A1, T1]), False, None, 2, "ephemeral"),
    # keel rewrote the history after the prefix
    (shape([SYS, TASK, A1, T1]), shape([SYS, TASK, RECORD]), True, None, 2, "compaction"),
    # the same rewrite without a compaction is somebody editing history
    (shape([SYS, TASK, A1, T1]), shape([SYS, TASK, A1, {**T1, "content": "y" * 300}]), False, None, 3,
     "edited_history"),
    # a changed system prompt breaks everything after the tools
    (shape([SYS, TASK]), shape([{**SYS, "content": "You are keel, v2."}, TASK]), False, None, 0, "edited_history"),
    # a new tool: the tool list is measured first, so almost nothing is reused
    (shape([SYS, TASK]), shape([SYS, TASK], tools=("read_file", "grep")), False, None, TOOLS_INDEX,
     "tool_list_change"),
])
def test_divergence_is_found_and_named(prev, cur, compacted, reuse, index, cause):
    report = compare(prev, cur, compacted=compacted)
    assert report.diverged_at == index
    assert report.cause == cause
    if reuse is not None:
        assert report.reuse == reuse
    else:
        assert 0.0 <= report.reuse < 1.0
    assert report.cache_break == (cause in ("compaction", "tool_list_change", "edited_history"))


def test_reuse_counts_the_shared_bytes_of_the_first_changed_message():
    prev = shape([SYS, TASK, A1, {**T1, "content": "abc" + "x" * 97}])
    cur = shape([SYS, TASK, A1, {**T1, "content": "abc" + "y" * 97}])
    report = compare(prev, cur)
    head = len(prev.tools_text) + sum(len(t) for t in prev.texts[:3])
    assert report.shared_chars == head + common_prefix_len(prev.texts[3], cur.texts[3])
    assert report.shared_chars > head  # '{"role":"tool",...,"content":"abc' is shared too
    assert report.reuse == report.shared_chars / prev.total_chars


def test_first_request_has_nothing_to_reuse_and_overall_weighs_by_size():
    first = compare(None, shape([SYS, TASK]))
    assert first.reuse is None and first.cause is None and first.base_chars == 0
    grow = compare(shape([SYS, TASK]), shape([SYS, TASK, A1, T1]))
    cut = compare(shape([SYS, TASK, A1, T1]), shape([SYS, TASK, RECORD]), compacted=True)
    total = overall_reuse([first, grow, cut])
    assert total == (grow.shared_chars + cut.shared_chars) / (grow.base_chars + cut.base_chars)
    assert cut.reuse < total < 1.0


@pytest.mark.parametrize(("a", "b", "n"), [
    ("", "", 0), ("abc", "abd", 2), ("abc", "abc", 3), ("ab", "abc", 2),
    ("x" * 10000 + "a", "x" * 10000 + "b", 10000), ("x" * 8192, "x" * 8192, 8192),
])
def test_common_prefix_len(a, b, n):
    assert common_prefix_len(a, b) == n
