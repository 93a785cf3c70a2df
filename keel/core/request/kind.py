"""What a request asks for: a change, only an answer, or to make sure of something.

Why: keel's promise is that ``complete`` means verified, and what counts as verified depends on this
reading. Read too loosely it makes a false done ("Can you fix add() in calc.py?" was read as a question,
and a model that changed nothing ended complete); read too strictly a real question can never end well
("What does this project do? Just explain, do not change anything." was pushed to make a change).

The rule: "asks only for an answer" needs positive evidence, and anything else is a change request.

- A change verb where a request's verb stands ("fix", "can you add", "bitte … beheben", "¿puedes
  arreglar …?", "peux-tu corriger", "帮我修复") asks for a change, also in a polite question.
- The same verb negated ("don't change anything", "without modifying it", "ne modifie rien") or talked
  about ("how would you refactor X?", "how do I fix it?") does not.
- An explicit "don't change anything / just explain / only tell me", or a change put off ("don't do it
  yet"), asks for an answer and forbids a change; a change verb outweighs it, except a change put off.
- "Make sure the tests pass", "ensure …" asks to verify: the checks decide, with or without a change.
- An explain / describe / review verb, or a question that names nothing to change, asks for an
  answer. A defect reported ("paginate() skips the first page", "why does add() return the wrong
  value?") asks for a change, unless the request also asks to explain it.
- Text in a language the reader does not hold gives no evidence, so it is a change request.

Languages: English, German, Spanish, French and Chinese (keel.core.request.lexicon). Pure and linear in
the text. Table-tested on phrasings both ways in tests/test_request_kind.py.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Literal, TypeVar

from keel.core.request.lexicon import ALPHABETIC, CHINESE, Lexicon
from keel.core.request.text import CODE_MARK, clauses_of, script_counts, sentences_with_ends, words_of

Kind = Literal["change", "answer", "verify"]
# A request longer than this many sentences (or one sentence of more clauses) is mostly a pasted log or
# document: its first and last ones are read. Missing evidence reads as a change request, the safe side.
MAX_SENTENCES = 600
MAX_CLAUSES = 200
MAX_WORDS = 400         # of one clause: prose clauses are short, a longer one is data
SAMPLE_CHARS = 20_000   # of the text's start and end, to tell its language
_T = TypeVar("_T")
_DETERMINERS = frozenset(["the", "a", "an", "any", "my", "your", "our", "their", "all", "of", "den", "die", "das", "dem", "der", "ein", "eine", "einen", "le", "la", "les", "un", "une", "des", "el", "los", "las", "lo", "pas"])


@dataclass(frozen=True)
class Reading:
    kind: Kind
    why: str                                  # the evidence the kind rests on, quoted from the request
    language: str                             # en, de, es, fr, zh; "unknown"; "" for an empty request
    forbids_change: bool = False              # the request says in so many words not to change anything
    change_phrases: tuple[str, ...] = ()      # what to change: each clause that asks for a change
    keep_phrases: tuple[str, ...] = ()        # what must not change: "the tests" of "don't change the tests"
    make_sure: bool = False                   # a verify request that says "make sure", "ensure" (not "run it")


@dataclass
class _Evidence:
    positive: list[str] = field(default_factory=list)
    directive: list[str] = field(default_factory=list)
    postpone: list[str] = field(default_factory=list)
    keep: list[str] = field(default_factory=list)
    answer: list[str] = field(default_factory=list)
    answer_weak: list[str] = field(default_factory=list)
    verify: list[str] = field(default_factory=list)
    defect: list[str] = field(default_factory=list)
    question: list[str] = field(default_factory=list)
    talked: list[str] = field(default_factory=list)       # change verbs talked about ("how would you fix")
    act: list[str] = field(default_factory=list)          # "run the job", "commit it"
    social: list[str] = field(default_factory=list)       # clauses of greetings and thanks only
    other: list[str] = field(default_factory=list)        # clauses of anything else


def read_kind(plain: str) -> Reading:
    """The reading of a request's prose (code already replaced by ``identN``: keel.core.request.text)."""
    if not plain.strip():
        return Reading("verify", "no request text: the checks decide", "")
    language = detect_language(plain)
    ev = _Evidence()
    seen: set[tuple[str, str]] = set()
    for sentence, ends in _ends_kept(sentences_with_ends(plain), MAX_SENTENCES):
        if (sentence, ends) in seen:
            continue                   # the same sentence again adds no evidence (and costs nothing)
        seen.add((sentence, ends))
        lang = detect_language(sentence)
        lang = language if lang == "unknown" else lang
        if lang == "zh":
            _read_han(sentence, ends, ev)
        elif (lex := _LEXICONS.get(lang)) is not None:
            _read_sentence(sentence, ends, lex, ev)
    return _decide(ev, language)


