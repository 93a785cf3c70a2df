"""Expected values from the code: when the task asks for tests of code it keeps, a new assertion's expected
value is what the code returns.

Why: measured on Qwen2.5-Coder-1.5B. py-write-tests ("Write pytest tests for is_leap_year in test_leap.py
… Don't change leap.py"): the editor chose good inputs (2000, 1900, 2024, 2023) and wrote wrong
expectations (``assert is_leap_year(2023) == True``, ``== 365``); every rewrite and candidate failed on the
kept code, 2 or 3 tests each, until the wall clock ended the run. js-write-tests ("Don't touch
duration.js"): its test expected humanDuration(-1) to return where the code throws a RangeError, as its
doc comment says; the run ended with that test failing. The failure output says what the code did; the
small model does not carry it over. The task says the code is right (it must not change), so what the
code does *is* the expectation: keel runs each asserted call on the code as it is (a scratch copy,
inside the sandbox) and writes what it got into the assertion: the value it returned, or, when it threw
a built-in error, an assertion that it throws (``pytest.raises``, ``assert.throws``). Whether the tests
are good enough stays the task's check (its mutation checker) and the gate's.

Only plain forms, each on one line, whose call uses only names the test file imports: Python's
``assert CALL == LITERAL`` (either side), ``assert CALL is True|False|None``, ``assert CALL`` and
``assert not CALL``; JavaScript's ``assert.strictEqual|equal|deepStrictEqual|deepEqual(CALL, EXPECTED)``.
Pure: ``expectations``, ``evaluation_command`` and ``corrected``; keel.drive.change runs the command.
"""

from __future__ import annotations

import ast
import builtins
import json
import posixpath
import re
import shlex
from collections.abc import Callable, Sequence
from dataclasses import dataclass

from keel.core.request import Request
from keel.verify.calltrace import NODE_SUFFIXES
from keel.verify.probes import balanced, split_raw
from keel.verify.selfcheck import is_test_file

MAX_EXPECTS = 40


@dataclass(frozen=True)
class Expect:
    call: str                 # the asserted call's source
    line: int                 # 0-based line of the assertion
    span: tuple[int, int]     # byte offsets in that line of what a returned value replaces
    stmt: tuple[int, int]     # … and of the whole assertion (replaced when the call throws)
    kind: str                 # "eq": a literal; "is": True/False/None; "truth": CALL or not CALL; "js"
    written: str              # what stands at ``span`` now


# -- Python ------------------------------------------------------------------------------------------
def _imported(body: list[ast.stmt]) -> tuple[set[str], list[ast.Import | ast.ImportFrom]]:
    names: set[str] = set()
    imports = [s for s in body if isinstance(s, ast.Import | ast.ImportFrom)]
    for s in imports:
        for alias in s.names:
            names.add((alias.asname or alias.name).split(".")[0])
    return names, imports


def _plain_call(node: ast.expr, known: set[str]) -> bool:
    """A call whose every name is imported or built in (no test-local variable, no lambda)."""
    if not isinstance(node, ast.Call):
        return False
    for sub in ast.walk(node):
        if isinstance(sub, ast.Lambda | ast.NamedExpr | ast.Await):
            return False
        if isinstance(sub, ast.Name) and sub.id not in known and not hasattr(builtins, sub.id):
            return False
    return True


def _literal(source: str | ast.expr) -> tuple[bool, object]:
    """Whether ``source`` is a literal, and its value."""
    try:
        return True, ast.literal_eval(source)
    except (ValueError, TypeError, SyntaxError, MemoryError, RecursionError):
        return False, None


def _one(test: ast.expr, known: set[str]) -> tuple[ast.expr, ast.expr, str] | None:
    """(the call, the node a value replaces, kind) for one assertion's test, or None."""
    if isinstance(test, ast.Compare) and len(test.ops) == 1:
        left, right, op = test.left, test.comparators[0], test.ops[0]
        for call, other in ((left, right), (right, left)):
            if not _plain_call(call, known):
                continue
            if isinstance(op, ast.Eq) and _literal(other)[0]:
                return call, other, "eq"
            if isinstance(op, ast.Is) and other is right and isinstance(other, ast.Constant) and \
                    other.value in (True, False, None):
                return call, other, "is"
        return None
    inner = test.operand if isinstance(test, ast.UnaryOp) and isinstance(test.op, ast.Not) else test
    if _plain_call(inner, known):
        return inner, test, "truth"
    return None


def _python(text: str) -> tuple[list[Expect], str]:
    try:
        tree = ast.parse(text)
    except (SyntaxError, ValueError):
        return [], ""
    known, imports = _imported(tree.body)
    lines = text.splitlines(keepends=True)
    found: list[Expect] = []
    for node in ast.walk(tree):
        if not isinstance(node, ast.Assert) or node.lineno != node.end_lineno or (hit := _one(node.test, known)) is None:
            continue
        call, target, kind = hit
        assert target.end_col_offset is not None and call.end_col_offset is not None and node.end_col_offset
        line = lines[node.lineno - 1].encode()
        found.append(Expect(line[call.col_offset:call.end_col_offset].decode(), node.lineno - 1,
                            (target.col_offset, target.end_col_offset), (node.col_offset, node.end_col_offset),
                            kind, line[target.col_offset:target.end_col_offset].decode()))
    return found, "\n".join(ast.unparse(s) for s in imports)


