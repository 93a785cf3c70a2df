"""What the docs promise: when a task says a function must do what its comment or docstring says,
the checks passing is not yet the whole evidence.

Why: measured on Qwen2.5-Coder-1.5B (js-implement-function, "implement them as their comments
describe"), the model wrote chunk() so that `npm test` passed and keel reported the task complete,
while the comment's "`size` must be a positive integer (RangeError otherwise)" was not done: 1.5
gave no error. The tests do not check every sentence of a comment; the task made the comment part of
what "done" means. So before such a claim stands, the model is shown the comment of each function the
task names, in the files it changed, and asked once to check its code against it (the decider's
``contract_review`` pushback). It is asked once: keel cannot run a comment, and a claim made again
after reading it is judged by the checks as usual.

Shown the comments alone, the 1.5B model sent its first change_file again and finished; so the review
ends with one concrete next call when change_file is offered: a change whose note is the comment's
rules (its sentences that say must, otherwise, raises, only …), which the editor request then follows.

Pure core: ``doc_comments`` (one file's text), ``promises`` (all of them, for the functions a request
names when it points at docs: keel.core.request) and ``review_text``. Linear time on any input (tests/linear_text_cases.py).
"""

from __future__ import annotations

import ast
import json
import re
from collections.abc import Mapping, Sequence
from dataclasses import dataclass

from keel.core.request import Request
from keel.core.request.names import word_runs

MAX_DOC_CHARS = 500        # of one function's comment, shown
MAX_FUNCTIONS = 4          # shown in one review
MAX_FILE_CHARS = 256_000   # a bigger file is not read for comments
MAX_NOTE_CHARS = 300       # the suggested change's note (change_file takes up to 600)

_JS_DECL = re.compile(r"^\s*(?:export\s+)?(?:default\s+)?(?:async\s+)?(?:function\s*\*?\s*([A-Za-z_$][\w$]*)"
                      r"|(?:const|let|var)\s+([A-Za-z_$][\w$]*)\s*=|(?:static\s+)?([A-Za-z_$][\w$]*)\s*\([^)]*\)\s*\{)")
JS_EXTS = (".js", ".mjs", ".cjs", ".ts", ".tsx", ".jsx", ".mts", ".cts")
_SENTENCE_END = re.compile(r"(?<=[.!?;])\s+")
_RULE = re.compile(r"\b(?:must|shall|should|otherwise|raises?|throws?|error|errors|only|never|not|no|rounds?|rounded|"
                   r"positive|negative|integer|at least|at most|unchanged|modified|empty|order)\b", re.IGNORECASE)


@dataclass(frozen=True)
class Promise:
    """One function's comment that the task makes part of "done"."""

    name: str
    path: str
    doc: str
    rules: tuple[str, ...]   # its sentences that state a rule (must, otherwise, raises, only …)


def doc_comments(path: str, text: str) -> dict[str, str]:
    """Function name -> its docstring (Python) or the ``/** … */`` block right above it (JS/TS),
    whitespace collapsed; functions without one are left out."""
    if len(text) > MAX_FILE_CHARS:
        return {}
    if path.endswith(".py"):
        return _python_docs(text)
    if path.endswith(JS_EXTS):
        return _js_docs(text)
    return {}


def _python_docs(text: str) -> dict[str, str]:
    try:
        tree = ast.parse(text)
    except (SyntaxError, ValueError, RecursionError):
        return {}
    docs: dict[str, str] = {}
    for node in ast.walk(tree):
        if isinstance(node, ast.FunctionDef | ast.AsyncFunctionDef) and (doc := ast.get_docstring(node)):
            docs.setdefault(node.name, " ".join(doc.split()))
    return docs


def _js_docs(text: str) -> dict[str, str]:
    """A line scanner: a ``/**`` block, then the next non-blank line must declare the function."""
    docs: dict[str, str] = {}
    block: list[str] | None = None
    pending: str | None = None   # a finished block waiting for its declaration
    for line in text.splitlines():
        stripped = line.strip()
        if block is not None:
            end = stripped.find("*/")
            block.append(stripped[:end] if end >= 0 else stripped)
            if end >= 0:
                pending, block = _js_block_text(block), None
            continue
        if stripped.startswith("/**"):
            rest = stripped[3:]
            end = rest.find("*/")
            if end >= 0:
                pending = _js_block_text([rest[:end]])
            else:
                block = [rest]
            continue
        if not stripped:
            continue
        if pending and (m := _JS_DECL.match(line)):
            name = m.group(1) or m.group(2) or m.group(3)
            if name and name not in ("if", "for", "while", "switch", "catch", "function"):
                docs.setdefault(name, pending)
        pending = None
    return docs


def _js_block_text(lines: list[str]) -> str:
    return " ".join(" ".join(line.lstrip("*").strip() for line in lines).split())


# What a rule's words mean as inputs, for the few words whose edge a small model misses. Measured on
# the 1.5B model (js-implement-function): given the note "`size` must be a positive integer (RangeError
# otherwise)", the editor wrote `if (size <= 0) throw new RangeError(…)` and 1.5 went through; the
# hidden check tried chunk([1], 1.5). Spelled out as the values refused, the edge is in the note.
# (words, the values they refuse, whether the words name the refused values themselves): "a negative n
# raises" refuses -1 as it stands; "positive" refuses 0 and -1 only where the sentence requires it
# ("must be positive", "not positive", "(… otherwise)"), not in "raises ValueError if n is positive".
_MEANS = (
    (r"positive\s+(?:whole\s+number|integer|int)", ("0", "-1", "1.5"), False),
    (r"non-?negative\s+(?:whole\s+number|integer|int)", ("-1", "1.5"), False),
    (r"non-?(?:integer|whole\s+number)|fractional", ("1.5",), True),
    (r"non-?positive", ("0", "-1"), True),
    (r"non-?negative", ("-1",), False),
    (r"negative", ("-1",), True),
    (r"whole\s+number|integer", ("1.5",), False),
    (r"positive", ("0", "-1"), False),
    (r"non-?empty", ("an empty one",), False),
)
_MEANS_RE = tuple((re.compile(rf"(?<![\w-])(?:{words})(?![\w-])", re.IGNORECASE), values, named)
                  for words, values, named in _MEANS)