def _decide(ev: _Evidence, language: str) -> Reading:
    forbids = bool(ev.directive or ev.postpone)
    change, keep = tuple(dict.fromkeys(ev.positive)), tuple(dict.fromkeys(ev.keep))

    def reading(kind: Kind, why: str, forbid: bool = False) -> Reading:
        return Reading(kind, why, language, forbid, change, keep, make_sure=kind == "verify" and bool(ev.verify))

    if ev.postpone:
        return reading("answer", f"puts the change off: “{ev.postpone[0]}”", True)
    if ev.positive:
        return reading("change", f"asks for a change: “{ev.positive[0]}”")
    if ev.directive:
        return reading("answer", f"asks for no change: “{ev.directive[0]}”", True)
    if ev.answer:
        return reading("answer", f"asks for an answer: “{ev.answer[0]}”", forbids)
    if ev.verify:
        return reading("verify", f"asks to make sure: “{ev.verify[0]}”")
    if ev.act:
        return reading("verify", f"asks for work that needs no change: “{ev.act[0]}”")
    if ev.defect:
        return reading("change", f"reports a defect: “{ev.defect[0]}”")
    if ev.answer_weak or ev.question:
        return reading("answer", f"asks a question: “{(ev.answer_weak or ev.question)[0]}”", forbids)
    if ev.social and not ev.other:
        return reading("answer", f"a greeting or thanks: “{ev.social[0]}”")
    if language == "unknown":
        return reading("change", "written in a language keel does not read, so read as a change request")
    return reading("change", "nothing in it asks only for an answer, so read as a change request")


# -- languages -------------------------------------------------------------------------------------
_LEXICONS = {lex.name: lex for lex in ALPHABETIC}
_KNOWN_WORDS = {lex.name: (lex.function_words | lex.change | lex.change_anywhere | lex.answer | lex.answer_weak
                           | lex.wh | lex.aux | lex.negators | lex.defect | lex.social) for lex in ALPHABETIC}
_SEARCHED = frozenset(["for", "any", "no", "keine", "ningún", "aucun"])   # "check for bugs": the defect is looked for


def detect_language(text: str) -> str:
    """en, de, es, fr or zh by the words and characters of ``text``; "unknown" when none fits."""
    if len(text) > 2 * SAMPLE_CHARS:
        text = text[:SAMPLE_CHARS] + "\n" + text[-SAMPLE_CHARS:]
    prose = CODE_MARK.sub(" ", text)
    latin, han, kana, other = script_counts(prose)
    if kana:
        return "unknown"            # Japanese or Korean: their Han characters are not Chinese sentences
    if han >= 2 and han * 5 >= latin:
        return "zh"
    if other > latin:
        return "unknown"
    words = [_base(w) for w in words_of(prose)]
    scores = {name: sum(w in known for w in words) for name, known in _KNOWN_WORDS.items()}
    best = max(scores, key=lambda name: scores[name])   # dicts keep order: English wins a tie
    return best if scores[best] else "unknown"


