"""Compaction planning: which messages fold into the record, which outputs become stubs. Pure.

A history is the stable prefix (everything before the first assistant message: system prompt,
task, project overview), then units: an assistant message with the tool messages answering its
calls, or a lone message. Compaction keeps the prefix object-for-object (byte-identical), puts one
record message after it, and keeps the last ``keep_last`` messages verbatim, cut only at unit
boundaries so every tool call keeps exactly its answers. If that still does not fit, in order:
superseded file reads become stubs (an older read_file of a file read again or edited since), then
outputs of components over their budget share, then whole units fold from the oldest, and last the
newest outputs are cut in the middle. Every history this module returns is valid for Chat
Completions (``pairing_problems`` says why one is not).
"""

from __future__ import annotations

import json
import posixpath
from collections.abc import Sequence
from dataclasses import dataclass, field
from typing import Any

from keel.context.budget import component_of, tool_names_by_call

RECORD_MARKER = "[keel context record]"
READS = frozenset({"read_file"})
EDITS = frozenset({"write_file", "edit_file", "change_file"})
STUB_TOKENS = 40          # what a stub costs, for planning
STUB_PREFIX = "[keel: the output of "
MIN_KEPT_CHARS = 400      # a cut output keeps at least this much of its head and tail together


def is_record(message: dict[str, Any]) -> bool:
    content = message.get("content")
    return message.get("role") == "user" and isinstance(content, str) and content.startswith(RECORD_MARKER)


def stable_prefix_len(messages: Sequence[dict[str, Any]]) -> int:
    for i, m in enumerate(messages):
        if m.get("role") in ("assistant", "tool") or is_record(m):
            return i
    return len(messages)


def units(messages: Sequence[dict[str, Any]], start: int) -> list[tuple[int, int]]:
    """[start, end) spans from ``start``: an assistant message with its tool answers, or one message."""
    spans: list[tuple[int, int]] = []
    i = start
    while i < len(messages):
        end = i + 1
        if messages[i].get("role") == "assistant" and messages[i].get("tool_calls"):
            while end < len(messages) and messages[end].get("role") == "tool":
                end += 1
        spans.append((i, end))
        i = end
    return spans


@dataclass(frozen=True)
class CallInfo:
    name: str
    args: dict[str, Any]

    @property
    def path(self) -> str | None:
        value = self.args.get("path")
        return posixpath.normpath(value) if isinstance(value, str) and value else None

    def short(self, limit: int = 100) -> str:
        text = json.dumps(self.args, ensure_ascii=False)
        return f"{self.name}({text if len(text) <= limit else text[:limit] + '…'})"


def calls_by_id(messages: Sequence[dict[str, Any]]) -> dict[str, CallInfo]:
    out: dict[str, CallInfo] = {}
    for m in messages:
        for c in m.get("tool_calls") or ():
            fn = c.get("function") or {}
            try:
                args = json.loads(fn.get("arguments") or "{}")
            except (json.JSONDecodeError, TypeError):
                args = {}
            out[str(c.get("id"))] = CallInfo(str(fn.get("name") or ""), args if isinstance(args, dict) else {})
    return out


def superseded_reads(messages: Sequence[dict[str, Any]]) -> dict[int, str]:
    """Tool messages holding a read_file result that a later read of the same slice or a later edit
    of the file made stale: index → the path."""
    calls = calls_by_id(messages)
    latest_read: dict[tuple[str, Any, Any], int] = {}
    reads_of: dict[str, list[int]] = {}
    stale: dict[int, str] = {}
    for i, m in enumerate(messages):
        if m.get("role") != "tool":
            continue
        call = calls.get(str(m.get("tool_call_id")))
        if call is None or call.path is None:
            continue
        if call.name in READS:
            key = (call.path, call.args.get("offset"), call.args.get("limit"))
            if key in latest_read:
                stale[latest_read[key]] = call.path
            latest_read[key] = i
            reads_of.setdefault(call.path, []).append(i)
        elif call.name in EDITS:
            for j in reads_of.pop(call.path, []):
                stale[j] = call.path
            for key in [k for k in latest_read if k[0] == call.path]:
                del latest_read[key]
    return stale


