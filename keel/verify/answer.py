"""Is a reply an answer? For a request that asks only for an answer, the answer is the evidence.

A question back ("Which file do you mean?"), a promise of work ("I will look at calc.py first.", "Let me
check the tests."), an empty reply or a bare "Done." finishes nothing: the person asked something and
got no answer (keel issue 32). An answer that ends with an offer ("add() subtracts instead of adding.
Want me to fix it?") is still an answer: the offer is dropped before judging.

Pure; English, German, Spanish, French and Chinese openings (the languages keel.core.request reads).
"""

from __future__ import annotations

import re
from collections.abc import Iterable, Sequence

from keel.verify.contract import ERROR_NAME

_SENTENCES = re.compile(r"(?<=[.!?。！？])\s*|\n+")
_OFFER = re.compile(
    r"^(?:(?:would|do|shall|should|can|could) (?:you|i)\b.*\b(?:like|want|me)\b|shall i\b|should i\b|want me to\b|"
    r"do you want\b|would you like\b|let me know\b|if you(?:'d| would)? like\b|if you want\b|"
    r"soll ich\b|möchtest du\b|willst du\b|quieres que\b|¿?quieres que\b|te gustaría\b|veux-tu que\b|"
    r"voulez-vous que\b|souhaites-tu\b|需要我|要不要我|是否需要)", re.IGNORECASE)
# "I will look at calc.py", "Let me check the tests", "Ich schaue mir … an", "Voy a revisar", "Je vais regarder",
# "让我看看": work promised, not done. "Let me explain: …" is an answer's opening, so the verb must be one of work.
_WORK = (r"(?:look|check|read|inspect|examine|investigate|search|open|start|begin|run|review|analy[sz]e|go through|"
         r"find|explore|dig|take a look|have a look|scan|browse|trace|debug|figure|verify|test)")
_PROMISE = re.compile(
    r"^(?:(?:ok(?:ay)?|sure|alright|great|understood)[,!.]?\s+)?(?:"
    rf"(?:i(?:'ll| will| am going to|'m going to| shall| need to| should| have to| must)|let me|let's|"
    rf"(?:first|next|now),? i(?:'ll| will)?)\s+(?:\w+\s+){{0,2}}?{_WORK}"
    r"|i'm (?:now |going to )?(?:looking|checking|reading|investigating)|i am (?:now )?(?:looking|checking|reading)"
    r"|ich (?:werde|schaue|sehe|prüfe)\b.{0,40}\b(?:an|nach|prüfen|ansehen|anschauen|untersuchen)\b|lass mich"
    r"|voy a (?:revisar|mirar|buscar|comprobar|analizar|investigar|leer)|d[ée]jame (?:revisar|mirar|ver)"
    r"|je vais (?:regarder|vérifier|verifier|examiner|analyser|lire|chercher)|laisse-moi (?:regarder|vérifier)"
    r"|(?:我会|我将|让我|我先|我来|首先我)(?:先)?(?:看|查|检查|分析|读|研究))",
    re.IGNORECASE)
_CONTENT_FREE = frozenset({"done", "ok", "okay", "finished", "complete", "completed", "fertig", "erledigt", "listo",
                           "hecho", "terminé", "fini", "fait", "完成", "好的", "好"})
_WORD = re.compile(r"\w+")


def strip_offer(text: str) -> str:
    """``text`` without the offers and questions it ends with ("Want me to fix it?")."""
    parts = [p for p in _SENTENCES.split(text.strip()) if p.strip()]
    while parts and (_OFFER.match(parts[-1].strip()) or parts[-1].rstrip().endswith(("?", "？"))) and len(parts) > 1:
        parts.pop()
    return " ".join(parts)


