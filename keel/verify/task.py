"""What the task text says about "done": does it ask for a change to the workspace at all?

A prose answer with nothing changed is the most common false "done" of coding agents. When the
task asks for a change ("fix", "add", "implement", "make … pass", "rename" …), an untouched
workspace cannot be a finished task, whatever the checks say. A task that only asks to explain,
find or review is finished by an answer. The rule is deliberately simple and table-tested: a
change verb anywhere wins, because "Find and fix the cause" asks for a fix.
"""

from __future__ import annotations

import re

_CHANGE_VERBS = (
    r"fix|repair|correct|resolve|patch|implement|add|create|write|generate|make|build|change|update|"
    r"modify|edit|rename|move|remove|delete|replace|refactor|rewrite|convert|migrate|extract|inline|"
    r"introduce|handle|enable|disable|bump|upgrade|downgrade|configure|clean\s+up|tidy|optimi[sz]e|"
    r"speed\s+up|improve|translate"
)
_CHANGE = re.compile(rf"(?:^|[\s,;:(\"'])(?:{_CHANGE_VERBS})(?:s|es|ed|ing)?\b", re.IGNORECASE)
# Phrases that ask only for an answer: "explain how X works", "what does Y do?".
_ANSWER_ONLY = re.compile(
    r"^\s*(?:please\s+)?(?:explain|describe|summari[sz]e|tell me|show me|list|find out|what|why|how|where|"
    r"which|who|when|is|are|does|do|can|could|review|analy[sz]e|investigate|look at)\b",
    re.IGNORECASE,
)
_MAKE_SURE = re.compile(r"[\s,;:(\"']?make\s+sure\b", re.IGNORECASE)
# A bug report states a defect without a change verb: "The list endpoint skips the first page:
# page 1 returns what should be page 2. paginate() is the culprit, I think." Unattended, nobody
# wrote that to get an answer back; a 1.5B model "finished" it with nothing changed (false done).
_DEFECT = re.compile(
    r"\b(?:bugs?|buggy|broken|breaks|crash(?:es|ed|ing)?|culprit|regress\w*|wrong(?:ly)?|incorrect(?:ly)?|"
    r"fails|failing|failed|errors?|exceptions?|traceback|skips|skipped|ignores|ignored|loses|leaks|hangs|"
    r"should(?:n't| not)? (?:be|return|give|show|print|have|get|start|stop|work|accept|reject|raise)|"
    r"instead of|(?:is|was) expected|does(?:n't| not)|is(?:n't| not)|won't|no longer|off[- ]by[- ]one)\b",
    re.IGNORECASE)


def task_requests_change(task: str) -> bool:
    """True when the task asks for the workspace to change (so an untouched one is not done)."""
    text = " ".join(task.split())
    if not text:
        return False
    if _ANSWER_ONLY.search(text):
        if text.endswith("?"):
            return False  # a question: "what does add() return?", "how would I fix this?"
        return _asks_change(text)   # "explain why X is broken" is answered, "list … and fix them" is not
    return _asks_change(text) or _DEFECT.search(text) is not None


def _asks_change(text: str) -> bool:
    # "make sure …" asks for verification; other uses of "make" ("make the test pass") ask for a change.
    return any(not _MAKE_SURE.match(text, m.start()) for m in _CHANGE.finditer(text))


# Words that tie a task to a category of checks: "fix the failing test" is about the tests, so a
# test failure that was there before the agent started is the task, not someone else's problem.
# A bug report ("fix add()", "it crashes", "wrong result") is about the tests too: a test that
# fails before the fix is the likeliest witness of that very bug. Accepting it as "pre-existing"
# would turn a wrong fix into a false "done"; when it really is unrelated the run ends
# incomplete with the failure reported, which is the honest outcome.
_CONCERNS = {
    "test": re.compile(r"\b(?:tests?|testing|failing|fails|failure|pytest|unittest|specs?|suite|passe?s?|"
                       r"green|ci|fix\w*|bugs?|broken|breaks?|crash\w*|errors?|exceptions?|wrong|incorrect\w*|"
                       r"regressions?)\b", re.IGNORECASE),
    "static": re.compile(r"\b(?:lint|linter|linting|ruff|flake8|eslint|pylint|style|warnings?)\b", re.IGNORECASE),
    "types": re.compile(r"\b(?:types?|typing|typed|mypy|pyright|tsc|type-?check\w*)\b", re.IGNORECASE),
    "build": re.compile(r"\b(?:build|builds|compile|compiles|compilation|compiler)\b", re.IGNORECASE),
}


def task_concerns(task: str, category: str, failing_tests: tuple[str, ...] = ()) -> bool:
    """Does the task speak of this category of check, or name one of its failing tests?"""
    pattern = _CONCERNS.get(category)
    if pattern is not None and pattern.search(task):
        return True
    lowered = task.lower()
    for test_id in failing_tests:
        for part in re.split(r"[\s/:.()\[\]_-]+", test_id):  # test_parser.py::test_quotes → parser, quotes
            if len(part) >= 4 and part.lower() not in {"test", "tests", "py"} and part.lower() in lowered:
                return True
    return False
