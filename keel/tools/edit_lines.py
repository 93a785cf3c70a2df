"""Line-by-line comparison of old_text with a window of the file's lines.

Two jobs, both pure: the tolerant fits (uniform re-indentation, whitespace, quotes) that say what
replaces a window once it is known to be the one, and the diagnosis when nothing fits: the closest
region, numbered like read_file, with each differing line's whitespace made visible.
"""

from __future__ import annotations

import re
from collections import Counter
from collections.abc import Callable
from dataclasses import dataclass
from difflib import SequenceMatcher, get_close_matches

CURLY_TO_STRAIGHT = str.maketrans({"“": '"', "”": '"', "„": '"', "‘": "'", "’": "'", "‚": "'"})
_WS_RUN = re.compile(r"\s+")
_VISIBLE = str.maketrans({" ": "·", "\t": "→", "\r": "␍"})
HINT_MIN_RATIO = 0.5
MAX_VOTERS = 50        # a line found more often than this (blank, "}", "return") does not vote
MAX_SHOWN_LINES = 40
MAX_SHOWN_DIFFS = 12


def collapse(line: str) -> str:
    return _WS_RUN.sub(" ", line.strip())


def lenient(line: str) -> str:
    return collapse(line).translate(CURLY_TO_STRAIGHT)


def lead(line: str) -> str:
    return line[: len(line) - len(line.lstrip(" \t"))]


