"""Splitting a request's text: code spans held apart, sentences, clauses and the words a reader reads.

Every scan here is linear in the text (keel issue 22: a backtracking pattern over a 200,000-character
task hung the self-check for minutes): whitespace-separated tokens are judged one by one with
``fullmatch``, code fences are found by ``str.find``.
"""

from __future__ import annotations

import re
from collections.abc import Callable

PLACEHOLDER = re.compile(r"\x00(\d+)\x00")
_FENCED = re.compile(r"```[^\n]*\n(.*?)```", re.DOTALL)
_INLINE = re.compile(r"`([^`\n]+)`")
# A sentence ends at . ! ? ; (and their CJK forms) followed by space or the end, or at a blank line, or
# before a list item; a dot inside `calc.py` is held in a span or followed by a letter, so it stays.
SENTENCE_END = re.compile(r"(?<=[.!?])\s+|\n\s*\n|\n(?=\s*(?:[-*]|\d+\.)\s)")
_BREAK = re.compile(r"[.!?;。！？；\n]+")
_CLAUSE = re.compile(r"[,，:：、;；()（）]|\s[-–—]\s|\bbut\b|\baber\b|\bpero\b|\bmais\b|但是|不过")
_WORD = re.compile(r"[\w'’-]+")
# A whitespace token that is code, not a word of the sentence: a call, a path, a dotted or snake_case
# name, camelCase, or anything with brackets, operators or digits glued to letters.
_CODE_TOKEN = re.compile(r"[^\s]*[(){}\[\]<>=/\\$#@|`*~^][^\s]*|[A-Za-z_]\w*(?:\.\w+)+|\w*_\w*|[a-z]+[A-Z]\w*|"
                         r"[A-Z]{2,}\w*|[\w.]*\d[\w.]*")
_EDGE = ".,;:!?\"'“”‘’¿¡"
CODE_WORD = "ident"
CODE_MARK = re.compile(r"\bident(\d+)\b")
_QUOTES = "'\"“”‘’"
_CJK_RUN = re.compile(r"([\u3000-\u303f\u4e00-\u9fff\uff00-\uffef]+)")
_CJK = re.compile(r"[\u4e00-\u9fff]")
_KANA_HANGUL = re.compile(r"[\u3040-\u30ff\uac00-\ud7af]")
_OTHER_SCRIPT = re.compile(r"[\u0370-\u03ff\u0400-\u04ff\u0590-\u06ff\u0900-\u0dff\u0e00-\u0e7f]")
_LATIN = re.compile(r"[A-Za-z\u00c0-\u024f]")


def sub_fenced(text: str, repl: Callable[[re.Match[str]], str]) -> str:
    """``_FENCED.sub(repl, text)`` in linear time: the pattern is tried only at each next fence, and not
    after a failure (a start that fails fails for every later start too)."""
    out, pos = [], 0
    while (start := text.find("```", pos)) >= 0 and (match := _FENCED.match(text, start)) is not None:
        out += [text[pos:start], repl(match)]
        pos = match.end()
    return "".join([*out, text[pos:]])


def hold_spans(text: str) -> tuple[tuple[str, ...], str]:
    """The code spans (each line of a fenced block, each inline span) and the text with each replaced by
    a placeholder ``\\x00N\\x00``, so a dot inside `test_app.py` does not end a sentence."""
    spans: list[str] = []

    def hold(code: str) -> str:
        spans.append(code.strip())
        return f"\x00{len(spans) - 1}\x00"

    def hold_block(match: re.Match[str]) -> str:
        lines = [re.sub(r"^\s*\$\s+", "", ln).strip() for ln in match.group(1).splitlines()]
        return " ".join(hold(ln) for ln in lines if ln and not ln.startswith("#"))

    held = sub_fenced(text, hold_block)
    held = _INLINE.sub(lambda m: hold(m.group(1)), held)
    return tuple(spans), held


def sentences_of(held: str) -> tuple[str, ...]:
    """The sentences of a text whose spans are held (see ``hold_spans``)."""
    return tuple(s for s in SENTENCE_END.split(held) if s.strip())


def plain_words(held: str, spans: tuple[str, ...] = ()) -> tuple[str, list[str]]:
    """The text as prose, line by line, and the code it held: code spans and code-like tokens become one
    word each, ``ident0``, ``ident1`` …, so a function called add() or a file called fix.py is never read
    as a verb; ``restore`` puts them back into what is quoted from it."""
    held_code: list[str] = []

    def mark(code: str) -> str:
        held_code.append(PLACEHOLDER.sub(lambda m: f"`{spans[int(m.group(1))]}`" if int(m.group(1)) < len(spans)
                                         else "", code))
        return f"{CODE_WORD}{len(held_code) - 1}"

    plain = "\n".join(" ".join(_plain_token(t, mark) for t in _CJK_RUN.sub(r" \1 ", line).split())
                      for line in held.split("\n"))   # Chinese glued to code: 修复add()吗 is three tokens
    return plain, held_code


def restore(text: str, held_code: list[str]) -> str:
    """``text`` (quoted from prose) with each ``identN`` back as the code it stood for."""
    return CODE_MARK.sub(lambda m: held_code[int(m.group(1))] if int(m.group(1)) < len(held_code) else m.group(0),
                         text)


def _plain_token(token: str, mark: Callable[[str], str]) -> str:
    quoted = token.rstrip(".,;:!?")
    if len(quoted) > 2 and quoted[0] in _QUOTES and quoted[-1] in _QUOTES:
        return mark(quoted) + token[len(quoted):]    # a quoted word is a value or a name, not a verb
    core = token.strip(_EDGE)
    if core.startswith("(") and "(" not in core[1:]:
        core = core[1:]                           # "(don't": a word in brackets, not a call
    if core.endswith(")") and "(" not in core:
        core = core[:-1]
    at = token.find(core) if core else -1
    if at >= 0 and ("\x00" in core or _CODE_TOKEN.fullmatch(core)):
        return f"{token[:at]}{mark(core)}{token[at + len(core):]}"
    return token


def sentences_with_ends(plain: str) -> list[tuple[str, str]]:
    """(sentence, its end marks) of prose, split at . ! ? ; and their CJK forms and at line breaks."""
    out: list[tuple[str, str]] = []
    pos = 0
    for m in _BREAK.finditer(plain):
        body = plain[pos:m.start()]
        if body.strip():
            out.append((body.strip(), m.group(0)))
        pos = m.end()
    if plain[pos:].strip():
        out.append((plain[pos:].strip(), ""))
    return out


def clauses_of(sentence: str) -> list[str]:
    """A sentence's clauses: cut at commas, colons, dashes, brackets and "but" (a negation's reach)."""
    return [p.strip() for p in _CLAUSE.split(sentence) if p.strip()]


def words_of(clause: str) -> list[str]:
    """Lower-case words, apostrophes made straight ("don’t" is "don't")."""
    return [w.lower().replace("’", "'").strip("'-") for w in _WORD.findall(clause) if w.strip("'’-")]


def script_counts(text: str) -> tuple[int, int, int, int]:
    """(Latin letters, Han characters, kana or Hangul, letters of other scripts) in ``text``."""
    return (len(_LATIN.findall(text)), len(_CJK.findall(text)), len(_KANA_HANGUL.findall(text)),
            len(_OTHER_SCRIPT.findall(text)))