# -- JavaScript --------------------------------------------------------------------------------------
_REQUIRE = re.compile(r"^\s*(?:const|let|var)\s+(\{[^}]*\}|[A-Za-z_$][\w$]*)\s*=\s*require\(\s*(['\"])([^'\"]+)\2\s*\)\s*;?\s*$")
_JS_ASSERT = re.compile(r"\bassert\.(strictEqual|equal|deepStrictEqual|deepEqual)\(")
_JS_CALL = re.compile(r"\s*([A-Za-z_$][\w$]*)(?:\.[A-Za-z_$][\w$]*)*\(")


def _bytes(line: str, start: int, end: int) -> tuple[int, int]:
    """Character offsets in ``line`` as byte offsets (what Python's ast gives, and what ``corrected`` cuts)."""
    return len(line[:start].encode()), len(line[:end].encode())


def _javascript(text: str) -> tuple[list[Expect], str]:
    requires = [line.strip() for line in text.splitlines()
                if (m := _REQUIRE.match(line)) is not None and m.group(3).startswith(".")]
    names = _js_names("\n".join(requires))
    found: list[Expect] = []
    for n, line in enumerate(text.splitlines(keepends=True)):
        for m in _JS_ASSERT.finditer(line):
            end = balanced(line, m.end() - 1)
            args = split_raw(line[m.end():end - 1]) if end is not None else []
            if end is None or len(args) not in (2, 3) or (c := _JS_CALL.match(args[0])) is None or \
                    c.group(1) not in names or balanced(args[0], c.end() - 1) != len(args[0].rstrip()):
                continue
            first = m.end() + len(args[0]) + 1          # the expected value: the second argument, trimmed
            at, to = first + len(args[1]) - len(args[1].lstrip()), first + len(args[1].rstrip())
            span, stmt = _bytes(line, at, to), _bytes(line, m.start(), end)
            found.append(Expect(args[0].strip(), n, span, stmt, "js:" + m.group(1), line[at:to]))
    return found, "\n".join(requires)


# -- both --------------------------------------------------------------------------------------------
def expectations(text: str, path: str = "test_x.py") -> tuple[list[Expect], str]:
    """The assertions keel can check in test source ``text`` (Python, or JavaScript by ``path``), and the
    source its calls need (the imports, the relative requires). Source that does not parse gives none."""
    found, needs = _javascript(text) if path.endswith(NODE_SUFFIXES) else _python(text)
    return sorted(found, key=lambda e: (e.line, e.span))[:MAX_EXPECTS], needs


def evaluation_command(needs: str, found: Sequence[Expect], path: str = "test_x.py") -> str:
    """One command that runs the test file's imports, then prints one JSON line per assertion:
    ``[i, "ok", value, holds]`` (value: a Python repr or JSON; holds: the assertion passes already) or
    ``[i, "raised", error name, is built in]``."""
    calls = [e.call for e in found]
    if path.endswith(NODE_SUFFIXES):
        wanted = [e.written for e in found]
        lines = ["const path = require('path'), assert = require('assert');",
                 f"const req = require('module').createRequire(path.resolve({json.dumps(path)}));",
                 f"const names = {json.dumps(sorted(_js_names(needs)))};",
                 f"const bound = new Function('require', {json.dumps(needs)} + '\\nreturn [' + names.join(', ') + '];')(req);",
                 "const run = (code) => new Function(...names, 'return (' + code + ');')(...bound);",
                 f"const wanted = {json.dumps(wanted)};",
                 f"{json.dumps(calls)}.forEach((call, i) => {{",
                 "  let got; try { got = run(call); } catch (e) { const name = (e && e.name) || 'Error';",
                 "    // a name the call needs from the test itself (a local), or text that is no expression: not run",
                 "    const ran = !['ReferenceError', 'SyntaxError'].includes(name);",
                 "    console.log(JSON.stringify([i, ran ? 'raised' : 'other', name, typeof globalThis[name] === 'function']));",
                 "    return; }",
                 "  let holds = false; try { assert.deepStrictEqual(got, run(wanted[i])); holds = true; } catch (e) {}",
                 "  const plain = got === null || ['string', 'boolean'].includes(typeof got) || Number.isFinite(got) ||",
                 "    (typeof got === 'object' && JSON.stringify(got) !== undefined);",
                 "  console.log(JSON.stringify([i, plain ? 'ok' : 'other', plain ? JSON.stringify(got) : '', holds]));",
                 "});"]
        return "node -e " + shlex.quote("\n".join(lines))
    lines = ["import builtins, sys, json", "sys.path[:0] = ['.', 'src']", "space = {}", f"exec({needs!r}, space)",
             f"for i, call in enumerate({calls!r}):",
             "    try:",
             "        print(json.dumps([i, 'ok', repr(eval(call, space)), False]))",
             "    except Exception as e:",
             "        print(json.dumps([i, 'raised', type(e).__name__, getattr(builtins, type(e).__name__, None) "
             "is type(e)]))"]
    return "python3 -c " + shlex.quote("\n".join(lines))


