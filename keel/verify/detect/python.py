"""Python: ruff, flake8, mypy, pyright, pytest or unittest, and lone test scripts.

Evidence comes from the project's own files — pyproject.toml, setup.cfg, tox.ini, noxfile.py,
ruff.toml, mypy.ini, pytest.ini, pyrightconfig.json, .flake8, requirements files, conftest.py and the
test files themselves. tox and nox are never run (they build environments and may need the
network); what they mention only counts as evidence for the tools they run.
"""

from __future__ import annotations

import configparser
import contextlib
import os
import re
import shutil
import tomllib
from collections.abc import Callable, Iterable
from pathlib import Path
from typing import Any

from keel.policy.runner import Job, neutral_dir, run
from keel.policy.sandbox import SandboxPolicy
from keel.verify.detect.common import Findings, read_text

# (interpreter path, module name) -> importable? Injected by tests; see default_module_probe.
ModuleProbe = Callable[[str, str], bool]

_VENV_DIRS = (".venv", "venv")
_MAX_SCRIPTS = 5
_TEST_FILE = re.compile(r"^(test_.+|.+_test)\.py$")
_REQ_NAME = re.compile(r"\s*([A-Za-z0-9][A-Za-z0-9_.-]*)")
_MAIN_GUARD = re.compile(r"""^if\s+__name__\s*==\s*["']__main__["']\s*:""", re.MULTILINE)
# Indentation within the line ([^\S\n]): with \s, each line start rescanned every blank line after it,
# quadratic in a run of blank lines (keel issue 22); for a search, the same texts match.
_FRAMEWORK_TEST = re.compile(r"^[^\S\n]*(?:async\s+)?def\s+test\w*\s*\(|^[^\S\n]*class\s+Test\w*", re.MULTILINE)
_IMPORTS_PYTEST = re.compile(r"^[^\S\n]*(?:import|from)\s+pytest\b", re.MULTILINE)
_USES_UNITTEST = re.compile(r"\bunittest\b|\bTestCase\b")


def default_module_probe(interpreter: str, module: str) -> bool:
    """``make_module_probe``'s probe under the default sandbox policy."""
    return make_module_probe(None)(interpreter, module)


def make_module_probe(policy: SandboxPolicy | None) -> ModuleProbe:
    """Can ``interpreter`` import ``module``?

    A virtualenv (pyvenv.cfg next to its bin/) is inspected on disk and never executed: a venv in
    the workspace came with the project, and starting its interpreter would run its ``.pth`` files
    (or a fake ``python``). Any other interpreter is asked in a child process: the checks run with
    the project's interpreter, usually not the one running keel, so an in-process
    ``importlib.util.find_spec`` would answer for the wrong environment; ``find_spec`` does not
    import the module. That child goes through keel's runner like a command (``policy``'s tier,
    the scrubbed environment, limits), in isolated mode (``-I``: no current directory, user site or
    PYTHON* variables on its path) and in an empty directory of its own, so no planted module that
    shadows the standard library can run."""

    def probe(interpreter: str, module: str) -> bool:
        venv = Path(interpreter).parent.parent
        if (venv / "pyvenv.cfg").is_file():
            return venv_has_module(venv, module)
        return _ask_interpreter(interpreter, module, policy)

    return probe


def _workspace_safe(workspace: Path, probe: ModuleProbe) -> ModuleProbe:
    """``probe``, except that an interpreter inside the workspace is never started: its venv is
    inspected on disk (see default_module_probe)."""

    def safe(interpreter: str, module: str) -> bool:
        if Path(interpreter).is_relative_to(workspace):
            return venv_has_module(Path(interpreter).parent.parent, module)
        return probe(interpreter, module)

    return safe


def _ask_interpreter(interpreter: str, module: str, policy: SandboxPolicy | None) -> bool:
    probe = "import importlib.util, sys; sys.exit(0 if importlib.util.find_spec(sys.argv[1]) else 1)"
    neutral = neutral_dir()
    try:
        done = run(Job(neutral, argv=[interpreter, "-I", "-c", probe, module], policy=policy, timeout_s=15,
                       aftercare=False))
    except OSError:
        return False
    finally:
        shutil.rmtree(neutral, ignore_errors=True)
    return done.exit_code == 0


def venv_has_module(venv: Path, module: str) -> bool:
    """Is ``module`` installed for the virtualenv (a package, a module file, or an editable
    install's dist-info) — in its own site-packages, or in its base interpreter's when the venv
    was made with --system-site-packages (pip then installs nothing the base already has)?"""
    roots = [venv]
    base = _system_site_base(venv / "pyvenv.cfg")
    if base is not None:
        roots.append(base)
    for root in roots:
        for site in [*root.glob("lib/python*/site-packages"), *root.glob("Lib/site-packages")]:
            if (site / module).is_dir() or (site / f"{module}.py").is_file() or any(site.glob(f"{module}-*.dist-info")):
                return True
    return False


