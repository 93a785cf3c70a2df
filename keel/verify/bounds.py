"""Documented bounds, tried before and after a change: a function that answered for a value its comment or
the task allows must still answer for it.

Why: measured on Qwen2.5-Coder-1.5B (js-off-by-one at bd2b06d, "fix it so the month lengths are right
(months are 1–12)"). The model replaced daysInMonth()'s date arithmetic with a table; the project's tests
try months 1 to 4 and passed; the gate passed the claim; daysInMonth(2023, 12) returned undefined. The
comment says ``month (1 = January … 12 = December)`` and the task says 1–12: the ends of a documented
range are inputs the code must handle, and the code before the change handled them (with a wrong
number, but a number). So the gate takes the calls the tests make to the changed functions, puts each
end of a documented range in each argument that lies inside it, and runs those calls on the code as it
was and as it is: a call that returned a value before and now returns undefined, NaN or None, or throws,
refuses the claim. A value outside every documented range is never tried, so a change that makes the
code refuse such a value is not held back.

Pure: ``ranges``, ``literal_calls``, ``bound_calls`` and ``bounds_command`` (one command per file; with
``before`` None it records what each call gives, with ``before`` it checks against that record).
"""

from __future__ import annotations

import json
import re
import shlex
from collections.abc import Callable, Mapping, Sequence
from pathlib import PurePosixPath

from keel.context.outline import outline
from keel.verify.contract import doc_comments
from keel.verify.plan import PlannedCheck
from keel.verify.probes import balanced, signature, split_raw

MARK = "@@keel-bounds@@"
Item = tuple[str, ...]   # one call that must still answer, or (call, call) two that must give the same
MAX_CALLS = 12         # per file
MAX_SPAN = 100_000     # a range wider than this is no bound of an argument ("1-200000 rows")
_N = r"(-?\d{1,6})"
_RANGE = re.compile(
    rf"(?<![\w.\-–—/:]){_N}\s*(?:–|—|-|\.\.\.?|…|to|through|bis)\s*{_N}(?![\w.\-–—/:])"
    rf"|{_N}\s*=\s*[^\W\d]\w*\s*(?:…|\.\.\.?|,|to|-|–)\s*{_N}\s*=\s*[^\W\d]"
    rf"|\bbetween\s+{_N}\s+and\s+{_N}\b|\bfrom\s+{_N}\s+(?:to|through)\s+{_N}\b", re.IGNORECASE)
_ATOM = r"(?:-?\d+(?:\.\d+)?|\"[^\"\\\n]*\"|'[^'\\\n]*'|true|false|null|None|True|False)"
_LITERAL = re.compile(rf"{_ATOM}|\[\s*(?:{_ATOM}\s*(?:,\s*{_ATOM}\s*)*,?)?\]")
_INT = re.compile(r"-?\d+")


def ranges(text: str) -> list[tuple[int, int]]:
    """The integer ranges ``text`` documents: "1–12", "1 = January … 12 = December", "between 0 and 59"."""
    found: list[tuple[int, int]] = []
    for m in _RANGE.finditer(text):
        lo, hi = (int(g) for g in m.groups() if g is not None)
        if lo < hi and hi - lo <= MAX_SPAN and (lo, hi) not in found:
            found.append((lo, hi))
    return found


def literal_calls(name: str, texts: Sequence[str]) -> list[list[str]]:
    """The argument lists of the calls to ``name`` in ``texts`` (test files) whose arguments are all
    literals: numbers, strings, booleans, null, flat lists of those."""
    calls: list[list[str]] = []
    for text in texts:
        for m in re.finditer(rf"(?<![\w$.]){re.escape(name)}\(", text):
            end = balanced(text, m.end() - 1)
            if end is None:
                continue
            inner = text[m.end():end - 1]
            args = [a.strip() for a in split_raw(inner)] if inner.strip() else []
            if args and all(_LITERAL.fullmatch(a) for a in args) and args not in calls:
                calls.append(args)
    return calls


def bound_calls(name: str, calls: Sequence[list[str]], spans: Sequence[tuple[int, int]]) -> list[str]:
    """Each call with the ends of a range in an integer argument that lies inside it, the tests' own
    calls left out (they run already)."""
    own = {f"{name}({', '.join(args)})" for args in calls}
    found: list[str] = []
    for args in calls:
        for i, arg in enumerate(args):
            if not _INT.fullmatch(arg):
                continue
            for lo, hi in spans:
                if lo <= int(arg) <= hi:
                    for end in (lo, hi):
                        call = f"{name}({', '.join([*args[:i], str(end), *args[i + 1:]])})"
                        if call not in own and call not in found:
                            found.append(call)
    return found[:MAX_CALLS]


