"""The closing self-check on a change, and tamper detection for tests. Pure: snapshots and their
diff (keel.verify.snapshot) come in, lists of findings go out.

- ``tampered_tests`` blocks: tests are evidence, not clay.
- ``debug_leftovers``, ``stray_files`` and ``unrelated_changes`` are reported, never blocking.
- ``change_summary`` / ``render_changes`` describe the change for the result JSON and event log.
"""

from __future__ import annotations

import fnmatch
import re
from pathlib import PurePosixPath
from typing import Any

from keel.core.request import Request
from keel.core.request.names import DOC_SUFFIXES
from keel.verify.snapshot import FileChange, Snapshot

# -- which files are tests, scripts, or tooling ----------------------------------------------------
TEST_NAMES = ("test_*.py", "*_test.py", "conftest.py", "*_test.go", "*.test.*", "*.spec.*", "*_spec.rb")
TEST_DIRS = frozenset({"tests", "test", "__tests__", "spec"})
# Files whose job is to print: a print() added there is output, not a leftover.
_SCRIPT_DIRS = frozenset({"scripts", "script", "bin", "tools", "examples", "example", "bench", "benchmarks",
                          "docs", "cli", "cmd"})
_SCRIPT_NAMES = ("__main__.py", "setup.py", "manage.py", "cli.py", "main.py", "noxfile.py", "tasks.py",
                 "cli.*", "main.*")


def is_test_file(path: str) -> bool:
    p = PurePosixPath(path)
    return any(fnmatch.fnmatch(p.name, pat) for pat in TEST_NAMES) or any(d in TEST_DIRS for d in p.parts[:-1])


def is_code_file(path: str) -> bool:
    """Neither a test nor a document (keel.core.request.names.DOC_SUFFIXES): where a task's code goes."""
    return not is_test_file(path) and not path.endswith(DOC_SUFFIXES)


def _is_script_or_test(path: str) -> bool:
    p = PurePosixPath(path)
    return (is_test_file(path) or any(fnmatch.fnmatch(p.name, pat) for pat in _SCRIPT_NAMES)
            or any(d in _SCRIPT_DIRS for d in p.parts[:-1]))


# -- debug leftovers ---------------------------------------------------------------------------------
# Always a leftover, wherever added: nobody ships a breakpoint.
_PY_DEBUGGER = re.compile(r"\bbreakpoint\(\)|^\s*import (?:pdb|ipdb|pudb)\b|^\s*from (?:pdb|ipdb|pudb) import|"
                          r"\b(?:pdb|ipdb|pudb)\.set_trace\(")
_JS_DEBUGGER = re.compile(r"^\s*debugger\s*;?\s*$")
_RUST_DBG = re.compile(r"\bdbg!\(")
# Leftovers only in library code (see debug_leftovers for the rule).
_PY_PRINT = re.compile(r"(?<![\w.])print\(")
_JS_CONSOLE = re.compile(r"\bconsole\.(?:log|debug)\(")
_GO_PRINTLN = re.compile(r"\bfmt\.Println\(")
_MAIN_GUARD = re.compile(r"""^if __name__ == ['"]__main__['"]\s*:""", re.MULTILINE)
_GO_MAIN = re.compile(r"^package main\b", re.MULTILINE)
_JS_EXTENSIONS = (".js", ".jsx", ".ts", ".tsx", ".mjs", ".cjs", ".mts", ".cts", ".vue", ".svelte")


def _prints_by_design(change: FileChange, after: Snapshot | None) -> bool:
    """A Python module that already printed before the change, or runs as a script, prints on purpose."""
    text = after.text(change.path) if after is not None else None
    whole = text if text is not None else "\n".join(change.added_text)
    if _MAIN_GUARD.search(whole):
        return True
    if text is None:
        return False
    already = sum(1 for line in text.splitlines() if _PY_PRINT.search(line) and not line.lstrip().startswith("#"))
    return already > sum(1 for line in change.added_text if _PY_PRINT.search(line))


def _go_main(change: FileChange, after: Snapshot | None) -> bool:
    text = after.text(change.path) if after is not None else None
    return bool(_GO_MAIN.search(text if text is not None else "\n".join(change.added_text)))


