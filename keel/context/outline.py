"""The shape of a source file: its top-level definitions and their signatures, read by a real parser
(tree-sitter's Python and JavaScript grammars, as wheels).

Used for the project overview (keel.context.overview: every file with what it defines, so a model finds
where the code lives without reading every file) and by change_file's checks on a rewrite
(keel.drive.rewrite: does it still parse, which definitions did it drop). A parser, not patterns: it
reads a file that does not parse as far as it can and says where it breaks, and it is linear in the text.

Pure: text in, ``Outline`` out; the parsers are built on first use (importing this has no side effects).
"""

from __future__ import annotations

import functools
import re
from dataclasses import dataclass, replace
from pathlib import PurePosixPath
from typing import Any

MAX_PARSED_BYTES = 256_000   # a bigger file gets no outline (the overview names it)
MAX_SIGNATURE = 160
_LANGUAGES = {".py": "python", ".pyi": "python", ".js": "javascript", ".mjs": "javascript", ".cjs": "javascript",
              ".jsx": "javascript"}
_SPACE = re.compile(r"\s+")
_CONSTANT = re.compile(r"[A-Z][A-Z0-9_]*")


@dataclass(frozen=True)
class Definition:
    kind: str                              # function, class, method, constant
    name: str
    signature: str                         # "def read_rows(text)", "class Ledger", "function parseDate(text)"
    line: int                              # 1-based, its decorators or `export` included for a top-level one
    members: tuple[Definition, ...] = ()   # a class's methods
    end: int = 0                           # its last line, 1-based (top-level definitions)


@dataclass(frozen=True)
class Outline:
    language: str
    definitions: tuple[Definition, ...]
    error: str | None = None               # where the text stops parsing ("line 4: ..."), None when it parses

    @property
    def names(self) -> set[str]:
        """The top-level names it defines (functions, classes, constants)."""
        return {d.name for d in self.definitions}


def language_of(path: str) -> str | None:
    return _LANGUAGES.get(PurePosixPath(path).suffix.lower())


def outline(path: str, text: str) -> Outline | None:
    """The outline of ``text`` as the file ``path``, or None for a language keel does not parse."""
    language = language_of(path)
    data = text.encode("utf-8", "replace")
    if language is None or len(data) > MAX_PARSED_BYTES:
        return None
    root = _parser(language).parse(data).root_node
    read = _python_definitions if language == "python" else _javascript_definitions
    found = tuple(replace(d, line=node.start_point[0] + 1, end=node.end_point[0] + 1)
                  for node in root.children if (d := read(node, data)) is not None)
    return Outline(language, found, _first_error(root, data) if root.has_error else None)


@functools.cache
def _parser(language: str) -> Any:
    import importlib

    import tree_sitter

    grammar = importlib.import_module(f"tree_sitter_{language}")   # tree_sitter_python, tree_sitter_javascript
    return tree_sitter.Parser(tree_sitter.Language(grammar.language()))


def _text(data: bytes, start: int, end: int) -> str:
    flat = _SPACE.sub(" ", data[start:end].decode("utf-8", "replace")).strip()
    return flat if len(flat) <= MAX_SIGNATURE else flat[:MAX_SIGNATURE - 1] + "…"


def _head(node: Any, data: bytes, body_types: tuple[str, ...]) -> str:
    """The node's text up to its body (a comment before the body left out): a definition's signature."""
    body = next((c for c in node.children if c.type in (*body_types, "comment")), None)
    end = body.start_byte if body is not None else node.end_byte
    return _text(data, node.start_byte, end).rstrip(":").rstrip()


def _name(node: Any, data: bytes) -> str:
    named = node.child_by_field_name("name")
    return data[named.start_byte:named.end_byte].decode("utf-8", "replace") if named is not None else ""


# -- Python -------------------------------------------------------------------------------------------
def _python_definitions(node: Any, data: bytes) -> Definition | None:
    if node.type == "decorated_definition":
        inner = node.child_by_field_name("definition")
        return _python_definitions(inner, data) if inner is not None else None
    if node.type == "function_definition":
        return Definition("function", _name(node, data), _head(node, data, ("block",)), node.start_point[0] + 1)
    if node.type == "class_definition":
        body = node.child_by_field_name("body")
        members = tuple(m for child in (body.children if body is not None else ())
                        if (m := _python_definitions(child, data)) is not None and m.kind == "function")
        return Definition("class", _name(node, data), _head(node, data, ("block",)), node.start_point[0] + 1,
                          tuple(Definition("method", m.name, m.signature, m.line) for m in members))
    if node.type == "expression_statement" and node.children and node.children[0].type == "assignment":
        target = node.children[0].child_by_field_name("left")
        name = data[target.start_byte:target.end_byte].decode("utf-8", "replace") if target is not None else ""
        if _CONSTANT.fullmatch(name):
            return Definition("constant", name, name, node.start_point[0] + 1)
    return None


# -- JavaScript -------------------------------------------------------------------------------------
_JS_FUNCTIONS = ("function_declaration", "generator_function_declaration")
_JS_VALUES = ("arrow_function", "function_expression", "function", "generator_function")


def _javascript_definitions(node: Any, data: bytes) -> Definition | None:
    if node.type == "export_statement":
        inner = node.child_by_field_name("declaration") or next(
            (c for c in node.children if c.type in (*_JS_FUNCTIONS, "class_declaration", "lexical_declaration")), None)
        return _javascript_definitions(inner, data) if inner is not None else None
    line = node.start_point[0] + 1
    if node.type in _JS_FUNCTIONS:
        return Definition("function", _name(node, data), _head(node, data, ("statement_block",)), line)
    if node.type in ("class_declaration", "class"):
        body = node.child_by_field_name("body")
        members = tuple(Definition("method", _name(m, data), _head(m, data, ("statement_block",)), m.start_point[0] + 1)
                        for m in (body.children if body is not None else ()) if m.type == "method_definition")
        return Definition("class", _name(node, data), _head(node, data, ("class_body",)), line, members)
    if node.type in ("lexical_declaration", "variable_declaration"):
        for declarator in (c for c in node.children if c.type == "variable_declarator"):
            value = declarator.child_by_field_name("value")
            name = _name(declarator, data)
            if value is not None and value.type in _JS_VALUES:
                body = value.child_by_field_name("body")
                end = body.start_byte if body is not None else value.end_byte
                return Definition("function", name, _text(data, node.start_byte, end), line)
            if _CONSTANT.fullmatch(name):
                return Definition("constant", name, name, line)
    return None


def _first_error(root: Any, data: bytes) -> str:
    """Where the first ERROR or MISSING node is, with the line's text."""
    stack = [root]
    while stack:
        node = stack.pop()
        if node.is_error or node.is_missing:
            row = node.start_point[0]
            lines = data.split(b"\n")
            text = lines[row].decode("utf-8", "replace").strip()[:120] if row < len(lines) else ""
            what = f"missing {node.type}" if node.is_missing else "invalid syntax"
            return f"line {row + 1}: {what}" + (f": {text!r}" if text else "")
        if node.has_error:
            stack.extend(reversed(node.children))
    return "invalid syntax"
