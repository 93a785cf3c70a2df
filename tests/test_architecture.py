"""keel's layers, drawn from its own imports: no upward import, no circle, no room without a layer.

Every ``import`` counts — at the top, inside functions and under ``TYPE_CHECKING`` — because a
deferred import hides a circle, it does not remove one. docs/layout.md explains the layers.
"""

from __future__ import annotations

import ast
from pathlib import Path

import pytest

KEEL = Path(__file__).resolve().parent.parent / "keel"

# Bottom to top; a module may import its own layer or a lower one. "keel" is the package itself.
LAYERS: list[tuple[str, ...]] = [
    ("keel", "core"),
    ("config", "engine"),
    ("policy", "testing", "outputs"),
    ("context",),
    ("tools",),
    ("verify",),
    ("loop",),
    ("drive",),
    ("trace",),
    ("ext", "eval"),
    ("agent",),
    ("cli",),
]
LAYER = {room: i for i, rooms in enumerate(LAYERS) for room in rooms}
MAX_LINES = 450


def module_name(path: Path, root: Path) -> str:
    parts = list(path.relative_to(root.parent).with_suffix("").parts)
    if parts[-1] == "__init__":
        parts.pop()
    return ".".join(parts)


def room_of(module: str) -> str:
    parts = module.split(".")
    return parts[1] if len(parts) > 1 else parts[0]


def _imported(node: ast.Import | ast.ImportFrom, module: str, is_package: bool, known: set[str]) -> set[str]:
    """The keel modules one import statement loads (``from X import y`` loads X.y when that is a module)."""
    if isinstance(node, ast.Import):
        names = [alias.name for alias in node.names]
    else:
        if node.level:
            base = module.split(".") if is_package else module.split(".")[:-1]
            base = base[:len(base) - (node.level - 1)]
            target = ".".join(base + ([node.module] if node.module else []))
        else:
            target = node.module or ""
        names = [f"{target}.{a.name}" if f"{target}.{a.name}" in known else target for a in node.names]
    found = set()
    for name in names:
        while name and name not in known:   # `import keel.x.y` of a name that is not a module: its module
            name = name.rpartition(".")[0]
        if name:
            found.add(name)
    return found


def import_graph(root: Path) -> dict[str, set[str]]:
    """module -> the keel modules it imports, anywhere in the file."""
    files = {module_name(p, root): p for p in sorted(root.rglob("*.py"))}
    known = set(files)
    graph: dict[str, set[str]] = {}
    for module, path in files.items():
        deps: set[str] = set()
        for node in ast.walk(ast.parse(path.read_text(encoding="utf-8"), str(path))):
            if isinstance(node, ast.Import | ast.ImportFrom):
                deps |= _imported(node, module, path.name == "__init__.py", known)
        graph[module] = deps - {module}
    return graph


def upward_imports(graph: dict[str, set[str]]) -> list[str]:
    found = []
    for module, deps in sorted(graph.items()):
        for dep in sorted(deps):
            here, there = LAYER.get(room_of(module)), LAYER.get(room_of(dep))
            if here is not None and there is not None and there > here:
                found.append(f"{module} ({room_of(module)}) imports {dep} ({room_of(dep)})")
    return found


def circles(graph: dict[str, set[str]]) -> list[list[str]]:
    """Strongly connected components with more than one module (Tarjan, iterative)."""
    index: dict[str, int] = {}
    low: dict[str, int] = {}
    stack: list[str] = []
    on_stack: set[str] = set()
    found: list[list[str]] = []
    for start in sorted(graph):
        if start in index:
            continue
        work = [(start, iter(sorted(graph[start])))]
        index[start] = low[start] = len(index)
        stack.append(start)
        on_stack.add(start)
        while work:
            node, children = work[-1]
            child = next(children, None)
            if child is not None:
                if child not in index:
                    index[child] = low[child] = len(index)
                    stack.append(child)
                    on_stack.add(child)
                    work.append((child, iter(sorted(graph.get(child, ())))))
                elif child in on_stack:
                    low[node] = min(low[node], index[child])
                continue
            work.pop()
            if work:
                low[work[-1][0]] = min(low[work[-1][0]], low[node])
            if low[node] == index[node]:
                component = []
                while True:
                    member = stack.pop()
                    on_stack.discard(member)
                    component.append(member)
                    if member == node:
                        break
                if len(component) > 1:
                    found.append(sorted(component))
    return found


