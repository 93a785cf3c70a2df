"""JSON call objects written as text: inside ``<tool_call>`` (Hermes), in a code fence or wrapper
tags, as the whole reply, or after a ``functions.NAME:`` line.

Where a JSON object counts as a call follows what the format says: a fenced block or a reply that
is nothing but the object (perhaps inside wrapper tags such as ``<tools>``, ``<response>``,
``<json>`` that llama.cpp strips too). A call-shaped object in the middle of prose is an example
("one could call a tool like this: {...}"), never a request. Scans are ``str.find`` and
``raw_decode`` moving forward: linear time on hostile text.
"""

from __future__ import annotations

import json
import re
from dataclasses import dataclass
from typing import Any

from keel.engine.recovery_xml import skip_ws

# Tags models (and llama.cpp's Hermes parser) wrap a bare call object in.
WRAPPER_TAGS = frozenset({"tool", "tools", "response", "json", "xml", "function_call", "tool_call"})
_NAME_RE = re.compile(r'"name"\s*:\s*"([^"\\]*)"')
_ARGS_KEY_RE = re.compile(r'"(?:arguments|parameters)"\s*:\s*')
_FUNCTIONS_PREFIX_RE = re.compile(r"(?m)^[ \t]*`?functions\.([A-Za-z_][\w\-]*)`?[ \t]*:?")
_MAX_FENCE_INFO = 40
_FIRST_WINDOW = 1024
_DECODER = json.JSONDecoder(strict=False)  # raw newlines in strings: see keel/engine/grammar.py


@dataclass
class Block:
    """A span of the content that held one or more recovered calls."""

    start: int
    end: int
    calls: list[tuple[str, str]]  # (name, raw JSON arguments)
    fmt: str
    whole: bool = True            # the call's own syntax ended (a closing tag, a complete object)


def call_from_object(obj: Any) -> tuple[str, str] | None:
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


def decode_at(text: str, pos: int) -> tuple[Any, int] | None:
    """The JSON value starting at ``pos`` and the position after it, or None.

    Decoded from a growing window, not from ``text`` itself: a JSONDecodeError counts the lines
    from the start of the document it was given, so failing at many places of one long text would
    cost quadratic time. A window grows only while the failure may be its own cut."""
    window = _FIRST_WINDOW
    while True:
        end = min(len(text), pos + window)
        chunk = text[pos:end]
        try:
            value, length = _DECODER.raw_decode(chunk)
        except json.JSONDecodeError as exc:
            cut = exc.pos >= len(chunk) - 1 or exc.msg.startswith("Unterminated string")
            if end == len(text) or not cut:
                return None
            window *= 4
            continue
        except RecursionError:
            return None
        return value, pos + length


def requote(text: str) -> str | None:
    """``text`` with each double quote inside a string that cannot end it escaped, or None when there is
    none. A key's string ends at a quote followed (blanks aside) by ``:``; a value's at one followed by
    ``,`` or the closing ``}`` or ``]`` of its container, or by the end. Why: a small model writes code
    in its change note unescaped ("Replace format_price(cents, currency="USD")"), and the grammar lets a
    note hold such a quote (keel.engine.grammar, NOTE_CHAR); measured on the 1.5B, four runs of forty
    had their notes cut at the first one. One pass: each quote looks past the blanks after it once."""
    out: list[str] = []
    stack: list[str] = []       # the open containers, "{" or "["
    last = ""                   # the last structural character outside strings
    inside, key, changed, i, n = False, False, False, 0, len(text)
    while i < n:
        c = text[i]
        if inside and c == "\\":
            out.append(text[i:i + 2])
            i += 2
            continue
        if inside and c == '"':
            j = i + 1
            while j < n and text[j] in " \t\r\n":
                j += 1
            ends = ":" if key else (",}" if stack[-1:] == ["{"] else ",]")
            inside = not (j >= n or text[j] in ends)
            changed = changed or inside
            out.append('\\"' if inside else c)
        elif not inside and c == '"':
            inside, key = True, stack[-1:] == ["{"] and last in "{,"
            out.append(c)
        else:
            if not inside and c in "{[":
                stack.append(c)
            elif not inside and c in "}]" and stack:
                stack.pop()
            if not inside and c not in " \t\r\n":
                last = c
            out.append(c)
        i += 1
    return "".join(out) if changed else None


