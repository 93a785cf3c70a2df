"""Where a change aimed at the project's tests should go instead: the code the test file tests, and
the assertion that fails.

Why: measured on Qwen2.5-Coder-1.5B, a bare refusal ("the file holds the project's tests … change the
code they test") did not redirect the model: after reading the test file it sent the same change_file
for the test four times in a row until the run stopped. A small model follows a concrete next step;
this module finds one (the module the test imports, the line that fails) so the refusal can name it.

Naming the module was not enough either: in the whole-suite batch the 1.5B model sent a change_file of
the test file three times after being told which module to change (py-cli-json-output). So when the
test file tests exactly one module, change_file makes the change there itself (``redirect_to``), with a
note built from the task rather than the model's test-oriented one, and says so in its result; with
several modules it refuses as before. When the one module it imports is not written yet but its
package is there (``from shop.validators import …`` with shop/ a package: py-extract-validator on the
1.5B sent the same test-file change three times), the change goes to that new module (``missing_module``).

Pure core: ``modules_under_test`` (a test file's text and the workspace's file list in, the modules it
tests out), ``redirect_to`` (which one a change goes to) and ``failing_assertion`` (a check's output
in, its first failing assertion out, a few lines); ``redirect`` words the refusal.
``redirect_or_refusal`` is the shell a tool calls.
"""

from __future__ import annotations

import ast
import posixpath
import re
from collections.abc import Collection, Sequence
from dataclasses import dataclass
from pathlib import Path, PurePosixPath
from typing import TYPE_CHECKING

from keel.core.request import Request
from keel.core.request.names import DOC_SUFFIXES
from keel.verify.failing import failing_assertion
from keel.verify.selfcheck import is_code_file, is_test_file

if TYPE_CHECKING:
    from keel.verify.gate import CheckOutcome

MAX_MODULES = 3            # named in the refusal
MAX_LISTED_FILES = 50_000  # a workspace listing stops here (the refusal must stay cheap)
SAVED_HEAD_BYTES = 256 * 1024
_JS_EXTS = (".js", ".mjs", ".cjs", ".ts", ".tsx", ".jsx", ".mts", ".cts")


@dataclass(frozen=True)
class UnderTest:
    """A workspace file the test file tests, and the names it takes from it (may be empty)."""

    path: str
    names: tuple[str, ...] = ()


# -- the modules a test file tests -------------------------------------------------------------------
def modules_under_test(test_path: str, text: str, files: Collection[str]) -> list[UnderTest]:
    """The workspace files ``test_path`` imports (Python imports, relative ones too; JS ``require`` and
    ``import … from`` of relative paths), in import order; else the file its name maps to
    (test_calc.py → calc.py, calc.test.js → calc.js). Only paths in ``files`` (workspace-relative,
    posix) count; a path that leaves the workspace, a test file and the file itself never do."""
    found: dict[str, list[str]] = {}
    suffix = PurePosixPath(test_path).suffix
    pairs = _python_imports(test_path, text, files) if suffix == ".py" else \
        _js_imports(test_path, text, files) if suffix in _JS_EXTS else []
    for path, names in pairs:
        if path != test_path and not is_test_file(path):
            merged = found.setdefault(path, [])
            merged += [n for n in names if n not in merged]
    if not found and (by_name := _by_name(test_path, files)):
        found[by_name] = []
    return [UnderTest(path, tuple(names)) for path, names in found.items()]


def _inside(path: str) -> str | None:
    """``path`` normalised, or None when it leaves the workspace (``..``) or is absolute."""
    norm = posixpath.normpath(path)
    return None if norm.startswith(("../", "/")) or norm in ("..", ".") else norm


def _first_file(candidates: Sequence[str], files: Collection[str]) -> str | None:
    for candidate in candidates:
        if (norm := _inside(candidate)) is not None and norm in files:
            return norm
    return None


def _python_module(base_dirs: Sequence[str], dotted: str, files: Collection[str]) -> str | None:
    rel = dotted.replace(".", "/")
    return _first_file([posixpath.join(d, rel + ext) for d in base_dirs for ext in (".py", "/__init__.py")], files)