def _system_site_base(cfg: Path) -> Path | None:
    """The base installation a ``--system-site-packages`` venv also imports from (pyvenv.cfg's
    ``home`` is the base interpreter's bin directory), else None."""
    text = read_text(cfg) or ""
    values = dict(line.split("=", 1) for line in text.splitlines() if "=" in line)
    values = {k.strip().lower(): v.strip() for k, v in values.items()}
    if values.get("include-system-site-packages", "").lower() != "true" or not values.get("home"):
        return None
    return Path(values["home"]).parent


class _Config:
    """The parsed Python config files of one workspace (missing or broken files are empty)."""

    def __init__(self, workspace: Path, found: Findings) -> None:
        self.workspace = workspace
        self.pyproject: dict[str, Any] = {}
        text = read_text(workspace / "pyproject.toml")
        if text is not None:
            try:
                self.pyproject = tomllib.loads(text)
            except tomllib.TOMLDecodeError as e:
                found.hint(f"pyproject.toml does not parse ({e}); its tool settings were not read")
        self.setup_cfg = _ini(workspace / "setup.cfg")
        self.tox_ini = _ini(workspace / "tox.ini")
        self.tox_text = read_text(workspace / "tox.ini") or ""
        self.nox_text = read_text(workspace / "noxfile.py") or ""
        self.deps = _dependency_names(self.pyproject) | _requirements_names(workspace)

    def tool_table(self, name: str) -> dict[str, Any] | None:
        tool = self.pyproject.get("tool")
        table = tool.get(name) if isinstance(tool, dict) else None
        return table if isinstance(table, dict) else None

    def has(self, name: str) -> bool:
        return (self.workspace / name).is_file()

    def evidence(self, tool: str, *, table: str | None = None, files: Iterable[str] = (),
                 sections: Iterable[tuple[str, str]] = ()) -> list[str]:
        """Why we believe the project uses ``tool``, strongest evidence first (empty: it does not)."""
        why: list[str] = []
        if table and self.tool_table(table) is not None:
            why.append(f"pyproject.toml has [tool.{table}]")
        why += [f"{name} exists" for name in files if self.has(name)]
        for filename, section in sections:
            parser = self.setup_cfg if filename == "setup.cfg" else self.tox_ini
            if parser.has_section(section):
                why.append(f"{filename} has [{section}]")
        if tool in self.deps:
            why.append(f"{tool} is a declared dependency")
        word = re.compile(rf"\b{re.escape(tool)}\b")
        if word.search(self.tox_text) and not any(w.startswith("tox.ini") for w in why):
            why.append(f"tox.ini mentions {tool}")
        if word.search(self.nox_text):
            why.append(f"noxfile.py runs {tool}")
        return why


def _ini(path: Path) -> configparser.RawConfigParser:
    parser = configparser.RawConfigParser(strict=False, interpolation=None)
    text = read_text(path)
    if text is not None:
        with contextlib.suppress(configparser.Error):   # a broken file is as good as none here
            parser.read_string(text)
    return parser


def _requirement_name(spec: Any) -> str | None:
    match = _REQ_NAME.match(spec) if isinstance(spec, str) else None
    return match.group(1).lower().replace("_", "-") if match else None


def _dependency_names(pyproject: dict[str, Any]) -> set[str]:
    """Every package named in pyproject's dependency lists (PEP 621, PEP 735, Poetry, PDM, uv)."""
    specs: list[Any] = []
    project = pyproject.get("project", {})
    if isinstance(project, dict):
        specs += list(project.get("dependencies", []) or [])
        for group in (project.get("optional-dependencies") or {}).values():
            specs += list(group or [])
    for group in (pyproject.get("dependency-groups") or {}).values():
        specs += list(group or []) if isinstance(group, list) else []
    tool = pyproject.get("tool", {}) if isinstance(pyproject.get("tool"), dict) else {}
    poetry = tool.get("poetry", {}) if isinstance(tool.get("poetry"), dict) else {}
    for table in (poetry.get("dependencies"), poetry.get("dev-dependencies")):
        specs += list(table or {})
    for group in (poetry.get("group") or {}).values():
        specs += list((group or {}).get("dependencies") or {}) if isinstance(group, dict) else []
    for group in ((tool.get("pdm") or {}).get("dev-dependencies") or {}).values():
        specs += list(group or [])
    specs += list((tool.get("uv") or {}).get("dev-dependencies") or [])
    return {name for name in map(_requirement_name, specs) if name}


