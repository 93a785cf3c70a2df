"""The renames and file moves a request (or a change note) asks for, in so many words.

``renames_in``: "rename X to Y", "X -> Y", "replace `X` with `Y`", "X is renamed to Y" … (identifiers only;
keel.drive.rename carries them to the other files). ``move_phrases``: "rename <file> to <path>", "move it to
<path>" with the words before them in their sentence, so keel.drive.move can tell whether "it" is the
file a change is made to.
"""

from __future__ import annotations

import builtins
import keyword
import re
from dataclasses import dataclass


@dataclass(frozen=True)
class Rename:
    old: str
    new: str


@dataclass(frozen=True)
class MovePhrase:
    what: str        # the words before "to": a file's name or a pronoun ("it", "the file")
    new: str         # the path after "to", as written
    lead: str        # the sentence's text before the phrase (where "it" is named)


# A name starts where no word character stands before it, and is taken whole (possessive): tried at
# every letter of a long word, the pattern read to the word's end from each, quadratic (issue 22's fuzz).
_NAME = r"(?<![\w$])`?(?P<{0}>[A-Za-z_][A-Za-z0-9_]*+)(?:\(\))?`?"
_X, _Y = _NAME.format("x"), _NAME.format("y") + r"(?![\w(]|\.\w)"   # Y ends the name: not `logger.info`
# Words a sentence puts before the name ("rename the constant MAX_RETRY", "to the new name X").
_KIND = (r"(?:(?:the|a|an|old|existing|current|global|public|private|module-level|constant|function|method|"
         r"class|variable|var|field|attribute|attr|property|parameter|param|argument|arg|symbol|identifier|"
         r"helper|type|enum|setting|name|named|called)\s+)*")
_NEW = r"(?:(?:the|a|new|name|named|called)\s+)*"
_ARROW = r"\s*(?:->|→|=>)\s*"
# (pattern, whether both names must look like code: wording that also reads as prose)
_PHRASES: list[tuple[re.Pattern[str], bool]] = [
    (re.compile(rf"\brenam(?:e|es|ed|ing)\s+{_KIND}{_X}\s+(?:to|into|as)\s+{_NEW}{_Y}", re.I), False),
    (re.compile(rf"\brenam(?:e|es|ed|ing)\s+{_KIND}{_X}{_ARROW}{_Y}", re.I), False),
    (re.compile(rf"{_X}\s+(?:(?:is|was|gets|get|be|should|must|to)\s+)*renamed\s+(?:to|into|as)\s+{_NEW}{_Y}",
                re.I), False),
    (re.compile(rf"\bname\s+of\s+{_KIND}{_X}\s+to\s+{_NEW}{_Y}", re.I), False),
    (re.compile(rf"\breplac(?:e|es|ed|ing)\s+(?:(?:all|every|each)\s+)?(?:(?:uses|occurrences|references|"
                rf"mentions)\s+of\s+)?{_KIND}{_X}\s+(?:with|by)\s+{_NEW}{_Y}", re.I), True),
    (re.compile(rf"\b(?:chang|updat)(?:e|es|ed|ing)\s+{_KIND}{_X}\s+to\s+{_NEW}{_Y}", re.I), True),
    (re.compile(rf"{_X}{_ARROW}{_Y}"), True),
]
# "rename A to B, C to D and E to F": the pairs after a rename's first one
_MORE = re.compile(rf"\s*(?:,\s*(?:and\s+)?|\s+and\s+){_KIND}{_X}\s+(?:to|into|as)\s+{_NEW}{_Y}", re.I)
# Never a rename's name: English words a sentence may put where a name goes ("rename it to be clearer").
_STOP = frozenset({"it", "this", "that", "them", "these", "those", "all", "each", "every", "one", "be", "the", "a",
                   "an", "to", "and", "or", "of", "in", "on", "for", "with", "by", "as", "its", "their",
                   "something", "more", "less", "new", "old", "same", "other"})
BUILTIN_NAMES = frozenset(dir(builtins))   # never a rename's name: their other uses are not the project's

# "rename <what> to <path>", "move <what> to <path>"; <what> is short: a file's name or a pronoun
_MOVE = re.compile(r"\b(?:rename|move)\s+(?P<what>(?:[^.\n]|\.(?=\w)){1,60}?)\s+(?:to|as|into)\s+[`'\"]?"
                   r"(?P<new>(?:\.{0,2}/)?[\w.-]+(?:/[\w.-]+)*\.\w+)", re.IGNORECASE)
_SENTENCE_END = re.compile(r"[.!?](?:\s|$)|\n\n")


def looks_like_code(name: str, quoted: bool) -> bool:
    """Backticked, or shaped like an identifier rather than a word: snake_case, camelCase, CAPS, digits."""
    return quoted or "_" in name or any(c.isdigit() for c in name) or any(c.isupper() for c in name[1:])


def renames_in(text: str, said: bool = False) -> list[Rename]:
    """The renames ``text`` asks for, in order, each once. Identifiers only; not Python keywords or
    builtins (their other uses are not this project's symbol). Wording that also reads as prose
    ("change the limit to 5", "replace the loop with a comprehension") counts only for names that look
    like code; with ``said`` it does not count at all: only the phrasings with the word rename (an
    arrow may be a mapping, as in "`G` -> `C`" of an exercise's instructions)."""
    found: list[Rename] = []
    for pattern, code_only in _PHRASES:
        if said and code_only:
            continue
        for m in [m for first in pattern.finditer(text) for m in _pairs(first, code_only)]:
            x, y = m["x"], m["y"]
            quoted = "`" in m.group(0)
            if code_only and not (looks_like_code(x, quoted) and looks_like_code(y, quoted)):
                continue
            if x == y or {x.lower(), y.lower()} & _STOP or any(keyword.iskeyword(n) for n in (x, y)):
                continue
            if x in BUILTIN_NAMES or Rename(x, y) in found:
                continue
            found.append(Rename(x, y))
    return found


def _pairs(first: re.Match[str], code_only: bool) -> list[re.Match[str]]:
    """``first`` and the pairs that follow a rename's ("…, C to D and E to F")."""
    found = [first]
    while not code_only and (m := _MORE.match(first.string, found[-1].end())) is not None:
        found.append(m)
    return found


def move_phrases(text: str) -> tuple[MovePhrase, ...]:
    """Every "rename/move <what> to <path>" of ``text``, with the words before it in its sentence."""
    out: list[MovePhrase] = []
    ends = [e.end() for e in _SENTENCE_END.finditer(text)]
    k = 0
    for m in _MOVE.finditer(text):
        while k < len(ends) and ends[k] <= m.start():
            k += 1
        start = ends[k - 1] if k else 0
        out.append(MovePhrase(m["what"], m["new"], text[start:m.start()]))
    return tuple(out)