def answer_problem(text: str, said: Sequence[str] = ()) -> str | None:
    """Why ``text`` is no answer ("empty", "a question back", "a promise to look, not an answer", "no content",
    "the request said back"), or None when it answers. ``said``: the request and keel's own words about it,
    which an answer that only repeats them answers nothing with."""
    body = text.strip()
    if not body:
        return "empty"
    if said and echoes(body, said):
        return "the request said back"
    kept = strip_offer(body)
    if kept.rstrip().endswith(("?", "？")):
        return "a question back"
    if _PROMISE.match(kept) and len(_WORD.findall(kept)) < 40:
        return "a promise to look, not an answer"
    words = [w.lower() for w in _WORD.findall(kept)]
    if not words or all(w in _CONTENT_FREE for w in words):
        return "no content"
    return None


# Measured on the 1.5B with the assists off (py-review-pagination): the answer was the task and keel's note about
# it, said back ("The task is to review pagination.py and tell me what is wrong with it. The user asked you not
# to change anything. Read what you need, change no file, …"), and keel took it (a false done).
_RUN = 4   # words in a row an echoed sentence shares with what was said


def _runs(text: str) -> set[tuple[str, ...]]:
    words = [w.lower() for w in _WORD.findall(text)]
    return {tuple(words[i:i + _RUN]) for i in range(len(words) - _RUN + 1)}


def echoes(text: str, said: Sequence[str]) -> bool:
    """Whether most of ``text`` (three quarters of its runs of four words) repeats ``said``."""
    mine = _runs(text)
    if not mine:
        return False
    heard = set().union(*(_runs(s) for s in said))
    return len(mine & heard) >= 0.75 * len(mine)


# "pagination.py is correct and does not need any changes": an answer that clears the code. Measured on the
# 1.5B (py-review-pagination, "tell me what is wrong with it"): said of a paginate() off by one page, with
# its test failing; keel took it as the answer (a false done). A clearing answer is checked against the
# project's checks (keel.verify.verifier): failing checks contradict it. Asked what is wrong
# (Request.presumes_flaw), an all-clear has nothing to rest on: the gate refuses it (``answer_unfounded``).
_CLEAR = re.compile(
    r"\b(?:is|are|looks?|seems?|appears?)\s+(?:to be\s+)?(?:correct|fine|good|ok(?:ay)?|right|valid|bug-free)\b"
    r"|\bno\s+(?:obvious\s+|apparent\s+)?(?:issues?|problems?|bugs?|errors?|mistakes?)\b"
    r"|\bnothing\s+(?:is\s+)?(?:wrong|broken|to fix)\b|\bworks?\s+(?:as expected|correctly|fine|as intended)\b"
    r"|\b(?:does not|doesn't|do not|don't)\s+(?:need|require)\s+(?:any\s+)?(?:changes?|fix(?:es)?)\b"
    r"|\bno\s+changes?\s+(?:are\s+|is\s+)?(?:needed|required|necessary)\b", re.IGNORECASE)
_FLAW = re.compile(r"\b(?:bug|wrong|incorrect|error|fail|off[ -]by[ -]one|instead|should|issue|problem|crash|miss|"
                   r"skip|broken|mistake|fix)", re.IGNORECASE)


def clears_the_code(text: str) -> bool:
    """Whether ``text`` says the code has nothing wrong with it, and names no flaw besides."""
    kept = strip_offer(text.strip())
    if not _CLEAR.search(kept):
        return False
    return _FLAW.search(_CLEAR.sub(" ", kept)) is None


# -- an answer about this project must rest on it ------------------------------------------------------------
# Measured on the 1.5B with the assists off (the suite at be12010): asked "What does this project do?", it
# answered "The project does what it is described in the files."; asked in German, "The tests passed after the
# change. The command showed it works." with nothing changed; asked why test_add fails, it blamed a TypeError
# while the test fails on `assert -1 == 5`. keel took all three as answers (false done). The gate now wants an
# answer about the project to name something of it (a file, a definition, a word of a module's docstring), to
# report no change that was not made, and to blame no exception the failing check does not show.
_PART = re.compile(r"[A-Z]?[a-z\u00c0-\u024f]+|[A-Z]+(?![a-z])|[^\W\d_A-Za-z\u00c0-\u024f]+")
_STEM = 4
# Parts of names too common to tie an answer to a project: every project has tests, files and functions.
_GENERIC = frozenset({
    "test", "file", "func", "modu", "clas", "code", "proj", "main", "init", "self", "data", "valu", "item",
    "list", "dict", "retu", "none", "true", "fals", "impo", "defa", "args", "argv", "this", "that", "with",
    "from", "what", "does", "have", "will", "when", "each", "then", "than", "into", "also", "only", "used",
    "uses", "util", "help", "name", "call", "line", "text", "numb", "resu", "make", "work", "chan", "pass",
    "the", "and", "for", "not", "get", "set", "run", "new", "all", "any", "its", "are", "was", "has", "one",
    "two", "but", "can", "str", "int", "obj", "arg", "def", "cls", "var", "let", "src", "lib", "app", "tmp",
    "asyn", "awai", "expo", "cons", "lamb", "die", "der", "das", "und", "von", "mit", "ein", "les", "des", "una", "los", "las", "que", "del",
})