@dataclass(frozen=True)
class Fold:
    prefix_len: int
    fold_end: int                                  # messages[prefix_len:fold_end] fold into the record
    stubbed: dict[int, str] = field(default_factory=dict)   # kept index → why its output is a stub
    cut: dict[int, int] = field(default_factory=dict)       # kept index → characters of output kept
    args_cut: dict[int, int] = field(default_factory=dict)  # kept assistant index → chars kept per argument

    @property
    def folded(self) -> range:
        return range(self.prefix_len, self.fold_end)


def choose_fold(messages: Sequence[dict[str, Any]], sizes: Sequence[int], *, keep_last: int, room: int,
                    over_share: Sequence[str] = (), hard_room: int | None = None) -> Fold:
    """Fold enough that the kept messages (after the prefix and the record) fit in ``room`` tokens.
    ``sizes``: tokens per message; ``over_share``: budget components using more than their share;
    ``hard_room``: what the newest unit alone may take before its outputs are cut (default ``room``):
    the model should see the result it just asked for whole whenever the window allows."""
    prefix = stable_prefix_len(messages)
    spans = units(messages, prefix)
    kept, count = len(spans), 0
    while kept > 0 and count < keep_last:
        kept -= 1
        count += spans[kept][1] - spans[kept][0]
    tail = spans[kept:] or spans[-1:]
    stubbed: dict[int, str] = {}
    stale = superseded_reads(messages)
    names = tool_names_by_call(messages)

    def size() -> int:
        return sum(STUB_TOKENS if i in stubbed else sizes[i] for a, b in tail for i in range(a, b))

    tail_tools = [i for a, b in tail for i in range(a, b) if messages[i].get("role") == "tool"]
    for i in tail_tools:
        if i in stale:
            stubbed[i] = f"superseded: {stale[i]} was read again or edited later"
    for component in over_share:
        mine = [i for i in tail_tools if component_of(messages[i], i, prefix, names) == component]
        for i in mine[:-1]:  # oldest first; the newest output of a component stays whole this way
            if size() <= room:
                break
            if i not in stubbed and sizes[i] > STUB_TOKENS:
                stubbed[i] = f"folded at compaction: {component.replace('_', ' ')} was over its share of the window"
    while tail and (is_record(messages[tail[0][0]]) or (size() > room and len(tail) > 1)):
        tail = tail[1:]  # an earlier record always folds into the new one
    excess = size() - max(room, hard_room or 0)
    cut = _cuts(messages, sizes, tail[0], stubbed, excess) if tail else {}
    excess -= sum(len(str(messages[i].get("content") or "")) - keep for i, keep in cut.items()) // 4
    args_cut = _argument_cuts(messages, sizes, tail[0], excess) if tail else {}
    fold_end = tail[0][0] if tail else len(messages)
    return Fold(prefix, fold_end, {i: why for i, why in stubbed.items() if i >= fold_end}, cut, args_cut)


def _cuts(messages: Sequence[dict[str, Any]], sizes: Sequence[int], unit: tuple[int, int],
          stubbed: dict[int, str], excess: int) -> dict[int, int]:
    """Last resort for the one unit left: cut the middle of its largest outputs until it fits."""
    cut: dict[int, int] = {}
    outputs = [i for i in range(*unit) if messages[i].get("role") == "tool" and i not in stubbed]
    for i in sorted(outputs, key=lambda i: -sizes[i]):
        if excess <= 0:
            break
        chars = len(str(messages[i].get("content") or ""))
        keep = max(MIN_KEPT_CHARS, chars - excess * 4 - 200)
        if keep < chars:
            cut[i] = keep
            excess -= (chars - keep) // 4
    return cut


