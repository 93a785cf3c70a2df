"""What a request names: files, folders, identifiers, functions, the words it shares with files, the
kinds of check it speaks of, whether it asks for test changes, whether it makes a comment the spec.

Each was read from the task by the module that needed it with its own pattern (the self-check, the gate,
the contract review, preloading, the test-tampering rule); they are read once here, into
keel.core.request.Request. Linear in the text (tests/linear_text_cases.py).
"""

from __future__ import annotations

import re
from pathlib import PurePosixPath

# -- files, folders and identifiers (the self-check's "does a change concern the task?") ------------------
_EXTENSIONS = ("py|pyi|js|jsx|ts|tsx|mjs|cjs|json|toml|yaml|yml|md|rst|txt|cfg|ini|rs|go|c|h|cc|cpp|hpp|java|kt|"
               "rb|php|sh|html|css|scss|sql|xml|vue|svelte|lock|env|csv")
_FILE_TOKEN = re.compile(rf"(?<![\w/.-])((?:[\w.-]+/)*[\w-]+(?:\.[\w-]+)*\.(?:{_EXTENSIONS}))(?![\w/])")
_DIR_TOKEN = re.compile(r"(?<![\w/.-])((?:[\w.-]+/)+)(?=[\s`'\",)]|$)")
_BACKTICKED = re.compile(r"`([^`]+)`")
_CALL = re.compile(r"\b([A-Za-z_]\w*)\(")
# A code-like word: snake_case, camelCase, PascalCase with two humps. Matched on each whole word, never
# searched across the text: searched, the overlapping runs backtracked quadratically inside one long
# word (a 200,000-character one-word task took minutes, keel issue 22).
_CODE_WORD = re.compile(r"[A-Za-z_]*[a-z][A-Za-z0-9]*_[A-Za-z0-9_]+|[a-z]+[A-Z]\w*|[A-Z][a-z0-9]+[A-Z]\w*")
_ANY_WORD = re.compile(r"\w+")
_LONGEST_NAME = 200     # longer words are data, not names; checking each costs its length squared
_DOTTED = re.compile(r"(?<![\w.])([a-z_]\w+(?:\.[a-z_]\w*)+)(?![\w.(])")   # keel.verify.gate
_WORD = re.compile(r"[A-Za-z_]\w+")
# CamelCase words of ordinary prose that name no code in the project.
_PROSE_CAMEL = frozenset({"JavaScript", "TypeScript", "CoffeeScript", "GitHub", "GitLab", "PyPI", "macOS", "iOS",
                          "PostgreSQL", "MySQL", "SQLite", "MongoDB", "OpenAI", "YouTube", "LinkedIn", "WordPress",
                          "PowerShell", "NodeJS", "VSCode", "DevOps", "OAuth", "GraphQL", "WebSocket", "iPhone"})
_CALLED = re.compile(r"(?<![\w$])([A-Za-z_$][\w$]*)\(\)")   # stats.summarize(): summarize


def files_named(text: str) -> tuple[str, ...]:
    """File paths the text names (``settings.json``, ``src/app.ts``), in order, each once."""
    return tuple(dict.fromkeys(m.removeprefix("./") for m in _FILE_TOKEN.findall(text)))


def dirs_named(text: str) -> tuple[str, ...]:
    return tuple(dict.fromkeys(d.removeprefix("./").rstrip("/") for d in _DIR_TOKEN.findall(text)))


def identifiers_named(text: str, files: tuple[str, ...]) -> frozenset[str]:
    """Identifiers: ``slugify()``, snake_case and camelCase words, dotted module names, words in
    backticks, the stems of the files named; three characters or more."""
    code_words = {w for w in _ANY_WORD.findall(text) if len(w) <= _LONGEST_NAME and _CODE_WORD.fullmatch(w)}
    found = set(_CALL.findall(text)) | (code_words - _PROSE_CAMEL)
    found |= {d for d in _DOTTED.findall(text) if d not in files}
    for span in _BACKTICKED.findall(text):
        found |= {w for w in _WORD.findall(span) if len(w) >= 3}
    found |= {PurePosixPath(f).stem for f in files}
    return frozenset(i for i in found if len(i) >= 3)


def functions_named(text: str) -> tuple[str, ...]:
    """The functions named as ``name()`` (``stats.summarize()`` names summarize), in order."""
    return tuple(dict.fromkeys(m.group(1) for m in _CALLED.finditer(text)))


def english_words(text: str) -> frozenset[str]:
    """Lower-case words of two characters or more (ASCII names), for "is this word in the request"."""
    return frozenset(w.lower() for w in _WORD.findall(text))


