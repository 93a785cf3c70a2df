"""Qwen3-Coder's XML call format, read the way the engines read it, and argument typing by schema.

``<function=NAME><parameter=P>value</parameter>...</function>``: a value is raw text, so it may
hold anything, tag-like text included (a file about tool calls, keel's own code). A value
therefore ends only at a ``</parameter>`` that the format's structure continues from:

- ``</parameter>`` then optional whitespace then ``<parameter=Q>`` where Q is a parameter of the
  tool that is not yet set (any new name when the tool has no schema); or
- ``</parameter>`` then ``</function>`` where what follows is the end of the call: the end of the
  text, ``</tool_call>`` and then the end or another call. When no such close exists, the last
  ``</parameter></function>`` wins, as the engines do.

A value without any close ends at the next real ``<parameter=`` opening, ``</function>`` or the
end (the engines' "implicit close"). Every scan moves forward with ``str.find``: linear time, no
regular expression over the value (issue 22: hostile text must not cost quadratic time).
"""

from __future__ import annotations

import ast
import json
import math
import re
from collections.abc import Mapping
from typing import Any

PARAM_OPEN = "<parameter="
PARAM_CLOSE = "</parameter>"
FUNCTION_OPEN = "<function="
FUNCTION_CLOSE = "</function>"
TOOL_CALL_OPEN = "<tool_call>"
TOOL_CALL_CLOSE = "</tool_call>"
# A tag name is short and on one line; longer or broken "names" are text, not structure.
MAX_NAME = 200
_WS = " \t\r\n"
_JSONISH_RE = re.compile(r"^(?:[\[{].*|-?\d+(?:\.\d+)?(?:[eE][+-]?\d+)?|true|false|null)$", re.DOTALL)
# Python-literal fallbacks (ast.literal_eval) only on values of a sane size: its parser recurses.
_LITERAL_EVAL_MAX = 100_000


def skip_ws(text: str, pos: int) -> int:
    while pos < len(text) and text[pos] in _WS:
        pos += 1
    return pos


def tag_name(text: str, start: int) -> tuple[str, int] | None:
    """The name in ``<parameter=NAME>`` / ``<function=NAME>`` whose ``=`` ends before ``start``,
    and the position after ``>``; None when the tag is broken (no ``>`` on the same line)."""
    gt = text.find(">", start, start + MAX_NAME)
    if gt == -1:
        return None
    name = text[start:gt]
    if "\n" in name or "<" in name:
        return None
    return name.strip(), gt + 1


class Scanner:
    """Forward searches over one text, remembered: a search from a later position reuses the last
    answer while it still lies ahead. Parsing many calls or parameters then stays linear instead
    of searching the rest of the text again for each one."""

    def __init__(self, text: str) -> None:
        self.text = text
        self._found: dict[str, tuple[int, int]] = {}
        self._final: tuple[int, tuple[int, int]] = (len(text) + 1, (-1, -1))

    def find(self, marker: str, pos: int) -> int:
        searched_from, at = self._found.get(marker, (len(self.text) + 1, -1))
        if searched_from <= pos and (at == -1 or at >= pos):
            return at
        at = self.text.find(marker, pos)
        self._found[marker] = (pos, at)
        return at

    def final_close(self, pos: int) -> tuple[int, int]:
        """(index, resume) of the first ``</parameter>`` at/after ``pos`` that ends a call: followed
        by ``</function>`` and the end of the call, by ``</tool_call>``, or by the end of the text."""
        searched_from, found = self._final
        if searched_from <= pos and (found[0] == -1 or found[0] >= pos):
            return found
        text, scan = self.text, pos
        found = (-1, -1)
        while (close := self.find(PARAM_CLOSE, scan)) != -1:
            after = skip_ws(text, close + len(PARAM_CLOSE))
            if text.startswith(FUNCTION_CLOSE, after) and _is_call_end(text, after + len(FUNCTION_CLOSE)):
                found = (close, after + len(FUNCTION_CLOSE))
                break
            if after == len(text) or text.startswith(TOOL_CALL_CLOSE, after):
                found = (close, after)
                break
            scan = close + len(PARAM_CLOSE)
        self._final = (pos, found)
        return found


