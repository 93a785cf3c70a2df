"""Recover tool calls that a model wrote as text instead of structured ``tool_calls``.

This happens when the server's tool parser is off or mismatched (vLLM without
``--tool-call-parser``, llama.cpp without ``--jinja``, an Ollama template without tools) and
with small models that imitate the format loosely. Four forms are understood:

1. Hermes / Qwen2.5: ``<tool_call>{"name": ..., "arguments": {...}}</tool_call>``
2. Qwen3-Coder XML: ``<tool_call><function=NAME><parameter=P>value</parameter></function></tool_call>``
3. A fenced JSON call object, or a reply that is nothing but ``{"name": ..., "arguments": {...}}``
   (perhaps in wrapper tags such as ``<tools>``/``<response>``/``<json>``) — only for offered tool
   names, and never an object in the middle of prose: "one could call a tool like this: {...}"
   is an example, and a false call would run something (keel/engine/recovery_json.py).
4. The ``functions.NAME:`` line that llama-cpp-python's ``chatml-function-calling`` format
   teaches, optionally followed by a JSON object of arguments — again only for offered names.

Values are cut only where the format's structure says (keel/engine/recovery_xml.py), so a
``write_file`` whose content holds ``</parameter>`` or a whole quoted ``<tool_call>`` is written
whole and the quoted call never runs. Differences from vLLM/SGLang/llama.cpp: docs/parsers.md.

Forms 1 and 2 keep unknown names (the loop then tells the model which tools exist) but never a
template placeholder such as ``<function-name>``: that is the model echoing its instructions.
"""

from __future__ import annotations

import json
import re
from collections.abc import Mapping
from typing import Any

from keel.engine.recovery_json import (
    Block,
    call_from_object,
    calls_in,
    decode_at,
    hermes_objects,
    object_cut,
    recover_functions_prefix,
    recover_json,
    salvage_body,
)
from keel.engine.recovery_xml import (
    FUNCTION_CLOSE,
    FUNCTION_OPEN,
    TOOL_CALL_CLOSE,
    TOOL_CALL_OPEN,
    Scanner,
    parse_function_body,
    skip_ws,
    tag_name,
    typed_value,
)
from keel.engine.types import ToolCall

_FUNCTION_NAMED_OPEN = '<function name="'
# Qwen2.5-Coder's form: <tools>{"name": ..., "arguments": ...}</tools>, or a JSON list of such objects.
TOOLS_OPEN, TOOLS_CLOSE = "<tools>", "</tools>"
_IDENTIFIER_RE = re.compile(r"^[^\W\d][\w.\-]*$")  # any script's letters: 获取天气 is a name
# Traces of an attempted call in text that was not recovered (the loop tells the model so).
_CALL_HINT_RE = re.compile(r"<tool_call>|</?function\s*=|(?m:^[ \t]*`?functions\.\w+)|\"name\"\s*:\s*\"\w+\"\s*,\s*\"(?:arguments|parameters)\"")
# Names that instruction templates use as stand-ins; a model echoing them is not calling anything.
_PLACEHOLDER_NAMES = frozenset({
    "name", "tool", "tool_name", "toolname", "function", "function_name", "functionname", "action",
    "action_name", "your_tool", "tool_call", "example", "example_tool", "func", "fn", "call",
})

JsonSchema = Mapping[str, Any]
# The format ``recover_text_tool_calls`` reports for a reply that ends inside a call: nothing is
# recovered from it, since a value cut short (half a file for write_file) must never run.
CUT = "cut"


_TEXT_CALL_ID = re.compile(r"call_txt_(\d+)")


def first_free_text_call_id(messages: list[dict[str, Any]], start: int) -> int:
    """The next ``call_txt_<n>`` number not used in ``messages``: a resumed session's history already
    holds the ids an earlier process gave out, and a repeated id would pair a result with the wrong call."""
    used = [int(m.group(1)) for msg in messages for call in (msg.get("tool_calls") or [])
            if isinstance(call, dict) and (m := _TEXT_CALL_ID.fullmatch(str(call.get("id", ""))))]
    return max([start, *(n + 1 for n in used)])