def _argument_cuts(messages: Sequence[dict[str, Any]], sizes: Sequence[int], unit: tuple[int, int],
                   excess: int) -> dict[int, int]:
    """When even that is not enough, the newest call's own long arguments (a huge write_file content the
    tool refused) are cut too: string values keep their start and end, the JSON stays valid."""
    i = unit[0]
    if excess <= 0 or messages[i].get("role") != "assistant" or sizes[i] * 4 < MIN_KEPT_CHARS * 2:
        return {}
    longest = max((len(str((c.get("function") or {}).get("arguments") or "")) for c in messages[i]["tool_calls"]),
                  default=0)
    keep = max(MIN_KEPT_CHARS, longest - excess * 4 - 200)
    return {i: keep} if keep < longest else {}


def cut_arguments(arguments: str, keep: int) -> str:
    try:
        parsed = json.loads(arguments)
    except json.JSONDecodeError:
        return cut_middle(arguments, keep)  # malformed already: the model was told so when it ran
    if not isinstance(parsed, dict):
        return cut_middle(arguments, keep)
    return json.dumps({k: cut_middle(v, keep) if isinstance(v, str) else v for k, v in parsed.items()},
                      ensure_ascii=False)


def apply_fold(messages: Sequence[dict[str, Any]], plan: Fold, record: str) -> list[dict[str, Any]]:
    """The new history: the prefix (same objects), the record, then the kept messages."""
    calls = calls_by_id(messages)
    out = list(messages[:plan.prefix_len])
    out.append({"role": "user", "content": record})
    for i in range(plan.fold_end, len(messages)):
        m = messages[i]
        if i in plan.stubbed:
            m = {**m, "content": stub_text(calls.get(str(m.get("tool_call_id"))), str(m.get("content") or ""),
                                           plan.stubbed[i])}
        elif i in plan.cut:
            m = {**m, "content": cut_middle(str(m.get("content") or ""), plan.cut[i])}
        if i in plan.args_cut:
            m = {**m, "tool_calls": [{**c, "function": {**c["function"], "arguments": cut_arguments(
                str(c["function"].get("arguments") or ""), plan.args_cut[i])}} for c in m["tool_calls"]]}
        out.append(m)
    return out


def stub_text(call: CallInfo | None, content: str, why: str) -> str:
    what = call.short() if call is not None else "this call"
    lines = content.count("\n") + 1 if content else 0
    return f"{STUB_PREFIX}{what} ({lines} lines) was removed from the context — {why}. Run it again if you need it.]"


def cut_middle(text: str, keep: int) -> str:
    if len(text) <= keep:
        return text
    head = keep * 2 // 3
    tail = keep - head
    return (f"{text[:head]}\n[… keel cut {len(text) - keep} characters here to fit the context window; "
            f"run the command again with a narrower scope to see them …]\n{text[len(text) - tail:]}")


def shrink_for_summary(messages: Sequence[dict[str, Any]], sizes: Sequence[int], room: int) -> list[dict[str, Any]]:
    """The history for the summarising request when it does not fit as is: tool outputs become
    stubs, oldest first, until it does (pairing stays intact; only contents change)."""
    calls = calls_by_id(messages)
    out = list(messages)
    total = sum(sizes)
    for i, m in enumerate(messages):
        if total <= room:
            break
        if m.get("role") == "tool" and sizes[i] > STUB_TOKENS:
            out[i] = {**m, "content": stub_text(calls.get(str(m.get("tool_call_id"))), str(m.get("content") or ""),
                                                "folded so the summary request fits")}
            total -= sizes[i] - STUB_TOKENS
    return out


def pairing_problems(messages: Sequence[dict[str, Any]]) -> list[str]:
    """Why ``messages`` would be refused by a Chat Completions server: every assistant tool call
    must be answered by exactly one tool message right after it, in order, and no tool message
    may answer nothing."""
    problems: list[str] = []
    i = 0
    while i < len(messages):
        m = messages[i]
        if m.get("role") == "assistant" and m.get("tool_calls"):
            ids = [c.get("id") for c in m["tool_calls"]]
            answers = [x.get("tool_call_id") if x.get("role") == "tool" else None
                       for x in messages[i + 1:i + 1 + len(ids)]]
            if answers != ids:
                problems.append(f"message {i}: calls {ids} answered by {answers}")
            i += 1 + len(ids)
        else:
            if m.get("role") == "tool":
                problems.append(f"message {i}: a tool message that answers no call")
            i += 1
    return problems