def debug_leftovers(changes: list[FileChange], after: Snapshot | None = None) -> list[str]:
    """Debugging aids the change added, as "file:line: text".

    Always flagged: ``breakpoint()``, ``import pdb``/``ipdb``/``pudb``, ``pdb.set_trace()``, a JS/TS
    ``debugger;`` statement, Rust ``dbg!(``. Flagged only in library code: Python ``print(``, JS/TS
    ``console.log(``/``console.debug(``, Go ``fmt.Println(`` — library code meaning not a test, not a
    script or tool (``scripts/``, ``bin/``, ``cli.py``, ``__main__.py``, ``setup.py`` …), not a module
    with an ``if __name__ == "__main__":`` guard, not one that printed before the change (``after``,
    when given, supplies the whole file), and for Go not ``package main``. Comment lines are skipped.
    """
    found: list[str] = []
    for change in changes:
        if not change.added_text:
            continue
        path = change.path
        is_py, is_js = path.endswith((".py", ".pyi")), path.endswith(_JS_EXTENSIONS)
        is_rs, is_go = path.endswith(".rs"), path.endswith(".go")
        library = not _is_script_or_test(path)
        print_ok: bool | None = None      # decided on the first print seen, at most once per file
        for number, line in zip(change.added_line_numbers, change.added_text, strict=False):
            code = line.strip()
            if not code or code.startswith(("#", "//", "/*", "*")):
                continue
            hit = bool((is_py and _PY_DEBUGGER.search(line)) or (is_js and _JS_DEBUGGER.match(line))
                       or (is_rs and _RUST_DBG.search(line)))
            if not hit and library and is_py and _PY_PRINT.search(line):
                if print_ok is None:
                    print_ok = _prints_by_design(change, after)
                hit = not print_ok
            elif not hit and library and ((is_js and _JS_CONSOLE.search(line))
                                          or (is_go and _GO_PRINTLN.search(line) and not _go_main(change, after))):
                hit = True
            if hit:
                found.append(f"{path}:{number}: {code[:160]}")
    return found


# -- stray files -------------------------------------------------------------------------------------
_STRAY_PATTERNS = ("*.pyc", "*.pyo", "*.orig", "*.rej", "*.bak", "*.swp", "*.swo", "*~", "nohup.out", "core",
                   "core.[0-9]*", "*.log", ".DS_Store", "Thumbs.db", "a.out", "*.tmp")
# Names a shell typo leaves behind: `x = 1` run as a command makes "=", `cmd 2 > err` makes "2".
_SHELL_MISTAKE = re.compile(r"^(?:[-=+&|<>;:,.'\"`]+|\d|-.*|.*[<>|&;`$].*|\s.*|.*\s)$")


def stray_files(changes: list[FileChange]) -> list[str]:
    """Added files that look generated or accidental: bytecode, editor and patch leftovers, logs,
    core dumps, ``a.out``, and names a shell mistake makes (``=``, ``2``, ``-x``). The snapshot already
    leaves out what .gitignore ignores, so a stray the project ignores anyway is never reported."""
    strays = []
    for change in changes:
        if change.status != "added":
            continue
        name = PurePosixPath(change.path).name
        if any(fnmatch.fnmatch(name, pat) for pat in _STRAY_PATTERNS) or _SHELL_MISTAKE.match(name):
            strays.append(change.path)
    return strays


# -- unrelated changes -------------------------------------------------------------------------------
_ANY_WORD = re.compile(r"\w+")
_MOST_PATTERN_NAMES = 1000


def _stem(path: PurePosixPath) -> str:
    stem = path.name.split(".", 1)[0]
    return path.parent.name if stem == "__init__" else stem


def _test_subject(path: PurePosixPath) -> str | None:
    """The name of what a test file tests: test_util.py, util_test.go, util.test.ts, util.spec.js -> util."""
    name = path.name
    for pattern in (r"^test_(.+?)\.\w+$", r"^(.+?)_test\.\w+$", r"^(.+?)\.(?:test|spec)\.\w+$"):
        if m := re.match(pattern, name):
            return m[1]
    return None


