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
from dataclasses import dataclass
from typing import Any

from keel.core.request.edits import MovePhrase, Rename, looks_like_code, move_phrases, renames_in
from keel.core.request.kind import Kind, Reading, detect_language, read_kind
from keel.core.request.names import (
    about_project,
    asks_for_flaws,
    asks_for_test_changes,
    asks_purpose,
    check_categories,
    dirs_named,
    english_words,
    files_named,
    functions_named,
    identifiers_named,
    kept_files,
    points_at_docs,
    presumes_flaw,
    spec_documents,
    word_runs,
    words,
)
from keel.core.request.text import PLACEHOLDER, hold_spans, plain_words, restore, sentences_of, sub_fenced

_ID_PART = re.compile(r"[\s/:.()\[\]_-]+")


@dataclass(frozen=True)
class Request:
    """A request as keel reads it. Build it with ``parse_request``; every field is derived from ``text``."""

    text: str
    kind: Kind                                   # "change", "answer" (no change wanted) or "verify"
    why: str                                     # the words the kind rests on, for reports and pushbacks
    language: str                                # en, de, es, fr, zh, "unknown", or "" when empty
    forbids_change: bool = False                 # "don't change anything", "just explain", "not yet"
    make_sure: bool = False                      # verify: "make sure …" (the checks it speaks of must pass), not "run it"
    change_phrases: tuple[str, ...] = ()         # what to change: each clause that asks for a change
    keep_phrases: tuple[str, ...] = ()           # what must not change ("the tests" of "don't touch the tests")
    files: tuple[str, ...] = ()                  # file paths named, in order
    functions: tuple[str, ...] = ()              # functions named as ``name()``, in order
    spans: tuple[str, ...] = ()                  # code spans: inline `…` and each line of a fenced block
    sentences: tuple[str, ...] = ()              # the sentences, each span held as ``\x00N\x00`` (acceptance)

    # Read on first use (each once, from ``text`` alone): most runs need only some of them.
    @functools.cached_property
    def dirs(self) -> tuple[str, ...]:
        """Folders named ("src/api/")."""
        return dirs_named(self.text)

    @functools.cached_property
    def identifiers(self) -> frozenset[str]:
        """Names of code: calls, snake_case, camelCase, dotted module names, words in backticks."""
        return identifiers_named(self.text, self.files)

    @functools.cached_property
    def renames(self) -> tuple[Rename, ...]:
        """"rename X to Y", "X -> Y", "replace `X` with `Y`"."""
        return tuple(renames_in(self.text))

    @functools.cached_property
    def named_renames(self) -> tuple[Rename, ...]:
        """The renames named with the word rename ("rename X to Y", "X should be renamed to Y"): keel
        makes these without the model, so an arrow or "replace X with Y" does not count here."""
        return tuple(renames_in(self.text, said=True))

    @functools.cached_property
    def moves(self) -> tuple[MovePhrase, ...]:
        """"move <file> to <path>", "rename it to <path>"."""
        return move_phrases(self.text)

    @functools.cached_property
    def checks(self) -> frozenset[str]:
        """The check categories it speaks of: test, static, types, build."""
        return check_categories(self.text)

    @functools.cached_property
    def kept_files(self) -> tuple[str, ...]:
        """The files it says must not change ("Don't touch duration.js"): the gate holds them as it holds
        the tests, and change_file is not aimed at them."""
        return kept_files(self.keep_phrases, self.files)

    @functools.cached_property
    def allows_test_changes(self) -> bool:
        """It asks for tests to be written or changed (keel.core.request.names.asks_for_test_changes)."""
        return asks_for_test_changes(self.text)

    @functools.cached_property
    def points_at_docs(self) -> bool:
        """A comment or docstring is part of what must be done ("as the docstring says")."""
        return points_at_docs(self.text)

    @functools.cached_property
    def spec_documents(self) -> tuple[str, ...]:
        """The documents it makes the spec of the work ("do the exercise in INSTRUCTIONS.md")."""
        return spec_documents(self.text)

    @functools.cached_property
    def asks_flaws(self) -> bool:
        """It asks what is wrong: "review X", "any bugs?", "what is wrong with it"."""
        return asks_for_flaws(self.text)

    @functools.cached_property
    def presumes_flaw(self) -> bool:
        """It says there is a flaw to name: "what is wrong with it", "find the bug", "why does it crash?"."""
        return presumes_flaw(self.text)

    @functools.cached_property
    def about_project(self) -> bool:
        """It speaks of the project at hand ("what does this project do?"), not of programming at large:
        an answer to it names something of the project (keel.verify.answer). Naming one of the project's
        files or functions does too; only the workspace can tell (keel.verify.verifier)."""
        return about_project(self.text)

    @functools.cached_property
    def asks_purpose(self) -> bool:
        """It asks what something of the project does ("what does this project do?", "explain this code")."""
        return asks_purpose(self.text)

    @functools.cached_property
    def words(self) -> frozenset[str]:
        """Preloading's words: lower-case words and identifier parts of three letters or more."""
        return frozenset(words(self.text))

    @functools.cached_property
    def phrases(self) -> frozenset[tuple[str, ...]]:
        """Every ECHO_WORDS words in a row, lower-case: what a comment that says the same thing shares
        with it ("rounded to the nearest cent")."""
        return word_runs(self.text)

    @functools.cached_property
    def plain_words(self) -> frozenset[str]:
        """Lower-case words as written (two letters or more)."""
        return english_words(self.text)

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
                "make_sure": self.make_sure,
                "files": list(self.files), "functions": list(self.functions),
                "keep": list(self.keep_phrases)}


@functools.lru_cache(maxsize=256)
def parse_request(text: str) -> Request:
    """Read ``text`` (the user's request) once: pure, linear in the text, cached by text."""
    spans, held = hold_spans(text)
    plain, code = plain_words(held, spans)
    reading: Reading = read_kind(plain)
    return Request(
        text=text, kind=reading.kind, why=restore(reading.why, code), language=reading.language,
        forbids_change=reading.forbids_change, make_sure=reading.make_sure, change_phrases=tuple(restore(p, code) for p in reading.change_phrases),
        keep_phrases=tuple(restore(p, code) for p in reading.keep_phrases), files=files_named(text),
        functions=functions_named(text),
        spans=spans, sentences=sentences_of(held))


__all__ = ["PLACEHOLDER", "Kind", "MovePhrase", "Rename", "Request", "detect_language", "looks_like_code",
           "move_phrases", "parse_request", "renames_in", "sub_fenced", "words"]