def stems(text: str) -> frozenset[str]:
    """The stems of ``text``'s words and name parts (``top_words`` → top, word; ``parseDate`` → pars, date):
    lower case, three letters or more, cut to four."""
    return frozenset(p.lower()[:_STEM] for p in _PART.findall(text) if len(p) >= 3)


def project_stems(names: Iterable[str]) -> frozenset[str]:
    """The stems an answer about a project may share with it: of its paths, definitions and descriptions."""
    return frozenset(s for n in names for s in stems(n)) - _GENERIC


def names_project(text: str, project: frozenset[str]) -> bool:
    """Whether the answer names something of the project (shares a stem with ``project_stems``)."""
    return bool(stems(strip_offer(text)) & project)


# The words of a project's anatomy: an answer made of them and the project's names says what it holds, not
# what it does ("The project's files are wordfreq.py and test_wordfreq.py; wordfreq.py defines WORD,
# top_words and main", the 1.5B with the assists off, asked what the project does).
_ANATOMY = frozenset({
    "cont", "defi", "meth", "list", "name", "call", "incl", "stri", "inte", "vari", "type", "regu", "rege",
    "expr", "argu", "para", "fold", "dire", "entr", "poin", "modu", "pack", "impo", "also", "seco", "firs",
    "anot", "othe", "some", "cert", "foll", "belo", "abov", "here", "ther", "insi", "with", "enth",
    "besc", "eing", "dict", "obje", "inst", "prop", "attr",
})


def only_anatomy(text: str, project: frozenset[str]) -> bool:
    """Whether the answer's words of four letters or more are all the project's names, its anatomy (files,
    functions, defines, contains …) or words too common to say anything."""
    said = {w.lower()[:_STEM] for w in _PART.findall(strip_offer(text)) if len(w) >= 4}
    return not (said - project - _GENERIC - _ANATOMY)


_REPORTS_CHANGE = re.compile(
    r"\bI(?:'ve| have)?\s+(?:now\s+|just\s+|already\s+)?(?:fixed|changed|updated|modified|edited|corrected|added|"
    r"removed|replaced|rewritten|rewrote|implemented|renamed|refactored)\b"
    r"|\bafter (?:the|my|this) (?:change|fix|edit)s?\b|\b(?:the|my) (?:change|fix|edit)s? (?:works?|passed|passes|made)\b"
    r"|\b(?:has|have) been (?:fixed|changed|updated|corrected)\b"
    r"|\bich habe\b[^.]{0,40}\b(?:geändert|behoben|korrigiert|angepasst|ersetzt)\b|\bnach (?:der|meiner) Änderung\b"
    r"|\bhe (?:cambiado|corregido|arreglado|modificado)\b|\bj'ai (?:modifié|corrigé|changé|remplacé)\b"
    r"|我(?:已经)?(?:修改|修复|改|更新)了", re.IGNORECASE)


def reports_change(text: str) -> bool:
    """Whether the answer says a change was made ("I fixed…", "the tests passed after the change")."""
    return _REPORTS_CHANGE.search(strip_offer(text)) is not None


def errors_blamed(text: str) -> frozenset[str]:
    """The exception types an answer names ("a TypeError"), by the pattern a comment's rules are read with."""
    return frozenset(ERROR_NAME.findall(text))
