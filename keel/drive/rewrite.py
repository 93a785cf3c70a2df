"""change_file's checks on a rewrite before it is written (the editor_checks assist), and what tells a
stub from a finished file.

Why, from the 1.5B model's medium runs (issue 36): the editor rewrote a module with the *test file's*
text (its imports, its own ``from module import …`` line), and the model then claimed success three
times; another rewrite made a module import itself, and the model then looped between edit_file and
change_file. A rewrite that holds the tests' text, imports its own module, drops definitions the note
did not ask to remove (they are put back first: ``restore_dropped``, ``restore_dropped_js``), no
longer parses or reads a name nothing binds (a forgotten standard-library import is added first:
keel.drive.unbound) is not written: the editor is asked again with the reason.

It also reads the editor's reply: the file in its code block (``extract_file``) without the request's
frame lines (``unframed``).

The other half is not stopping legitimate work: a file of placeholders (``pass``, ``raise
NotImplementedError``, ``throw new Error("not implemented")``) that comes back implemented keeps few of
its lines, and that is a change, not a replacement (a stub's rewrite was refused for keeping 19% of
its lines). A stub also grows, so the editor's reply cap grows with it (``reply_need``).

Pure: texts in, a problem in words (or None) out.
"""

from __future__ import annotations

import ast
import bisect
import math
import re
from collections.abc import Sequence
from pathlib import PurePosixPath
from typing import Any

from keel.context.outline import Outline, language_of, outline
from keel.context.preload import CHARS_PER_TOKEN, FileText
from keel.drive.unbound import newly_unbound, with_imports
from keel.verify.selfcheck import is_test_file

EDITOR_CAP_MAX = 2048      # tokens one editor reply may have (~3-4 minutes of a 1.5B model on 2 cores)
STUB_GROWTH = 3.0          # an implemented stub is up to this many times its placeholder file
GROWTH = 1.25              # any other file may come back this much longer
COPIED_SHARE = 0.5         # of a rewrite's lines found in a test file and not in the file: a copy
_MIN_COPIED_LINE = 12      # shorter lines ("return x", "})") say nothing about where a text came from
MIN_COPIED_LINES = 3
_IMPORT = re.compile(r"(?:import|from)\s|(?:const|let|var)\s[^=]*=\s*require\(")
_PLACEHOLDER = re.compile(r"\s*(?:pass|\.\.\.|raise\s+NotImplementedError\b.*|(?://|#)\s*TODO\b.*)")
_JS_THROW = re.compile(r"\s*throw\s+new\s+Error\s*\(")
_UNWRITTEN = ("implement", "todo")   # words of a JavaScript stub's error: "not implemented", "Remove this ... implement"
_PY_TEST_DEF = re.compile(r"\s*(?:async\s+)?def\s+test_\w*\s*\(|\s*class\s+Test\w*\s*[(:]")
_SELF_TEST = re.compile(r"\bunittest\b|\bpytest\b|^\s*assert\b|\.assert[A-Z]\w*\(")
_JS_TEST_CALL = re.compile(r"\s*(?:test|it|describe)\s*\(\s*['\"`]")


def placeholder_lines(text: str) -> int:
    """How many lines are placeholders for code not written yet."""
    return sum(1 for line in text.splitlines() if _is_placeholder(line))


def _is_placeholder(line: str) -> bool:
    if _PLACEHOLDER.fullmatch(line.rstrip()):
        return True
    return _JS_THROW.match(line) is not None and any(w in line.lower() for w in _UNWRITTEN)


def is_stub(path: str, text: str | None) -> bool:
    """A file whose definitions are placeholders: at least half of them, and at least one."""
    if text is None:
        return False
    shape = outline(path, text)
    if shape is None:
        return placeholder_lines(text) > 0
    defs = [d for top in shape.definitions for d in (top.members or (top,)) if d.kind != "constant"]
    return bool(defs) and placeholder_lines(text) * 2 >= len(defs)


def reply_need(path: str, current: str | None) -> int:
    """Tokens the rewrite of ``current`` may need in one reply: its length with room to grow, more for a
    stub, whose implementation is longer than its placeholders."""
    if current is None:
        return 0
    growth = STUB_GROWTH if is_stub(path, current) else GROWTH
    return math.ceil(len(current) / CHARS_PER_TOKEN * growth) + 40