def _requirements_names(workspace: Path) -> set[str]:
    files = [*workspace.glob("requirements*.txt"), *workspace.glob("*requirements.txt"),
             *(workspace / "requirements").glob("*.txt")]
    names: set[str] = set()
    for path in sorted(set(files))[:10]:
        for line in (read_text(path) or "").splitlines():
            if not line.lstrip().startswith(("#", "-")):
                name = _requirement_name(line)
                if name:
                    names.add(name)
    return names


def _interpreter(workspace: Path, found: Findings) -> tuple[str, str, str] | None:
    """(command spelling, path to probe, why) of the interpreter the checks run with."""
    for venv in _VENV_DIRS:
        python = workspace / venv / "bin" / "python"
        if python.exists():
            return f"{venv}/bin/python", str(python), f"the workspace's virtualenv {venv}/"
    for name in ("python3", "python"):
        at = found.which(name)
        if at and not os.path.isabs(at):   # inside the workspace (workspace_which answers relative paths)
            return at, str(workspace / at), f"the workspace's {at}"
        if at:
            return name, at, f"{name} at {at}"
    return None


def _top_level_test_files(workspace: Path) -> list[Path]:
    try:
        return sorted(p for p in workspace.iterdir() if p.is_file() and _TEST_FILE.match(p.name))
    except OSError:
        return []


def _is_script(text: str) -> bool:
    """A test file meant to be run as a program rather than collected by a framework."""
    if _IMPORTS_PYTEST.search(text):
        return False
    return bool(_MAIN_GUARD.search(text)) or not _FRAMEWORK_TEST.search(text)


def _test_dir_files(workspace: Path) -> tuple[str | None, list[Path]]:
    for name in ("tests", "test"):
        folder = workspace / name
        if folder.is_dir():
            files = sorted(p for p in folder.rglob("*.py") if _TEST_FILE.match(p.name))[:200]
            if files:
                return name, files
    return None, []


_NOT_PROJECT_DIRS = {"node_modules", "venv", "__pycache__", "build", "dist", "site-packages"}


def _nested_test_file(workspace: Path, max_depth: int = 6) -> Path | None:
    """A test file below the top level (src/pkg/tests/test_x.py), or None; vendored trees skipped."""
    for root, dirs, files in os.walk(workspace):
        depth = len(Path(root).relative_to(workspace).parts)
        dirs[:] = sorted(d for d in dirs if not d.startswith(".") and d not in _NOT_PROJECT_DIRS
                         and depth < max_depth)
        if depth > 0:
            match = next((f for f in sorted(files) if _TEST_FILE.match(f)), None)
            if match:
                return Path(root) / match
    return None


def _src_layout(workspace: Path, config: _Config) -> tuple[str, str]:
    """pytest's arguments for a src layout (src/pkg/…) whose config does not put src on the path: the
    tests import the package, which is not installed in every checkout (``-o pythonpath=src``)."""
    src = workspace / "src"
    try:
        packages = src.is_dir() and any((d / "__init__.py").is_file() or d.suffix == ".py" for d in src.iterdir())
    except OSError:
        packages = False
    if not packages:
        return "", ""
    table = config.tool_table("pytest") or {}
    ini = table.get("ini_options")
    if (isinstance(ini, dict) and "pythonpath" in ini) or any(p.has_option(s, "pythonpath") for p, s in (
            (_ini(workspace / "pytest.ini"), "pytest"), (config.setup_cfg, "tool:pytest"), (config.tox_ini, "pytest"))):
        return "", ""
    return " -o pythonpath=src", "; src/ holds the package, so src goes on the import path"


def is_python_project(workspace: Path) -> bool:
    markers = ("pyproject.toml", "setup.cfg", "setup.py", "tox.ini", "noxfile.py", "requirements.txt", "Pipfile",
               "pytest.ini", "conftest.py", "mypy.ini", ".mypy.ini", "ruff.toml", ".ruff.toml", ".flake8",
               "pyrightconfig.json")
    if any((workspace / m).is_file() for m in markers):
        return True
    try:
        return any(p.suffix == ".py" for p in workspace.iterdir()) or _test_dir_files(workspace)[0] is not None
    except OSError:
        return False


def _mypy_args(config: _Config) -> str:
    """`mypy` alone when the config names what to check (files, packages or modules: mypy refuses
    those together with paths on the command line), else `mypy .`."""
    table = config.tool_table("mypy") or {}
    keys = ("files", "packages", "modules")
    for parser in (_ini(config.workspace / "mypy.ini"), _ini(config.workspace / ".mypy.ini"), config.setup_cfg):
        if any(parser.has_option("mypy", key) for key in keys):
            return ""
    return "" if any(table.get(key) for key in keys) else "."


