"""Which shell commands count as verification evidence.

A "check" is a command whose exit status tells whether the work is right: tests, linters,
type checkers, builds, or running the program. The decider only accepts "done" when a check
exited 0 after the last file change; this module decides what counts as a check.
"""

from __future__ import annotations

import re
import shlex

from keel.policy.shell.unwrap import PROJECT_RUNNERS, TRANSPARENT, strip_wrappers

# First words (after unwrapping env assignments and simple wrappers) and the check kind they imply.
_TEST = {"pytest", "tox", "nox", "jest", "vitest", "mocha", "rspec", "phpunit", "ctest", "bats"}
_LINT = {"ruff", "flake8", "pylint", "eslint", "shellcheck", "golangci-lint", "black", "isort", "prettier"}
_TYPE = {"mypy", "pyright", "tsc", "pytype"}
_BUILD = {"make", "cmake", "ninja", "gcc", "g++", "cc", "clang", "javac", "mvn", "gradle", "meson"}
_RUN = {"python", "python3", "node", "ruby", "perl", "bash", "sh", "deno", "bun", "php", "java"}

_PY_MODULES = {
    "pytest": "test", "unittest": "test", "doctest": "test", "nose2": "test",
    "mypy": "type", "pyright": "type", "ruff": "lint", "flake8": "lint", "pylint": "lint",
    "py_compile": "build", "compileall": "build", "build": "build",
}
_SUBCOMMANDS = {
    ("cargo", "test"): "test", ("cargo", "check"): "build", ("cargo", "build"): "build",
    ("cargo", "clippy"): "lint", ("cargo", "run"): "run",
    ("go", "test"): "test", ("go", "vet"): "lint", ("go", "build"): "build", ("go", "run"): "run",
    ("npm", "test"): "test", ("npm", "run"): "run", ("yarn", "test"): "test", ("pnpm", "test"): "test",
    ("dotnet", "test"): "test", ("dotnet", "build"): "build", ("swift", "test"): "test",
}

# the one unwrapping of command wrappers (keel.policy.shell.unwrap), with the project runners too
_WRAPPERS = TRANSPARENT | PROJECT_RUNNERS


def _classify_words(words: list[str]) -> str | None:
    if not words:
        return None
    head = words[0].rsplit("/", 1)[-1]
    if re.fullmatch(r"python(\d(\.\d+)?)?", head):
        if len(words) >= 3 and words[1] == "-m":
            return _PY_MODULES.get(words[2], "run")
        if len(words) >= 2 and words[1] not in {"-V", "--version", "-h", "--help"}:
            return "run"
        return None
    if len(words) >= 2 and (head, words[1]) in _SUBCOMMANDS:
        if (head, words[1]) == ("npm", "run") and len(words) >= 3:
            name = words[2]
            return "test" if "test" in name else "lint" if "lint" in name else "build" if "build" in name else "run"
        return _SUBCOMMANDS[(head, words[1])]
    for kind, names in (("test", _TEST), ("lint", _LINT), ("type", _TYPE), ("build", _BUILD), ("run", _RUN)):
        if head in names:
            if head in {"bash", "sh"} and len(words) > 1 and words[1] == "-c":
                return None
            return kind
    if head.startswith("./") or head.endswith((".sh", ".py")):
        return "run"
    return None


def _segments(command: str) -> list[list[str]]:
    """The simple commands whose failure makes the whole command fail, so a 0 exit proves them.

    Only the `&&` chain after the last `;`, `&`, `||` or newline counts (`pytest; true` and
    `pytest || true` exit 0 whatever pytest did), and of a pipeline only its last command (its
    status is the pipeline's). Quotes are respected: `python -c 'a; b'` is one command."""
    lexer = shlex.shlex(command.replace("\n", " ; "), posix=True, punctuation_chars=True)
    lexer.whitespace_split = True
    lexer.commenters = "#"
    segments: list[list[str]] = [[]]
    try:
        for token in lexer:
            if token in {";", "||", "&", ";;"}:
                segments = [[]]
            elif token == "&&":
                segments.append([])
            elif token in {"|", "|&"}:
                segments[-1] = []
            else:
                segments[-1].append(token)
    except ValueError:  # unbalanced quotes: not something to count as evidence
        return []
    return [s for s in segments if s]


def classify_check(command: str) -> str | None:
    """Return "test", "lint", "type", "build" or "run" when ``command`` verifies work, else None.

    With several commands chained, the strongest kind wins (test > type > lint > build > run):
    `cd x && pytest` is a test run. A pipeline's status is its last command's, so only that counts.
    """
    order = ["test", "type", "lint", "build", "run"]
    found = [k for k in (_classify_words(strip_wrappers(words, _WRAPPERS)) for words in _segments(command)) if k]
    if not found:
        return None
    return min(found, key=order.index)


# Flags that run a chosen part of a suite (pytest, jest, vitest, mocha, go, cargo, unittest).
_NARROWING_FLAGS = frozenset({"-k", "-m", "--deselect", "--lf", "--last-failed", "--co", "--collect-only",
                              "-t", "--testNamePattern", "--testPathPattern", "-g", "--grep", "-run", "--run",
                              "--filter", "--only", "--exact", "--skip"})
_SOURCE_SUFFIXES = (".py", ".js", ".mjs", ".cjs", ".ts", ".tsx", ".jsx", ".go", ".rs")


def whole_test_run(command: str) -> bool:
    """Whether ``command`` runs a whole test suite: a test runner with no test selection (no ``-k``, no
    single file or ``file::test``, no ``-run`` pattern). A run of a corner of the suite is no evidence
    that the rest still passes. A command over 4,000 characters is no test run keel reads (shlex's
    tokenizer is quadratic in one long word)."""
    if len(command) > 4000:
        return False
    for words in _segments(command):
        words = strip_wrappers(words, _WRAPPERS)
        if _classify_words(words) != "test":
            continue
        head = words[0].rsplit("/", 1)[-1]
        module = words[2] if len(words) > 2 and words[1] == "-m" else None
        args = words[3:] if module else words[1:]
        if head in {"npm", "yarn", "pnpm", "go", "cargo", "dotnet", "swift"} and args:
            args = args[1:]                               # the subcommand: `npm test`, `go test`
        args = [a for a in args if a != "--"]
        if any(a.split("=", 1)[0] in _NARROWING_FLAGS or (a.startswith("-k") and len(a) > 2) for a in args):
            return False
        positional = [a for a in args if not a.startswith("-")]
        if module == "unittest" or head == "cargo":
            return all(a == "discover" or a.startswith(("-", ".")) for a in positional)
        return not any("::" in a or a.endswith(_SOURCE_SUFFIXES) for a in positional)
    return False