def recover_text_tool_calls(content: str, tool_names: set[str], *,
                            schemas: Mapping[str, JsonSchema] | None = None,
                            id_start: int = 1, after_prose: bool = False) -> tuple[str, list[ToolCall], str]:
    """Return (content without the recovered call text, calls, format).

    ``format`` is "hermes", "qwen3_coder", "json", "functions" or "" when nothing was recovered,
    in which case the content comes back unchanged; ``CUT`` ("cut") when the text ends inside a
    call (no closing tag, an unterminated object): then no call is recovered at all. ``schemas`` maps tool name to its JSON-schema
    parameters; with it, Qwen3-Coder parameter values are typed the way the tool expects (a
    ``content`` of ``42`` stays the string "42") and only the tool's own parameter names can end a
    value. Ids are ``call_txt_<n>`` from ``id_start``.

    ``after_prose``: the reply was decoded under keel's tool-call grammar (keel.engine.grammar),
    whose only shape is one line of prose without '<' or '{' and then the call; a bare call object
    after that prose is a call by construction (never so in free text, where it may be quoted).
    """
    blocks = find_blocks(content, tool_names, schemas=schemas, after_prose=after_prose)
    blocks.sort(key=lambda b: b.start)
    if _ends_inside_call(content, blocks, tool_names):
        return content, [], CUT
    if not blocks:
        return content, [], ""
    # Text after the last call was written before its result existed: small models go on to
    # "assume the output is …" and later answer from that invention. Keep only what precedes it.
    pieces, done = [], 0
    for block in blocks:  # joined once: cutting a copy per block is quadratic with many calls
        pieces.append(content[done:block.start])
        done = max(done, block.end)
    remaining = "".join(pieces)
    calls = [ToolCall(id="", name=name, arguments=args) for block in blocks for name, args in block.calls]
    for n, call in enumerate(calls):
        call.id = f"call_txt_{id_start + n}"
    return _tidy(remaining), calls, blocks[0].fmt


def _closed(content: str, end: int, tags: tuple[str, ...]) -> bool:
    """Does ``content[:end]`` end, blanks aside, with one of ``tags``? (No copy: blocks can be many.)"""
    while end > 0 and content[end - 1] in " \t\r\n":
        end -= 1
    return any(content.startswith(tag, end - len(tag)) for tag in tags if end >= len(tag))


def _ends_inside_call(content: str, blocks: list[Block], tool_names: set[str]) -> bool:
    """Does the reply stop before its last call does? The last call reaches the end of the text
    without its closing tag or object end, or an opening with no call read from it is the last thing."""
    end = len(content.rstrip())
    if blocks and not blocks[-1].whole and blocks[-1].end >= end:
        return True
    after = blocks[-1].end if blocks else 0
    opening = max(content.rfind(TOOL_CALL_OPEN), content.rfind(FUNCTION_OPEN), content.rfind(_FUNCTION_NAMED_OPEN))
    if opening >= after and content.find(TOOL_CALL_CLOSE, opening) == -1 and content.find(FUNCTION_CLOSE, opening) == -1:
        tail = content[opening + len(TOOL_CALL_OPEN):] if content.startswith(TOOL_CALL_OPEN, opening) else ""
        return not tail.strip() or tail.lstrip().startswith(("<", "{")) and (
            not tail.lstrip().startswith("{") or object_cut(tail, tool_names))
    return not blocks and object_cut(content, tool_names)


def find_blocks(content: str, tool_names: set[str], *, schemas: Mapping[str, JsonSchema] | None = None,
                after_prose: bool = False) -> list[Block]:
    """Where ``content`` holds calls, in any of the forms, each with its calls (unsorted)."""
    if not content:
        return []
    blocks = (_recover_tagged(content, tool_names, schemas or {}) or recover_json(content, tool_names)
              or recover_functions_prefix(content, tool_names))
    if not blocks and after_prose:
        brace = content.find("{")
        if brace > 0 and "<" not in content[:brace] and (found := calls_in(content[brace:], tool_names)):
            blocks = [Block(brace, len(content), found, "json")]
    return blocks


