"""Is a reply an answer? For a request that asks only for an answer, the answer is the evidence.

A question back ("Which file do you mean?"), a promise of work ("I will look at calc.py first.", "Let me
check the tests."), an empty reply or a bare "Done." finishes nothing: the person asked something and
got no answer (keel issue 32). An answer that ends with an offer ("add() subtracts instead of adding.
Want me to fix it?") is still an answer: the offer is dropped before judging.

Pure; English, German, Spanish, French and Chinese openings (the languages keel.core.request reads).
"""

from __future__ import annotations

import re

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


def answer_problem(text: str) -> str | None:
    """Why ``text`` is no answer ("empty", "a question back", "a promise to look, not an answer", "no content"),
    or None when it answers."""
    body = text.strip()
    if not body:
        return "empty"
    kept = strip_offer(body)
    if kept.rstrip().endswith(("?", "？")):
        return "a question back"
    if _PROMISE.match(kept) and len(_WORD.findall(kept)) < 40:
        return "a promise to look, not an answer"
    words = [w.lower() for w in _WORD.findall(kept)]
    if not words or all(w in _CONTENT_FREE for w in words):
        return "no content"
    return None


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