def file_calls(path: str, texts: Sequence[str], tests: Sequence[str], task: str) -> list[Item]:
    """The probes of file ``path`` (``texts``: its text now and before the change, a comment the change
    dropped still counts): for each top-level function the tests call, the bound calls of its comment's
    ranges and the task's, and the iterator pairs of a parameter its comment calls iterable."""
    spans_of_task = ranges(task)
    docs: dict[str, str] = {}
    names: list[str] = []
    for text in texts:
        for name, doc in doc_comments(path, text).items():
            docs[name] = f"{docs.get(name, '')} {doc}"
        shape = outline(path, text)
        names += [d.name for d in (shape.definitions if shape else ()) if d.kind == "function" and d.name not in names]
    found: list[Item] = []
    for name in names:
        doc = docs.get(name, "")
        spans = ranges(doc) + [s for s in spans_of_task if s not in ranges(doc)]
        calls = literal_calls(name, tests)
        found += [(c,) for c in bound_calls(name, calls, spans)] if spans else []
        found += iterator_pairs(name, calls, _iterable_index(path, texts[0], name, doc), path.endswith(".py"))
    return found[:MAX_CALLS]


# A parameter its comment calls iterable ("``durations_ms`` (any iterable)") must take a one-shot iterator as
# it takes a list. Measured on the 1.5B with the assists off (py-empty-input at be12010): the fix tested
# `if not durations_ms:`, true for [] and false for iter([]), so the visible test of [] passed, the gate
# passed the claim, and summarize(iter([])) still raised ZeroDivisionError.
_ITERABLE = re.compile(r"\b(?:iterable|iterator|generator)s?\b", re.IGNORECASE)


def _iterable_index(path: str, text: str, name: str, doc: str) -> int | None:
    """Which parameter of ``name`` its comment calls iterable: the one named just before the word, or the
    only one; None when it says no such thing or it is unclear."""
    sig = signature(path, text, name)
    word = _ITERABLE.search(doc)
    if sig is None or word is None:
        return None
    params = sig[0]
    before = doc[max(0, word.start() - 60):word.start()]
    named = [i for i, p in enumerate(params) if re.search(rf"(?<![\w$]){re.escape(p)}(?![\w$])", before)]
    return named[-1] if named else (0 if len(params) == 1 else None)


def iterator_pairs(name: str, calls: Sequence[list[str]], index: int | None, python: bool) -> list[Item]:
    """(the call with a one-shot iterator, the test's call with a list) for each test call that passes a
    list literal as parameter ``index``: the two must give the same."""
    if index is None:
        return []
    pairs: list[Item] = []
    for args in calls:
        if index < len(args) and args[index].startswith("["):
            wrapped = f"iter({args[index]})" if python else f"{args[index]}.values()"
            pairs.append((f"{name}({', '.join([*args[:index], wrapped, *args[index + 1:]])})",
                          f"{name}({', '.join(args)})"))
    return pairs[:3]


def label(item: Item) -> str:
    return item[0] if len(item) == 1 else f"{item[0]} as {item[1]}"


_JS = r'''
const m = require(MODULE);
const show = (v) => { try { const s = JSON.stringify(v); return s === undefined ? String(v) : s; } catch (e) { return String(v); } };
const state = (f) => { try { const v = f(m); if (v === undefined) return ["undefined", "undefined"];
  if (typeof v === "number" && Number.isNaN(v)) return ["NaN", "NaN"]; return ["ok", show(v).slice(0, 120)]; }
  catch (e) { return ["raised", String((e && e.name) || "Error") + (e && e.name === "Disagree" ? ": " + e.message : "")]; } };
const say = (s) => (s[0] === "raised" ? "throws " : "returns ") + s[1];
const same = (f, g, a, b) => (m) => { const x = state(f), y = state(g); if (x[0] === y[0] && x[1] === y[1]) return true;
  const e = new Error(a + " " + say(x) + ", but " + b + " " + say(y)); e.name = "Disagree"; throw e; };
const calls = CALLS, before = BEFORE;
if (before === null) { console.log(MARK + JSON.stringify(calls.map(([label, f]) => [label, ...state(f)]))); process.exit(0); }
let failed = 0;
for (const [label, f] of calls) { if (!(label in before)) continue; const [s, v] = state(f);
  if (s === "ok") { console.log("ok: " + label + (label.includes(" as ") && v === "true" ? " gives the same" : " returns " + v)); continue; }
  failed += 1; console.log("FAILED: " + (v.startsWith("Disagree: ") ? v.slice(10) + " (its comment says it takes any iterable; an iterator can be read once)" :
    label + (s === "raised" ? " throws " + v : " returns " + v) + " after the change; before it, it returned " + before[label])); }
process.exit(failed ? 1 : 0);
'''

