"""Call traces of failing tests: what each function of the project got and returned while a failing test
ran, shown to change_file's editor next to the failure.

Why: measured on Qwen2.5-Coder-1.5B. The failure output names the symptom, at the test's line; the
cause is often a call or two deeper, and the small model rewrites the function it was shown. js-due-date:
dueDate() returned "2024-05-05"; the bug was parseDate(), which read "2024-03-05" as April; the editor
gave back parseDate unchanged in eight rewrites and the run ended on the wall clock. py-mutable-default:
``Article("second").tags`` was ``['news']``; the editor never saw that ``__init__`` got ``tags=['news']``
by default, and returned the file unchanged twelve times. A trace shows it in one line per call::

    test_articles.py::test_new_articles_start_without_tags
      __init__(title='first', tags=[]) returned None
      add_tag(article=Article('first', tags=[]), tag='news') returned Article('first', tags=['news'])
      __init__(title='second', tags=['news']) returned None

Python: the failing pytest tests run again under ``sys.settrace`` (functions in the workspace's own
files, not its tests, as keel.verify.selfcheck names them, or installed packages). JavaScript: the test file runs again under a ``require``
hook that wraps the functions each workspace module exports, and node:test's ``test`` to mark each test.
keel.verify.verifier runs the command in a scratch copy inside the sandbox. Pure: the commands and
``render``.
"""

from __future__ import annotations

import json
import re
import shlex
from collections.abc import Sequence

from keel.verify.selfcheck import TEST_DIRS, TEST_NAMES

MARK = "@@keel-trace@@"
NODE_SUFFIXES = (".js", ".cjs", ".mjs")   # what node runs as it is
MAX_TESTS = 2
MAX_LINES = 24          # per test: enough for a call chain, short enough for a small window
MAX_CALLS = 400         # recorded per run: a loop in the code must not fill memory

_PY = r'''
import fnmatch, json, os, reprlib, sys
root = os.path.realpath(os.getcwd())
rep = reprlib.Repr(); rep.maxstring = 60; rep.maxother = 60; rep.maxlist = 6; rep.maxdict = 6; rep.maxlevel = 3
calls, stack, mine = [], [], {}
def ours(path):
    if path not in mine:
        real = os.path.realpath(path); rel = real[len(root) + 1:]
        mine[path] = not path.startswith("<") and real.startswith(root + os.sep) and "site-packages" not in rel and \
            not any(fnmatch.fnmatch(os.path.basename(rel), t) for t in TEST_NAMES) and \
            not any(part in TEST_DIRS or part.startswith(".") for part in rel.split(os.sep)[:-1])
    return mine[path]
def show(value):
    try:
        return rep.repr(value)
    except Exception:
        return "<" + type(value).__name__ + ">"
def local(frame, event, arg):
    if event == "exception":
        if stack and stack[-1] is not None:
            calls[stack[-1]][4] = arg[0].__name__
    elif event == "return" and stack:
        i = stack.pop()
        if i is not None and (arg is not None or not calls[i][4]):   # None after an exception: it raised
            calls[i][3], calls[i][4] = show(arg), None
    return local
def trace(frame, event, arg):
    code = frame.f_code
    if event != "call" or code.co_name.startswith("<") or code.co_name in ("__repr__", "__str__") or \
            not ours(code.co_filename):   # repr is what the trace itself calls to show a value
        return None
    if len(calls) >= MAX_CALLS:
        stack.append(None)
        return local
    names = code.co_varnames[:code.co_argcount + code.co_kwonlyargcount]
    args = ", ".join(k + "=" + show(frame.f_locals[k]) for k in names if k in frame.f_locals and k != "self")
    stack.append(len(calls))
    calls.append([len(stack) - 1, code.co_name, args, None, None])
    return local
class Mark:
    def pytest_runtest_call(self, item):
        calls.append(["test", item.nodeid])
        stack.clear()
import pytest
sys.settrace(trace)
try:
    pytest.main(["-q", "-p", "no:cacheprovider", *IDS], plugins=[Mark()])
finally:
    sys.settrace(None)
print(MARK + json.dumps(calls))
'''

