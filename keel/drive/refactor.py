"""Renames and moves made by real refactoring tools: rope for Python, tree-sitter for JavaScript.

Why: keel carried a rename to the other files word for word and pointed a moved module's imports by
regular expressions. Both missed what only a parser knows: ``import a.b as c`` then ``c.NAME``, a
``from a import b`` then ``b.NAME``, a relative import two packages up, a same-named local in another
module that is not the symbol, and a name inside a string that is data and must stay (a log key, a
config field). rope resolves each use to its definition; tree-sitter tells a JavaScript identifier
from the same word in a string.

What happens to each place the old name is written:

- code (definitions, imports, ``module.attr``, f-string expressions): renamed where rope proves it is
  the symbol (JavaScript: every identifier node of that name; tree-sitter has no scopes);
- strings, docstrings included: never renamed. A string may be data; the files that still hold the
  old name are listed for the model to judge (keel.drive.rename.Outcome);
- ``__all__`` entries: renamed, they name the symbol;
- comments: the old name as a whole word is renamed in the files the refactoring changes (a comment
  beside the code describes it), and nowhere else.

The engines are pure over a mapping of workspace paths to texts: rope works in a private scratch
folder holding copies of those texts (it never sees the workspace, so it cannot write there or
through a symlink; its own project folder is off), and the callers write what changed through keel's
jailed, checkpointed writes. ``request_renames`` reads the renames the task names: the seam where the
parsed request will be read instead.
"""

from __future__ import annotations

import ast
import functools
import importlib
import re
import tempfile
import warnings
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path, PurePosixPath
from typing import Any

from keel.core.request import Rename, Request

# The JavaScript files tree-sitter-javascript parses; TypeScript's other suffixes stay word for word.
JS_PARSED = (".js", ".mjs", ".cjs", ".jsx")
# A larger JavaScript file (a bundle) is not parsed for a refactoring: tree-sitter's recovery from
# errors grows faster than the text (1 s at 128 kB of prose on a busy 2-core machine).
MAX_JS_BYTES = 64_000
_JS_NAMES = ("[(identifier) (property_identifier) (shorthand_property_identifier) "
             "(shorthand_property_identifier_pattern) (statement_identifier)] @name (comment) @comment")


class RefactorError(Exception):
    """The refactoring could not be made; the message says why, for the tool result."""


def request_renames(request: Request) -> list[Rename]:
    """The renames the request itself names in so many words ("rename MAX_RETRY to MAX_RETRIES",
    "parse_cfg should be renamed to parse_config"); keel makes these without the model, so an arrow or
    "replace X with Y", which may describe a mapping or an edit, does not count here.

    Read once, with the request (keel.core.request.Request.named_renames)."""
    return list(request.named_renames)


# -- Python, through rope --------------------------------------------------------------------------------
def python_rename(files: dict[str, str], anchor_path: str, old: str, new: str) -> dict[str, str | None]:
    """The files whose text changes when the symbol ``old`` that ``anchor_path`` defines or uses is
    renamed to ``new``: path -> new text. Raises RefactorError when rope cannot make it."""
    offset = anchor(files[anchor_path], old)
    if offset is None:
        raise RefactorError(f"{old} is not a name {anchor_path} defines or imports")

    def rename(project: Any) -> Any:
        from rope.refactor.rename import Rename as RopeRename

        return RopeRename(project, project.get_resource(anchor_path), offset).get_changes(new, docs=False)

    changed = _with_rope(files, rename)
    return {p: (None if t is None else follow_names(t, old, new)) for p, t in changed.items()}


def python_move(files: dict[str, str], old: str, new: str) -> dict[str, str | None]:
    """The files that change when module ``old`` moves to ``new`` (workspace paths): each importer's
    ``import``/``from`` lines and dotted uses, the moved module itself (None: ``old`` is gone)."""
    old_p, new_p = PurePosixPath(old), PurePosixPath(new)
    if not new_p.stem.isidentifier():
        raise RefactorError(f"{new_p.name} is not a Python module name")

    def move(project: Any) -> Any:
        from rope.refactor.move import MoveModule
        from rope.refactor.rename import Rename as RopeRename

        resource = project.get_resource(old)
        if new_p.stem != old_p.stem:   # the name first, in its own folder
            project.do(RopeRename(project, resource).get_changes(new_p.stem))
            resource = project.get_resource(str(old_p.with_name(new_p.name)))
        if new_p.parent != old_p.parent:
            folder = Path(project.address, new_p.parent)
            folder.mkdir(parents=True, exist_ok=True)
            project.validate(project.root)
            return MoveModule(project, resource).get_changes(project.get_resource(str(new_p.parent)))
        return None

    changed = _with_rope(files, move)
    if "\r\n" in files[old] and changed.get(new) is not None:   # the moved module keeps its line ends
        changed[new] = str(changed[new]).replace("\n", "\r\n")
    return changed