def _import_bases(test_path: str, level: int) -> list[str]:
    """Where a module imported by ``test_path`` may be found, nearest first: the package ``level`` dots
    name, or (``level`` 0) the test's folder, each folder above it, then src/ and lib/."""
    here = posixpath.dirname(test_path)
    if level:
        return [posixpath.join(here, *[".."] * (level - 1))]
    ancestors = [here]
    while ancestors[-1]:
        ancestors.append(posixpath.dirname(ancestors[-1]))
    return [*ancestors, "src", "lib"]


def _python_imports(test_path: str, text: str, files: Collection[str]) -> list[tuple[str, list[str]]]:
    out: list[tuple[str, list[str]]] = []
    for module, level, names, alias in _python_import_statements(text):
        bases = _import_bases(test_path, level)
        rest = []
        for name in names:   # `from pkg import mod`: mod is a module of its own when its file exists
            sub = ".".join(p for p in (module, name) if p)
            if (path := _python_module(bases, sub, files)) is not None:
                out.append((path, []))
            else:
                rest.append(name)
        if module and (rest or not names) and (path := _python_module(bases, module, files)) is not None:
            used = rest or sorted(set(re.findall(rf"\b{re.escape(alias or module)}\.(\w+)", text)))
            out.append((path, [n for n in used if n != "*"]))
    return out


def _python_import_statements(text: str) -> list[tuple[str, int, list[str], str | None]]:
    """(module, level, imported names, alias) per import, in order; a file that does not parse is
    read line by line (a test the model broke still names its imports)."""
    try:
        tree = ast.parse(text)
    except (SyntaxError, ValueError, MemoryError, RecursionError):   # deep nesting: MemoryError
        return _python_import_lines(text)
    out: list[tuple[int, tuple[str, int, list[str], str | None]]] = []
    for node in ast.walk(tree):
        if isinstance(node, ast.ImportFrom):
            out.append((node.lineno, (node.module or "", node.level, [a.name for a in node.names], None)))
        elif isinstance(node, ast.Import):
            out += [(node.lineno, (a.name, 0, [], a.asname)) for a in node.names]
    return [statement for _, statement in sorted(out, key=lambda p: p[0])]


# [ \t]* at a line's start, not \s*: from every line start of many blank lines, \s* read all the rest.
_PY_FROM = re.compile(r"^[ \t]*from\s+(\.*)([\w.]*)\s+import\s+\(?([\w\s,*]{1,2000})", re.M)
_PY_IMPORT = re.compile(r"^[ \t]*import\s+([\w.]+)(?:\s+as\s+(\w+))?", re.M)


def _python_import_lines(text: str) -> list[tuple[str, int, list[str], str | None]]:
    out: list[tuple[int, tuple[str, int, list[str], str | None]]] = []
    for m in _PY_FROM.finditer(text):
        names = [n.split()[0] for n in m[3].split(",") if n.strip()]
        out.append((m.start(), (m[2], len(m[1]), names, None)))
    out += [(m.start(), (m[1], 0, [], m[2])) for m in _PY_IMPORT.finditer(text)]
    return [statement for _, statement in sorted(out, key=lambda p: p[0])]


# Bounded: from each of many unclosed `{` or `import`s, an unbounded class read the rest of the file.
_JS_REQUIRE = re.compile(r"""(?:\{([^}]{0,2000})\}\s*=\s*)?require\(\s*['"](\.{1,2}/[^'"]{1,500})['"]\s*\)""")
_JS_IMPORT = re.compile(r"""\bimport\s+(?:([\w$\s{},*]{1,2000}?)\s+from\s+)?['"](\.{1,2}/[^'"]{1,500})['"]""")
_JS_EXPORT_FROM = re.compile(r"""\bexport\s+[\w$\s{},*]{1,2000}?\s+from\s+['"](\.{1,2}/[^'"]{1,500})['"]""")