def words(text: str) -> set[str]:
    """Lower-case words and identifier parts: ``shipping_cost`` gives shipping_cost, shipping, cost
    (three characters or more). Preloading ranks files by the words they share with the request."""
    out: set[str] = set()
    for w in _PRELOAD_WORD.findall(text):
        lw = w.lower()
        out.add(lw)
        out.update(p.lower() for p in re.split(r"_+|(?<=[a-z])(?=[A-Z])", w) if p)
    return {w for w in out if len(w) >= 3}


_PRELOAD_WORD = re.compile(r"[A-Za-z_][A-Za-z0-9_]*")


# -- the checks a request speaks of (the gate's pre-existing failures) ------------------------------------
# "fix the failing test" is about the tests, so a test failure that was there before the agent started is
# the task, not someone else's problem. A bug report ("fix add()", "it crashes", "wrong result") is about
# the tests too: a test that fails before the fix is the likeliest witness of that very bug.
_CONCERNS = {
    "test": re.compile(r"\b(?:tests?|testing|failing|fails|failure|pytest|unittest|specs?|suite|passe?s?|"
                       r"green|ci|fix\w*|bugs?|broken|breaks?|crash\w*|errors?|exceptions?|wrong|incorrect\w*|"
                       r"regressions?)\b", re.IGNORECASE),
    "static": re.compile(r"\b(?:lint|linter|linting|ruff|flake8|eslint|pylint|style|warnings?)\b", re.IGNORECASE),
    "types": re.compile(r"\b(?:types?|typing|typed|mypy|pyright|tsc|type-?check\w*)\b", re.IGNORECASE),
    "build": re.compile(r"\b(?:build|builds|compile|compiles|compilation|compiler)\b", re.IGNORECASE),
}


def check_categories(text: str) -> frozenset[str]:
    """The categories of check (test, static, types, build) the text speaks of."""
    return frozenset(name for name, pattern in _CONCERNS.items() if pattern.search(text))


# -- test changes (the gate's tampering rule) --------------------------------------------------------------
# Verbs that ask for test changes when "test" follows within three words. Fix-like verbs are apart:
# "fix the failing test" names the symptom (the code is to be fixed), "update the failing test" does not.
_EDIT_VERB = (r"(?:add|adding|write|writing|create|creating|update|updating|change|changing|modify|modifying|"
              r"edit|editing|extend|extending|adjust|rewrite|rewriting|amend|improve|refactor|expand|remove|"
              r"delete|rename|replace)")
_FIX_VERB = r"(?:fix|fixing|repair|correct)"
_TEST_NOUN = r"(?:unit[- ])?(?:tests?|test[- ]?cases?|test[- ]suites?|specs?|test[- ]files?|assertions?)\b"
_CLAUSE_END = r"(?:and|then|so|to|that|which|but|until|when|while|if)\b"     # "add X and test it"
_SYMPTOM = r"(?:failing|failed|broken|erroring|red)\b"
_TEST_FILE = r"`?(?:[\w.-]+/)*(?:test_\w+\.py|\w+_test\.\w+|\w+\.(?:test|spec)\.\w+)"
_IN_BETWEEN = r"[\w'-]+(?:[:.][\w'-]+)*\s+"   # a word, "node:test" and "pytest.mark" too (not "this: ")
_ALLOWS = re.compile(
    rf"\b{_EDIT_VERB}\s+(?:(?!{_CLAUSE_END}){_IN_BETWEEN}){{0,3}}{_TEST_NOUN}"
    rf"|\b{_FIX_VERB}\s+(?:(?!{_CLAUSE_END}|{_SYMPTOM}){_IN_BETWEEN}){{0,3}}{_TEST_NOUN}"
    rf"|\b{_EDIT_VERB}\s+(?:the\s+)?(?:file\s+)?{_TEST_FILE}"
    r"|\btests?\b[^.]{0,40}?\b(?:is|are)\s+(?:wrong|incorrect|outdated|out of date|stale|buggy|obsolete)",
    re.IGNORECASE)
_NEGATION = re.compile(r"\b(?:don'?t|do not|never|without|not|no need to|must not|mustn'?t)\s+(?:\w+\s+){0,2}$",
                       re.IGNORECASE)


def asks_for_test_changes(text: str) -> bool:
    """True when the text asks for test changes, by one of:

    - an editing verb (add, write, update, change, rewrite, remove …) followed within three words by
      "test(s)", "spec", "test case", "assertions" …, no clause boundary in between ("add caching and
      test it" does not count): "add a test for the parser", "update the failing test";
    - fix / repair / correct followed likewise, unless a word in between makes the test the symptom:
      "fix the flaky test" counts, "fix the failing test" does not (the code is to be fixed); "make the
      failing test pass" never counts (no editing verb);
    - an editing verb naming a test file ("update test_app.py"; "fix test_app.py" does not count);
    - the text saying the tests are wrong, outdated, stale …

    A request negated just before the verb ("don't change the tests", "without modifying tests") does
    not count."""
    return any(not _NEGATION.search(text[max(0, m.start() - 30): m.start()]) for m in _ALLOWS.finditer(text))