def detect_python(workspace: Path, found: Findings, has_module: ModuleProbe | None = None) -> None:
    if not is_python_project(workspace):
        return
    probe = has_module or _workspace_safe(workspace, default_module_probe)
    config = _Config(workspace, found)

    def use(category: Any, tool: str, args: str, why: list[str]) -> None:
        if why:
            found.tool(category, tool, args, "; ".join(why[:2]))

    use("static", "ruff", "check .", config.evidence("ruff", table="ruff", files=("ruff.toml", ".ruff.toml")))
    use("static", "flake8", "", config.evidence(
        "flake8", files=(".flake8",), sections=(("setup.cfg", "flake8"), ("tox.ini", "flake8"))))
    use("types", "mypy", _mypy_args(config), config.evidence(
        "mypy", table="mypy", files=("mypy.ini", ".mypy.ini"), sections=(("setup.cfg", "mypy"),)))
    use("types", "pyright", "", config.evidence("pyright", table="pyright", files=("pyrightconfig.json",)))
    _detect_tests(workspace, found, config, probe)


def _detect_tests(workspace: Path, found: Findings, config: _Config, probe: ModuleProbe) -> None:
    pytest_why = config.evidence("pytest", files=("pytest.ini", "conftest.py"),
                                 sections=(("setup.cfg", "tool:pytest"), ("tox.ini", "pytest")))
    if config.tool_table("pytest") is not None:
        pytest_why.insert(0, "pyproject.toml has [tool.pytest.ini_options]")
    test_dir, dir_files = _test_dir_files(workspace)
    if test_dir and (workspace / test_dir / "conftest.py").is_file():
        pytest_why.append(f"{test_dir}/conftest.py exists")
    scripts: list[Path] = []
    framework_files = list(dir_files)
    for path in _top_level_test_files(workspace):
        (scripts if _is_script(read_text(path) or "") else framework_files).append(path)
    if not (framework_files or scripts):
        # pytest-style tests anywhere below: src/pkg/tests/test_x.py, pkg/test_x.py (keel issue 32: a
        # project without [tool.pytest] and with its tests there got "no checks found")
        nested = _nested_test_file(workspace)
        if nested is not None and not _is_script(read_text(nested) or ""):
            framework_files.append(nested)
    if not (pytest_why or framework_files or scripts):
        return
    interp = _interpreter(workspace, found)
    if interp is None:
        found.skip("test", "python3 -m pytest -q", "the project has Python tests, but no python3 or python "
                                                   "interpreter is installed")
        return
    spelled, probe_path, interp_why = interp
    for path in scripts[:_MAX_SCRIPTS]:
        found.plan("test", f"{spelled} {path.name}",
                   f"{path.name} is a test script with no test framework; run with {interp_why}",
                   protects=(path.name,))
    if len(scripts) > _MAX_SCRIPTS:
        left_out = ", ".join(p.name for p in scripts[_MAX_SCRIPTS:])
        found.hint(f"only the first {_MAX_SCRIPTS} top-level test scripts are planned; not planned: {left_out}")
    if not (pytest_why or framework_files):
        return
    if not framework_files:
        nested = _nested_test_file(workspace)
        if nested is None:
            # pytest with nothing to collect exits 5: a check that could never pass.
            found.hint(f"{pytest_why[0]}, but no test files were found: pytest is not planned")
            return
        framework_files.append(nested)
    where = (f"{test_dir}/ holds test files" if test_dir else
             f"{framework_files[0].relative_to(workspace).as_posix()} holds tests")
    importable = probe(probe_path, "pytest")
    if importable:
        why = "; ".join(pytest_why[:2]) if pytest_why else where
        args, src_why = _src_layout(workspace, config)
        found.plan("test", f"{spelled} -m pytest -q{args}", f"{why}; pytest is importable by {interp_why}{src_why}")
    elif pytest_why:
        found.skip("test", f"{spelled} -m pytest -q", f"{pytest_why[0]}, but pytest is not installed for "
                                                      f"{interp_why}")
    elif any(_USES_UNITTEST.search(read_text(p) or "") for p in framework_files):
        args = f" -s {test_dir}" if test_dir and not (workspace / test_dir / "__init__.py").is_file() else ""
        found.plan("test", f"{spelled} -m unittest discover{args}",
                   f"{where} using unittest; pytest is not installed for {interp_why}")
    else:
        # unittest would collect nothing from plain `def test_…` functions and exit 0: no evidence.
        found.skip("test", f"{spelled} -m pytest -q", f"{where} in pytest style (no unittest.TestCase), but "
                                                      f"pytest is not installed for {interp_why}")