_PY = r'''
import json, math, sys
sys.path[:0] = ['.', 'src']
import MODULE as m
class Disagree(Exception):
    pass
def state(f):
    try:
        v = f(m)
    except Exception as e:
        return ['raised', type(e).__name__ + (': ' + str(e) if isinstance(e, Disagree) else '')]
    if v is None:
        return ['None', 'None']
    if isinstance(v, float) and math.isnan(v):
        return ['NaN', 'nan']
    try:
        return ['ok', repr(v)[:120]]
    except Exception:
        return ['ok', '?']
def same(f, g, a, b):
    def both(m):
        x, y = state(f), state(g)
        if x == y:
            return True
        say = lambda s: ('raises ' if s[0] == 'raised' else 'returns ') + s[1]
        raise Disagree(a + ' ' + say(x) + ', but ' + b + ' ' + say(y))
    return both
calls, before = CALLS, BEFORE
if before is None:
    print(MARK + json.dumps([[label, *state(f)] for label, f in calls]))
    sys.exit(0)
failed = 0
for label, f in calls:
    if label not in before:
        continue
    s, v = state(f)
    if s == 'ok':
        print('ok: ' + label + (' gives the same' if ' as ' in label and v == 'True' else ' returns ' + v))
        continue
    failed += 1
    if v.startswith('Disagree: '):
        print('FAILED: ' + v[10:] + ' (its docstring says it takes any iterable; an iterator can be read once)')
    else:
        print('FAILED: ' + label + (' raises ' if s == 'raised' else ' returns ') + v +
              ' after the change; before it, it returned ' + before[label])
sys.exit(1 if failed else 0)
'''


def bounds_command(path: str, items: Sequence[Item], before: Mapping[str, str] | None) -> str | None:
    """The command that runs ``items`` (calls ``name(args)`` of functions of module ``path``): with ``before``
    None it prints MARK and what each gives as JSON (``parse_record``); with ``before`` (label -> what it
    gave then) it prints ok/FAILED lines and exits 1 when one that answered then does not now. None for
    a file it cannot load that way (another language, a path that is no module name)."""
    if not items:
        return None
    if path.endswith(".py"):
        module = ".".join(PurePosixPath(path).with_suffix("").parts)
        if re.fullmatch(r"[A-Za-z_]\w*(?:\.[A-Za-z_]\w*)*", module, re.ASCII) is None:
            return None
        listed = "[" + ", ".join(f"({label(i)!r}, {_py(i)})" for i in items) + "]"
        code = _PY.replace("MODULE", module).replace("MARK", repr(MARK)).replace("CALLS", listed).replace(
            "BEFORE", repr(dict(before)) if before is not None else "None")
        return "python3 -c " + shlex.quote(code)
    if path.endswith((".js", ".cjs")):
        listed = "[" + ", ".join(f"[{json.dumps(label(i))}, {_js(i)}]" for i in items) + "]"
        code = _JS.replace("MODULE", json.dumps("./" + path)).replace("MARK", json.dumps(MARK)).replace(
            "CALLS", listed).replace("BEFORE", json.dumps(dict(before)) if before is not None else "null")
        return "node -e " + shlex.quote(code)
    return None


def _py(item: Item) -> str:
    if len(item) == 1:
        return f"lambda m: m.{item[0]}"
    return f"same(lambda m: m.{item[0]}, lambda m: m.{item[1]}, {item[0]!r}, {item[1]!r})"


def _js(item: Item) -> str:
    if len(item) == 1:
        return f"(m) => m.{item[0]}"
    return f"same((m) => m.{item[0]}, (m) => m.{item[1]}, {json.dumps(item[0])}, {json.dumps(item[1])})"


def parse_record(output: str | None) -> dict[str, str]:
    """From a recording run's output: label -> what the call returned, for the calls that returned a value."""
    _, mark, data = (output or "").rpartition(MARK)
    try:
        rows = json.loads(data.strip().splitlines()[0]) if mark else []
    except (ValueError, IndexError):
        return {}
    return {str(r[0]): str(r[2]) for r in rows if isinstance(r, list) and len(r) == 3 and r[1] == "ok"}


def bound_checks(changed: Mapping[str, str], before: Mapping[str, str | None], tests: Sequence[str], task: str,
                 record: Callable[[str], str | None]) -> list[PlannedCheck]:
    """One acceptance check per changed file with bound calls (``changed``: path -> text now; ``before``:
    path -> text at the start, None for a file the run made). ``record(command)`` runs a recording
    command on the code as it was and returns its output: the check then refuses a call that returned a
    value there and does not now."""
    checks = []
    for path, text in sorted(changed.items()):
        then = before.get(path)
        if then is None:
            continue
        items = file_calls(path, [text, then], tests, task)
        command = bounds_command(path, items, None)
        returned = parse_record(record(command)) if command else {}
        check = bounds_command(path, [i for i in items if label(i) in returned], returned) if returned else None
        if check is not None:
            names = ", ".join(sorted({c.split("(")[0] for c in returned}))   # each label starts with a call
            checks.append(PlannedCheck(
                "acceptance", check, f"{names} must still answer at the ends of the ranges its comment or the task "
                "documents, and take an iterator where its comment says iterable, as it did before the change",
                source="task", timeout_s=30,
                shown=f"{names} at the documented bounds and iterables, against the code before the change ({path})"))
    return checks