# -- alphabetic languages ------------------------------------------------------------------------------
def _read_sentence(sentence: str, ends: str, lex: Lexicon, ev: _Evidence) -> None:
    asked = "?" in ends or sentence.startswith("¿")
    form: str | None = None
    forms: set[str | None] = set()
    found = _Evidence()
    for clause in _ends_kept(list(dict.fromkeys(clauses_of(sentence.lstrip("¿¡")))), MAX_CLAUSES):
        words = words_of(clause)
        clause_form = _read_clause(words, lex, found, " ".join(words), asked)
        form = form or clause_form
        forms.add(clause_form)
    # A question needs an opening keel reads ("what", "does", "can you"): a "?" after words it does not
    # know ("Você pode corrigir …?") is no evidence. Without a "?", only the sentence's opening clause
    # asks: "…in rle.py, which has only stubs" is a relative clause, not a question.
    # A "?" after words of a language keel reads, with no change asked in them ("and in test_calc.py?",
    # a follow-up), asks too.
    question = (asked and (bool(forms & {"wh", "aux", "polite"}) or (not found.positive and _known(sentence, lex)))) \
        or form in ("wh", "aux")
    joined = " ".join(words_of(sentence))
    if found.defect and not found.answer:
        if not question or form == "polite":
            ev.defect.append(found.defect[0])   # "add() returns a - b", "can you look at the failing test?"
        else:
            ev.question.append(joined)   # "why does add() fail?", "is there a bug in …?": asks about it
    elif question and not found.positive:
        ev.question.append(joined)
    for name in ("positive", "directive", "postpone", "keep", "answer", "answer_weak", "verify", "act", "social",
                 "other"):
        getattr(ev, name).extend(getattr(found, name))


def _known(sentence: str, lex: Lexicon) -> bool:
    """Whether at least half the sentence's words (code aside) are words keel knows in ``lex``'s language:
    "and in test_calc.py?" is English; "Você pode corrigir …?" only shares a word with it."""
    words = [_base(w) for w in words_of(CODE_MARK.sub(" ", sentence))]
    return bool(words) and 2 * sum(w in _KNOWN_WORDS[lex.name] for w in words) >= len(words)


