"""Where a search-and-replace edit goes, as pure functions on strings (the file's LF view).

The matcher tries tiers from strict to lenient: exact, line endings, uniform re-indentation,
whitespace, quotes, ``...`` elision. A tier must find exactly one place; several places are
refused at that tier with every candidate listed, never guessed. Every tier past the exact ones
also requires uniqueness under the most lenient comparison, so drift can never make a second,
similar block look unique. Zero matches come back with the closest region and what differs.
"""

from __future__ import annotations

import re
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field, replace
from difflib import SequenceMatcher
from functools import cached_property

from keel.tools.edit_hints import CURLY_TO_STRAIGHT, diagnose_not_found

_WS_RUN = re.compile(r"\s+")
_ELISION = re.compile(r"^\s*(?:\.\.\.|(?:#|//)\s*\.\.\..*)\s*$")
LINE_HINT_SLACK = 5
MAX_LISTED = 50


@dataclass(frozen=True)
class EditRequest:
    old_text: str
    new_text: str
    replace_all: bool = False


@dataclass(frozen=True)
class Replacement:
    """Put ``text`` in place of ``content[start:end]``; lines are 1-based, in the original content."""

    start: int
    end: int
    text: str
    first_line: int
    last_line: int


@dataclass(frozen=True)
class MatchResult:
    replacements: tuple[Replacement, ...] = ()
    tier: str = ""                      # exact | line_endings | reindent | whitespace | quotes | elision
    notes: tuple[str, ...] = ()
    error: str = ""
    candidates: tuple[int, ...] = ()    # ambiguous: 1-based first line of every match
    closest: tuple[int, int] | None = None   # not found: 1-based inclusive region most like old_text
    already_applied_at: int | None = None    # not found, but new_text is present at this line
    tiers: tuple[str, ...] = field(default=())   # multi-edit: the tier of each edit

    @property
    def ok(self) -> bool:
        return not self.error


def _lf(text: str) -> str:
    return text.replace("\r\n", "\n").replace("\r", "\n")


def _split(text: str) -> list[str]:
    return (text[:-1] if text.endswith("\n") else text).split("\n")


def _collapse(line: str) -> str:
    return _WS_RUN.sub(" ", line.strip())


def _lenient(line: str) -> str:
    return _collapse(line).translate(CURLY_TO_STRAIGHT)


def _lead(line: str) -> str:
    return line[: len(line) - len(line.lstrip(" \t"))]


