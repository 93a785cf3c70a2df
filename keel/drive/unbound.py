"""The names a Python module reads but never binds: each is a NameError when its line runs.

Why, from the 1.5B model's medium runs (issue 36, py-todo-due): the editor rewrote render.py with
``def render(text, today=TODAY)``, a constant of the test file that render.py never defines. The
module then failed at import, every test with it, and pytest's single collection error scored the
same as the one test that failed before; the rewrite was written and the next four rounds started
from a file that could not be imported. change_file refuses such a rewrite before it lands
(keel.drive.rewrite.rewrite_problem) and names the missing name to the editor.

Pure: the standard library's ``symtable`` resolves scopes as the compiler does (class bodies,
comprehensions, ``global``), so no hand-written scope rules.
"""

from __future__ import annotations

import ast
import builtins
import symtable
import sys

_KNOWN = frozenset(dir(builtins)) | {"__file__", "__name__", "__doc__", "__spec__", "__loader__", "__package__",
                                     "__path__", "__builtins__", "__annotations__", "__cached__", "__dict__"}


def unbound_names(source: str) -> set[str] | None:
    """The global names ``source`` reads that nothing in it binds (assignment, def, class, import,
    ``global`` in a function) and that are not builtins. None when keel cannot tell: the source does
    not compile, or a star import or a write to ``globals()`` may bind anything."""
    try:
        tree = ast.parse(source)
        top = symtable.symtable(source, "<rewrite>", "exec")
    except (SyntaxError, ValueError, RecursionError):
        return None
    if any(isinstance(n, ast.ImportFrom) and any(a.name == "*" for a in n.names) for n in ast.walk(tree)) or \
            any(isinstance(n, ast.Name) and n.id in {"globals", "locals", "exec", "vars"} for n in ast.walk(tree)):
        return None
    bound = {s.get_name() for s in top.get_symbols() if s.is_assigned() or s.is_imported()}
    read = {s.get_name() for s in top.get_symbols() if s.is_referenced()}
    stack = list(top.get_children())
    while stack:
        table = stack.pop()
        stack += table.get_children()
        for s in table.get_symbols():
            if s.is_declared_global() and s.is_assigned():
                bound.add(s.get_name())
            elif s.is_global() and s.is_referenced():
                read.add(s.get_name())
    return read - bound - _KNOWN - _postponed(tree)


def _postponed(tree: ast.Module) -> set[str]:
    """Under ``from __future__ import annotations`` annotations are never evaluated: names that appear
    only there (a type imported under TYPE_CHECKING elsewhere, or not at all) raise nothing."""
    if not any(isinstance(n, ast.ImportFrom) and n.module == "__future__" and any(a.name == "annotations" for a in n.names)
               for n in tree.body):
        return set()
    hints = [n.annotation for n in ast.walk(tree) if isinstance(n, (ast.arg, ast.AnnAssign)) and n.annotation] + \
            [n.returns for n in ast.walk(tree) if isinstance(n, (ast.FunctionDef, ast.AsyncFunctionDef)) and n.returns]
    in_hints = {id(n) for h in hints for n in ast.walk(h)}
    return {n.id for n in ast.walk(tree) if isinstance(n, ast.Name) and id(n) in in_hints} - \
        {n.id for n in ast.walk(tree) if isinstance(n, ast.Name) and id(n) not in in_hints}


def newly_unbound(current: str | None, new: str) -> list[str]:
    """The names ``new`` reads without binding that ``current`` did not already read unbound (a name
    the file already lacked is not the rewrite's doing), sorted; [] when keel cannot tell."""
    after = unbound_names(new)
    if not after:
        return []
    before = unbound_names(current) if current is not None else set()
    return sorted(after - (before or set()))


# Names the 1.5B uses without their import, and where they come from (the module itself for a module).
FROM = {**{name: "typing" for name in ("Any", "Callable", "Dict", "Iterable", "Iterator", "List", "Mapping",
                                       "Optional", "Sequence", "Set", "Tuple", "Union")},
        **{name: "collections" for name in ("Counter", "OrderedDict", "defaultdict", "deque", "namedtuple")},
        "dataclass": "dataclasses", "field": "dataclasses", "reduce": "functools", "lru_cache": "functools"}


def with_imports(source: str, names: list[str]) -> tuple[str, list[str]]:
    """``source`` with the import of each of ``names`` that is a standard library module (``datetime``)
    or a name FROM knows (``List``), after the docstring and ``from __future__`` lines; and the import
    lines added. Why: a rewrite that calls datetime.date without ``import datetime`` is otherwise right,
    and the 1.5B's rewrites of parse.py and render.py were refused for that, four times in one run
    (py-todo-due). Names it does not know stay unbound, and the rewrite is refused with them."""
    lines = [f"import {n}" for n in names if n in sys.stdlib_module_names and n not in FROM]
    lines += [f"from {FROM[n]} import {n}" for n in names if n in FROM]
    if not lines:
        return source, []
    try:
        body = ast.parse(source).body
    except SyntaxError:
        return source, []
    at = 0
    for node in body:
        docstring = isinstance(node, ast.Expr) and isinstance(node.value, ast.Constant) and node is body[0]
        if not (docstring or (isinstance(node, ast.ImportFrom) and node.module == "__future__")):
            break
        at = node.end_lineno or at
    text = source.splitlines(keepends=True)
    return "".join(text[:at] + [line + "\n" for line in lines] + text[at:]), lines
