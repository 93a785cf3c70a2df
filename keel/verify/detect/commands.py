"""Is a command written in prose (AGENTS.md, a CI file) a check, and of which category?

Commands found in documents are only planned when they verify without changing anything: a
formatter, `--fix`, or an install would turn "run the checks" into "edit the workspace" or "reach
the network", so those are never checks, whatever heading they sit under.
"""

from __future__ import annotations

import re
import shlex

from keel.outputs.checks import classify_check
from keel.policy.shell.unwrap import strip_wrappers
from keel.verify.detect.makefile import TARGET_CATEGORIES
from keel.verify.plan import Category

_KIND_TO_CATEGORY: dict[str, Category] = {"test": "test", "lint": "static", "type": "types", "build": "build"}
_CONTEXT_WORDS: tuple[tuple[Category, re.Pattern[str]], ...] = (
    ("types", re.compile(r"\btype[- ]?check\w*|\btypes?\b|\bmypy\b|\btsc\b", re.IGNORECASE)),
    ("static", re.compile(r"\blint\w*|\bstatic\b|\bstyle\b", re.IGNORECASE)),
    ("test", re.compile(r"\btest\w*|\bchecks?\b|\bverif\w*|\bvalidat\w*|\bacceptance\b", re.IGNORECASE)),
    ("build", re.compile(r"\bbuild\w*|\bcompil\w*", re.IGNORECASE)),
)
_SCRIPT_CATEGORIES: dict[str, Category] = {
    "lint": "static", "typecheck": "types", "type-check": "types", "tsc": "types", "check-types": "types",
    "types": "types", "build": "build", "test": "test",
}
# Scripts that start a server or watcher: they never exit, so they can never pass.
_LONG_RUNNING_SCRIPTS = {"dev", "start", "serve", "watch", "preview"}
_MUTATES = re.compile(
    r"--fix\b|--write\b|(?-i:(?:^|\s)-w\b)|\b(?:ruff\s+format|black|isort|prettier|gofmt|go\s+fmt|cargo\s+fmt|"
    r"autopep8|yapf|clang-format)\b"
    r"|\b(?:pip3?|npm|yarn|pnpm|uv|poetry|pipx|cargo|go|gem|bundle|apt|apt-get|brew)\s+"
    r"(?:install|ci|add|sync|get|update|upgrade|lock|remove|uninstall)\b"
    r"|-m\s+(?:pip|venv)\b|\bvirtualenv\b|\bsetup\.py\s+(?:install|develop)\b"
    r"|\b(?:deploy|publish|release|upload|migrate)\b|\bmake\s+(?:install|uninstall|clean|distclean|dist)\b"
    r"|\bgit\s+(?:commit|push|add|checkout|reset)\b|\brm\s",
    re.IGNORECASE)
_READ_ONLY_FLAGS = re.compile(r"--check\b|--diff\b|--list-different\b|(?:^|\s)-l\b")


# Words that introduce commands without saying which kind ("## Development commands"): a command
# that is a check by itself (`go vet ./...`) counts under them; one that merely runs something does not.
_COMMAND_CONTEXT = re.compile(r"\bcommands?\b|\bdevelop\w*|\bworkflow\b|\bpresubmit\b|\bpre-?commit\b|"
                              r"\bquality\b|\bci\b", re.IGNORECASE)


def mentions_check(text: str) -> bool:
    """Does this heading or line talk about tests, linting, type checks, builds or commands?"""
    return bool(_COMMAND_CONTEXT.search(text)) or any(p.search(text) for _, p in _CONTEXT_WORDS)


def context_category(text: str) -> Category | None:
    for category, pattern in _CONTEXT_WORDS:
        if pattern.search(text):
            return category
    return None


def is_mutating(command: str) -> bool:
    match = _MUTATES.search(command)
    if match is None:
        return False
    formatter = re.match(r"\s*(?:ruff\s+format|black|isort|prettier|gofmt|go\s+fmt|cargo\s+fmt)", match.group(0))
    # `black --check .`, `ruff format --check`, `prettier --check` only read.
    return not (formatter and _READ_ONLY_FLAGS.search(command) and "--write" not in command)


