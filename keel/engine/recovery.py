"""Recover tool calls that a model wrote as text instead of structured ``tool_calls``.

This happens when the server's tool parser is off or mismatched (vLLM without
``--tool-call-parser``, llama.cpp without ``--jinja``, an Ollama template without tools) and
with small models that imitate the format loosely. Three forms are understood:

1. Hermes / Qwen2.5: ``<tool_call>{"name": ..., "arguments": {...}}</tool_call>``
2. Qwen3-Coder XML: ``<tool_call><function=NAME><parameter=P>value</parameter></function></tool_call>``
3. A ```json fence or bare JSON object ``{"name": ..., "arguments": {...}}`` — only for offered
   tool names, because prose full of JSON is common and a false call would run something.
4. The ``functions.NAME:`` line that llama-cpp-python's ``chatml-function-calling`` format
   teaches, optionally followed by a JSON object of arguments — again only for offered names.

Forms 1 and 2 keep unknown names (the loop then tells the model which tools exist) but never a
template placeholder such as ``<function-name>``: that is the model echoing its instructions.
"""

from __future__ import annotations

import json
import re
from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any

from keel.engine.types import ToolCall

_TOOL_CALL_OPEN = "<tool_call>"
_TOOL_CALL_CLOSE = "</tool_call>"
_FUNCTION_RE = re.compile(r"<function\s*=\s*([^>\n]*)>")
_FUNCTION_CLOSE = "</function>"
_PARAMETER_RE = re.compile(r"<parameter\s*=\s*([^>\n]*)>")
_PARAMETER_CLOSE = "</parameter>"
_FENCE_RE = re.compile(r"```[ \t]*([A-Za-z_]*)[ \t]*\n(.*?)```", re.DOTALL)
_NAME_RE = re.compile(r'"name"\s*:\s*"([^"\\]*)"')
_ARGS_KEY_RE = re.compile(r'"(?:arguments|parameters)"\s*:\s*')
_IDENTIFIER_RE = re.compile(r"^[A-Za-z_][A-Za-z0-9_.\-]*$")
_JSONISH_RE = re.compile(r"^(?:[\[{].*|-?\d+(?:\.\d+)?(?:[eE][+-]?\d+)?|true|false|null)$", re.DOTALL)
# Names that instruction templates use as stand-ins; a model echoing them is not calling anything.
_FUNCTIONS_PREFIX_RE = re.compile(r"(?m)^[ \t]*`?functions\.([A-Za-z_][\w\-]*)`?[ \t]*:?[ \t]*")
# Traces of an attempted call in text that was not recovered (the loop tells the model so).
_CALL_HINT_RE = re.compile(r"<tool_call>|</?function\s*=|(?m:^[ \t]*`?functions\.\w+)|\"name\"\s*:\s*\"\w+\"\s*,\s*\"(?:arguments|parameters)\"")
_PLACEHOLDER_NAMES = frozenset({
    "name", "tool", "tool_name", "toolname", "function", "function_name", "functionname", "action",
    "action_name", "your_tool", "tool_call", "example", "example_tool", "func", "fn", "call",
})

JsonSchema = Mapping[str, Any]


_TEXT_CALL_ID = re.compile(r"call_txt_(\d+)")


def first_free_text_call_id(messages: list[dict[str, Any]], start: int) -> int:
    """The next ``call_txt_<n>`` number not used in ``messages``: a resumed session's history already
    holds the ids an earlier process gave out, and a repeated id would pair a result with the wrong call."""
    used = [int(m.group(1)) for msg in messages for call in (msg.get("tool_calls") or [])
            if isinstance(call, dict) and (m := _TEXT_CALL_ID.fullmatch(str(call.get("id", ""))))]
    return max([start, *(n + 1 for n in used)])


def recover_text_tool_calls(content: str, tool_names: set[str], *,
                            schemas: Mapping[str, JsonSchema] | None = None,
                            id_start: int = 1) -> tuple[str, list[ToolCall], str]:
    """Return (content without the recovered call text, calls, format).

    ``format`` is "hermes", "qwen3_coder", "json" or "" when nothing was recovered, in which
    case the content comes back unchanged. ``schemas`` maps tool name to its JSON-schema
    parameters; with it, Qwen3-Coder parameter values are typed the way the tool expects
    (a ``content`` of ``42`` stays the string "42"). Ids are ``call_txt_<n>`` from ``id_start``.
    """
    if not content:
        return content, [], ""
    blocks = (_recover_tagged(content, tool_names, schemas or {}) or _recover_json(content, tool_names)
              or _recover_functions_prefix(content, tool_names))
    if not blocks:
        return content, [], ""
    blocks.sort(key=lambda b: b.start)
    # Text after the last call was written before its result existed: small models go on to
    # "assume the output is …" and later answer from that invention. Keep only what precedes it.
    remaining = content[:blocks[-1].end]
    # Cut from the end so earlier spans keep their offsets.
    for block in reversed(blocks):
        remaining = remaining[:block.start] + remaining[block.end:]
    calls = [ToolCall(id="", name=name, arguments=args) for block in blocks for name, args in block.calls]
    for n, call in enumerate(calls):
        call.id = f"call_txt_{id_start + n}"
    return _tidy(remaining), calls, blocks[0].fmt