def unrelated_changes(changes: list[FileChange], request: Request) -> list[str]:
    """Changed paths the task does not seem to concern. Reported, never blocking.

    Only when the task names files (``settings.json``, ``src/app.ts``) or identifiers (``slugify()``,
    ``load_settings``, ``KeyError``, ``keel.verify.gate``, words in backticks); when it names nothing,
    nothing is flagged.
    A changed file is related when any of these holds: it is a named file (``app.py`` names
    ``src/app.py`` too) or lies under a named directory; its stem or dotted module path is a word of
    the task (``textutil.py`` for "fix textutil"); it is a test of a named file or identifier
    (``test_textutil.py``); it sits in the same directory as a named file; or its added lines mention
    a named identifier (the new ``def slugify`` for "implement slugify()").
    """
    files, dirs, identifiers = request.files, request.dirs, request.identifiers
    if not files and not dirs and not identifiers:
        return []
    words = request.plain_words
    lowered_ids = {i.lower() for i in identifiers}
    changed = [c.path for c in changes]
    # Where each named file lives: the changed path that matches it, else the directory it was named with.
    named_dirs: set[str] = set()
    for f in files:
        matches = [p for p in changed if p == f or p.endswith("/" + f)]
        named_dirs |= {str(PurePosixPath(p).parent) for p in matches} or {str(PurePosixPath(f).parent)}
    # A one-word name is found as a whole word of a line (a set lookup); only the rest (keel.verify.gate,
    # my-file) go into a pattern, at most _MOST_PATTERN_NAMES of them: compiling an alternation of the
    # tens of thousands of names a long task can hold took seconds.
    word_ids = {i for i in identifiers if _ANY_WORD.fullmatch(i)}
    other_ids = sorted(identifiers - word_ids)[:_MOST_PATTERN_NAMES]
    id_pattern = re.compile(r"\b(?:" + "|".join(map(re.escape, other_ids)) + r")\b") if other_ids else None

    def mentions_name(line: str) -> bool:
        return bool(word_ids.intersection(_ANY_WORD.findall(line)) or (id_pattern and id_pattern.search(line)))

    def related(change: FileChange) -> bool:
        path = PurePosixPath(change.path)
        if any(change.path == f or change.path.endswith("/" + f) or f.endswith("/" + change.path) for f in files):
            return True
        if any(change.path.startswith(d + "/") for d in dirs if d):
            return True
        module = ".".join((*path.parent.parts, _stem(path))).lower()
        if _stem(path).lower() in words or request.mentions(module):
            return True
        subject = _test_subject(path)
        if subject and (subject.lower() in lowered_ids or subject.lower() in words):
            return True
        if str(path.parent) in named_dirs:
            return True
        return any(mentions_name(line) for line in change.added_text)

    return [c.path for c in changes if not related(c)]


# -- tampering with tests ------------------------------------------------------------------------------
def tampered_tests(before: Snapshot, after: Snapshot, protected: set[str], request: Request) -> list[str]:
    """Existing tests and ``protected`` files (the acceptance command's own script, the files the task
    says must not change) that the change modified or deleted, sorted. When the task asks for test
    changes the tests are free, but not the rest: a write-tests task whose checker script was edited to
    pass would otherwise be a false done. A new test file is never tampering, and a file rewritten with
    identical bytes is not a change."""
    def held(path: str) -> bool:
        if request.allows_test_changes:
            return path in protected and (not is_test_file(path) or path in request.kept_files)
        return is_test_file(path) or path in protected
    return sorted(path for path, digest in before.files.items() if held(path) and after.files.get(path) != digest)


# -- change summary ------------------------------------------------------------------------------------
def _plural(n: int, word: str) -> str:
    return f"{n} {word}" + ("" if n == 1 else "s")


def change_summary(changes: list[FileChange]) -> dict[str, Any]:
    """For the result JSON: one entry per file and a git-style diffstat. Unknown line counts
    (binary or very large files) are null per file and count as 0 in the totals."""
    insertions = sum(c.added_lines or 0 for c in changes)
    deletions = sum(c.removed_lines or 0 for c in changes)
    parts = [_plural(len(changes), "file") + " changed"]
    if insertions:
        parts.append(f"{insertions} insertion{'' if insertions == 1 else 's'}(+)")
    if deletions:
        parts.append(f"{deletions} deletion{'' if deletions == 1 else 's'}(-)")
    return {"files": [{"path": c.path, "status": c.status, "added": c.added_lines, "removed": c.removed_lines}
                      for c in changes],
            "diffstat": ", ".join(parts)}


def render_changes(changes: list[FileChange]) -> str:
    """One line per file, e.g. "M app.py (+2 -1)", "A new.py (+12)", "D old.py (-30)", "M logo.png (binary)"."""
    lines = []
    for c in changes:
        letter = {"added": "A", "modified": "M", "deleted": "D"}[c.status]
        if c.added_lines is None or c.removed_lines is None:
            counts = "binary or large"
        else:
            counts = " ".join(s for s in (f"+{c.added_lines}" if c.added_lines else "",
                                          f"-{c.removed_lines}" if c.removed_lines else "") if s) or "no line changes"
        lines.append(f"{letter} {c.path} ({counts})")
    return "\n".join(lines)