@contextmanager
def _scratch(files: dict[str, str]) -> Iterator[Path]:
    """A private folder holding ``files`` (LF line ends, as rope reads them); removed after."""
    with tempfile.TemporaryDirectory(prefix="keel-refactor-") as tmp:
        root = Path(tmp)
        for path, text in files.items():
            target = root / path
            target.parent.mkdir(parents=True, exist_ok=True)
            target.write_bytes(text.replace("\r\n", "\n").encode("utf-8"))
        yield root


def _with_rope(files: dict[str, str], refactoring: Any) -> dict[str, str | None]:
    """Run ``refactoring(project)`` on a scratch copy of ``files``; it may change the copy itself and
    may return changes still to make. The copies that differ afterwards, with their line ends as they
    were (None: removed)."""
    from rope.base import exceptions
    from rope.base.project import Project

    with _scratch(files) as root, warnings.catch_warnings():
        warnings.simplefilter("ignore", DeprecationWarning)   # rope's own, about its own internals
        project = Project(str(root), ropefolder=None)
        try:
            changes = refactoring(project)
            if changes is not None:
                project.do(changes)
        except (exceptions.RopeError, SyntaxError, ValueError) as e:
            raise RefactorError(f"rope could not make it: {e}") from e
        finally:
            project.close()
        after = {p.relative_to(root).as_posix(): p.read_text("utf-8") for p in root.rglob("*.py") if p.is_file()}
    out: dict[str, str | None] = {p: None for p in files if p not in after}
    for path, text in after.items():
        was = files.get(path)
        crlf = was is not None and "\r\n" in was
        if was is None or text != was.replace("\r\n", "\n"):
            out[path] = text.replace("\n", "\r\n") if crlf else text
    return out


def anchor(source: str, name: str) -> int | None:
    """Where rope is pointed at ``name`` in ``source`` (a character offset): its definition at the top
    level or in a top-level class, else its import, else a ``module.name`` use. None if none."""
    text = source.replace("\r\n", "\n")
    try:
        tree = ast.parse(text)
    except (SyntaxError, ValueError, MemoryError, RecursionError):   # deep nesting: the parser's own limits
        return None
    found: list[tuple[int, int, int]] = []   # (line, first byte to look from, last byte)
    for node in [*tree.body, *(n for c in tree.body if isinstance(c, ast.ClassDef) for n in c.body)]:
        if isinstance(node, ast.FunctionDef | ast.AsyncFunctionDef | ast.ClassDef) and node.name == name:
            found.append((node.lineno, node.col_offset, -1))
        elif isinstance(node, ast.Assign | ast.AnnAssign):
            targets = node.targets if isinstance(node, ast.Assign) else [node.target]
            found += [(n.lineno, n.col_offset, n.col_offset + len(name)) for t in targets for n in ast.walk(t)
                      if isinstance(n, ast.Name) and n.id == name]
    found += [(a.lineno, a.col_offset, a.end_col_offset or -1) for n in tree.body
              if isinstance(n, ast.Import | ast.ImportFrom) for a in n.names
              if (a.asname or a.name).split(".")[-1] == name or a.name == name]
    found += [(n.end_lineno or n.lineno, (n.end_col_offset or 0) - len(name), n.end_col_offset or -1)
              for n in ast.walk(tree) if isinstance(n, ast.Attribute) and n.attr == name]
    lines = text.splitlines(keepends=True)
    starts = _line_starts(text)
    word = re.compile(rf"(?<![\w.]){re.escape(name)}(?!\w)" if found else "$^")
    for line, first, last in found:
        raw = lines[line - 1].encode("utf-8")   # ast's columns count bytes
        hits = list(word.finditer(raw[first:last if last >= 0 else len(raw)].decode("utf-8", "replace")))
        if not hits:
            continue
        hit = hits[-1] if last >= 0 else hits[0]   # `a.b as name`: the last; `def name(name)`: the first
        col = len(raw[:first].decode("utf-8", "replace")) + hit.start()
        return starts[line - 1] + col
    return None


def _line_starts(text: str) -> list[int]:
    starts, at = [], 0
    for line in text.splitlines(keepends=True):
        starts.append(at)
        at += len(line)
    return [*starts, at]


