"""A reply's reasoning, where the server left it in the content, and the one text-call recovery step
every engine runs on a finished reply.

Qwen3 models think in ``<think>…</think>`` before they answer. A server without a reasoning parser
(vLLM without ``--reasoning-parser``, llama.cpp with ``--reasoning-format none``, a plain template)
hands that text back as content. Calls the model drafts while thinking are not calls: the model
has not decided yet, and running its drafts runs what it may go on to reject. So the reasoning
is split off first (it becomes the turn's ``reasoning``, as a reasoning parser would have made it)
and calls are recovered from the answer alone.

Where the template opened ``<think>`` itself, the reply starts inside the reasoning and holds only
the closing tag: everything before it is reasoning, unless the text before that ``</think>`` stops
inside a call (the tag is then a call's value: a file about think tags). A reply with no think tag at all is
all answer: keel cannot see that a template opened one. Differences from the engines' parsers:
docs/parsers.md.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from keel.engine.recovery import CUT, find_blocks, recover_text_tool_calls
from keel.engine.types import AssistantTurn, ToolCall

THINK_OPEN, THINK_CLOSE = "<think>", "</think>"
# Where a call could start: a </think> after one of these may be part of the call's text.
_CALL_MARKS = ("<tool_call>", "<function=", "<function name=", "<tools>", "{")
_CALL_ENDS = ("</tool_call>", "</function>", "</tools>", "}", "```")


def split_reasoning(content: str, tool_names: set[str] = frozenset(),  # type: ignore[assignment]
                    schemas: Mapping[str, Any] | None = None) -> tuple[str, str]:
    """(reasoning, answer). No think tag: ("", content) unchanged."""
    start = len(content) - len(content.lstrip())
    if content.startswith(THINK_OPEN, start):
        body = start + len(THINK_OPEN)
        close = content.find(THINK_CLOSE, body)
        if close == -1:  # cut while thinking: all of it is reasoning
            return content[body:].strip(), ""
        return content[body:close].strip(), content[close + len(THINK_CLOSE):].lstrip()
    close = content.find(THINK_CLOSE)
    if close == -1:
        return "", content
    before = content[:close]
    if any(mark in before for mark in _CALL_MARKS) and _ends_inside_a_call(before, tool_names, schemas):
        return "", content  # the tag is a call's text (a file about think tags), not the end of reasoning
    return before.strip(), content[close + len(THINK_CLOSE):].lstrip()


def _ends_inside_a_call(text: str, tool_names: set[str], schemas: Mapping[str, Any] | None) -> bool:
    """Does ``text`` stop in the middle of a call? Calls drafted and closed before it do not count."""
    end = len(text.rstrip())
    return any(b.end >= end and not text[:b.end].rstrip().endswith(_CALL_ENDS)
               for b in find_blocks(text, tool_names, schemas=schemas))


def recover_reply(content: str, tool_names: set[str], *, schemas: Mapping[str, Any] | None = None,
                  id_start: int = 1, after_prose: bool = False) -> tuple[str, str, list[ToolCall], str]:
    """(reasoning, answer without the call text, calls recovered from the answer, format)."""
    reasoning, answer = split_reasoning(content, tool_names, schemas)
    rest, calls, fmt = recover_text_tool_calls(answer, tool_names, schemas=schemas, id_start=id_start,
                                               after_prose=after_prose)
    return reasoning, rest, calls, fmt


def recover_turn(turn: AssistantTurn, tools: list[dict[str, Any]], *, id_start: int,
                 after_prose: bool = False) -> int:
    """Split reasoning off ``turn.content`` and recover its text calls in place; the number of calls.
    An answer that ends inside a call gets none and ``turn.cut_reason = "call"``."""
    functions = [t.get("function") or {} for t in tools if isinstance(t, dict)]
    schemas = {f["name"]: f.get("parameters") or {} for f in functions if isinstance(f.get("name"), str)}
    reasoning, answer = split_reasoning(turn.content, set(schemas), schemas)
    if answer != turn.content:
        turn.reasoning = f"{turn.reasoning}\n{reasoning}" if turn.reasoning and reasoning else turn.reasoning or reasoning
        turn.content = answer
    content, calls, fmt = recover_text_tool_calls(answer, set(schemas), schemas=schemas, id_start=id_start,
                                                  after_prose=after_prose)
    if fmt == CUT:  # the answer ends inside a call: none runs, the loop says it was cut
        turn.cut_reason = "call"
    elif calls:
        turn.content, turn.tool_calls, turn.tool_call_format = content, calls, fmt
    return len(calls)