def decode_requoted(text: str) -> Any | None:
    """The JSON value that is the whole of ``text`` once ``requote`` has escaped its stray quotes, or None."""
    fixed = requote(text)
    if fixed is None:
        return None
    try:
        value, end = _DECODER.raw_decode(fixed)
    except (json.JSONDecodeError, RecursionError):
        return None
    return value if not fixed[end:].strip() else None


def iter_fences(text: str):
    """(start, end, info, body) of each ``` fenced block, found by str.find (linear)."""
    pos = 0
    while (opening := text.find("```", pos)) != -1:
        newline = text.find("\n", opening + 3, opening + 3 + _MAX_FENCE_INFO)
        info = text[opening + 3:newline].strip() if newline != -1 else ""
        if newline == -1 or not all(c.isalnum() or c in "_-+." for c in info):
            pos = opening + 3
            continue
        closing = text.find("```", newline + 1)
        if closing == -1:
            return
        yield opening, closing + 3, info, text[newline + 1:closing]
        pos = closing + 3


def unwrap(text: str) -> str:
    """The text inside any outer code fence and wrapper tags (``<tools>…</tools>``)."""
    for _ in range(4):  # fence, tag, tag again: models nest a few, never many
        text = text.strip()
        if text.startswith("```") and text.endswith("```") and len(text) >= 6:
            newline = text.find("\n", 3, 3 + _MAX_FENCE_INFO)
            if newline != -1 and all(c.isalnum() or c in "_-+." for c in text[3:newline].strip()):
                text = text[newline + 1:-3]
                continue
        if text.startswith("<"):
            gt = text.find(">", 1, 20)
            tag = text[1:gt].strip().lower() if gt != -1 else ""
            if tag in WRAPPER_TAGS and text.lower().endswith(f"</{tag}>"):
                text = text[gt + 1:len(text) - len(tag) - 3]
                continue
        break
    return text


def calls_in(text: str, tool_names: set[str]) -> list[tuple[str, str]]:
    """The calls when ``text`` (unwrapped) is exactly one call object or a list of them, all naming
    offered tools; otherwise none (a list mixing calls and other data is an example)."""
    inner = unwrap(text)
    if not inner.startswith(("{", "[")):
        return []
    decoded = decode_at(inner, 0)
    if decoded is None and (value := decode_requoted(inner)) is not None:
        decoded = value, len(inner)
    if decoded is None or inner[decoded[1]:].strip():
        return []
    objects = decoded[0] if isinstance(decoded[0], list) else [decoded[0]]
    calls = [c for c in (call_from_object(o) for o in objects) if c and c[0] in tool_names]
    return calls if calls and len(calls) == len(objects) else []


def recover_json(content: str, tool_names: set[str]) -> list[Block]:
    """A fenced call block anywhere, or a reply that is only a (wrapped) call object."""
    blocks = [Block(start, end, calls, "json") for start, end, _info, body in iter_fences(content)
              if (calls := calls_in(body, tool_names))]
    if not blocks and (calls := calls_in(content, tool_names)):
        blocks.append(Block(0, len(content), calls, "json"))
    return blocks