def editor_cap(base: int | None, need: int, room: int) -> int | None:
    """The editor request's reply cap: the engine's own (``base``, None: none), raised to what the file
    needs (``need`` tokens, keel.drive.rewrite.reply_need) as far as the window leaves ``room`` and at
    most EDITOR_CAP_MAX. Measured: an 80-line implementation of a stub was cut by the 768-token cap of
    the small profile, and a file the run itself had grown was then "too long to be rewritten"."""
    if base is None:
        return None
    return max(base, min(need, room, EDITOR_CAP_MAX))


def editor_reply_cap(engine: Any) -> int | None:
    """The engine's own cap on one reply's tokens (its ``reply_cap()`` or ``max_tokens``), None: none."""
    cap = getattr(engine, "reply_cap", None)
    if callable(cap):
        return int(cap())
    limit = getattr(engine, "max_tokens", None)
    return int(limit) if isinstance(limit, int) else None


def keeps_definitions(path: str, current: str, new: str) -> bool:
    """Whether ``new`` still defines every function, class and method ``current`` does, a placeholder
    aside: then a rewrite that keeps few of the lines (a stub implemented, a file reformatted) changed
    the file, it did not replace it. False where keel cannot tell (no parser for the language). A
    definition that was only a placeholder may go: nothing written is lost (measured on the 1.5B,
    Exercism complex-numbers: every candidate implemented the stub with ``abs`` for ``__abs__``, and all
    were refused as replacing the file, so none was tried)."""
    old, now = outline(path, current), outline(path, new)
    if old is None or now is None or not old.definitions:
        return False
    return not (_all_names(old) - _all_names(now) - placeholder_names(old, current))


def _all_names(shape: Outline) -> set[str]:
    return {f"{top.name}.{m.name}" for top in shape.definitions for m in top.members} | shape.names


def placeholder_names(shape: Outline, text: str) -> set[str]:
    """The definitions in ``shape`` (of ``text``) whose body is placeholders only, named as
    ``_all_names`` names them: ``f``, ``Class.method``."""
    lines = text.splitlines()
    found = set()
    for top in shape.definitions:
        starts = [m.line for m in top.members]
        for i, m in enumerate(top.members):
            end = starts[i + 1] - 1 if i + 1 < len(starts) else (top.end or len(lines))
            if _only_placeholders(lines[m.line - 1:end]):
                found.add(f"{top.name}.{m.name}")
        if not top.members and top.kind == "function" and _only_placeholders(lines[top.line - 1:top.end or top.line]):
            found.add(top.name)
    return found


def _only_placeholders(block: list[str]) -> bool:
    """Whether a definition's lines (its header first) hold a placeholder and nothing else but closers."""
    # the header ends at the first line ending with ":" or "{" (decorators and continuation lines above it)
    header = next((i for i, line in enumerate(block) if line.rstrip().endswith((":", "{"))), len(block))
    body = [line for line in block[header + 1:] if line.strip() and line.strip() not in ("}", "};")]
    return bool(body) and all(_is_placeholder(line) for line in body)


_OPENER = re.compile(r"[ \t]*+(`{3,64}+|~{3,64})[^\n`]*+")
_CLOSER = re.compile(r"[ \t]*+(`++|~++)[ \t]*+")


def extract_file(reply: str) -> str | None:
    """The file in the reply: its longest closed code block (a model may add a usage example after
    the file), or None when there is no closed block (the reply was cut, or is prose).

    A line scanner, not one regex over the reply: with many unclosed fences a regex searches to
    the end from each of them (quadratic); here each fence's closing lines are indexed once."""
    lines = reply.split("\n")
    closers: dict[str, list[int]] = {}
    for j, line in enumerate(lines):
        if (m := _CLOSER.fullmatch(line)) is not None:
            closers.setdefault(m.group(1), []).append(j)
    blocks, i = [], 0
    while i < len(lines) - 1:                  # an opening line needs a line break after it
        close = _closing_line(lines[i], i, closers)
        if close is None:
            i += 1
            continue
        blocks.append("".join(line + "\n" for line in lines[i + 1:close]))
        i = close + 1
    return max(blocks, key=len) if blocks else None