# -- a comment made the spec (the contract review) ----------------------------------------------------------
_DOCS = re.compile(r"\b(?:doc ?strings?|doc[- ]comments?|comments?|documentation|documented|javadoc|jsdoc)\b",
                   re.IGNORECASE)
# "as the docstring says", "the docstring says what it should do", "as their comments describe", "as documented"
_SAYS = re.compile(r"\b(?:says?|describes?|described|promises?|specif(?:y|ies)|documented|according to|"
                   r"as (?:its|their|the) )\b", re.IGNORECASE)


def points_at_docs(text: str) -> bool:
    """Whether the text makes a comment or docstring part of what must be done."""
    return bool(_DOCS.search(text)) and bool(_SAYS.search(text))


# -- a request about flaws (keel.loop.decider, keel.verify.verifier) ---------------------------------------
_ASKS_FLAW = re.compile(r"\b(?:what(?:'s| is)? wrong|wrong with|bugs?|buggy|issues?|problems?|flaws?|mistakes?|broken|"
                        r"what (?:fails|breaks)|review|fehler|falsch|errores?|erreurs?|bogues?)\b|问题|错误|缺陷",
                        re.IGNORECASE)
# Said as a fact, not asked: "tell me what is wrong with it", "find the bug", "why does parse() crash?".
# "Is anything wrong with it?", "any bugs?" and "review it" ask; they do not say there is a flaw.
_PRESUMES_FLAW = re.compile(
    r"\bwhat(?:'s| is| are)? (?:wrong|broken|failing)\b|\bwhat (?:fails|breaks|goes wrong)\b"
    r"|\b(?:find|spot|locate|explain|name|show me) (?:the|this|that|its|their) (?:bugs?|errors?|problems?|mistakes?|flaws?)\b"
    r"|\b(?:where|what)(?:'s| is| are) the (?:bugs?|errors?|problems?|mistakes?|flaws?)\b"
    r"|\bwhy (?:does|do|did|is|are)\b[^?!\n]{0,80}\b(?:fail|fails|failing|crash|crashes|break|breaks|wrong|"
    r"raise|raises|error)\b"
    r"|\bwas (?:ist|stimmt)\b[^?!\n]{0,40}\b(?:falsch|nicht)\b|\bwo (?:ist|liegt) der fehler\b"
    r"|\bqu[ée] (?:está|esta) mal\b|\bqu'est-ce qui ne va pas\b|哪里错|什么问题|错在哪",
    re.IGNORECASE)


def asks_for_flaws(text: str) -> bool:
    """Whether the text asks what is wrong ("review X", "any bugs?", "tell me what is wrong with it")."""
    return _ASKS_FLAW.search(text) is not None or presumes_flaw(text)


def presumes_flaw(text: str) -> bool:
    """Whether the text says there is a flaw to name ("what is wrong with it", "find the bug", "why does
    it crash?"): an answer that finds none then has nothing to rest on (docs/verification.md)."""
    return _PRESUMES_FLAW.search(text) is not None


# -- a document made the spec ("do the exercise in INSTRUCTIONS.md": change_file's redirect) -----------------
DOC_SUFFIXES = (".md", ".rst", ".txt", ".adoc")
_DOC = r"`?((?:[\w.-]+/)*[\w-]+(?:\.[\w-]+)*\.(?:md|rst|txt|adoc))`?"
_SPEC_OF = re.compile(
    r"\b(?:exercise|task|spec(?:ification)?|instructions|problem|assignment)\s+(?:(?:described|given|set out)\s+)?"
    rf"(?:in|from|of)\s+{_DOC}"
    rf"|\b(?:described|specified|explained|defined|set out|as stated)\s+in\s+{_DOC}"
    rf"|\b(?:as|what)\s+{_DOC}\s+(?:says|describes|specifies|asks|requires)"
    rf"|\b(?:according to|per|following|as in)\s+{_DOC}", re.IGNORECASE)


def spec_documents(text: str) -> tuple[str, ...]:
    """The documents the request makes the spec of the work: "the exercise in INSTRUCTIONS.md", "as
    SPEC.md describes", "described in docs/api.md". A document the request asks to change ("update
    README.md") is not one: no such wording names it."""
    found = (next(g for g in m.groups() if g) for m in _SPEC_OF.finditer(text))
    return tuple(dict.fromkeys(found))