def hermes_objects(text: str, pos: int, limit: int) -> tuple[list[tuple[str, str]], int] | None:
    """Call objects starting at ``pos`` (after ``<tool_call>``), past an optional fence line or
    ``<function_call>`` tag; None when no JSON object decodes there."""
    pos = skip_ws(text, pos)
    if text.startswith("```", pos):
        newline = text.find("\n", pos + 3, pos + 3 + _MAX_FENCE_INFO)
        pos = skip_ws(text, newline) if newline != -1 else pos
    if text.startswith("<function_call>", pos):
        pos = skip_ws(text, pos + len("<function_call>"))
    calls: list[tuple[str, str]] = []
    while pos < limit and text.startswith("{", pos):
        decoded = decode_at(text, pos)
        if decoded is None and not calls:   # the one object of the block, its stray quotes escaped
            close = text.find("</tool_call>", pos, limit)
            body = text[pos:close if close != -1 else limit].rstrip()
            body = body.removesuffix("```").rstrip().removesuffix("</function_call>").rstrip()
            decoded = (value, pos + len(body)) if (value := decode_requoted(body)) is not None else None
        if decoded is None:
            break
        if call := call_from_object(decoded[0]):
            calls.append(call)
        pos = skip_ws(text, decoded[1])
    if not calls:
        return None
    for closer in ("</function_call>", "```"):
        if text.startswith(closer, pos):
            pos = skip_ws(text, pos + len(closer))
    return calls, pos


def salvage_body(body: str) -> list[tuple[str, str]]:
    """Malformed JSON in a ``<tool_call>``: keep the raw argument text so the validator can say
    what is wrong (``{"path": "a.py",}``) instead of dropping the call silently."""
    text = unwrap(body)
    brace = text.find("{")
    if brace == -1:
        return []
    text = text[brace:]
    name_match = _NAME_RE.search(text)
    if not name_match:
        return []
    args_match = _ARGS_KEY_RE.search(text)
    if not args_match:
        return [(name_match.group(1), text.strip())]
    raw = text[args_match.end():]
    if name_match.start() > args_match.end():
        # "arguments" came first: the arguments end where the "name" key begins.
        raw = text[args_match.end():name_match.start()].rstrip().rstrip(",")
    else:
        raw = raw.rstrip()
        # Drop the outer object's closing brace when the braces balance (not cut off mid-way).
        if raw.endswith("}") and text.count("{") == text.count("}"):
            raw = raw[:-1].rstrip()
    return [(name_match.group(1), raw)]


def recover_functions_prefix(content: str, tool_names: set[str]) -> list[Block]:
    """``functions.list_dir:`` (llama-cpp-python's chatml-function-calling) then, optionally, a
    JSON object of arguments — only for offered names."""
    blocks: list[Block] = []
    for match in _FUNCTIONS_PREFIX_RE.finditer(content):
        name = match.group(1)
        if name not in tool_names:
            continue
        line_end = content.find("\n", match.end())
        line_end = len(content) if line_end == -1 else line_end
        start = skip_ws(content, match.end())
        end, args = match.end(), "{}"
        whole = True
        if content.startswith("{", start):
            decoded = decode_at(content, start)
            if decoded is None:
                raw_end = content.find("\n", start)
                raw_end = len(content) if raw_end == -1 else raw_end
                args, end, whole = content[start:raw_end], raw_end, False
            else:
                obj, end = decoded
                args = json.dumps(obj, ensure_ascii=False) if isinstance(obj, dict) else content[start:end]
        elif content[match.end():line_end].strip():
            continue  # prose after the name on the same line: a mention, not a call
        blocks.append(Block(match.start(), end, [(name, args)], "functions", whole))
    return blocks


def object_cut(text: str, tool_names: set[str]) -> bool:
    """Is ``text`` (a reply, or what follows an unclosed ``<tool_call>``) a call object for an offered
    tool that the text ends inside of (an unterminated string, a missing closing brace)?"""
    text = text.strip()
    if text.startswith("```"):
        newline = text.find("\n", 3, 3 + _MAX_FENCE_INFO)
        text = text[newline + 1:].lstrip() if newline != -1 else ""
    if text.startswith("<"):
        gt = text.find(">", 1, 20)
        if gt != -1 and text[1:gt].strip().lower() in WRAPPER_TAGS:
            text = text[gt + 1:].lstrip()
    name = _NAME_RE.search(text, 0, 400)
    if not text.startswith("{") or name is None or name.group(1) not in tool_names:
        return False
    try:
        _DECODER.raw_decode(text)
    except json.JSONDecodeError as exc:
        return exc.msg.startswith("Unterminated string") or exc.pos >= len(text) - 1
    except RecursionError:
        return False
    return False