def parse_function_body(scanner: Scanner, pos: int, props: Mapping[str, Any]) -> tuple[dict[str, Any], int]:
    """Parameters of one ``<function=...>`` block whose body starts at ``pos``.

    Returns (raw string values by name, position after the block)."""
    text = scanner.text
    args: dict[str, Any] = {}
    taken: set[str] = set()  # the names set so far and the current one: never a new parameter
    while True:
        j = skip_ws(text, pos)
        if text.startswith(FUNCTION_CLOSE, j):
            return args, j + len(FUNCTION_CLOSE)
        if not text.startswith(PARAM_OPEN, j):
            return args, j
        named = tag_name(text, j + len(PARAM_OPEN))
        if named is None:
            return args, j
        name, value_start = named
        taken.add(name)
        value_end, pos, done = _value_end(scanner, value_start, props, taken)
        args[name] = _unframe(text[value_start:value_end])
        if done:
            return args, pos


def _acceptable(text: str, pos: int, props: Mapping[str, Any], taken: set[str]) -> bool:
    """Is there a real ``<parameter=Q>`` opening at ``pos``?"""
    if not text.startswith(PARAM_OPEN, pos):
        return False
    named = tag_name(text, pos + len(PARAM_OPEN))
    if named is None or named[0] in taken:
        return False
    return not props or named[0] in props


def _is_call_end(text: str, pos: int) -> bool:
    """After a ``</function>``: does the call really end here (end, next call, or </tool_call>)?"""
    pos = skip_ws(text, pos)
    if text.startswith(TOOL_CALL_CLOSE, pos):
        pos = skip_ws(text, pos + len(TOOL_CALL_CLOSE))
    return pos == len(text) or text.startswith((TOOL_CALL_OPEN, FUNCTION_OPEN), pos)


def _value_end(scanner: Scanner, start: int, props: Mapping[str, Any], taken: set[str]) -> tuple[int, int, bool]:
    """(end of the value, where parsing continues, whether the function block is done).

    Searched in order: a close the next real parameter follows; else the close that ends the call
    (the last ``</parameter></function>`` there is); else the last ``</parameter></function>``
    before the next real ``<parameter=`` opening; else that opening (the model left
    ``</parameter>`` out); else ``</function>``, ``</tool_call>`` or the end. Each search stops at the first close that ends the call, so no text is searched again
    for every parameter."""
    text = scanner.text
    final, final_resume = scanner.final_close(start)
    bound = final if final != -1 else len(text)
    opening, pos = -1, start
    while (found := text.find(PARAM_OPEN, pos, bound)) != -1:
        if _acceptable(text, found, props, taken):
            opening = found
            break
        pos = found + len(PARAM_OPEN)
    limit = opening if opening != -1 else bound
    last_function_close: tuple[int, int] | None = None
    pos = start
    while (close := text.find(PARAM_CLOSE, pos, limit)) != -1:
        after = skip_ws(text, close + len(PARAM_CLOSE))
        if _acceptable(text, after, props, taken):
            return close, after, False
        if text.startswith(FUNCTION_CLOSE, after):
            last_function_close = (close, after + len(FUNCTION_CLOSE))
        pos = close + len(PARAM_CLOSE)
    if opening == -1 and final != -1:
        return final, final_resume, True  # the last </parameter></function>, and it ends the call
    if last_function_close:
        return last_function_close[0], last_function_close[1], True
    if opening != -1:
        return opening, opening, False
    for tag in (FUNCTION_CLOSE, TOOL_CALL_CLOSE):  # no </parameter> at all
        cut = scanner.find(tag, start)
        if cut != -1:
            return cut, cut, True
    return len(text), len(text), True


def _unframe(value: str) -> str:
    """The value without the template's framing: Qwen3-Coder's template puts a value on lines of
    its own, so one newline each side is framing (vLLM, Ollama). A model that indents the tags
    (``    </parameter>``) pretty-prints the whole block; then the value is trimmed as llama.cpp
    trims it. Anything else is the value: indentation inside it (code) and a value of spaces alone
    (``"   "``) survive."""
    first_line = value.split("\n", 1)[0]
    if value.startswith("\n"):
        value = value[1:]
        if not value.strip(" \t"):  # only the closing tag's indentation: an empty value
            return ""
    last_line = value.rfind("\n")
    tail = value[last_line + 1:] if last_line != -1 else ""
    if last_line != -1 and not tail.strip(" \t"):
        if not tail:
            return value[:last_line]
        if first_line.strip() or not first_line:  # the closing tag was indented: pretty-printed tags
            return value[:last_line].strip()
    return value