class _NextTag:
    """Next occurrence of a marker at or after a position, each marker searched again only when
    passed: finding the earliest of several markers stays linear over the whole text."""

    def __init__(self, text: str, markers: tuple[str, ...]) -> None:
        self.text, self.found = text, {m: -2 for m in markers}

    def after(self, pos: int) -> int:
        for marker, at in self.found.items():
            if at != -1 and at < pos:
                self.found[marker] = self.text.find(marker, pos)
        hits = [at for at in self.found.values() if at != -1]
        return min(hits) if hits else -1


def _recover_tagged(content: str, tool_names: set[str], schemas: Mapping[str, JsonSchema]) -> list[Block]:
    """``<tool_call>`` blocks and bare ``<function=...>`` blocks, read in order: whatever a call's
    value swallows (a quoted call inside ``content``) is never read as a call of its own."""
    blocks: list[Block] = []
    markers = _NextTag(content, (TOOL_CALL_OPEN, FUNCTION_OPEN, _FUNCTION_NAMED_OPEN, TOOLS_OPEN))
    scanner = Scanner(content)
    pos = 0
    while (start := markers.after(pos)) != -1:
        if content.startswith(TOOL_CALL_OPEN, start):
            calls, end, fmt, whole = _parse_tool_call(scanner, start, schemas)
        elif content.startswith(TOOLS_OPEN, start):
            calls, end, fmt = _parse_tools(content, start)
            whole = True  # objects that parsed are whole; a cut one is no call (and object_cut sees it)
        else:
            calls, end, fmt = _parse_functions(scanner, start, schemas)
            whole = _closed(content, end, (FUNCTION_CLOSE, TOOL_CALL_CLOSE))
        calls = [(n, a) for n, a in calls if not _is_placeholder(n, tool_names)]
        if calls:
            blocks.append(Block(start, end, calls, fmt, whole))
        pos = max(end, start + 1)
    return blocks


def _parse_tool_call(scanner: Scanner, start: int,
                     schemas: Mapping[str, JsonSchema]) -> tuple[list[tuple[str, str]], int, str, bool]:
    """(calls, end, format, whether the call's syntax ended: a closing tag or a complete object)."""
    content = scanner.text
    body = skip_ws(content, start + len(TOOL_CALL_OPEN))
    whole = True
    if content.startswith((FUNCTION_OPEN, _FUNCTION_NAMED_OPEN), body):
        calls, end, fmt = _parse_functions(scanner, body, schemas)
        whole = _closed(content, end, (FUNCTION_CLOSE,))
    else:
        next_open = content.find(TOOL_CALL_OPEN, body)
        limit = len(content) if next_open == -1 else next_open
        parsed = hermes_objects(content, body, limit)
        fmt = "hermes"
        if parsed is not None:
            calls, end = parsed
        else:
            # Malformed JSON: the block ends at its close tag, or the next opening, or the end.
            close = content.find(TOOL_CALL_CLOSE, body, limit)
            end = limit if close == -1 else close
            calls = salvage_body(content[body:end])
            whole = False
    end = skip_ws(content, end)
    if content.startswith(TOOL_CALL_CLOSE, end):
        end += len(TOOL_CALL_CLOSE)
        whole = True
    return calls, end, fmt, whole


def _parse_tools(content: str, start: int) -> tuple[list[tuple[str, str]], int, str]:
    """``<tools>`` holding call objects (or one list of them). Qwen2.5's template also lists the tool
    *definitions* in ``<tools>``: an object with a description or a JSON schema for parameters is
    a model echoing its instructions, never a call. Malformed JSON is no call (as vLLM reads it)."""
    body = skip_ws(content, start + len(TOOLS_OPEN))
    close = content.find(TOOLS_CLOSE, body)
    limit = len(content) if close == -1 else close
    decoded = decode_at(content, body) if content.startswith("[", body) else None
    if decoded is not None and isinstance(decoded[0], list):
        objects, end = decoded[0], decoded[1]
    else:
        objects, end = [], body
        while end < limit and content.startswith("{", end) and (one := decode_at(content, end)) is not None:
            objects.append(one[0])
            end = skip_ws(content, one[1])
    calls = [call for obj in objects if not _is_definition(obj) and (call := call_from_object(obj))]
    end = skip_ws(content, end)
    if content.startswith(TOOLS_CLOSE, end):
        end += len(TOOLS_CLOSE)
    return calls, end, "hermes"


