"""The wording around a command a request names: is it named as proof, what output must it print, is it
to be run.

"Fix the crash so that `python test_app.py` prints OK" names a command, says it is proof ("so that",
"prints") and what its output must contain ("OK"); "then run check.py" tells to run a script. These
read sentences whose code spans are held as ``\\x00N\\x00`` (keel.core.request.text); keel.verify.acceptance
decides which spans are commands and which files exist.
"""

from __future__ import annotations

import re

from keel.core.request.text import PLACEHOLDER

_PROOF = re.compile(
    r"\b(?:must|should|to|will|and)\s+(?:still\s+)?(?:pass|succeed|work)\w*|\bpass(?:es|ing)?\b|\bgreen\b|"
    r"\bsucceed\w*|\bexits?\s+(?:with\s+)?(?:code\s+|status\s+)?0\b|\bprint\w*|\boutputs?\b|"
    r"\bverif\w*|\bmake\s+sure\b|\bensure\b|\bso\s+that\b|\buntil\b|\bconfirm\w*|\bcheck\s+that\b|"
    # the command judges the work: "`python check_tests.py test_leap.py` tells you whether the tests would
    # catch real bugs" (py-write-tests: unread, the 1.5B never wrote the tests and keel took it as done)
    r"\b(?:tells?|shows?|says|checks?|reports?)\s+(?:you\s+|us\s+|me\s+)?(?:whether|if)\b",
    re.IGNORECASE)
_EXPECT = re.compile(
    r"\b(?:prints?|printing|outputs?|shows?|displays?|says|echo(?:es)?|emits?|writes?)(?:\s*+:)?\s++"
    r"(?:out\s+)?(?:exactly\s+|only\s+)?(?:the\s+(?:word|text|string|line|message)\s+)?"
    r"(?:\x00(?P<span>\d+)\x00|\"(?P<dq>[^\"\n]+)\"|'(?P<sq>[^'\n]+)'|“(?P<cq>[^”\n]+)”|"
    r"(?P<bare>[A-Z][A-Z0-9_!]*\b|\d+(?:\.\d+)*\b))")
_RUN_VERBS = frozenset({"run", "rerun", "re-run", "execute"})
_NEGATIONS = frozenset({"not", "never", "without", "avoid", "no", "dont", "don't", "don’t"})
TRAILING = ".,;:!?)]}\"'”’"
LEADING = "([{\"'“‘"


def names_proof(context: str) -> bool:
    """Does this sentence (spans held) say a command is proof: "must pass", "prints", "so that" …?"""
    return _PROOF.search(PLACEHOLDER.sub(" ", context)) is not None


def expected_after(rest: str) -> tuple[int | None, str | None]:
    """What "prints X" in ``rest`` (the sentence after a command) asks for: (the index of a code span, or
    None; the literal text, or None). "prints no errors" asks for nothing."""
    match = _EXPECT.search(rest)
    if match is None:
        return None, None
    if match.group("span") is not None:
        return int(match.group("span")), None
    return None, next(v for v in (match.group(g) for g in ("dq", "sq", "cq", "bare")) if v is not None)


def run_phrases(sentence: str) -> list[list[str]]:
    """The two words after each "run" / "execute" of ``sentence`` that is not negated ("do not run
    deploy.sh"). A word scan, not a pattern over the text: linear in the sentence."""
    words = sentence.split()
    bare = [w.strip(TRAILING + LEADING).lower() for w in words]
    found: list[list[str]] = []
    for i in range(len(words) - 1):
        if bare[i] not in _RUN_VERBS:
            continue
        if any(w in _NEGATIONS or w.endswith(("n't", "n’t")) for w in bare[max(0, i - 3):i]):
            continue
        found.append(words[i + 1:i + 3])
    return found