def _read_clause(words: list[str], lex: Lexicon, ev: _Evidence, joined: str, asked: bool = False) -> str | None:
    """Gather one clause's evidence; return its form: polite, wh, aux, plain, or None (fillers only)."""
    words = _ends_kept(words, MAX_WORDS)
    joined = " ".join(words) if len(words) >= MAX_WORDS else joined
    if not words:
        return None
    (ev.social if all(w in lex.social for w in words) else ev.other).append(joined)
    start = _skip(words, 0, lex.fillers)
    polite = _opening(words, start, lex.polite) or _opening(words, start, lex.suggestion)
    hypothetical = _first_phrase(words, lex.hypothetical)
    if start >= len(words) and not polite:
        return None
    form = "polite" if polite else ("wh" if words[start] in lex.wh else "aux" if words[start] in lex.aux else "plain")
    if form == "aux" and not asked and words[start] in lex.imperative_aux and \
            not (start + 1 < len(words) and (words[start + 1] in lex.subjects or words[start + 1] in lex.negators)):
        ev.positive.append(joined)   # "do the task": an order, not "do you …?"
        return "plain"
    padded = f" {joined} "
    ev.directive += [p for p in lex.directives if f" {p} " in padded]
    ev.postpone += [p for p in lex.postpone if f" {p} " in padded]
    ev.verify += [p for p in lex.verify if f" {p} " in padded]
    if any(_base(w) in lex.defect and (k == 0 or words[k - 1] not in _SEARCHED) for k, w in enumerate(words)) \
            or any(f" {p} " in padded for p in lex.defect_phrases):
        ev.defect.append(joined)
    if any(w in lex.answer_nouns for w in words):
        ev.answer_weak.append(joined)
    # "render.py should then show it": a statement of what the code is to do, by a subject that is not
    # the one asked ("should I explain" opens with aux; "you should" is a polite opening)
    # Not when the clause opens with a verb ("find out which port it should use": an order) or the modal
    # stands in a wh-clause.
    modal = next((k for k in range(start + 1, len(words)) if words[k] in lex.modals), None)
    opener = _base(words[start]) if start < len(words) else ""
    if form == "plain" and polite is None and modal is not None and words[start] not in lex.function_words \
            and opener not in lex.answer | lex.answer_weak | lex.change | lex.act \
            and not any(w in lex.wh for w in words[start:modal]):
        ev.defect.append(joined)
    for i, word in enumerate(map(_base, words)):
        verb = word in lex.change or word in lex.change_anywhere or word in lex.negated_only
        wants_answer = word in lex.answer or word in lex.answer_weak
        if word in lex.act and not verb and not wants_answer:
            first = i == start or (polite is not None and (lex.verb_final or i == _skip(words, polite, lex.fillers)))
            if first and not _negated(words, i, start, lex):   # the clause's verb: "test" later is a noun
                ev.act.append(joined)
            continue
        if not (verb or wants_answer) or (word == "make" and words[i + 1:i + 2] == ["sure"]):
            continue
        negated = _negated(words, i, polite if polite is not None else start, lex)
        if verb and negated:
            _negated_change(words, i, lex, ev, joined)
            continue
        if verb and (form == "wh" or hypothetical < i):    # talked about: "how would you refactor X?"
            ev.talked.append(" ".join(words[i:i + 8]))
            continue
        placed = (polite is not None and i >= polite) or word in lex.change_anywhere or i == start or \
            (i > 0 and (words[i - 1] in lex.fillers or words[i - 1] in lex.to))
        if wants_answer and not verb and modal is not None and modal < i:
            continue   # "should then show it": what the code does, not a request to show
        if not placed or negated:
            continue
        if verb and word not in lex.negated_only:
            ev.positive.append(" ".join(words[i:i + 8]))
        elif wants_answer and not verb:
            (ev.answer if word in lex.answer else ev.answer_weak).append(joined)
    return form


def _base(word: str) -> str:
    """A word without the pronoun its hyphen glues on ("corrige-le", "échoue-t-il"; not "read-only") or the
    French word elided before it ("m'expliquer", "l'ajouter", "n'ajoute": _negated reads that "n'")."""
    if len(word) > 3 and word[1] == "'" and word[0] in "mltsdcjn":
        word = word[2:]
    head, sep, _ = word.partition("-")
    return head if sep and len(head) > 3 else word