def _is_definition(obj: Any) -> bool:
    if not isinstance(obj, dict):
        return True
    function = obj.get("function")
    inner: dict[str, Any] = function if isinstance(function, dict) and "name" not in obj else obj
    params = inner.get("parameters")
    return "description" in inner or (isinstance(params, dict) and ("properties" in params or params.get("type") == "object"))


def _parse_functions(scanner: Scanner, pos: int,
                     schemas: Mapping[str, JsonSchema]) -> tuple[list[tuple[str, str]], int, str]:
    """Consecutive ``<function=...>`` blocks from ``pos`` (one ``<tool_call>`` may hold several)."""
    content = scanner.text
    calls: list[tuple[str, str]] = []
    fmt = "qwen3_coder"
    while content.startswith((FUNCTION_OPEN, _FUNCTION_NAMED_OPEN), pos):
        parsed = _parse_function(scanner, pos, schemas)
        if parsed is None:
            return calls, pos + 1, fmt
        call, pos, fmt = parsed
        calls.append(call)
        after = skip_ws(content, pos)
        if not content.startswith((FUNCTION_OPEN, _FUNCTION_NAMED_OPEN), after):
            break
        pos = after
    return calls, pos, fmt


def _parse_function(scanner: Scanner, pos: int,
                    schemas: Mapping[str, JsonSchema]) -> tuple[tuple[str, str], int, str] | None:
    content = scanner.text
    if content.startswith(_FUNCTION_NAMED_OPEN, pos):
        # llama.cpp's Hermes 2 Pro variant: <function name="NAME">{json}</function>
        quote = content.find('">', pos + len(_FUNCTION_NAMED_OPEN), pos + len(_FUNCTION_NAMED_OPEN) + 200)
        if quote == -1:
            return None
        name, body = content[pos + len(_FUNCTION_NAMED_OPEN):quote].strip(), quote + 2
    else:
        named = tag_name(content, pos + len(FUNCTION_OPEN))
        if named is None:
            return None
        name, body = named
    json_args = _json_arguments(content, body)
    if json_args is not None:
        return (name, json_args[0]), json_args[1], "hermes"
    props = (schemas.get(name) or {}).get("properties") or {}
    raw, end = parse_function_body(scanner, body, props)
    args = {param: typed_value(value, props.get(param)) for param, value in raw.items()}
    return (name, json.dumps(args, ensure_ascii=False)), end, "qwen3_coder"


def _json_arguments(content: str, body: int) -> tuple[str, int] | None:
    """``<function=NAME>{"arg1": 1}</function>`` (Hermes 2 Pro as llama.cpp reads it)."""
    pos = skip_ws(content, body)
    if not content.startswith("{", pos):
        return None
    decoded = decode_at(content, pos)
    if decoded is None or not isinstance(decoded[0], dict):
        return None
    end = skip_ws(content, decoded[1])
    if content.startswith(FUNCTION_CLOSE, end):
        end += len(FUNCTION_CLOSE)
    elif end < len(content) and not content.startswith(TOOL_CALL_CLOSE, end):
        return None
    return json.dumps(decoded[0], ensure_ascii=False), end


def looks_like_tool_call(content: str, tool_names: set[str]) -> bool:
    """Does text that yielded no call still carry the marks of an attempted one? Then the reply is
    a failed call, not an answer, and the model should be told how to call tools."""
    if _CALL_HINT_RE.search(content):
        return True
    return any(re.search(rf"(?m)^[ \t]*`?{re.escape(name)}\s*\(", content) for name in tool_names)


def _is_placeholder(name: str, tool_names: set[str]) -> bool:
    if name in tool_names:
        return False
    return not _IDENTIFIER_RE.match(name) or name.lower() in _PLACEHOLDER_NAMES


def _tidy(text: str) -> str:
    return re.sub(r"\n{3,}", "\n\n", text).strip()