def _col(ws: str, tab: int) -> int:
    col = 0
    for ch in ws:
        col = (col // tab + 1) * tab if ch == "\t" else col + 1
    return col


# ---- fits: the replacement lines for one window, or None when it does not fit -----------------

Fit = Callable[[list[str], list[str], list[str]], "list[str] | None"]


def _render(file_lines: list[str], old: list[str], new: list[str], fix: Callable[[str], str]) -> list[str]:
    """Lines new_text keeps from old_text are copied from the file verbatim; changed lines get ``fix``."""
    out: list[str] = []
    for tag, i1, i2, j1, j2 in SequenceMatcher(None, old, new, autojunk=False).get_opcodes():
        out.extend(file_lines[i1:i2] if tag == "equal" else (fix(line) for line in new[j1:j2]))
    return out


def _fit_exact(file_lines: list[str], old: list[str], new: list[str]) -> list[str] | None:
    return _render(file_lines, old, new, lambda s: s) if file_lines == old else None


def _fit_reindent(file_lines: list[str], old: list[str], new: list[str]) -> list[str] | None:
    shift: tuple[str, str] | None = None
    for f, o in zip(file_lines, old, strict=True):
        if not f.strip() and not o.strip():
            continue
        if len(f) > len(o) and f.endswith(o) and not f[: len(f) - len(o)].strip(" \t"):
            s = ("add", f[: len(f) - len(o)])
        elif len(o) > len(f) and o.endswith(f) and not o[: len(o) - len(f)].strip(" \t"):
            s = ("remove", o[: len(o) - len(f)])
        else:
            return None
        if shift is None:
            shift = s
        elif shift != s:
            return None
    if shift is None:
        return None
    how, prefix = shift

    def fix(line: str) -> str:
        if not line.strip():
            return ""
        if how == "add":
            return prefix + line
        return line[len(prefix):] if line.startswith(prefix) else line.lstrip(" \t")

    return _render(file_lines, old, new, fix)


def _indent_mapper(pairs: list[tuple[str, str]], model_lines: list[str]) -> Callable[[str], str] | None:
    """How the model's leading whitespace translates to the file's, if it does so consistently
    (same column shift on every line for some tab width)."""
    direct: dict[str, str] = {}
    for f, m in pairs:
        direct.setdefault(m, f)
    direct_ok = all(direct[m] == f for f, m in pairs)
    file_tabs = sum(f.startswith("\t") for f, _ in pairs) > sum(f.startswith(" ") for f, _ in pairs)
    space_widths = sorted({len(lead(x)) for x in model_lines if x.strip() and "\t" not in lead(x)})
    steps = [b - a for a, b in zip(space_widths, space_widths[1:], strict=False) if b - a in (2, 4, 8)]
    tab_widths = dict.fromkeys([*(steps[:1]), 4, 8, 2])
    for tab in tab_widths:
        deltas = {_col(f, tab) - _col(m, tab) for f, m in pairs}
        if len(deltas) <= 1:
            delta = deltas.pop() if deltas else 0
            break
    else:
        return None

    def mapper(ws: str) -> str:
        if direct_ok and ws in direct:
            return direct[ws]
        col = max(0, _col(ws, tab) + delta)
        return "\t" * (col // tab) + " " * (col % tab) if file_tabs else " " * col

    return mapper


def _fit_loose(file_lines: list[str], old: list[str], new: list[str], *, quotes: bool) -> list[str] | None:
    key = lenient if quotes else collapse
    if any(key(f) != key(o) for f, o in zip(file_lines, old, strict=True)):
        return None
    pairs = [(lead(f), lead(o)) for f, o in zip(file_lines, old, strict=True) if f.strip()]
    mapper = _indent_mapper(pairs, old + new)
    if mapper is None:
        return None
    # Trailing blanks the model added to old_text are noise; strip them from its new lines too.
    strip_tail = any(o != o.rstrip() and f == f.rstrip() for f, o in zip(file_lines, old, strict=True))
    table = _quote_table(file_lines, old) if quotes else {}

    def fix(line: str) -> str:
        if not line.strip():
            return ""
        ws = lead(line)
        body = line[len(ws):].rstrip() if strip_tail else line[len(ws):]
        return mapper(ws) + body.translate(table)

    return _render(file_lines, old, new, fix)


def _quote_table(file_lines: list[str], old: list[str]) -> dict[int, str]:
    """Curly quotes the model wrote where the file has straight ones, to straighten in its new lines.
    Never the reverse: turning straight quotes curly could break code."""
    seen: dict[str, set[str]] = {}
    for f, o in zip(file_lines, old, strict=True):
        fq = [c for c in f if c in "'\"‘’“”„‚"]
        oq = [c for c in o if c in "'\"‘’“”„‚"]
        if len(fq) == len(oq):
            for a, b in zip(oq, fq, strict=True):
                if a != b and a not in "'\"" and b in "'\"":
                    seen.setdefault(a, set()).add(b)
    table = {ord(a): next(iter(bs)) for a, bs in seen.items() if len(bs) == 1}
    if table and not any(c in "‘’“”„‚" for f in file_lines for c in f):
        return dict(CURLY_TO_STRAIGHT)   # the model types curly for straight; the file has none
    return table


LINE_TIERS: tuple[tuple[str, Fit], ...] = (
    ("exact", _fit_exact),
    ("reindent", _fit_reindent),
    ("whitespace", lambda f, o, n: _fit_loose(f, o, n, quotes=False)),
    ("quotes", lambda f, o, n: _fit_loose(f, o, n, quotes=True)),
)


# ---- diagnosis ----------------------------------------------------------------------------------

@dataclass(frozen=True)
class Diagnosis:
    message: str
    closest: tuple[int, int] | None       # 1-based inclusive lines most like old_text
    already_applied_at: int | None


def visible(text: str) -> str:
    return text.translate(_VISIBLE)


def strong_key(line: str) -> str:
    """A line with all whitespace removed and quotes straightened: what survives any drift."""
    return _WS_RUN.sub("", line).translate(CURLY_TO_STRAIGHT)


def diagnose_not_found(lines: list[str], old: list[str], *, already_applied_at: int | None,
                       had_cr: bool) -> Diagnosis:
    msg = ["old_text was not found in the file (tried exact, line endings, re-indentation, whitespace, quotes"
           " and '...' elision). Nothing was changed."]
    if already_applied_at is not None:
        msg.append(f"new_text is already in the file at line {already_applied_at}: this edit was probably "
                   "applied already. Re-read the file before editing it again.")
    region = closest_region(lines, old)
    closest = None
    if region:
        a, b, ratio = region
        closest = (a + 1, b)
        shown = "\n".join(f"{n + 1:>6}\t{lines[n]}" for n in range(a, min(b, a + MAX_SHOWN_LINES)))
        where = f"line {b}" if b == a + 1 else f"lines {a + 1}-{b}"
        msg.append(f"The closest region is {where} ({ratio:.0%} similar):\n{shown}")
        diffs = differences(lines[a:b], a + 1, old)
        if diffs:
            msg.append("Where it differs from old_text (· space, → tab, ␍ CR):\n"
                       + "\n".join(diffs[:MAX_SHOWN_DIFFS]))
        msg.append("Copy old_text from the current file exactly (re-read it if it may have changed).")
    elif already_applied_at is None:
        msg.append("No similar region either: re-read the file; it may not contain what you expect.")
    if had_cr:
        msg.append("(old_text's CR/CRLF line endings were already ignored.)")
    return Diagnosis("\n".join(msg), closest, already_applied_at)


# difflib is quadratic in characters (worse on repetitive text: 1,500 characters of "```a" lines
# took 9 s), so a "did you mean" hint compares at most this many, in at most this many windows.
SIMILARITY_CAP = 300
SIMILARITY_WINDOWS = 6


def closest_region(lines: list[str], old: list[str]) -> tuple[int, int, float] | None:
    """0-based half-open window of the file most like old_text, by line, ignoring whitespace."""
    okeys = [strong_key(line) for line in old]
    keys = [strong_key(line) for line in lines]
    index: dict[str, list[int]] = {}
    for i, key in enumerate(keys):
        index.setdefault(key, []).append(i)
    votes: Counter[int] = Counter()
    for j, key in enumerate(okeys):
        hits = index.get(key, []) if key else []
        for c in hits if len(hits) <= MAX_VOTERS else ():
            votes[c - j] += 1
    if not votes:  # no line survives intact: vote with near-identical lines instead
        # difflib is quadratic in a line's length: compare heads only (a 20 kB minified line took 171 s)
        heads = {k[:SIMILARITY_CAP]: k for k in index if k}
        for j in sorted(range(len(okeys)), key=lambda j: -len(okeys[j]))[:5]:
            for near in get_close_matches(okeys[j][:SIMILARITY_CAP], list(heads), n=3, cutoff=0.6) if okeys[j] else ():
                for c in index[heads[near]][:MAX_VOTERS]:
                    votes[c - j] += 1
    k, wanted = len(old), "\n".join(okeys)[:SIMILARITY_CAP]
    # Lines in the same position first (a changed line still leaves the rest aligned), then
    # character similarity, which also ranks single-line old_text; difflib only for the best few.
    aligned = []
    for s in {s + d for s, _ in votes.most_common(8) for d in (-1, 0, 1)}:
        a, b = max(0, s), min(len(lines), s + k)   # a window as long as old_text
        if a < b:
            aligned.append((sum(keys[a + j] == okeys[j + a - s] for j in range(b - a)), -a, b))
    scored = []
    for in_place, neg_a, b in sorted(aligned, reverse=True)[:SIMILARITY_WINDOWS]:
        window = "\n".join(keys[-neg_a:b])
        ratio = SequenceMatcher(None, wanted, window[:SIMILARITY_CAP], autojunk=False).ratio()
        if ratio == 1.0 and window != "\n".join(okeys):   # equal heads only: never claim "100% similar"
            ratio = 0.99
        scored.append((in_place, ratio, neg_a, b))
    if not scored:
        return None
    _, ratio, neg_a, b = max(scored)
    best = (-neg_a, b, ratio)
    return best if best[2] >= HINT_MIN_RATIO else None


def differences(file_lines: list[str], first: int, old: list[str]) -> list[str]:
    out: list[str] = []
    sm = SequenceMatcher(None, [strong_key(x) for x in file_lines], [strong_key(x) for x in old], autojunk=False)
    for _tag, i1, i2, j1, j2 in sm.get_opcodes():
        for d in range(max(i2 - i1, j2 - j1)):
            f = file_lines[i1 + d] if i1 + d < i2 else None
            o = old[j1 + d] if j1 + d < j2 else None
            if f == o:
                continue
            label = f"line {first + i1 + d}"
            if f is not None and o is not None:
                out.append(f"  {label} file:     {visible(f)}\n  {' ' * len(label)} old_text: {visible(o)}")
            elif f is not None:
                out.append(f"  {label} file:     {visible(f)}   (missing from old_text)")
            else:
                out.append(f"  old_text line {j1 + d + 1}: {visible(o or '')}   (not in the file here)")
    return out