def _js_imports(test_path: str, text: str, files: Collection[str]) -> list[tuple[str, list[str]]]:
    here = posixpath.dirname(test_path)
    found = [(m.start(), m[2], _js_names(m[1] or "")) for m in _JS_REQUIRE.finditer(text)]
    found += [(m.start(), m[2], _js_names(b[1]) if (b := re.search(r"\{([^}]*)\}", m[1] or "")) else [])
              for m in _JS_IMPORT.finditer(text)]
    found += [(m.start(), m[1], []) for m in _JS_EXPORT_FROM.finditer(text)]
    out = []
    for _, spec, names in sorted(found):
        target = posixpath.join(here, spec)
        stem, ext = posixpath.splitext(target)
        candidates = [target] if ext in _JS_EXTS else []
        if ext in (".js", ".mjs", ".cjs", ".jsx"):   # TypeScript imports `./calc.js` for calc.ts
            candidates += [stem + e for e in (".ts", ".tsx", ".mts", ".cts")]
        candidates += [target + e for e in _JS_EXTS] + [posixpath.join(target, "index" + e) for e in _JS_EXTS]
        if (path := _first_file(candidates, files)) is not None:
            out.append((path, names))
    return out


def _js_names(body: str) -> list[str]:
    """The names inside the braces of `{ add, sub as minus }` or `{ add, sub: minus } = require(…)`."""
    names = []
    for part in body.split(","):
        name = re.split(r"\s+as\s+|\s*:\s*", part.strip())[0].strip()
        if re.fullmatch(r"[A-Za-z_$][\w$]*", name) and name != "default":
            names.append(name)
    return names


_TEST_NAME = re.compile(r"^(?:test_(?P<a>.+)\.py|(?P<b>.+)_test\.(?P<bx>py|go)|(?P<c>.+)_spec\.rb"
                        r"|(?P<d>.+)\.(?:test|spec)\.(?P<dx>\w+))$")


def _by_name(test_path: str, files: Collection[str]) -> str | None:
    """The file ``test_path``'s name maps to, nearest first: its own folder, then the shortest path."""
    m = _TEST_NAME.match(PurePosixPath(test_path).name)
    if m is None:
        return None
    target = (f"{m['a']}.py" if m["a"] else f"{m['b']}.{m['bx']}" if m["b"] else f"{m['c']}.rb" if m["c"]
              else f"{m['d']}.{m['dx']}")
    here = posixpath.dirname(test_path)
    matches = [f for f in files if posixpath.basename(f) == target and not is_test_file(f) and _inside(f) == f]
    matches.sort(key=lambda f: (posixpath.dirname(f) != here, f.count("/"), f))
    return matches[0] if matches else None



def missing_module(test_path: str, text: str, files: Collection[str]) -> str | None:
    """The one Python module ``test_path`` imports that is not in ``files`` while its package is (a folder
    with an ``__init__.py``, looked for where the test's imports are, ``_import_bases``): where code the
    test needs is to be written. None for a JavaScript test, for an import of something outside the workspace (no package
    of it here), or when more than one is missing."""
    if PurePosixPath(test_path).suffix != ".py":
        return None
    missing: dict[str, None] = {}   # in import order, once each
    for module, level, names, _ in _python_import_statements(text):
        if not module or "." not in module and not level:
            continue   # `import os`, `from calc import x`: no package to put it in
        bases = _import_bases(test_path, level)
        if any(_python_module(bases, ".".join(p for p in (module, n) if p), files) for n in names) or \
                _python_module(bases, module, files):
            continue
        package, _, leaf = module.rpartition(".")
        for base in bases:
            folder = _inside(posixpath.join(base, package.replace(".", "/")))
            if folder and f"{folder}/__init__.py" in files:
                missing[f"{folder}/{leaf}.py"] = None
                break
    return next(iter(missing)) if len(missing) == 1 else None


# -- the redirect ------------------------------------------------------------------------------------
def redirect_to(tested: Sequence[UnderTest], protected: Collection[str]) -> str | None:
    """The file a change aimed at a test file goes to instead: the one module it tests (None when it
    tests several, so the choice is the model's, or none)."""
    candidates = [t.path for t in tested if t.path not in protected]
    return candidates[0] if len(candidates) == 1 and len(tested) == 1 else None


def redirect_note(test_path: str, target: str) -> str:
    """The change request sent for the redirected change: the task's, not the model's test edit."""
    return (f"Make the change the task asks for in {target}, so that the tests in {test_path} pass as they are "
            "(the tests stay unchanged).")