# ---- typing by schema ----------------------------------------------------------------------


def schema_types(schema: Any) -> tuple[list[str], bool]:
    """(declared non-null types in order, nullable) from ``type``, a type list, ``anyOf`` or ``oneOf``."""
    if not isinstance(schema, Mapping):
        return [], False
    declared = schema.get("type")
    types: list[Any] = []
    if isinstance(declared, str):
        types = [declared]
    elif isinstance(declared, list):
        types = list(declared)
    else:
        for key in ("anyOf", "oneOf"):
            options = schema.get(key)
            if isinstance(options, list):
                types = [o.get("type") for o in options if isinstance(o, Mapping)]
                break
    nullable = "null" in types or schema.get("nullable") is True
    return [t for t in types if isinstance(t, str) and t != "null"], nullable


# A value that may be several types is read as the most specific one it parses as (Ollama's order):
# "42.5" for ["integer", "number"] is 42.5, {"k": "v"} for ["array", "object"] an object, and text
# only when nothing else fits ("hello" for ["string", "number"] stays "hello").
_PRECEDENCE = ("integer", "int", "number", "float", "double", "boolean", "bool", "object", "dict", "array", "list")
_NO_VALUE = object()


def typed_value(value: str, schema: Any) -> Any:
    """A raw parameter text as the type the tool's schema declares (as vLLM/SGLang/Ollama convert it)."""
    types, nullable = schema_types(schema)
    candidate = value.strip()
    if types == ["string"] and not nullable:
        return value
    if candidate.lower() in ("null", "none") and (nullable or (types and "string" not in types)):
        return None
    if not types:
        if _JSONISH_RE.match(candidate):
            try:
                return json.loads(candidate)
            except (json.JSONDecodeError, RecursionError):
                return value
        return value
    for declared in sorted(types, key=lambda t: _PRECEDENCE.index(t) if t in _PRECEDENCE else len(_PRECEDENCE)):
        converted = _as_type(declared, candidate)
        if converted is not _NO_VALUE:
            return converted
    return value


def _as_type(declared: str, candidate: str) -> Any:
    """``candidate`` as ``declared``, or _NO_VALUE when it is not one (the raw text is kept then)."""
    if declared in ("integer", "int", "number", "float", "double"):
        return _number(candidate, integer=declared in ("integer", "int"))
    if declared in ("boolean", "bool"):
        lowered = candidate.lower()
        return lowered == "true" if lowered in ("true", "false") else _NO_VALUE
    if declared in ("object", "array", "dict", "list"):
        return _container(candidate, dict if declared in ("object", "dict") else list)
    return _NO_VALUE


def _number(candidate: str, *, integer: bool) -> Any:
    if integer:
        try:
            return int(candidate)
        except ValueError:
            pass
    try:
        parsed = float(candidate)
    except ValueError:
        return _NO_VALUE
    if not math.isfinite(parsed):
        return _NO_VALUE  # JSON has no Infinity/NaN: keep the text for the validator to report
    return int(parsed) if parsed.is_integer() else (_NO_VALUE if integer else parsed)


def _container(candidate: str, kind: type) -> Any:
    parsed = _loads(candidate)
    if isinstance(parsed, str):  # double-encoded: a JSON string holding the literal
        parsed = _loads(parsed.strip())
    return parsed if isinstance(parsed, kind) else _NO_VALUE


def _loads(text: str) -> Any:
    try:
        return json.loads(text)
    except (json.JSONDecodeError, RecursionError):
        pass
    if len(text) > _LITERAL_EVAL_MAX:
        return None
    try:
        return ast.literal_eval(text)
    except (ValueError, SyntaxError, TypeError, MemoryError, RecursionError):
        return None