def rooms_without_layer(root: Path) -> list[str]:
    rooms = {p.stem for p in root.iterdir()
             if (p.is_dir() and (p / "__init__.py").exists()) or (p.suffix == ".py" and p.name != "__init__.py")}
    return sorted(rooms - set(LAYER))


def long_files(root: Path) -> list[str]:
    found = []
    for path in sorted(root.rglob("*.py")):
        lines = len(path.read_text(encoding="utf-8").splitlines())
        if lines > MAX_LINES:
            found.append(f"{path.relative_to(root.parent)}: {lines} lines")
    return found


def _report(title: str, items: list[str]) -> str:
    return f"{title} ({len(items)}):\n" + "".join(f"  {item}\n" for item in items)


# ---- keel itself ---------------------------------------------------------------------------------

@pytest.fixture(scope="module")
def graph() -> dict[str, set[str]]:
    return import_graph(KEEL)


def test_every_room_has_a_layer() -> None:
    missing = rooms_without_layer(KEEL)
    print(_report("rooms without a layer", missing))
    assert not missing, _report("rooms without a layer (add them to LAYERS and docs/layout.md)", missing)


def test_no_import_reaches_up_a_layer(graph: dict[str, set[str]]) -> None:
    up = upward_imports(graph)
    print(f"{len(graph)} modules, {sum(len(d) for d in graph.values())} imports between them")
    print(_report("upward imports", up))
    assert not up, _report("upward imports", up)


def test_no_import_circles(graph: dict[str, set[str]]) -> None:
    found = [" <-> ".join(c) for c in circles(graph)]
    print(_report("import circles", found))
    assert not found, _report("import circles", found)


def test_no_file_is_over_the_line_limit() -> None:
    long = long_files(KEEL)
    print(_report(f"files over {MAX_LINES} lines", long))
    assert not long, _report(f"files over {MAX_LINES} lines", long)


# ---- the walker sees what it must (a fake package on disk) ---------------------------------------

def _package(root: Path, files: dict[str, str]) -> Path:
    pkg = root / "keel"
    for name, text in files.items():
        path = pkg / name
        path.parent.mkdir(parents=True, exist_ok=True)
        path.write_text(text, encoding="utf-8")
    for d in [pkg, *[p for p in pkg.rglob("*") if p.is_dir()]]:
        (d / "__init__.py").touch()
    return pkg


def test_the_walker_finds_hidden_relative_and_module_imports(tmp_path: Path) -> None:
    pkg = _package(tmp_path, {
        "core/low.py": "def f():\n    from keel.cli import main\n",                      # inside a function
        "config.py": "from typing import TYPE_CHECKING\nif TYPE_CHECKING:\n    from keel.tools.x import A\n",
        "tools/x.py": "from ..cli.main import run\nfrom . import y\n",                       # relative imports
        "tools/y.py": "import keel.core\n",
        "cli/main.py": "from keel.tools import x\n",                                       # `from X import module`
        "stray.py": "",
    })
    graph = import_graph(pkg)
    assert graph["keel.core.low"] == {"keel.cli.main"}
    assert graph["keel.config"] == {"keel.tools.x"}
    assert graph["keel.tools.x"] == {"keel.cli.main", "keel.tools.y"}
    assert graph["keel.cli.main"] == {"keel.tools.x"}
    assert graph["keel.tools.y"] == {"keel.core"}
    up = upward_imports(graph)
    assert "keel.core.low (core) imports keel.cli.main (cli)" in up
    assert "keel.config (config) imports keel.tools.x (tools)" in up
    assert "keel.tools.x (tools) imports keel.cli.main (cli)" in up
    assert circles(graph) == [["keel.cli.main", "keel.tools.x"]]
    assert rooms_without_layer(pkg) == ["stray"]


def test_the_line_limit_counts_every_file(tmp_path: Path) -> None:
    pkg = _package(tmp_path, {"tools/big.py": "x = 1\n" * (MAX_LINES + 1), "tools/ok.py": "x = 1\n" * MAX_LINES})
    assert long_files(pkg) == [f"keel/tools/big.py: {MAX_LINES + 1} lines"]