_JS = r'''
const Module = require("module"), path = require("path"), util = require("util");
const root = process.cwd(), calls = [], done = new Set();
const show = (v) => { try { return util.inspect(v, { depth: 2, breakLength: Infinity, maxArrayLength: 6, maxStringLength: 60 }); } catch (e) { return "?"; } };
const ours = (file) => { const rel = path.relative(root, file); return !rel.startsWith("..") && !path.isAbsolute(rel) &&
  !rel.split(path.sep).some((p) => p === "node_modules" || TEST_DIRS.includes(p) || p.startsWith(".")) &&
  !TEST_NAMES.some((r) => new RegExp(r).test(path.basename(rel))); };
let depth = 0;
const wrap = (fn, name) => function (...args) {
  if (calls.length >= MAX_CALLS) return fn.apply(this, args);
  const row = [depth, name, args.map(show).join(", "), null, null]; calls.push(row); depth += 1;
  try { const out = fn.apply(this, args); row[3] = show(out); return out; }
  catch (e) { row[4] = (e && e.name) || "Error"; throw e; } finally { depth -= 1; } };
const load = Module.prototype.require;
Module.prototype.require = function (id) {
  const got = load.apply(this, arguments);
  if (id === "node:test" || id === "test") {
    const test = (name, ...rest) => got(name, ...rest.map((f) => typeof f === "function"
      ? async (...a) => { calls.push(["test", String(name)]); depth = 0; return f(...a); } : f));
    return Object.assign(test, got, { test });
  }
  let file; try { file = Module._resolveFilename(id, this); } catch (e) { return got; }
  if (!path.isAbsolute(file) || !ours(file) || done.has(file) || !got || typeof got !== "object" && typeof got !== "function") return got;
  done.add(file);
  if (typeof got === "function") return wrap(got, got.name || path.basename(file));
  for (const key of Object.keys(got)) if (typeof got[key] === "function" && !/^[A-Z]/.test(key)) got[key] = wrap(got[key], key);
  return got; };
process.on("exit", () => { process.stdout.write("\n" + MARK + JSON.stringify(calls) + "\n"); });
require(path.resolve(FILE));
'''


def python_command(test_ids: Sequence[str]) -> str:
    """Run pytest on ``test_ids`` under the tracer; the calls are printed after MARK as JSON."""
    code = _PY.replace("MAX_CALLS", str(MAX_CALLS)).replace("MARK", repr(MARK)).replace(
        "*IDS", ", ".join(repr(t) for t in test_ids[:MAX_TESTS])).replace(
        "TEST_NAMES", repr(TEST_NAMES)).replace("TEST_DIRS", repr(sorted(TEST_DIRS)))
    return "python3 -c " + shlex.quote(code)


def javascript_command(test_file: str) -> str:
    """Run a node:test file in process under the require hook; the calls are printed after MARK as JSON."""
    names = [f"^{re.escape(glob).replace(chr(92) + '*', '.*')}$" for glob in TEST_NAMES]   # keel's test files, as JS regexes
    code = _JS.replace("MAX_CALLS", str(MAX_CALLS)).replace("MARK", json.dumps(MARK)).replace(
        "FILE", json.dumps(test_file)).replace("TEST_NAMES", json.dumps(names)).replace(
        "TEST_DIRS", json.dumps(sorted(TEST_DIRS)))
    return "node -e " + shlex.quote(code)


def render(output: str, failing: Sequence[str]) -> str:
    """The trace for the editor: the calls made under each failing test (``failing``: pytest ids, or
    node:test names), one line per call, indented by depth; a call repeated in a row is counted, not
    repeated. Empty when nothing of the project's was called."""
    _, mark, data = output.rpartition(MARK)
    try:
        rows = json.loads(data.strip().splitlines()[0]) if mark else []
    except (ValueError, IndexError):
        return ""
    blocks: list[list[str]] = []
    wanted = set(failing)
    current: list[str] | None = None
    for row in rows:
        if row[0] == "test":
            current = [str(row[1])] if str(row[1]) in wanted or any(str(row[1]).endswith(f) for f in wanted) else None
            if current is not None:
                blocks.append(current)
            continue
        if current is None:
            continue
        depth, name, args, returned, raised = row
        line = "  " * (int(depth) + 1) + f"{name}({args}) " + (f"raised {raised}" if raised else f"returned {returned}")
        if len(current) > 1 and current[-1].split(" ×")[0] == line:
            count = int(current[-1].rpartition(" ×")[2]) + 1 if " ×" in current[-1] else 2
            current[-1] = f"{line} ×{count}"
        elif len(current) <= MAX_LINES:
            current.append(line)
    shown = [b for b in blocks if len(b) > 1][:MAX_TESTS]
    if not shown:
        return ""
    head = "What the project's functions got and returned while the failing tests ran (keel traced them):"
    return "\n".join([head] + [line for block in shown for line in block])