def _ends_kept(items: list[_T], limit: int) -> list[_T]:
    """``items``, or its first and last ``limit // 2`` when there are more."""
    return items if len(items) <= limit else items[: limit // 2] + items[-(limit // 2):]


def _skip(words: list[str], i: int, skipped: frozenset[str]) -> int:
    while i < len(words) and words[i] in skipped:
        i += 1
    return i


def _opening(words: list[str], start: int, phrases: tuple[tuple[str, ...], ...]) -> int | None:
    """Where a polite opening ("can you", "please") that starts at or before ``start`` (and within the
    clause's first words) ends, or None."""
    for j in range(0, min(start, len(words) - 1, 4) + 1):
        for phrase in phrases:
            if tuple(words[j:j + len(phrase)]) == phrase:
                return j + len(phrase)
    return None


def _negated(words: list[str], i: int, floor: int, lex: Lexicon) -> bool:
    """A negation before the verb (after the clause's opening: "why don't you fix" is no negation), in the
    verb itself ("n'ajoute"), or, in German and French, after it in the clause ("ändere nichts")."""
    if words[i].startswith("n'"):
        return True
    before = words[max(floor, i - 3, 0):i]
    if any(w in lex.negators for w in before):
        return True
    return bool(lex.negators_after) and any(w in lex.negators_after for w in words[i + 1:i + 6])


def _negated_change(words: list[str], i: int, lex: Lexicon, ev: _Evidence, joined: str) -> None:
    """A negated change verb: a directive when its object is the whole workspace (or nothing, or "it"),
    else a thing that must not change ("don't change the tests")."""
    j = _skip(words[:i + 5], i + 1, _DETERMINERS | lex.negators_after)
    obj = words[j] if j < len(words) else None
    after = words[j + 1] if j + 1 < len(words) else None
    if obj is None or (obj in lex.global_objects and after not in lex.scope_words):
        ev.directive.append(joined)
    else:
        ev.keep.append(" ".join(w for w in words[i + 1:j + 6] if w not in lex.negators_after))


def _first_phrase(words: list[str], phrases: tuple[tuple[str, ...], ...]) -> int:
    """Where the first of ``phrases`` starts in ``words`` ("how to", "should i"), or len(words): one pass,
    a set lookup per word for the phrases' first words."""
    firsts = {p[0] for p in phrases}
    for j, word in enumerate(words):
        if word in firsts and any(tuple(words[j:j + len(p)]) == p for p in phrases if p[0] == word):
            return j
    return len(words)


# -- Chinese --------------------------------------------------------------------------------------------
def _read_han(sentence: str, ends: str, ev: _Evidence) -> None:
    lex = CHINESE
    asked = "?" in ends or "？" in ends or any(p in sentence for p in lex.particles)
    wh = any(w in sentence for w in lex.wh)
    found = _Evidence()
    for clause in _ends_kept(list(dict.fromkeys(clauses_of(sentence))), MAX_CLAUSES):
        social = clause.strip(" 。！!～~") in lex.social
        (found.social if social else found.other).append(clause)
        found.directive += [p for p in lex.directives if p in clause]
        found.postpone += [p for p in lex.postpone if p in clause]
        found.verify += [p for p in lex.verify if p in clause]
        found.act += [p for p in lex.act if clause.startswith(p) or any(clause.startswith(q + p) for q in lex.polite)]
        if any(d in clause.lower() for d in lex.defect):
            found.defect.append(clause)
        _han_verbs(clause, asked, found)
    if found.defect and not found.answer:
        (ev.question if asked or wh else ev.defect).append(found.defect[0])
    elif (asked or wh) and not found.positive:
        ev.question.append(sentence)
    for name in ("positive", "directive", "postpone", "keep", "answer", "answer_weak", "verify", "act", "social",
                 "other"):
        getattr(ev, name).extend(getattr(found, name))


def _han_verbs(clause: str, asked: bool, ev: _Evidence) -> None:
    lex = CHINESE
    polite = any(p in clause for p in lex.polite)
    for verb in (*lex.change, *lex.negated_only):
        at = clause.find(verb)
        if at < 0:
            continue
        before, after = clause[:at], clause[at + len(verb):]
        if any(before.endswith(n) or before[:-1].endswith(n) for n in lex.negators):
            if any(after.lstrip(" 一下").startswith(g) for g in lex.global_after if g) or not after.strip(" 。！"):
                ev.directive.append(clause)
            else:
                ev.keep.append(after.strip()[:30])
            return
        if verb in lex.negated_only or after.startswith(("了", "过")) or before.endswith(("会", "的", "在", "已经")):
            continue
        if any(w in before for w in lex.wh) or (asked and not polite):
            continue     # talked about: 怎么修复 "how to fix", 这个函数修改什么 "what does it change"
        ev.positive.append(clause)
        return
    for verb in (*lex.answer, *lex.answer_weak):
        at = clause.find(verb)
        if at >= 0 and not any(clause[:at].endswith(n) for n in lex.negators):
            (ev.answer if verb in lex.answer else ev.answer_weak).append(clause)
            return