def redirect_notice(test_path: str, target: str) -> str:
    """The first line of the redirected change's result."""
    if is_test_file(target) and not is_test_file(test_path):   # from a held file (held_redirect)
        return f"{test_path} stays as it is, so the change was made in {target}, the tests the task asks for:\n"
    if test_path.endswith(DOC_SUFFIXES) and not is_test_file(test_path):
        return f"{test_path} is the task's spec and stays as it is, so the change was made in {target}:\n"
    return (f"{test_path} holds the project's tests and the task does not ask to change them, so the change was "
            f"made in {target}, the code they test, from the task and the failing tests:\n")


# -- the refusal -------------------------------------------------------------------------------------
def redirect(test_path: str, tested: Sequence[UnderTest], assertion: str, tool: str = "change_file") -> str:
    """The answer to a change aimed at ``test_path``: where the change belongs, and what fails.

    No example values here: a 1.5B model sent an example's words as its own change (see ChangeArgs
    in keel/drive/change.py). The one next step comes last, as the model follows what it read last."""
    parts = [f"{test_path} holds the project's tests: they are the evidence that the task is done, and the "
             "task does not ask to change them."]
    shown = list(tested)[:MAX_MODULES]
    if shown:
        where = " and ".join(t.path + (f" (imported: {', '.join(t.names[:6])})" if t.names else "") for t in shown)
        parts.append(f"The code it tests is in {where}.")
    text = " ".join(parts)
    if assertion:
        text += " The failing check:\n" + "".join(f"    {line}\n" for line in assertion.splitlines())
    else:
        text += " "
    if shown:
        return text + f"Call {tool} with path {shown[0].path} and say what must change there."
    return text + "Change the code they test."


# -- the shell: from a run's workspace and checks ----------------------------------------------------
def workspace_files(workspace: Path) -> set[str]:
    """The workspace's files as relative posix paths: the ignore rules' walk, which follows no
    symlink and never leaves the workspace, without the caches and environments snapshots skip."""
    from keel.context.ignore import IgnoreRules
    from keel.verify.snapshot import EXTRA_SKIPPED_DIRS

    rules = IgnoreRules(workspace)
    prefix = len(rules.root.rstrip("/")) + 1
    found: set[str] = set()
    for entry in rules.walk_files(rules.root, lambda e, is_dir: False if is_dir and e.name in EXTRA_SKIPPED_DIRS
                                  else None):
        found.add(entry.path[prefix:])
        if len(found) >= MAX_LISTED_FILES:
            break
    return found


def redirect_or_refusal(workspace: Path, test_path: str, text: str, protected: Collection[str],
                        outcomes: Sequence[CheckOutcome] | None) -> tuple[str | None, str]:
    """For a change aimed at the test file ``test_path`` (its text ``text``): the file it goes to and
    the change to ask there (``redirect_to``, ``redirect_note``), or None and the refusal."""
    files = workspace_files(workspace)   # one walk for every answer
    tested = modules_under_test(test_path, text, files)
    if (target := redirect_to(tested, protected)) is not None:
        return target, redirect_note(test_path, target)
    if not tested and (target := missing_module(test_path, text, files)) is not None and target not in protected:
        return target, redirect_note(test_path, target)
    return None, protected_test_refusal(test_path, text, tested, outcomes)


def protected_test_refusal(test_path: str, text: str, tested: Sequence[UnderTest],
                           outcomes: Sequence[CheckOutcome] | None, tool: str = "change_file") -> str:
    """The refusal for a change to the test file ``test_path`` (its text ``text``, the modules it tests
    ``tested``): those modules and the first failing assertion of ``outcomes`` (the last check run
    keel knows, None: none)."""
    assertion = ""
    for o in sorted(outcomes or (), key=lambda o: o.check.category != "test"):   # tests first, then the rest
        if o.passed or o.refused:
            continue
        saved = _saved_head(o.output_path) if o.output_path else None
        assertion = (failing_assertion(saved, {test_path: text}) if saved else "") or \
            failing_assertion(o.summary, {test_path: text})
        if assertion:
            break
    return redirect(test_path, tested, assertion, tool)


def _saved_head(path: str) -> str | None:
    """The start of a saved check output (the first failure is near it; the file may be 16 MB)."""
    try:
        with open(path, "rb") as f:
            return f.read(SAVED_HEAD_BYTES).decode("utf-8", errors="replace")
    except OSError:
        return None