@dataclass
class _Block:
    """A span of the content that held one or more recovered calls."""

    start: int
    end: int
    calls: list[tuple[str, str]]  # (name, raw JSON arguments)
    fmt: str


def _recover_tagged(content: str, tool_names: set[str], schemas: Mapping[str, JsonSchema]) -> list[_Block]:
    blocks: list[_Block] = []
    pos = 0
    while (start := content.find(_TOOL_CALL_OPEN, pos)) != -1:
        body_start = start + len(_TOOL_CALL_OPEN)
        close = content.find(_TOOL_CALL_CLOSE, body_start)
        next_open = content.find(_TOOL_CALL_OPEN, body_start)
        # A missing close tag ends the block at the next opening tag or at the end of the text.
        if close == -1 or (next_open != -1 and next_open < close):
            body_end = end = next_open if next_open != -1 else len(content)
        else:
            body_end, end = close, close + len(_TOOL_CALL_CLOSE)
        body = content[body_start:body_end]
        if _FUNCTION_RE.match(body.strip()):
            calls, fmt = _parse_xml_functions(body, schemas), "qwen3_coder"
        else:
            calls, fmt = _parse_hermes_body(body), "hermes"
        calls = [(n, a) for n, a in calls if not _is_placeholder(n, tool_names)]
        if calls:
            blocks.append(_Block(start, end, calls, fmt))
        pos = end
    # Qwen3-Coder calls written without the <tool_call> wrapper.
    wrapped = [(b.start, b.end) for b in blocks]
    for match in _FUNCTION_RE.finditer(content):
        if any(s <= match.start() < e for s, e in wrapped):
            continue
        name = match.group(1).strip()
        if _is_placeholder(name, tool_names):
            continue
        end = _function_block_end(content, match.end())
        args = _parse_parameters(content[match.end():end], name, schemas)
        blocks.append(_Block(match.start(), end, [(name, args)], "qwen3_coder"))
    return blocks


def _parse_hermes_body(body: str) -> list[tuple[str, str]]:
    """JSON call objects inside one <tool_call> block (usually one, sometimes several)."""
    text = _unfence(body.strip())
    decoder = json.JSONDecoder(strict=False)  # raw newlines in strings: see keel/engine/grammar.py
    calls: list[tuple[str, str]] = []
    pos = 0
    while pos < len(text):
        brace = text.find("{", pos)
        if brace == -1:
            break
        try:
            obj, end = decoder.raw_decode(text, brace)
        except json.JSONDecodeError:
            # Malformed JSON: keep the raw argument text so the validator can say what is wrong.
            salvaged = _salvage_malformed(text[brace:])
            if salvaged:
                calls.append(salvaged)
            break
        call = _call_from_object(obj)
        if call:
            calls.append(call)
        pos = end
    return calls


def _salvage_malformed(text: str) -> tuple[str, str] | None:
    name_match = _NAME_RE.search(text)
    if not name_match:
        return None
    args_match = _ARGS_KEY_RE.search(text)
    if not args_match:
        return name_match.group(1), text.strip()
    raw = text[args_match.end():]
    if name_match.start() > args_match.end():
        # "arguments" came first: the arguments end where the "name" key begins.
        raw = text[args_match.end():name_match.start()].rstrip().rstrip(",")
    else:
        raw = raw.rstrip()
        # Drop the outer object's closing brace when the braces balance (not cut off mid-way).
        if raw.endswith("}") and text.count("{") == text.count("}"):
            raw = raw[:-1].rstrip()
    return name_match.group(1), raw


def _call_from_object(obj: Any) -> tuple[str, str] | None:
    """(name, raw arguments) from a parsed {"name", "arguments"|"parameters"} object."""
    if not isinstance(obj, dict):
        return None
    if isinstance(obj.get("function"), dict) and "name" not in obj:
        obj = obj["function"]  # OpenAI-shaped {"type": "function", "function": {...}}
    name = obj.get("name")
    if not isinstance(name, str):
        return None
    args = obj.get("arguments", obj.get("parameters", {}))
    if isinstance(args, str):
        return name, args
    return name, json.dumps(args, ensure_ascii=False)


def _parse_xml_functions(body: str, schemas: Mapping[str, JsonSchema]) -> list[tuple[str, str]]:
    calls: list[tuple[str, str]] = []
    for match in _FUNCTION_RE.finditer(body):
        end = _function_block_end(body, match.end())
        name = match.group(1).strip()
        calls.append((name, _parse_parameters(body[match.end():end], name, schemas)))
    return calls


def _function_block_end(text: str, body_start: int) -> int:
    """End of a <function=...> block: after </function>, else before the next block or wrapper."""
    close = text.find(_FUNCTION_CLOSE, body_start)
    candidates = [i for i in (text.find("<function", body_start), text.find(_TOOL_CALL_OPEN, body_start),
                              text.find(_TOOL_CALL_CLOSE, body_start)) if i != -1]
    limit = min(candidates) if candidates else len(text)
    if close != -1 and close < limit:
        return close + len(_FUNCTION_CLOSE)
    return limit