def _js_names(requires: str) -> set[str]:
    names: set[str] = set()
    for line in requires.splitlines():
        if (m := _REQUIRE.match(line)) is not None:
            names |= {part.split(":")[-1].strip() for part in m.group(1).strip("{} ").split(",") if part.strip()}
    return names


def _results(output: str) -> dict[int, tuple[str, str, bool]]:
    got: dict[int, tuple[str, str, bool]] = {}
    for line in output.splitlines():
        try:
            i, status, value, flag = json.loads(line)
        except (ValueError, TypeError):
            continue
        got[int(i)] = (str(status), str(value), bool(flag))
    return got


def _replacement(e: Expect, status: str, value: str, flag: bool) -> tuple[tuple[int, int], str] | None:
    """Where and what to write so the assertion expects what the code did, or None to leave it."""
    js = e.kind.startswith("js:")
    if status == "raised":   # a built-in error only: another one would need an import the file may lack
        if not flag:
            return None
        return e.stmt, (f"assert.throws(() => {e.call}, {value})" if js else f"with pytest.raises({value}): {e.call}")
    if status != "ok":
        return None
    if js:
        shaped = value.startswith(("[", "{")) and e.kind in ("js:strictEqual", "js:equal")   # compared by reference
        return None if flag or shaped else (e.span, value)
    plain, returned = _literal(value)
    if not plain:
        return None   # not a literal (an object): nothing to write
    if e.kind == "eq":
        return None if _literal(e.written)[1] == returned else (e.span, value)   # holds already: as written
    if e.kind == "is":
        return (e.span, value) if returned in (True, False, None) and repr(returned) != e.written else None
    negated = e.written.startswith("not ")
    if bool(returned) is not negated:
        return None   # it already holds
    return e.span, (e.call if negated else f"not {e.call}")


def corrected(text: str, found: Sequence[Expect], output: str, path: str = "test_x.py") -> tuple[str, list[str]]:
    """``text`` with each assertion the evaluation ``output`` contradicts set to what the code did, and
    one note per change ("is_leap_year(2023): True -> False")."""
    got = _results(output)
    lines = text.splitlines(keepends=True)
    notes: list[str] = []
    for i in sorted(range(len(found)), key=lambda k: (found[k].line, -found[k].span[0])):
        e = found[i]
        if i not in got or (change := _replacement(e, *got[i])) is None:
            continue
        (start, end), new = change
        raw = lines[e.line].encode()
        lines[e.line] = (raw[:start] + new.encode() + raw[end:]).decode()
        notes.append(f"{e.call}: {e.written} -> {new}" if (start, end) == e.span else f"{e.call}: {new}")
    new_text = "".join(lines)
    if "pytest.raises(" in new_text and not path.endswith(NODE_SUFFIXES) and \
            not re.search(r"^import pytest\b", new_text, re.MULTILINE):
        new_text = "import pytest\n" + new_text
    return new_text, notes


def _modules(needs: str, path: str) -> list[str]:
    """The workspace files the test's imports (Python) or relative requires (JavaScript) may load."""
    if path.endswith(NODE_SUFFIXES):
        found = []
        for line in needs.splitlines():
            if (m := _REQUIRE.match(line)) is not None:
                target = posixpath.normpath(posixpath.join(posixpath.dirname(path), m.group(3)))
                found += [target, target + ".js", posixpath.join(target, "index.js")]
        return found
    names = [n for line in needs.splitlines() if (m := re.match(r"(?:from|import)\s+([\w.]+)", line)) for n in [m.group(1)]]
    return [f"{root}{n.replace('.', '/')}{end}" for n in names for root in ("", "src/") for end in (".py", "/__init__.py")]


def from_code(path: str, text: str, request: Request,
              run_in_copy: Callable[[str], str | None]) -> tuple[str, list[str]] | None:
    """``text``, a rewrite of test file ``path``, with its expectations set from the code, and the notes;
    None when the task does not both ask for tests and keep the code, or nothing changed. ``run_in_copy``:
    what a command prints in a scratch copy of the workspace (None: it failed)."""
    if not (path.endswith((".py", *NODE_SUFFIXES)) and is_test_file(path) and request.allows_test_changes
            and request.kept_files):
        return None
    found, needs = expectations(text, path)
    if not found or not needs or not set(_modules(needs, path)) & set(request.kept_files):
        return None   # the code the tests call is not what the task keeps: a failing test may be the bug report
    output = run_in_copy(evaluation_command(needs, found, path))
    if output is None:
        return None
    new, notes = corrected(text, found, output, path)
    return (new, notes) if notes else None