# shlex builds each word by repeated string concatenation, quadratic in a long word: 100 kB took 0.5 s
# and 1 MB minutes (keel issue 22). No command a project or task names as a check is this long.
_LONGEST_COMMAND = 8192


def words_of(command: str) -> list[str]:
    """The shell words of ``command``; none for an unbalanced quote or an absurdly long text."""
    if len(command) > _LONGEST_COMMAND:
        return []
    try:
        return shlex.split(command)
    except ValueError:
        return []


def program_of(command: str) -> str | None:
    """The program a simple command starts (env assignments and plain wrappers skipped)."""
    words = words_of(command)
    words = strip_wrappers(words)
    return words[0] if words else None


def _mentions_a_file_not_a_command(head: str) -> bool:
    """`conftest.py` or `tests/test_api.py` in prose names a file; only `./x` or `dir/x.sh` run one."""
    if head.startswith(("./", "/")):
        return False
    if "/" not in head:              # bash looks bare names up on PATH, never in the project
        return head.endswith((".py", ".sh", ".js", ".ts"))
    return head.endswith((".py", ".js", ".ts"))   # `tests/test_api.py` is a file; `.venv/bin/pytest` runs


_WRITING_SCRIPT = re.compile(r"fix|format|fmt|prettier|install|release|publish|deploy|clean", re.IGNORECASE)
_PM_OPTIONS_WITH_VALUE = {"--prefix", "-C", "--dir", "--cwd", "--workspace", "-w", "--filter", "-F"}


def _package_script(args: list[str]) -> str | None:
    """The script `npm --prefix ui run lint`, `pnpm -C web test` or `yarn lint` runs."""
    words: list[str] = []
    skip = False
    for word in args:
        if skip:
            skip = False
        elif word in _PM_OPTIONS_WITH_VALUE:
            skip = True
        elif not word.startswith("-"):
            words.append(word)
    if not words:
        return None
    if words[0] in {"run", "run-script"}:
        return words[1] if len(words) > 1 else None
    return words[0]


def categorize(command: str, context: str = "") -> Category | None:
    """The category of ``command`` as a check, or None when it is not a check keel should run.

    The command itself decides first (`pytest` is a test, `ruff check` static, `make lint` by its
    target, `npm run typecheck` by its script name); a command that merely runs something
    (`python run_tests.py`, `./scripts/verify.sh`) takes its category from the surrounding words."""
    command = command.strip()
    if not command or "\n" in command or is_mutating(command):
        return None
    words = words_of(command)
    if not words:
        return None
    head = words[0].rsplit("/", 1)[-1]
    if head == "make":
        targets = [w for w in words[1:] if not w.startswith("-") and "=" not in w]
        if not targets or targets[0] in {"all", "build"}:
            return "build"
        # Other targets (`make presubmit`, `make install`) say nothing by name: the words around decide.
        return TARGET_CATEGORIES.get(targets[0]) or context_category(context)
    if head in {"npm", "yarn", "pnpm"}:
        script = _package_script(words[1:])
        if script in _SCRIPT_CATEGORIES:
            return _SCRIPT_CATEGORIES[script]
        if script is None or script in _LONG_RUNNING_SCRIPTS or script == "exec" or _WRITING_SCRIPT.search(script):
            return None
        # `test:unit`, `test-ci`, `lint:css`, `typecheck:all`: the name says the kind.
        return context_category(script.replace(":", " ").replace("-", " ")) or context_category(context)
    if _mentions_a_file_not_a_command(words[0]):
        return None
    kind = classify_check(command)
    if kind is None and words[0].startswith("./") and len(words[0]) > 2:
        kind = "run"                 # `./check`: a project script without a suffix
    if kind is None:
        return None
    if kind in _KIND_TO_CATEGORY:
        return _KIND_TO_CATEGORY[kind]
    return context_category(context)