def _closing_line(line: str, i: int, closers: dict[str, list[int]]) -> int | None:
    """The line that closes a block opened on line ``i``, or None. A run of tildes may open with
    fewer of them (the rest read as the info string), as the regex this replaces allowed."""
    if (m := _OPENER.fullmatch(line)) is None:
        return None
    fence = m.group(1)
    widths = range(len(fence), 2, -1) if fence[0] == "~" else (len(fence),)
    for width in widths:
        ends = closers.get(fence[0] * width, [])
        k = bisect.bisect_right(ends, i)
        if k < len(ends):
            return ends[k]
    return None


def unframed(text: str | None, path: str) -> str | None:
    """The editor's file without the request's own frame lines copied into it: ``=== path ===`` first,
    ``=== end ===`` last (keel.drive.change.change_request). Measured on the 1.5B (py-discount-cent): a
    candidate began with "=== checkout.py ===" and was refused as not parsing."""
    if text is None:
        return None
    lines = text.splitlines(keepends=True)
    if lines and lines[0].strip() == f"=== {path} ===":
        lines = lines[1:]
    if lines and lines[-1].strip() == "=== end ===":
        lines = lines[:-1]
    return "".join(lines)


def imports_added(path: str, current: str | None, new: str) -> tuple[str, list[str]]:
    """A Python rewrite of an existing file with the imports it forgot (keel.drive.unbound.with_imports:
    a standard library module or a well-known name it reads and nothing binds), and the lines added."""
    if current is None or language_of(path) != "python":
        return new, []
    return with_imports(new, newly_unbound(current, new))


def without_self_test(path: str, current: str | None, new: str) -> tuple[str, bool]:
    """A Python rewrite without the ``if __name__ == "__main__":`` block of tests it appended (a
    unittest class, test functions, asserts), with the comment lines just above it; and whether one was
    dropped. Measured on the 1.5B (Exercism dnd-character): the editor's module came back with its own
    copy of the tests under such a block, was refused as holding the test file's text, and the code
    above it was lost. A main block the file already had, or one without tests, stays."""
    if language_of(path) != "python" or is_test_file(path) or (current is not None and _main_block(current)):
        return new, False
    found = _main_block(new)
    if found is None:
        return new, False
    start, end = found
    lines = new.splitlines(keepends=True)
    if not any(_PY_TEST_DEF.match(line) or _SELF_TEST.search(line) for line in lines[start:end]):
        return new, False
    while start > 0 and lines[start - 1].lstrip().startswith("#"):
        start -= 1
    kept = "".join(lines[:start] + lines[end:]).rstrip("\n") + "\n"
    return kept, True


def _main_block(source: str) -> tuple[int, int] | None:
    """The 0-based line span of a top-level ``if __name__ == "__main__":``, or None (also when it does not parse)."""
    try:
        tree = ast.parse(source)
    except (SyntaxError, ValueError):
        return None
    for node in tree.body:
        test = node.test if isinstance(node, ast.If) else None
        if isinstance(test, ast.Compare) and isinstance(test.left, ast.Name) and test.left.id == "__name__" and \
                len(test.comparators) == 1 and isinstance(c := test.comparators[0], ast.Constant) and c.value == "__main__":
            return node.lineno - 1, node.end_lineno or node.lineno
    return None


def rewrite_problem(path: str, current: str | None, new: str, note: str, tests: Sequence[FileText]) -> str | None:
    """Why the rewrite ``new`` of ``path`` must not be written, or None. ``tests``: the project's test
    files (their text), ``note``: the model's change note (a definition it names may go)."""
    if (copied := copies_tests(path, current, new, tests)) is not None:
        return (f"The rewrite of {path} holds the test file {copied}'s text instead of {path}'s own code, so "
                f"nothing was written. {path} must keep its own code; the tests stay as they are.")
    if (line := imports_itself(path, new)) is not None:
        return (f"The rewrite of {path} imports its own module ({line.strip()!r}), so nothing was written. "
                f"{path} defines these names itself; it must not import them from itself.")
    if current is None:
        return None
    # an existing file only: a new .py file may be a fragment or a template, not a module run as is
    if language_of(path) == "python" and (missing := newly_unbound(current, new)):
        names = ", ".join(missing[:3])
        return (f"The rewrite of {path} uses {names}, which {path} never defines or imports, so nothing was "
                f"written: it would fail with NameError. Define or import {names} in {path}, or do without.")
    if language_of(path) == "javascript" and (gone := dropped_definitions(path, current, new, note)):
        return (f"The rewrite of {path} dropped {', '.join(gone)}, which the change did not ask to remove, so "
                "nothing was written. The whole file comes back with the change; name a function in the "
                "change if it must go.")
    before, after = outline(path, current), outline(path, new)
    if before is not None and after is not None and before.error is None and after.error is not None:
        return (f"The rewrite of {path} does not parse ({after.error}), so nothing was written. Call change_file "
                "again, saying exactly what must change, or use edit_file for a few lines.")
    return None