_REQUIRES = re.compile(r"\b(?:must|should|shall|otherwise|not|only|needs?\s+to|has\s+to|at\s+least)\b", re.IGNORECASE)
ERROR_NAME = re.compile(r"\b([A-Z]\w*(?:Error|Exception))\b")   # RangeError, ValueError, ParseException


def rules(doc: str) -> tuple[str, ...]:
    """The sentences of a comment that state a rule, in order, each with the values it refuses
    spelled out when its words have an edge (``spelled_out``)."""
    return tuple(spelled_out(s) for s in _SENTENCE_END.split(doc) if _RULE.search(s))


def refused(rule: str) -> tuple[tuple[str, ...], int | None]:
    """The values ``rule`` refuses by its words (``_MEANS``), in order, and where the first such word
    starts: "`size` must be a positive integer" refuses 0, -1 and 1.5. A word inside a longer one
    already read ("integer" in "positive integer") adds nothing."""
    values: list[str] = []
    taken: list[tuple[int, int]] = []
    requires = _REQUIRES.search(rule) is not None
    for pattern, refuses, named in _MEANS_RE:
        for m in pattern.finditer(rule):
            if (named or requires) and not any(a < m.end() and m.start() < b for a, b in taken):
                taken.append(m.span())
                values += [v for v in refuses if v not in values]
    return tuple(values), min((a for a, _ in taken), default=None)


def edge_values(rule: str) -> tuple[str, ...]:
    """The numbers among the values ``rule`` refuses (``refused``)."""
    return tuple(v for v in refused(rule)[0] if re.fullmatch(r"-?[\d.]+", v))


# "half rounds up", which a small model wrote as Python's round() (half to even): the edge spelled out.
HALF_UP = re.compile(r"\bhalf\b[^.;]{0,40}?\bround(?:s|ed)?\s+up\b|\bround(?:s|ed|ing)?\s+half\s+up\b", re.IGNORECASE)
HALF_UP_SAID = ("Half rounds up: 0.5 becomes 1 and 2.5 becomes 3, not the even neighbour (Python's round() "
                "gives 0 and 2).")


def spelled_out(rule: str) -> str:
    """``rule``, then the values it refuses when it uses a word of ``_MEANS``: "`size` must be a positive
    integer (RangeError otherwise)." gets "Each of 0, -1 and 1.5 gives RangeError."; a rule that half
    rounds up gets its edge (HALF_UP_SAID)."""
    values = refused(rule)[0]
    if HALF_UP.search(rule):
        end = "" if rule.rstrip().endswith((".", "!", ";", ")")) else "."
        return f"{rule.rstrip()}{end} {HALF_UP_SAID}"
    if not values:
        return rule
    error = ERROR_NAME.search(rule)
    outcome = f"gives {error.group(1)}" if error else "is refused"
    said = values[0] if len(values) == 1 else "Each of " + ", ".join(values[:-1]) + " and " + values[-1]
    end = "" if rule.rstrip().endswith((".", "!", ";", ")")) else "."
    return f"{rule.rstrip()}{end} {said[0].upper() + said[1:]} {outcome}."


def promises(request: Request, files: Mapping[str, str]) -> tuple[Promise, ...]:
    """For each function whose comment is in ``files`` (the source files the run changed: path -> text)
    and that the request makes part of "done", its promise: a function the request names when it points
    at docs (``Request.points_at_docs``, ``Request.functions``: keel.core.request), or one whose comment
    says what the request says, ECHO_WORDS words in a row ("rounded to the nearest cent"). Measured
    (py-discount-cent): the 1.5B fixed percent_of() with round(), which rounds half to even, where its
    docstring and the task said "rounded to the nearest cent (half a cent rounds up)"; the tests passed."""
    wanted = request.functions if request.points_at_docs else ()
    found: list[Promise] = []
    for path in sorted(files):
        docs = doc_comments(path, files[path])
        echoed = [n for n, doc in docs.items() if n not in wanted and word_runs(doc) & request.phrases]
        for name in (*wanted, *echoed):
            if name in docs and len(found) < MAX_FUNCTIONS:
                doc = docs[name] if len(docs[name]) <= MAX_DOC_CHARS else docs[name][: MAX_DOC_CHARS - 1] + "…"
                found.append(Promise(name, path, doc, rules(doc)))
    return tuple(found)


def review_text(found: Sequence[Promise], change_tool: bool) -> str:
    """The review's body: each function's comment, then (``change_tool``: change_file is offered) one
    change_file call whose note is the first function's rules."""
    lines = [f"- {p.name} in {p.path}: {p.doc}" + "".join(f"\n  Spelled out: {r}" for r in p.rules if r not in p.doc)
             for p in found]
    first = next((p for p in found if p.rules), None)
    if change_tool and first is not None:
        note = f"{first.name}: " + " ".join(first.rules)
        note = note if len(note) <= MAX_NOTE_CHARS else note[: MAX_NOTE_CHARS - 1] + "…"
        lines.append("If your code does not do all of that, a good next call: change_file with "
                     + json.dumps({"path": first.path, "change": note}, ensure_ascii=False))
    return "\n".join(lines)