def follow_names(text: str, old: str, new: str) -> str:
    """``text`` (a file the rename changed) with ``old`` renamed in its comments (tree-sitter-python
    finds them) and ``__all__``."""
    if old not in text:
        return text
    source = text.encode("utf-8")
    try:
        tree = ast.parse(text)
    except (SyntaxError, ValueError, MemoryError, RecursionError):
        return text
    starts = [0]
    for line in source.splitlines(keepends=True):
        starts.append(starts[-1] + len(line))
    spans = [(starts[c.lineno - 1] + c.col_offset, starts[c.lineno - 1] + (c.end_col_offset or c.col_offset))
             for c in _all_entries(tree, old)]
    if b"#" in source:
        spans += [(n.start_byte, n.end_byte) for n in _captures("python", "(comment) @c", source).get("c", [])]
    word = re.compile(rf"(?<![\w$]){re.escape(old)}(?![\w$])".encode())
    for start, end in sorted(spans, reverse=True):
        source = source[:start] + word.sub(new.encode(), source[start:end]) + source[end:]
    return source.decode("utf-8")


def _all_entries(tree: ast.Module, name: str) -> list[ast.Constant]:
    """The one-line string literals equal to ``name`` in a top-level ``__all__``."""
    found = []
    for node in tree.body:
        if not isinstance(node, ast.Assign | ast.AugAssign | ast.AnnAssign) or node.value is None:
            continue
        targets = node.targets if isinstance(node, ast.Assign) else [node.target]
        if any(isinstance(t, ast.Name) and t.id == "__all__" for t in targets):
            found += [c for c in ast.walk(node.value)
                      if isinstance(c, ast.Constant) and c.value == name and c.end_lineno == c.lineno]
    return found


@functools.cache
def _query(language: str, pattern: str) -> tuple[Any, Any]:
    """A tree-sitter parser and query for ``language`` (python, javascript), made once."""
    import tree_sitter

    grammar = importlib.import_module(f"tree_sitter_{language}")
    lang = tree_sitter.Language(grammar.language())
    return tree_sitter.Parser(lang), tree_sitter.Query(lang, pattern)


def _captures(language: str, pattern: str, source: bytes, root: Any = None) -> dict[str, list[Any]]:
    """The nodes ``pattern`` captures in ``source`` (or in the tree ``root`` already parsed from it)."""
    import tree_sitter

    parser, query = _query(language, pattern)
    node = root if root is not None else parser.parse(source).root_node
    return dict(tree_sitter.QueryCursor(query).captures(node))


# -- JavaScript, through tree-sitter ---------------------------------------------------------------------
def _js_tree(source: bytes) -> Any:
    if len(source) > MAX_JS_BYTES:
        raise RefactorError(f"it is over {MAX_JS_BYTES // 1000} kB, too large to parse for a refactoring")
    parser, _ = _query("javascript", _JS_NAMES)
    return parser.parse(source)


def js_specifiers(text: str) -> list[tuple[int, int, str]]:
    """The module specifiers ``text`` imports (``import … from "x"``, ``export … from "x"``,
    ``require("x")``, ``import("x")``): each string's character span, quotes excluded, and its text.
    A specifier in a comment or in any other string is none."""
    source = text.encode("utf-8")
    found: list[tuple[int, int, str]] = []
    try:
        stack = [_js_tree(source).root_node]
    except RefactorError:
        return found
    while stack:
        node = stack.pop()
        stack.extend(node.children)
        strings = []
        if node.type in ("import_statement", "export_statement"):
            strings = [c for c in node.children if c.type == "string"]
        elif node.type == "call_expression" and node.children and node.children[0].type in ("import", "identifier") \
                and node.children[0].text in (b"import", b"require"):
            args = node.child_by_field_name("arguments")
            strings = [c for c in (args.children if args is not None else []) if c.type == "string"][:1]
        for string in strings:
            start, end = string.start_byte + 1, string.end_byte - 1   # inside the quotes
            found.append((len(source[:start].decode()), len(source[:end].decode()), source[start:end].decode()))
    return sorted(found)


def js_rename(text: str, old: str, new: str) -> str:
    """``text`` with every identifier named ``old`` renamed, and the word in comments; strings and
    template text stay. Raises RefactorError when the file does not parse."""
    source = text.encode("utf-8")
    tree = _js_tree(source)
    if tree.root_node.has_error:
        raise RefactorError("it does not parse as JavaScript")
    word = re.compile(rf"(?<![\w$]){re.escape(old)}(?![\w$])".encode())
    found = _captures("javascript", _JS_NAMES, source, tree.root_node)
    edits = [(n.start_byte, n.end_byte, new.encode()) for n in found.get("name", []) if n.text == old.encode()]
    edits += [(n.start_byte, n.end_byte, word.sub(new.encode(), n.text)) for n in found.get("comment", [])]
    for start, end, replacement in sorted(edits, reverse=True):
        source = source[:start] + replacement + source[end:]
    return source.decode("utf-8")