def same_name_elsewhere(shown: str, files: Collection[str]) -> str | None:
    """For a change aimed at ``shown``, a file that does not exist: the one file of ``files`` (the
    workspace's, relative posix paths) with its name in another folder, or None (none, or several:
    ``__init__.py`` is everywhere).

    Why: on py-extract-validator the 1.5B aimed its change to shop/accounts.py at accounts.py, and
    change_file wrote a new top-level module the tests never import, without a word."""
    name = PurePosixPath(shown).name
    same = [f for f in files if PurePosixPath(f).name == name and f != shown]
    return same[0] if len(same) == 1 else None


def elsewhere(workspace: Path, shown: str) -> str | None:
    """What change_file says when ``shown`` does not exist and one file of its name does elsewhere."""
    twin = same_name_elsewhere(shown, workspace_files(workspace))
    if twin is None:
        return None
    return (f"{shown} does not exist, and {twin} does: to change it, call change_file with path {twin}. "
            f"To create a new file {shown} instead, send this same call again.")


def spec_redirect(doc: str, named: Sequence[str], files: Collection[str],
                  protected: Collection[str]) -> tuple[str | None, str]:
    """For a change aimed at ``doc``, a document the request makes the spec of the work: the one code
    file the request ``named`` that exists (neither a test nor a document) and the note to ask there;
    None and the refusal otherwise.

    Why: on js-spec-brackets ("do the exercise in INSTRUCTIONS.md: brackets.js has the two functions as
    stubs") the 1.5B aimed four change_file calls at INSTRUCTIONS.md and never touched brackets.js."""
    code = [f for f in named if f in files and is_code_file(f) and f not in protected]
    if len(code) == 1:
        return code[0], f"Write the code {doc} asks for in {code[0]}; {doc} is the task's spec and stays as it is."
    where = " or ".join(code) or "the project's source files"
    return None, (f"{doc} is the task's spec: it says what to build, and stays as it is. The code goes in {where}: "
                  "call change_file with that file's path.")


def held_redirect(held: str, request: Request, files: Collection[str]) -> tuple[str | None, str]:
    """For a change aimed at ``held``, a file the task says must not change or (in a task that asks for
    tests) the script its checks run: the one test file the task names when it asks for tests, and the
    note to ask there; None and the refusal otherwise.

    Why: js-write-tests on the 1.5B ("write node:test tests … Don't touch duration.js"): its new tests
    failed against duration.js, and it aimed six change_file calls at duration.js until the wall clock."""
    why = ("the task says not to change it" if held in request.kept_files
           else "the task's checks run it, so it is part of the evidence")
    tests = [f for f in request.files if is_test_file(f) and f not in request.kept_files]
    if request.allows_test_changes and len(tests) == 1:
        return tests[0], (f"Write the tests the task asks for in {tests[0]}. {held} stays as it is ({why}): "
                          f"a test that fails against it expects what {held} does not do, so make each test "
                          f"expect what {held} does, as its comments say.")
    others = [f for f in request.files if f in files and f != held and f not in request.kept_files
              and is_code_file(f)]
    where = f"change {' or '.join(others)}" if others else "change the other files the task concerns"
    return None, f"{held} stays as it is: {why}. Do not change it; {where} instead."


def evidence_redirect(workspace: Path, shown: str, text: str, request: Request, protected: Collection[str],
                      outcomes: Sequence[CheckOutcome] | None) -> tuple[str | None, str] | None:
    """Where a change aimed at the task's evidence goes instead: a test file (unless the task asks for
    test changes) or a document the task makes its spec; (None, the refusal) when nowhere; None when
    ``shown`` is neither."""
    if shown in request.kept_files or (request.allows_test_changes and shown in protected and not is_test_file(shown)):
        return held_redirect(shown, request, workspace_files(workspace))
    if (is_test_file(shown) or shown in protected) and not request.allows_test_changes:
        return redirect_or_refusal(workspace, shown, text, protected, outcomes)
    if shown in request.spec_documents:
        return spec_redirect(shown, request.files, workspace_files(workspace), protected)
    return None
