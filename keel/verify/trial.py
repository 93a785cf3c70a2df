"""Trial calls: what a reviewed module's functions return on small inputs, run by keel and shown to the model.

Why: measured on Qwen2.5-Coder-1.5B (py-review-pagination, "Review pagination.py and tell me what is
wrong with it"): the model answered "pagination.py is correct and does not need any changes" three
times. The gate refused each (``answer_unfounded``: asked what is wrong, an all-clear has nothing to
rest on), and told to try the edge cases in its head, the model sent the same answer; the run stopped
on the verification limit with 400 s left. The project's test tries page_count() only. A small model
reads ``start = page * per_page`` and does not compute it; keel can: ``paginate(list(range(10)), 1, 3)``
returns ``[3, 4, 5]`` where the docstring says page numbers start at 1.

So when such an answer is refused, keel calls each public function of the files under review with
small arguments chosen from its parameter names (a list for ``items``, 3 for ``per_page``, 1 for
``page``), once more with an empty list where one takes a list, and shows what came back. Nothing is
judged here: the results are facts for the model to hold against the docstrings. A function whose
required parameters keel cannot guess is left out. The calls run in a scratch copy of the workspace
inside the sandbox (keel.verify.verifier), so a function that writes files changes nothing.

Pure: ``trial_calls`` (one file's calls) and ``trial_command`` (the one command that runs them).
"""

from __future__ import annotations

import ast
import shlex
from collections.abc import Sequence
from pathlib import PurePosixPath

MAX_CALLS = 8          # per file: enough for a module under review, short enough to read
MAX_FILES = 3
_SEQUENCE = frozenset({"items", "xs", "values", "seq", "sequence", "data", "lst", "elements", "nums", "numbers",
                       "array", "arr", "records", "rows", "entries", "iterable", "collection", "list", "l"})
_STRINGS = frozenset({"words", "names", "lines", "strings", "tokens", "labels", "keys"})
_SIZE = frozenset({"per_page", "page_size", "size", "limit", "width", "length", "count", "n", "k", "chunk",
                   "chunk_size", "step", "batch", "batch_size", "depth", "times", "digits", "places", "precision"})
_POSITION = frozenset({"page", "index", "i", "idx", "start", "offset", "pos", "position", "number", "num",
                       "value", "amount", "price", "total", "year", "month", "day", "cents", "seconds"})
_PAIR = {"a": "2", "b": "3", "x": "2", "y": "3", "low": "1", "high": "5", "lo": "1", "hi": "5", "end": "5",
         "stop": "5"}
_TEXT = frozenset({"text", "s", "string", "name", "word", "line", "title", "message", "msg", "sentence",
                   "phrase", "key", "prefix", "suffix", "source", "content", "body"})
_MAPPING = frozenset({"mapping", "d", "dct", "config", "options", "counts", "table", "scores"})


def _value(param: str) -> str | None:
    """An argument for a parameter of this name, or None when the name says nothing keel can use."""
    name = param.lower()
    if name in _SEQUENCE:
        return "list(range(10))"
    if name in _STRINGS:
        return "['apple', 'banana', 'cherry']"
    if name in _SIZE:
        return "3"
    if name in _POSITION:
        return "1"
    if name in _PAIR:
        return _PAIR[name]
    if name in _TEXT:
        return "'Hello world'"
    if name in _MAPPING:
        return "{'a': 1, 'b': 2}"
    return None


def trial_calls(text: str) -> list[str]:
    """The calls to try for the public top-level functions of Python source ``text``: one with typical
    arguments, one with an empty list where a parameter takes a list. Parameters with a default are left
    to it. Source that does not parse gives none."""
    try:
        body = ast.parse(text).body
    except (SyntaxError, ValueError):
        return []
    calls: list[str] = []
    for node in body:
        if not isinstance(node, ast.FunctionDef) or node.name.startswith("_") or node.decorator_list:
            continue
        params = [a.arg for a in node.args.posonlyargs + node.args.args]
        required = params[:len(params) - len(node.args.defaults)]
        required += [a.arg for a, d in zip(node.args.kwonlyargs, node.args.kw_defaults, strict=True) if d is None]
        values = [_value(p) for p in required]
        if any(v is None for v in values):
            continue
        args = [v for v in values if v is not None]
        calls.append(f"{node.name}({', '.join(args)})")
        if "list(range(10))" in args:
            calls.append(f"{node.name}({', '.join('[]' if v == 'list(range(10))' else v for v in args)})")
    return calls[:MAX_CALLS]


def module_name(path: str) -> str | None:
    """The import name of a Python file in the workspace ("src/pkg/mod.py" -> "pkg.mod"); None for a
    package's __init__ or a name Python cannot import."""
    p = PurePosixPath(path)
    if p.suffix != ".py" or p.name == "__init__.py":
        return None
    parts = list(p.with_suffix("").parts)
    if parts[0] == "src" and len(parts) > 1:
        parts = parts[1:]
    return ".".join(parts) if all(part.isidentifier() for part in parts) else None


def trial_command(module: str, calls: Sequence[str]) -> str:
    """One ``python3 -c`` that imports ``module`` and prints, for each call, what it returned (an
    iterator listed, at most 20 items) or raised. Each result is cut at 160 characters."""
    lines = ["import sys, importlib, itertools", "sys.path[:0] = ['.', 'src']",
             f"space = dict(vars(importlib.import_module({module!r})))",
             f"for call in {list(calls)!r}:",
             "    try:",
             "        got = eval(call, space)",
             "        if hasattr(got, '__next__'):",
             "            got = list(itertools.islice(got, 20))",
             "        text = repr(got)",
             "        print(call, 'returned', text if len(text) <= 160 else text[:157] + '...')",
             "    except Exception as e:",
             "        said = str(e).splitlines()[0] if str(e) else ''",
             "        print(call, 'raised', type(e).__name__ + (': ' + said[:120] if said else ''))"]
    return "python3 -c " + shlex.quote("\n".join(lines))


def trial_text(shown: Sequence[tuple[str, str]]) -> str:
    """The pushback's facts: each file's printed results (``(path, output)``), introduced once."""
    if not shown:
        return ""
    parts = ["keel ran the functions with small inputs; compare each result with what its docstring promises:"]
    for path, output in shown:
        parts.append(f"{path}:")
        parts += [f"  {line}" for line in output.strip().splitlines()[:MAX_CALLS]]
    return "\n".join(parts)