def _parse_parameters(block: str, tool: str, schemas: Mapping[str, JsonSchema]) -> str:
    properties = (schemas.get(tool) or {}).get("properties") or {}
    args: dict[str, Any] = {}
    matches = list(_PARAMETER_RE.finditer(block))
    for i, match in enumerate(matches):
        value_end = matches[i + 1].start() if i + 1 < len(matches) else len(block)
        value = block[match.end():value_end]
        close = value.find(_PARAMETER_CLOSE)
        if close != -1:
            value = value[:close]
        elif (fn_close := value.find(_FUNCTION_CLOSE)) != -1:
            value = value[:fn_close]
        # The template puts the value on its own lines; exactly one newline each side is framing.
        if value.startswith("\n"):
            value = value[1:]
        if value.endswith("\n"):
            value = value[:-1]
        param = match.group(1).strip()
        args[param] = _typed_value(value, properties.get(param))
    return json.dumps(args, ensure_ascii=False)


def _typed_value(value: str, schema: Any) -> Any:
    declared = schema.get("type") if isinstance(schema, dict) else None
    if declared == "string" or (isinstance(declared, list) and declared and declared[0] == "string"):
        return value
    candidate = value.strip()
    if declared is not None or _JSONISH_RE.match(candidate):
        try:
            return json.loads(candidate)
        except json.JSONDecodeError:
            if declared == "boolean" and candidate.lower() in ("true", "false"):
                return candidate.lower() == "true"
    return value


def _recover_json(content: str, tool_names: set[str]) -> list[_Block]:
    """Form 3: fenced or bare JSON call objects naming an offered tool."""
    blocks: list[_Block] = []
    for fence in _FENCE_RE.finditer(content):
        try:
            parsed = json.loads(fence.group(2), strict=False)
        except json.JSONDecodeError:
            continue
        objects = parsed if isinstance(parsed, list) else [parsed]
        calls = [c for c in (_call_from_object(o) for o in objects) if c and c[0] in tool_names]
        # All or nothing: a fence mixing calls and other data is an example, not a request.
        if calls and len(calls) == len(objects):
            blocks.append(_Block(fence.start(), fence.end(), calls, "json"))
    fenced = [(f.start(), f.end()) for f in _FENCE_RE.finditer(content)]
    decoder = json.JSONDecoder(strict=False)  # raw newlines in strings: see keel/engine/grammar.py
    pos = 0
    while (brace := content.find("{", pos)) != -1:
        if any(s <= brace < e for s, e in fenced):
            pos = brace + 1
            continue
        try:
            obj, end = decoder.raw_decode(content, brace)
        except json.JSONDecodeError:
            pos = brace + 1
            continue
        call = _call_from_object(obj)
        if call and call[0] in tool_names:
            blocks.append(_Block(brace, end, [call], "json"))
        # Skip the whole value: a call-shaped object nested in other data is not a call.
        pos = end
    return blocks


def _recover_functions_prefix(content: str, tool_names: set[str]) -> list[_Block]:
    """Form 4: ``functions.list_dir:`` then, optionally, a JSON object of arguments."""
    blocks: list[_Block] = []
    decoder = json.JSONDecoder(strict=False)  # raw newlines in strings: see keel/engine/grammar.py
    for match in _FUNCTIONS_PREFIX_RE.finditer(content):
        name = match.group(1)
        if name not in tool_names:
            continue
        rest = content[match.end():]
        stripped = rest.lstrip()
        end, args = match.end(), "{}"
        if stripped.startswith("{"):
            offset = len(rest) - len(stripped)
            try:
                obj, length = decoder.raw_decode(stripped)
            except json.JSONDecodeError:
                line_end = rest.find("\n", offset)
                args = stripped[: None if line_end == -1 else line_end - offset]
                end = match.end() + (len(rest) if line_end == -1 else line_end)
            else:
                args = json.dumps(obj, ensure_ascii=False) if isinstance(obj, dict) else stripped[:length]
                end = match.end() + offset + length
        elif stripped and not stripped.startswith("\n") and rest.split("\n", 1)[0].strip():
            continue  # prose after the name on the same line: a mention, not a call
        blocks.append(_Block(match.start(), end, [(name, args)], "functions"))
    return blocks


def looks_like_tool_call(content: str, tool_names: set[str]) -> bool:
    """Does text that yielded no call still carry the marks of an attempted one? Then the reply is
    a failed call, not an answer, and the model should be told how to call tools."""
    if _CALL_HINT_RE.search(content):
        return True
    return any(re.search(rf"(?m)^[ \t]*`?{re.escape(name)}\s*\(", content) for name in tool_names)


def _unfence(text: str) -> str:
    fence = _FENCE_RE.fullmatch(text)
    return fence.group(2).strip() if fence else text


def _is_placeholder(name: str, tool_names: set[str]) -> bool:
    if name in tool_names:
        return False
    return not _IDENTIFIER_RE.match(name) or name.lower() in _PLACEHOLDER_NAMES


def _tidy(text: str) -> str:
    return re.sub(r"\n{3,}", "\n\n", text).strip()