def copies_tests(path: str, current: str | None, new: str, tests: Sequence[FileText]) -> str | None:
    """The test file whose text ``new`` copies, for a file that is not a test itself: test functions
    ``current`` did not have, or most of its lines taken from a test file."""
    if is_test_file(path):
        return None
    own = set((current or "").splitlines())
    fresh = [line for line in new.splitlines() if line not in own]
    pattern = _PY_TEST_DEF if language_of(path) == "python" else _JS_TEST_CALL
    defines_tests = any(pattern.match(line) for line in fresh)
    # imports say nothing either: the module and its tests may import the same things
    lines = [t for line in fresh if len(t := line.strip()) >= _MIN_COPIED_LINE and not _IMPORT.match(t)]
    for test in tests:
        if test.text is None:
            continue
        theirs = {line.strip() for line in test.text.splitlines()}
        copied = sum(1 for line in lines if line in theirs)
        if (defines_tests and copied) or (copied >= MIN_COPIED_LINES and copied >= COPIED_SHARE * len(lines)):
            return test.path
    return None


def imports_itself(path: str, new: str) -> str | None:
    """The line of ``new`` that imports the module ``path`` is, or None."""
    p = PurePosixPath(path)
    language = language_of(path)
    if language == "python":
        names = {p.stem, ".".join(p.with_suffix("").parts)} - {"__init__"}
        alternatives = "|".join(re.escape(n) for n in sorted(names))
        pattern = re.compile(rf"\s*(?:from\s+(?:{alternatives})\s+import\b|import\s+(?:{alternatives})\s*(?:$|,|\s+as\b))")
    elif language == "javascript":
        stem = re.escape(p.stem)
        pattern = re.compile(rf"""(?:require\s*\(\s*|\bfrom\s+)(['"])\./{stem}(?:\.[cm]?jsx?)?\1""")
    else:
        return None
    return next((line for line in new.splitlines() if pattern.match(line) or (language == "javascript"
                                                                               and pattern.search(line))), None)


_GONE = re.compile(r"\b(?:remove|removes|removing|delete|deleting|drop|dropping|get rid of|rename|renaming|move|"
                   r"moving|inline|inlining|merge|merging|replace|replacing|split|splitting|extract|extracting)\b",
                   re.IGNORECASE)
_GONE_AFTER = re.compile(r"\b(?:go|goes|removed|deleted|renamed|moved|merged|inlined|replaced|obsolete|unused)\b",
                         re.IGNORECASE)
_CLAUSE = re.compile(r"[.;\n]")


def asked_gone(name: str, note: str, added: Sequence[str] = ()) -> bool:
    """Whether ``note`` asks for the definition ``name`` to go (removed, renamed, moved, merged …): then a
    rewrite without it is what was asked. Named only ("add the encode and decode functions"), it stays:
    measured, a rewrite that held decode() alone would have deleted the encode() the note named. One
    clause at a time, each searched once: linear in the note."""
    word = re.compile(rf"(?<![\w$]){re.escape(name)}(?![\w$])")
    if added and word.search(note) and any(re.search(rf"(?<![\w$]){re.escape(n)}(?![\w$])", note) for n in added):
        return True   # ``added``: definitions the rewrite has that the file had not; both named: a rename
    for clause in _CLAUSE.split(note):
        if (named := word.search(clause)) is None:
            continue
        verb = _GONE.search(clause)
        if (verb is not None and (verb.start() < named.start() or word.search(clause, verb.end()))) or \
                _GONE_AFTER.search(clause, named.end()):
            return True
    return False


def dropped_definitions(path: str, current: str, new: str, note: str) -> list[str]:
    """Top-level definitions ``current`` has and ``new`` lost, that ``note`` does not name."""
    old, now = outline(path, current), outline(path, new)
    if old is None or now is None or now.error is not None:
        return []
    return [d.name + ("()" if d.kind == "function" else "") for d in old.definitions
            if d.name not in now.names and not asked_gone(d.name, note)]