# -- runs of words, for a comment that says what the request says (keel.verify.contract) ---------------------
ECHO_WORDS = 4
_LOWER_WORD = re.compile(r"[a-z0-9]+")


def word_runs(text: str, n: int = ECHO_WORDS) -> frozenset[tuple[str, ...]]:
    """Every ``n`` words in a row of ``text``, lower-cased (punctuation and markup between them ignored)."""
    said = _LOWER_WORD.findall(text.lower())
    return frozenset(tuple(said[i:i + n]) for i in range(len(said) - n + 1))


_LIST_JOIN = re.compile(r"\s*(?:,|;|\bor\b|\band\b|\bnor\b)\s*", re.IGNORECASE)
_FILLER = re.compile(r"^(?:the\s+)?(?:files?\s+)?|\s+files?$", re.IGNORECASE)


def kept_files(keep_phrases: tuple[str, ...], files: tuple[str, ...]) -> tuple[str, ...]:
    """The files a keep phrase names and nothing else ("duration.js", "x.py or the README.md"), in order.

    A phrase that says more than file names keeps none: "foo.py's public API" asks that a part stay,
    and the file may still need the fix."""
    kept: list[str] = []
    for phrase in keep_phrases:
        parts = [_FILLER.sub("", part.strip(" `'\"")).strip(" `'\"") for part in _LIST_JOIN.split(phrase)]
        parts = [part for part in parts if part]
        if parts and all(part in files for part in parts):
            kept.extend(part for part in parts if part not in kept)
    return tuple(kept)


# -- the request is about this project ("what does this project do?"), not about programming at large ----------
_ABOUT_PROJECT = re.compile(
    r"\b(?:the code here|the project|the code ?base|the repo(?:sitory)?|the tests|the test suite|the app(?:lication)?|"
    r"the workspace)\b"
    r"|\b(?:this|these|my|our|your)\s+(?:\w+\s+)?(?:project|code|code ?base|repo(?:sitory)?|app(?:lication)?|program|"
    r"tool|library|package|module|script|tests?|test suite|functions?|class(?:es)?|files?|folder|directory|workspace)\b"
    r"|\b(?:dies(?:e|es|er|em|en)?|das|mein(?:e|em)?|unser(?:e|em)?)\s+(?:Projekt|Code|Repo|Repository|Programm|Modul|"
    r"Skript|Tests?|Datei(?:en)?|Funktion(?:en)?|Anwendung|Bibliothek|Paket)\b"
    r"|\b(?:este|esta|estos|estas|el|mi|nuestro|nuestra)\s+(?:proyecto|c[óo]digo|repositorio|programa|m[óo]dulo|script|"
    r"pruebas?|tests?|archivos?|funci[óo]n|aplicaci[óo]n|biblioteca|paquete)\b"
    r"|\b(?:ce|cet|cette|ces|le|mon|ma|notre)\s+(?:projet|code|d[ée]p[ôo]t|programme|module|script|tests?|fichiers?|"
    r"fonctions?|application|biblioth[èe]que|paquet)\b"
    r"|这个项目|此项目|本项目|该项目|这段代码|这个代码|这些代码|这个程序|这个仓库|这些测试|这个函数|这个文件|代码库",
    re.IGNORECASE)


def about_project(text: str) -> bool:
    """Whether the text speaks of the project at hand ("what does this project do?", "was macht dieses
    Projekt?"), not of programming at large ("what is a tuple?"): an answer to it must name something of it."""
    return _ABOUT_PROJECT.search(text) is not None


# "What does this project do?", "Was macht dieses Projekt?": the answer is what it does, not what it holds.
_ASKS_PURPOSE = re.compile(
    r"\bwhat (?:does|do|is) (?:this|these|the|my|our)\b[^?.!\n]{0,60}?\b(?:do|for|about)\b|\bwhat is (?:this|it) for\b"
    r"|\b(?:explain|describe) (?:what|how)\b|\b(?:explain|describe) (?:this|the|my|our) (?:\w+ )?(?:project|code|"
    r"program|tool|app|module|script|library)\b"
    r"|\bwas (?:macht|tut|soll)\b|\bwozu (?:ist|dient)\b|\bqu[ée] hace\b|\bpara qu[ée] sirve\b|\bque fait\b|"
    r"\bà quoi sert\b|做什么|干什么|是什么|有什么用", re.IGNORECASE)


def asks_purpose(text: str) -> bool:
    """Whether the text asks what something of the project does ("what does this project do?"): an answer
    that only lists its files and names does not say (keel.verify.grounding)."""
    return _ASKS_PURPOSE.search(text) is not None
