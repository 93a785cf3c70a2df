"""The one parsed form of the user's request: ``parse_request(text) -> Request``.

Everything keel reads from the task — whether it asks for a change, only an answer, or to make sure of
something (the gate's evidence for each: docs/verification.md), what must not change, the files,
functions and identifiers named, the commands and their wording (acceptance), the renames and moves,
whether it asks for test changes, which checks it speaks of — is read here once, by one pure function,
into one frozen ``Request``. The gate, the decider's pushbacks, preloading, acceptance, change_file and
the assists read the request only through it (``TaskState.request``, ``RunHandle.request``).

``parse_request`` is cached by text: every reader of the same task gets the same object.
"""

from __future__ import annotations

import functools
import re
from dataclasses import dataclass, field
from typing import Any

from keel.core.request.edits import MovePhrase, Rename, looks_like_code, move_phrases, renames_in
from keel.core.request.kind import Kind, Reading, detect_language, read_kind
from keel.core.request.names import (
    asks_for_test_changes,
    check_categories,
    dirs_named,
    english_words,
    files_named,
    functions_named,
    identifiers_named,
    points_at_docs,
    words,
)
from keel.core.request.text import PLACEHOLDER, hold_spans, plain_words, sentences_of, sub_fenced

_ID_PART = re.compile(r"[\s/:.()\[\]_-]+")


@dataclass(frozen=True)
class Request:
    """A request as keel reads it. Build it with ``parse_request``; every field is derived from ``text``."""

    text: str
    kind: Kind                                   # "change", "answer" (no change wanted) or "verify"
    why: str                                     # the words the kind rests on, for reports and pushbacks
    language: str                                # en, de, es, fr, zh, "unknown", or "" when empty
    forbids_change: bool = False                 # "don't change anything", "just explain", "not yet"
    change_phrases: tuple[str, ...] = ()         # what to change: each clause that asks for a change
    keep_phrases: tuple[str, ...] = ()           # what must not change ("the tests" of "don't touch the tests")
    files: tuple[str, ...] = ()                  # file paths named, in order
    dirs: tuple[str, ...] = ()                   # folders named ("src/api/")
    identifiers: frozenset[str] = frozenset()    # names of code: calls, snake_case, dotted, backticked
    functions: tuple[str, ...] = ()              # functions named as ``name()``, in order
    spans: tuple[str, ...] = ()                  # code spans: inline `…` and each line of a fenced block
    sentences: tuple[str, ...] = ()              # the sentences, each span held as ``\x00N\x00`` (acceptance)
    renames: tuple[Rename, ...] = ()             # "rename X to Y", "X -> Y"
    moves: tuple[MovePhrase, ...] = ()           # "move <file> to <path>", "rename it to <path>"
    checks: frozenset[str] = frozenset()         # the check categories it speaks of: test, static, types, build
    allows_test_changes: bool = False            # it asks for tests to be written or changed
    points_at_docs: bool = False                 # a comment or docstring is part of what must be done
    words: frozenset[str] = field(default=frozenset(), repr=False)        # preloading's words (3+ letters)
    plain_words: frozenset[str] = field(default=frozenset(), repr=False)  # lower-case words as written

    @property
    def asks_change(self) -> bool:
        """An untouched workspace cannot finish it."""
        return self.kind == "change"

    @property
    def answer_only(self) -> bool:
        """Finished by an answer in words with the workspace as it was; a change is refused."""
        return self.kind == "answer"

    def concerns(self, category: str, failing_tests: tuple[str, ...] = ()) -> bool:
        """Does the request speak of this category of check, or name one of its failing tests
        (``test_parser.py::test_quotes`` is named by "parser" or "quotes")?"""
        if category in self.checks:
            return True
        lowered = self.text.lower()
        for test_id in failing_tests:
            for part in _ID_PART.split(test_id):
                if len(part) >= 4 and part.lower() not in {"test", "tests", "py"} and part.lower() in lowered:
                    return True
        return False

    def mentions(self, phrase: str) -> bool:
        """Whether ``phrase`` stands in the request as a whole word (any case): ``keel.verify.gate``."""
        return re.search(rf"\b{re.escape(phrase.lower())}\b", self.text.lower()) is not None

    def names_file(self, path: str) -> bool:
        """Whether the request names the file ``path``: its path, or its name (four letters or more)."""
        name = path.rsplit("/", 1)[-1]
        return path in self.text or (len(name) > 3 and re.search(rf"(?<![\w/.]){re.escape(name)}(?!\w)",
                                                                 self.text) is not None)

    def with_note(self, note: str) -> Request:
        """The request with a change note the model wrote added to it (change_file's related files)."""
        return parse_request(f"{self.text}\n{note}") if note.strip() else self

    def to_json(self) -> dict[str, Any]:
        """What the result and the session log say about the reading."""
        return {"kind": self.kind, "why": self.why, "language": self.language, "forbids_change": self.forbids_change,
                "files": list(self.files), "functions": list(self.functions),
                "keep": list(self.keep_phrases)}


@functools.lru_cache(maxsize=256)
def parse_request(text: str) -> Request:
    """Read ``text`` (the user's request) once: pure, linear in the text, cached by text."""
    spans, held = hold_spans(text)
    reading: Reading = read_kind(plain_words(held))
    files = files_named(text)
    return Request(
        text=text, kind=reading.kind, why=reading.why, language=reading.language,
        forbids_change=reading.forbids_change, change_phrases=reading.change_phrases,
        keep_phrases=reading.keep_phrases, files=files, dirs=dirs_named(text),
        identifiers=identifiers_named(text, files), functions=functions_named(text), spans=spans,
        sentences=sentences_of(held), renames=tuple(renames_in(text)), moves=move_phrases(text),
        checks=check_categories(text), allows_test_changes=asks_for_test_changes(text),
        points_at_docs=points_at_docs(text), words=frozenset(words(text)), plain_words=english_words(text))


__all__ = ["PLACEHOLDER", "Kind", "MovePhrase", "Rename", "Request", "detect_language", "looks_like_code",
           "move_phrases", "parse_request", "renames_in", "sub_fenced", "words"]