_EXPORTS = re.compile(r"^(\s*module\.exports\s*=\s*\{)([^{}]*)(\}\s*;?\s*)$")


def restore_dropped_js(old: str, new: str, note: str) -> tuple[str, list[str]]:
    """``new`` (JavaScript) with the top-level definitions of ``old`` it lost put back after the one that
    preceded them, and their names put back into a one-line ``module.exports = { … }`` they were in; the
    names. What ``note`` names is left out, as asked. Measured (js-rename-function): asked to rename
    fmtMoney, the 1.5B editor gave back the renamed function alone, sumCents() and its export gone, the
    same reply every time it was asked again. ``restore_dropped`` is the Python twin."""
    before, after = outline("m.js", old), outline("m.js", new)
    if before is None or after is None or after.error is not None:
        return new, []
    gone = [d for d in before.definitions if d.name not in after.names
            and not asked_gone(d.name, note)]
    if not gone:
        return new, []
    old_lines, lines = old.splitlines(keepends=True), new.splitlines(keepends=True)
    if lines and not lines[-1].endswith("\n"):
        lines[-1] += "\n"
    order = [d.name for d in before.definitions]
    for d in gone:
        now = outline("m.js", "".join(lines))
        ends = {e.name: e.end for e in (now.definitions if now is not None else ())}
        previous = [n for n in order[: order.index(d.name)] if n in ends]
        # after the definition that preceded it, else after the last one (a doc comment stays with its function)
        at = ends[previous[-1]] if previous else max(ends.values(), default=0)
        lines[at:at] = ["\n", *old_lines[d.line - 1:d.end]]
    names = [d.name for d in gone]
    exported = next((_EXPORTS.match(line) for line in old_lines if _EXPORTS.match(line)), None)
    for i, line in enumerate(lines):
        if exported and (m := _EXPORTS.match(line)):
            have = [n.strip() for n in m[2].split(",") if n.strip()]
            missing = [n for n in names if n in {x.strip() for x in exported[2].split(",")} and n not in have]
            lines[i] = f"{m[1]} {', '.join([*have, *missing])} {m[3].lstrip()}" if missing else line
    return "".join(lines), names


# -- definitions a rewrite left out, put back ------------------------------------------------------
def restore_dropped(old: str, new: str, change: str) -> tuple[str, list[str]]:
    """``new`` with the top-level functions and classes of ``old`` that it lost put back, and their names.

    Measured on a 1.5B model: asked to implement parse_duration(), the rewrite held that function
    only, and format_duration() below it was gone (the tests could not even import). A definition
    the change names ("remove format_duration") is left out as asked. Each one goes back after the
    definition that preceded it in ``old``, or before the first one when it was first. Python only;
    when either text does not parse, ``new`` is returned as it is."""
    try:
        old_defs, new_defs = _top_defs(old), _top_defs(new)
    except SyntaxError:
        return new, []
    added = [n for n in new_defs if n not in old_defs]
    missing = [name for name in old_defs if name not in new_defs and not asked_gone(name, change, added)]
    if not missing:
        return new, []
    old_lines, lines = old.splitlines(keepends=True), new.splitlines(keepends=True)
    if lines and not lines[-1].endswith("\n"):
        lines[-1] += "\n"
    order = list(old_defs)
    for name in missing:
        start, end = old_defs[name]
        previous = [n for n in order[: order.index(name)] if n in new_defs]
        if previous:   # after the definition that preceded it, blank lines first
            at, block = new_defs[previous[-1]][1], ["\n", "\n", *old_lines[start:end]]
        else:          # it was first: before the first definition, blank lines after
            at, block = min((s for s, _ in new_defs.values()), default=len(lines)), [*old_lines[start:end], "\n", "\n"]
        lines[at:at] = block
        new_defs = _top_defs("".join(lines))
    return "".join(lines), missing


def _top_defs(source: str) -> dict[str, tuple[int, int]]:
    """Top-level def/class names → (first line index incl. decorators, end line index), in order."""
    out: dict[str, tuple[int, int]] = {}
    for node in ast.parse(source).body:
        if isinstance(node, ast.FunctionDef | ast.AsyncFunctionDef | ast.ClassDef):
            first = min([node.lineno, *(d.lineno for d in node.decorator_list)])
            out[node.name] = (first - 1, node.end_lineno or node.lineno)
    return out