def _col(ws: str, tab: int) -> int:
    col = 0
    for ch in ws:
        col = (col // tab + 1) * tab if ch == "\t" else col + 1
    return col


def _lines_word(lines: Sequence[int]) -> str:
    shown = ", ".join(str(n) for n in lines[:MAX_LISTED])
    more = f" and {len(lines) - MAX_LISTED} more" if len(lines) > MAX_LISTED else ""
    return f"line{'s' if len(lines) > 1 else ''} {shown}{more}"


class _Doc:
    """The content split into lines, with offsets and lazily built lookup keys."""

    def __init__(self, content: str) -> None:
        self.content = content
        self.lines = _split(content) if content else []
        self.starts: list[int] = []
        pos = 0
        for line in self.lines:
            self.starts.append(pos)
            pos += len(line) + 1

    def line_of(self, offset: int) -> int:
        return self.content.count("\n", 0, offset) + 1

    def span(self, i: int, k: int) -> tuple[int, int]:
        """Offsets of lines i..i+k-1 (0-based), without the last line's newline."""
        return self.starts[i], self.starts[i + k - 1] + len(self.lines[i + k - 1])

    @cached_property
    def lenient_keys(self) -> list[str]:
        return [_lenient(line) for line in self.lines]

    @cached_property
    def lenient_index(self) -> dict[str, list[int]]:
        return _index(self.lenient_keys)


def _index(keys: list[str]) -> dict[str, list[int]]:
    out: dict[str, list[int]] = {}
    for i, key in enumerate(keys):
        out.setdefault(key, []).append(i)
    return out


# ---- line-level fits: each returns the replacement lines for one window, or None ----------------

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
    space_widths = sorted({len(_lead(x)) for x in model_lines if x.strip() and "\t" not in _lead(x)})
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
    key = _lenient if quotes else _collapse
    if any(key(f) != key(o) for f, o in zip(file_lines, old, strict=True)):
        return None
    pairs = [(_lead(f), _lead(o)) for f, o in zip(file_lines, old, strict=True) if f.strip()]
    mapper = _indent_mapper(pairs, old + new)
    if mapper is None:
        return None
    # Trailing blanks the model added to old_text are noise; strip them from its new lines too.
    strip_tail = any(o != o.rstrip() and f == f.rstrip() for f, o in zip(file_lines, old, strict=True))
    table = _quote_table(file_lines, old) if quotes else {}

    def fix(line: str) -> str:
        if not line.strip():
            return ""
        ws = _lead(line)
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


_LINE_TIERS: tuple[tuple[str, Fit], ...] = (
    ("exact", _fit_exact),
    ("reindent", _fit_reindent),
    ("whitespace", lambda f, o, n: _fit_loose(f, o, n, quotes=False)),
    ("quotes", lambda f, o, n: _fit_loose(f, o, n, quotes=True)),
)


def _windows(doc: _Doc, old: list[str]) -> list[int]:
    """Every line where old_text fits under the most lenient comparison."""
    okeys = [_lenient(line) for line in old]
    anchor = next((j for j, key in enumerate(okeys) if key), None)
    if anchor is None:
        return []
    k = len(old)
    starts = (c - anchor for c in doc.lenient_index.get(okeys[anchor], ()))
    return [i for i in starts if i >= 0 and i + k <= len(doc.lines) and doc.lenient_keys[i:i + k] == okeys]


def _line_match(doc: _Doc, old: list[str], new: list[str], replace_all: bool) -> MatchResult | None:
    windows = _windows(doc, old)
    if not windows:
        return None
    k = len(old)
    for tier, fit in _LINE_TIERS:
        fits = [(i, r) for i in windows if (r := fit(doc.lines[i:i + k], old, new)) is not None]
        if not fits:
            continue
        # Exact lines are judged like an exact substring; anything looser must be unique even
        # under the loosest comparison, so a drifted copy elsewhere cannot be mistaken for it.
        rivals = fits if tier == "exact" else windows
        if len(rivals) > 1 and not replace_all:
            return _ambiguous([r[0] + 1 if isinstance(r, tuple) else r + 1 for r in rivals], tier)
        chosen, last_end = [], -1
        for i, lines in fits:
            if i > last_end:
                chosen.append(_line_replacement(doc, i, k, lines))
                last_end = i + k - 1
        return MatchResult(replacements=tuple(chosen), tier=tier)
    i = windows[0]
    return MatchResult(error=(f"old_text matches {_lines_word([w + 1 for w in windows])} once whitespace is "
                              "ignored, but its indentation is not a uniform shift of the file's, so where "
                              "new_text's lines belong is unclear. Copy old_text's indentation from the file."),
                       closest=(i + 1, i + k), candidates=tuple(w + 1 for w in windows))


def _line_replacement(doc: _Doc, i: int, k: int, lines: list[str]) -> Replacement:
    start, end = doc.span(i, k)
    if not lines:  # deletion: take the line break too, so no empty line is left behind
        if end < len(doc.content):
            end += 1
        elif start > 0:
            start -= 1
    return Replacement(start, end, "\n".join(lines), i + 1, i + k)


def _ambiguous(lines: list[int], tier: str) -> MatchResult:
    how = "exactly" if tier in ("exact", "line_endings") else "once whitespace and quotes are ignored"
    shown = sorted(set(lines))
    return MatchResult(error=(f"old_text matches {len(lines)} places {how}: {_lines_word(shown)}. Nothing was "
                              "changed. Add neighbouring lines to old_text so it matches one place only, "
                              "or set replace_all=true to change every place."),
                       candidates=tuple(shown), tier=tier)


# ---- substring tiers ------------------------------------------------------------------------------

def _hits(content: str, old: str, overlapping: bool) -> list[int]:
    out, pos = [], content.find(old)
    while pos != -1:
        out.append(pos)
        pos = content.find(old, pos + (1 if overlapping else len(old)))
    return out


def _substring_match(doc: _Doc, old: str, new: str, tier: str, replace_all: bool) -> MatchResult | None:
    hits = _hits(doc.content, old, overlapping=not replace_all)
    if not hits:
        return None
    if len(hits) > 1 and not replace_all:
        return _ambiguous([doc.line_of(h) for h in hits], tier)
    if not replace_all and (repeat := _would_repeat(doc.content, hits[0], old, new)):
        return repeat
    reps = []
    for h in hits:
        text, end = new, h + len(old)
        ends_line = end == len(doc.content) or doc.content[end] == "\n"
        if text and old.endswith("\n") and not text.endswith("\n"):
            text += "\n"    # the model dropped new_text's last newline; do not join two lines
        elif ends_line and text.endswith("\n") and not old.endswith("\n"):
            text = text[:-1]    # the file's own newline follows; do not add a blank line
        reps.append(Replacement(h, end, text, doc.line_of(h), doc.line_of(max(h, end - 1))))
    return MatchResult(replacements=tuple(reps), tier=tier)


def _would_repeat(content: str, at: int, old: str, new: str) -> MatchResult | None:
    """new_text = old_text plus an addition that already sits next to old_text: applying it again
    would duplicate the addition (the classic double-applied insert)."""
    end = at + len(old)
    added_after = new.startswith(old) and content.startswith(new, at)
    added_before = new.endswith(old) and len(new) <= end and content.startswith(new, end - len(new))
    addition = new[len(old):] if added_after else new[: len(new) - len(old)]
    if not (added_after or added_before) or not addition.strip():
        return None
    line = content.count("\n", 0, at if added_after else end - len(new)) + 1
    return MatchResult(error=(f"new_text is already in the file at line {line} (old_text plus the lines you add "
                              "are all there): this edit was probably applied already, and applying it again "
                              "would duplicate the addition. Nothing was changed. If you really want another "
                              "copy, include the neighbouring lines in old_text."), already_applied_at=line)


# ---- elision --------------------------------------------------------------------------------------

def _pieces(lines: list[str]) -> list[list[str]]:
    pieces: list[list[str]] = [[]]
    for line in lines:
        if _ELISION.match(line):
            pieces.append([])
        else:
            pieces[-1].append(line)
    return [_trim_blank(p) for p in pieces]


def _trim_blank(piece: list[str]) -> list[str]:
    lo, hi = 0, len(piece)
    while lo < hi and not piece[lo].strip():
        lo += 1
    while hi > lo and not piece[hi - 1].strip():
        hi -= 1
    return piece[lo:hi]


def _elision_match(doc: _Doc, old: list[str], new: list[str]) -> MatchResult | None:
    old_pieces, new_pieces = _pieces(old), _pieces(new)
    if len(old_pieces) == 1:
        return None
    if len(old_pieces) != len(new_pieces):
        return MatchResult(error=(f"old_text has {len(old_pieces) - 1} '...' line(s) but new_text has "
                                  f"{len(new_pieces) - 1}; new_text must keep the same '...' lines so the "
                                  "elided parts stay as they are."))
    parts: list[Replacement] = []
    for n, (op, np_) in enumerate(zip(old_pieces, new_pieces, strict=True), 1):
        if not op:
            if np_:
                return MatchResult(error=(f"part {n} of new_text (between '...' lines) adds text where old_text "
                                          "has nothing to anchor it. Put real lines from the file there."))
            continue
        res = _line_match(doc, op, np_, replace_all=False)
        if res is None:
            return MatchResult(error=f"part {n} of old_text (split at its '...' lines) is not in the file.")
        if not res.ok:
            return replace(res, error=f"part {n} of old_text (split at its '...' lines): {res.error}")
        parts.append(res.replacements[0])
    if not parts:
        return MatchResult(error="old_text holds only '...' lines; copy the lines to change from the file.")
    for a, b in zip(parts, parts[1:], strict=False):
        if b.start < a.end:
            return MatchResult(error=(f"the parts of old_text between '...' lines are found out of order (line "
                                      f"{a.first_line} then line {b.first_line}); they must follow the file."))
    pieces, cursor = [], parts[0].start
    for p in parts:
        pieces += [doc.content[cursor:p.start], p.text]
        cursor = p.end
    return MatchResult(replacements=(Replacement(parts[0].start, parts[-1].end, "".join(pieces),
                                                 parts[0].first_line, parts[-1].last_line),), tier="elision")


# ---- not found --------------------------------------------------------------------------------------

def _already_applied(doc: _Doc, new: str) -> int | None:
    if not new.strip():
        return None
    pos = doc.content.find(new)
    if pos != -1:
        return doc.line_of(pos)
    windows = _windows(doc, _trim_blank(_split(new)))
    return windows[0] + 1 if windows else None


def _not_found(doc: _Doc, old: list[str], new: str, had_cr: bool) -> MatchResult:
    d = diagnose_not_found(doc.lines, old, already_applied_at=_already_applied(doc, new), had_cr=had_cr)
    return MatchResult(error=d.message, closest=d.closest, already_applied_at=d.already_applied_at)


# ---- public entry points ----------------------------------------------------------------------------

def find_edit(content: str, old_text: str, new_text: str, *, replace_all: bool = False,
              line_hint: int | None = None) -> MatchResult:
    """Locate one edit in ``content`` (LF line endings) and say what replaces what, or why not."""
    if not old_text:
        return MatchResult(error="old_text is empty: copy the lines to replace from the file "
                                 "(to create a file, use write_file).")
    if old_text == new_text:
        return MatchResult(error="old_text and new_text are identical, so nothing would change.")
    doc, new = _Doc(content), _lf(new_text)
    old = _lf(old_text)
    result = _substring_match(doc, old_text, new, "exact", replace_all)
    if result is None and old != old_text:
        result = _substring_match(doc, old, new, "line_endings", replace_all)
    if result is None and old.strip():
        old_lines, new_lines = _split(old), _split(new) if new else []
        result = _line_match(doc, old_lines, new_lines, replace_all)
        if result is None and not replace_all:
            result = _elision_match(doc, old_lines, new_lines)
        if result is None:
            result = _not_found(doc, old_lines, new, old != old_text)
    if result is None:
        return MatchResult(error="old_text is only whitespace and is not in the file; include real lines.")
    return _with_line_hint(result, line_hint)


def _with_line_hint(result: MatchResult, line_hint: int | None) -> MatchResult:
    if line_hint is None:
        return result
    if result.candidates and not result.ok:
        return replace(result, error=result.error + f" (line_hint={line_hint} does not choose between them.)")
    if len(result.replacements) == 1:
        at = result.replacements[0].first_line
        if abs(at - line_hint) > LINE_HINT_SLACK:
            return replace(result, notes=(*result.notes, f"line_hint was {line_hint} but old_text matched "
                                          f"line {at}, the only match; the edit was made there."))
    return result


def find_edits(content: str, requests: Sequence[EditRequest], *, line_hint: int | None = None) -> MatchResult:
    """Locate several edits against the same original content; all of them or none."""
    reps: list[tuple[Replacement, int]] = []
    tiers: list[str] = []
    notes: list[str] = []
    for n, req in enumerate(requests, 1):
        hint = line_hint if len(requests) == 1 else None
        res = find_edit(content, req.old_text, req.new_text, replace_all=req.replace_all, line_hint=hint)
        if not res.ok:
            later = ""
            if n > 1 and find_edit(apply_replacements(content, [r for r, _ in reps]), req.old_text, req.new_text).ok:
                later = (" Its old_text only exists after the earlier edits are applied, but all edits are "
                         "matched against the file as it is now: merge it into the earlier edit.")
            return replace(res, error=(f"edit {n} of {len(requests)} failed: {res.error}{later}\nNO edit was "
                                       f"applied; the file is unchanged. Fix edit {n} and send all edits again."))
        reps += [(r, n) for r in res.replacements]
        tiers.append(res.tier)
        notes += res.notes
    reps.sort(key=lambda rn: rn[0].start)
    for (a, na), (b, nb) in zip(reps, reps[1:], strict=False):
        if b.start < a.end:
            return MatchResult(error=(f"edits {min(na, nb)} and {max(na, nb)} overlap (around line {b.first_line})"
                                      "; NO edit was applied. Combine them into one edit."))
    return MatchResult(replacements=tuple(r for r, _ in reps), tier=",".join(dict.fromkeys(tiers)),
                       notes=tuple(notes), tiers=tuple(tiers))


def apply_replacements(content: str, replacements: Sequence[Replacement]) -> str:
    out, cursor = [], 0
    for r in sorted(replacements, key=lambda r: r.start):
        out += [content[cursor:r.start], r.text]
        cursor = r.end
    out.append(content[cursor:])
    return "".join(out)


def edited_ranges(content: str, replacements: Sequence[Replacement]) -> list[tuple[int, int]]:
    """1-based inclusive line ranges the replacements occupy in the content after applying them."""
    ranges, shift = [], 0
    for r in sorted(replacements, key=lambda r: r.start):
        first = content.count("\n", 0, r.start) + 1 + shift
        last = first + r.text.count("\n") - (1 if r.text.endswith("\n") else 0)
        ranges.append((first, max(first, last)))
        shift += r.text.count("\n") - content.count("\n", r.start, r.end)
    return ranges
