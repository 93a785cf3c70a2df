"""Check detection per ecosystem, on fixture projects written to tmp dirs.

Most tests pass a fake ``which`` (and ``has_module``) so "what is installed" is decided by the test;
one Python test uses the machine's real tools (ruff and pytest come with keel's dev extras)."""

from __future__ import annotations

import json
import os
from pathlib import Path

import pytest
from conftest import fake_which
from conftest import module_probe_yes as yes
from conftest import write_tree as write

from keel.verify.detect import build_plan, detect_checks, pinned_plan, workspace_which
from keel.verify.detect.makefile import makefile_targets
from keel.verify.plan import CheckSet


def no(_interp: str, _module: str) -> bool:
    return False


def commands(plan: CheckSet) -> list[tuple[str, str]]:
    return [(c.category, c.command) for c in plan.ordered()]


def skipped(plan: CheckSet) -> dict[str, str]:
    return {s.command: s.note for s in plan.skipped}


PYPROJECT = """\
[project]
name = "demo"
version = "0"
[project.optional-dependencies]
dev = ["pytest>=7", "ruff"]
[tool.ruff]
line-length = 100
[tool.pytest.ini_options]
testpaths = ["tests"]
"""


def python_project(root: Path) -> Path:
    return write(root, {"pyproject.toml": PYPROJECT, "demo.py": "def f():\n    return 1\n",
                        "tests/test_demo.py": "from demo import f\n\n\ndef test_f():\n    assert f() == 1\n"})


# -- Python -----------------------------------------------------------------------------------


def test_python_pyproject_with_pytest_and_ruff(tmp_path: Path) -> None:
    plan = detect_checks(python_project(tmp_path), which=fake_which("ruff", "python3"), has_module=yes)
    assert commands(plan) == [("static", "ruff check ."), ("test", "python3 -m pytest -q")]
    ruff, pytest_check = plan.ordered()
    assert "pyproject.toml has [tool.ruff]" in ruff.reason and "ruff found at /fake/bin/ruff" in ruff.reason
    assert "[tool.pytest.ini_options]" in pytest_check.reason and "importable" in pytest_check.reason
    assert all(c.source == "inferred" for c in plan.checks)


def test_python_detection_with_the_real_tools_on_this_machine(tmp_path: Path) -> None:
    plan = detect_checks(python_project(tmp_path))
    assert ("static", "ruff check .") in commands(plan)
    assert ("test", "python3 -m pytest -q") in commands(plan)


def test_a_tool_that_is_not_installed_is_skipped_with_a_note(tmp_path: Path) -> None:
    python_project(tmp_path)
    write(tmp_path, {"pyproject.toml": PYPROJECT + "[tool.mypy]\nstrict = true\n"})
    plan = detect_checks(tmp_path, which=fake_which("python3"), has_module=no)
    assert commands(plan) == []
    notes = skipped(plan)
    assert notes["ruff check ."] == "pyproject.toml has [tool.ruff]; ruff is a declared dependency, but ruff " \
                                    "is not installed"
    assert "mypy is not installed" in notes["mypy ."]
    assert "pytest is not installed" in notes["python3 -m pytest -q"]


def test_mypy_uses_the_configured_files_instead_of_dot(tmp_path: Path) -> None:
    write(tmp_path, {"pyproject.toml": '[tool.mypy]\nfiles = ["src"]\n'})
    assert commands(detect_checks(tmp_path, which=fake_which("mypy"))) == [("types", "mypy")]
    write(tmp_path, {"pyproject.toml": "", "mypy.ini": "[mypy]\nstrict = True\n"})
    assert commands(detect_checks(tmp_path, which=fake_which("mypy"))) == [("types", "mypy .")]


def test_setup_cfg_and_tox_ini_sections(tmp_path: Path) -> None:
    write(tmp_path, {"setup.cfg": "[flake8]\nmax-line-length = 100\n[tool:pytest]\naddopts = -q\n",
                     "tox.ini": "[testenv]\ncommands = pyright\n", "pkg.py": "",
                     "tests/test_pkg.py": "def test_pkg():\n    pass\n"})
    plan = detect_checks(tmp_path, which=fake_which("flake8", "pyright", "python3"), has_module=yes)
    assert commands(plan) == [("static", "flake8"), ("types", "pyright"), ("test", "python3 -m pytest -q")]
    reasons = {c.command: c.reason for c in plan.checks}
    assert reasons["flake8"].startswith("setup.cfg has [flake8]")
    assert reasons["pyright"].startswith("tox.ini mentions pyright")
    assert reasons["python3 -m pytest -q"].startswith("setup.cfg has [tool:pytest]")


def test_noxfile_requirements_and_poetry_groups_are_evidence(tmp_path: Path) -> None:
    write(tmp_path, {"noxfile.py": "import nox\n\n@nox.session\ndef lint(session):\n    session.run('flake8')\n",
                     "requirements-dev.txt": "# dev\nruff==0.5\n-e .\n",
                     "pyproject.toml": "[tool.poetry.group.dev.dependencies]\nmypy = '^1'\n"})
    plan = detect_checks(tmp_path, which=fake_which("flake8", "ruff", "mypy"))
    assert commands(plan) == [("static", "ruff check ."), ("static", "flake8"), ("types", "mypy .")]
    reasons = {c.command: c.reason for c in plan.checks}
    assert reasons["flake8"].startswith("noxfile.py runs flake8")
    assert reasons["ruff check ."].startswith("ruff is a declared dependency")
    assert reasons["mypy ."].startswith("mypy is a declared dependency")


def test_unittest_when_tests_exist_and_pytest_is_not_importable(tmp_path: Path) -> None:
    write(tmp_path, {"calc.py": "def add(a, b):\n    return a + b\n",
                     "tests/test_calc.py": "import unittest\nfrom calc import add\n\n\n"
                                           "class TestAdd(unittest.TestCase):\n    def test_add(self):\n"
                                           "        self.assertEqual(add(1, 2), 3)\n"})
    plan = detect_checks(tmp_path, which=fake_which("python3"), has_module=no)
    assert commands(plan) == [("test", "python3 -m unittest discover -s tests")]
    assert "pytest is not installed" in plan.checks[0].reason


def test_pytest_style_tests_without_pytest_are_skipped_not_run_by_unittest(tmp_path: Path) -> None:
    write(tmp_path, {"tests/test_x.py": "def test_x():\n    assert True\n"})
    plan = detect_checks(tmp_path, which=fake_which("python3"), has_module=no)
    assert commands(plan) == []
    assert "pytest style" in skipped(plan)["python3 -m pytest -q"]


def test_pytest_when_tests_exist_and_pytest_is_importable(tmp_path: Path) -> None:
    write(tmp_path, {"tests/test_x.py": "def test_x():\n    assert True\n"})
    plan = detect_checks(tmp_path, which=fake_which("python3"), has_module=yes)
    assert commands(plan) == [("test", "python3 -m pytest -q")]
    assert plan.checks[0].reason.startswith("tests/ holds test files")


def test_lone_test_script_runs_with_the_interpreter(tmp_path: Path) -> None:
    write(tmp_path, {"app.py": "def load():\n    return {}\n",
                     "test_app.py": "from app import load\nassert load() == {}\nprint('OK')\n"})
    plan = detect_checks(tmp_path, which=fake_which("python3"), has_module=yes)
    assert commands(plan) == [("test", "python3 test_app.py")]
    assert plan.checks[0].protects == ("test_app.py",)
    assert "no test framework" in plan.checks[0].reason


def test_pytest_is_not_planned_when_there_is_nothing_to_collect(tmp_path: Path) -> None:
    write(tmp_path, {"pyproject.toml": '[project]\nname = "x"\ndependencies = ["pytest"]\n'})
    plan = detect_checks(tmp_path, which=fake_which("python3"), has_module=yes)
    assert commands(plan) == []
    assert plan.hints == ("pytest is a declared dependency, but no test files were found: pytest is not planned",)


def test_nested_tests_count_when_pytest_is_configured(tmp_path: Path) -> None:
    write(tmp_path, {"pytest.ini": "[pytest]\n", "src/pkg/tests/test_x.py": "def test_x():\n    pass\n",
                     "node_modules/y/test_y.py": ""})
    plan = detect_checks(tmp_path, which=fake_which("python3"), has_module=yes)
    assert commands(plan) == [("test", "python3 -m pytest -q")]
    assert plan.checks[0].reason.startswith("pytest.ini exists; pytest is importable")


def test_top_level_test_file_with_test_functions_goes_to_pytest(tmp_path: Path) -> None:
    write(tmp_path, {"calc_test.py": "def test_add():\n    assert 1 + 1 == 2\n"})
    plan = detect_checks(tmp_path, which=fake_which("python3"), has_module=yes)
    assert commands(plan) == [("test", "python3 -m pytest -q")]


def test_workspace_virtualenv_is_the_interpreter_and_its_tools_are_found(tmp_path: Path) -> None:
    python_project(tmp_path)
    for tool in ("python", "ruff"):
        exe = write(tmp_path, {f".venv/bin/{tool}": "#!/bin/sh\n"}) / ".venv" / "bin" / tool
        exe.chmod(0o755)
    plan = detect_checks(tmp_path, which=workspace_which(tmp_path), has_module=yes)
    assert ("static", ".venv/bin/ruff check .") in commands(plan)
    assert ("test", ".venv/bin/python -m pytest -q") in commands(plan)
    assert "ruff found at .venv/bin/ruff" in plan.checks[0].reason


def test_a_workspace_virtualenv_is_inspected_on_disk_never_executed(tmp_path: Path) -> None:
    write(tmp_path, {"pytest.ini": "[pytest]\n", "tests/test_x.py": "def test_x():\n    pass\n",
                     ".venv/bin/python": f"#!/bin/sh\ntouch {tmp_path}/EXECUTED\n"})
    (tmp_path / ".venv" / "bin" / "python").chmod(0o755)
    plan = detect_checks(tmp_path, which=fake_which("python3"))
    assert commands(plan) == []
    assert "pytest is not installed for the workspace's virtualenv .venv/" in skipped(plan)[
        ".venv/bin/python -m pytest -q"]
    write(tmp_path, {".venv/lib/python3.11/site-packages/pytest/__init__.py": ""})
    plan = detect_checks(tmp_path, which=fake_which("python3"))
    assert commands(plan) == [("test", ".venv/bin/python -m pytest -q")]
    assert not (tmp_path / "EXECUTED").exists()


def test_node_modules_bin_is_searched_by_the_default_which(tmp_path: Path) -> None:
    exe = write(tmp_path, {"node_modules/.bin/tsc": "#!/bin/sh\n"}) / "node_modules" / ".bin" / "tsc"
    exe.chmod(0o755)
    assert workspace_which(tmp_path)("tsc") == "node_modules/.bin/tsc"
    assert workspace_which(tmp_path)("definitely-not-a-tool-keel") is None


def test_broken_pyproject_is_a_hint_not_a_crash(tmp_path: Path) -> None:
    write(tmp_path, {"pyproject.toml": "[tool.ruff\n"})
    plan = detect_checks(tmp_path, which=fake_which())
    assert any("pyproject.toml does not parse" in h for h in plan.hints)


# -- JavaScript / TypeScript ------------------------------------------------------------------

SCRIPTS = {"lint": "eslint .", "typecheck": "tsc --noEmit", "build": "vite build", "test": "vitest run"}


@pytest.mark.parametrize(("lockfile", "manager"), [
    (None, "npm"), ("package-lock.json", "npm"), ("pnpm-lock.yaml", "pnpm"), ("yarn.lock", "yarn")])
def test_package_json_scripts_through_the_lockfile_manager(tmp_path: Path, lockfile: str | None,
                                                           manager: str) -> None:
    write(tmp_path, {"package.json": json.dumps({"scripts": SCRIPTS})})
    if lockfile:
        write(tmp_path, {lockfile: ""})
    plan = detect_checks(tmp_path, which=fake_which("npm", "pnpm", "yarn"))
    assert commands(plan) == [("static", f"{manager} run lint"), ("types", f"{manager} run typecheck"),
                              ("build", f"{manager} run build"), ("test", f"{manager} test")]
    assert f"{lockfile or 'no lockfile'} → {manager}" in plan.checks[0].reason
    assert 'package.json has a "lint" script (eslint .)' in plan.checks[0].reason


def test_npm_placeholder_test_script_is_not_a_test(tmp_path: Path) -> None:
    placeholder = 'echo "Error: no test specified" && exit 1'
    write(tmp_path, {"package.json": json.dumps({"scripts": {"test": placeholder}})})
    plan = detect_checks(tmp_path, which=fake_which("npm"))
    assert commands(plan) == []
    assert any("placeholder" in h for h in plan.hints)


def test_tsc_when_tsconfig_exists_and_no_typecheck_script(tmp_path: Path) -> None:
    write(tmp_path, {"package.json": json.dumps({"scripts": {"test": "node --test"}}), "tsconfig.json": "{}"})
    plan = detect_checks(tmp_path, which=fake_which("npm", "tsc"))
    assert commands(plan) == [("types", "tsc --noEmit"), ("test", "npm test")]
    plan = detect_checks(tmp_path, which=fake_which("npm"))
    assert "tsc is not installed" in skipped(plan)["tsc --noEmit"]


def test_missing_package_manager_and_watch_scripts_are_skipped(tmp_path: Path) -> None:
    write(tmp_path, {"package.json": json.dumps({"scripts": {"test": "jest --watch", "lint": "eslint ."}}),
                     "pnpm-lock.yaml": ""})
    notes = skipped(detect_checks(tmp_path, which=fake_which("npm")))
    assert "watch mode" in notes["pnpm test"]
    assert "pnpm is not installed" in notes["pnpm run lint"]


def test_missing_node_modules_is_hinted(tmp_path: Path) -> None:
    write(tmp_path, {"package.json": json.dumps({"scripts": {"test": "jest"}, "devDependencies": {"jest": "1"}}),
                     "package-lock.json": "{}"})
    plan = detect_checks(tmp_path, which=fake_which("npm"))
    assert any("`npm ci`" in h for h in plan.hints)


# -- Go, Rust, Makefile -----------------------------------------------------------------------


def test_go_module_with_and_without_the_toolchain(tmp_path: Path) -> None:
    write(tmp_path, {"go.mod": "module example.com/x\n\ngo 1.22\n"})
    plan = detect_checks(tmp_path, which=fake_which("go"))
    assert commands(plan) == [("static", "go vet ./..."), ("build", "go build ./..."), ("test", "go test ./...")]
    plan = detect_checks(tmp_path, which=fake_which())
    assert commands(plan) == [] and len(plan.skipped) == 3
    assert all("go toolchain is not installed" in s.note for s in plan.skipped)


def test_rust_crate_and_missing_clippy(tmp_path: Path) -> None:
    write(tmp_path, {"Cargo.toml": '[package]\nname = "x"\nversion = "0.1.0"\n'})
    plan = detect_checks(tmp_path, which=fake_which("cargo", "cargo-clippy"))
    assert commands(plan) == [("static", "cargo clippy"), ("build", "cargo check"), ("test", "cargo test")]
    plan = detect_checks(tmp_path, which=fake_which("cargo"))
    assert commands(plan) == [("build", "cargo check"), ("test", "cargo test")]
    assert "clippy" in skipped(plan)["cargo clippy"]


def test_makefile_targets_and_their_precedence_over_inference(tmp_path: Path) -> None:
    makefile = ".PHONY: test lint\nVAR := x\nlint:\n\truff check .\ntest: lint\n\tpython3 -m pytest -q\n" \
               "check: test\n"
    write(tmp_path, {"Makefile": makefile})
    python_project(tmp_path)
    plan = detect_checks(tmp_path, which=fake_which("make", "ruff", "python3"), has_module=yes)
    assert commands(plan) == [("static", "make lint"), ("test", "make test")]
    assert all(c.source == "makefile" for c in plan.checks)
    assert plan.checks[0].reason == "Makefile has a `lint` target; make found at /fake/bin/make"
    assert any("`python3 -m pytest -q` not planned: the Makefile" in h for h in plan.hints)


def test_makefile_target_whose_recipe_needs_a_missing_toolchain_is_skipped(tmp_path: Path) -> None:
    makefile = ("lint:\nifndef CI\n\t@echo local\nendif\n\t-golangci-lint run\n"
                "test: deps\n\tcd x && echo hi\ndeps:\n\tgo get ./...\n")
    write(tmp_path, {"Makefile": makefile, "go.mod": "module x\n"})
    plan = detect_checks(tmp_path, which=fake_which("make"))
    assert commands(plan) == []
    notes = skipped(plan)
    assert notes["make lint"] == "Makefile has a `lint` target, but it runs golangci-lint, which is not installed"
    assert notes["make test"] == "Makefile has a `test` target, but it runs go, which is not installed"
    assert "go toolchain is not installed" in notes["go test ./..."]     # inference is not covered


def test_makefile_target_parsing() -> None:
    text = "all: build\nbuild test : deps\n\t@echo x: y\nX ?= 1\nY := 2\nZ ::= 3\n%.o: %.c\n.PHONY: all\n"
    assert makefile_targets(text) == ["all", "build", "test", ".PHONY"]


# -- Settling and building the plan -----------------------------------------------------------


def test_order_is_by_category_and_duplicates_are_dropped(tmp_path: Path) -> None:
    write(tmp_path, {"AGENTS.md": "## Tests\n`npm test` and `npm test` again\n",
                     "package.json": json.dumps({"scripts": {"test": "jest", "lint": "eslint ."}}),
                     "go.mod": "module x\n"})
    plan = detect_checks(tmp_path, which=fake_which("npm", "go"))
    assert commands(plan) == [("static", "npm run lint"), ("static", "go vet ./..."),
                              ("build", "go build ./..."), ("test", "npm test")]


def test_pinned_plan_replaces_inference(tmp_path: Path) -> None:
    python_project(tmp_path)
    plan = build_plan(tmp_path, pinned=[{"category": "test", "command": "make ci"}, ("static", "ruff check src")],
                      which=fake_which("ruff", "python3"), has_module=yes)
    assert commands(plan) == [("static", "ruff check src"), ("test", "make ci")]
    assert all(c.source == "config" for c in plan.checks)
    assert build_plan(tmp_path, pinned=[], which=fake_which("ruff")).checks == ()
    with pytest.raises(ValueError, match="pinned check 1: category"):
        pinned_plan([{"category": "unit", "command": "x"}])


def test_disabled_categories_move_to_skipped_but_acceptance_stays(tmp_path: Path) -> None:
    python_project(tmp_path)
    plan = build_plan(tmp_path, task="Fix it so that `make demo` passes.", enabled={"static": False, "test": True},
                      which=fake_which("ruff", "python3"), has_module=yes)
    assert commands(plan) == [("test", "python3 -m pytest -q"), ("acceptance", "make demo")]
    assert skipped(plan)["ruff check ."] == "the static category is turned off in config"


def test_task_acceptance_replaces_the_same_inferred_command(tmp_path: Path) -> None:
    write(tmp_path, {"test_app.py": "print('OK')\n"})
    plan = build_plan(tmp_path, task="Fix the crash so that `python test_app.py` prints OK",
                      accept=["python3 -m http.server --help"], which=fake_which("python", "python3"))
    assert commands(plan) == [("acceptance", "python test_app.py"),
                              ("acceptance", "python3 -m http.server --help")]
    check = plan.ordered()[0]
    assert check.expect_output == "OK" and check.protects == ("test_app.py",) and check.source == "task"
    assert plan.ordered()[1].source == "accept"


def test_task_python_runs_with_python3_where_python_is_missing(tmp_path: Path) -> None:
    plan = build_plan(tmp_path, task="make sure `python test_app.py` prints OK", which=fake_which("python3"))
    assert commands(plan) == [("acceptance", "python3 test_app.py")]
    assert "no `python` is installed" in plan.checks[0].reason
    assert plan.checks[0].expect_output == "OK"


def test_empty_project_has_an_empty_plan(tmp_path: Path) -> None:
    plan = detect_checks(tmp_path, which=fake_which("python3", "npm", "make"))
    assert plan.empty and plan.skipped == () and plan.hints == ()


def test_detection_runs_nothing_and_tolerates_unreadable_files(tmp_path: Path) -> None:
    write(tmp_path, {"package.json": "{not json", "Makefile": "\x00\x01", "setup.cfg": "[broken"})
    if os.geteuid() != 0:
        (tmp_path / "setup.cfg").chmod(0)
    plan = detect_checks(tmp_path, which=fake_which("npm", "make", "python3"), has_module=no)
    assert plan.checks == ()
    assert any("package.json does not parse" in h for h in plan.hints)


@pytest.mark.parametrize(("system_site", "found"), [("true", True), ("false", False)])
def test_a_system_site_packages_venv_sees_its_base_installation(tmp_path: Path, system_site: str, found: bool):
    """pip installs nothing into a --system-site-packages venv that the base already has: pytest
    living only in the base interpreter's site-packages is still importable from the venv."""
    from keel.verify.detect.python import venv_has_module

    base = write(tmp_path / "base", {"bin/python3": "", "lib/python3.11/site-packages/pytest/__init__.py": ""})
    venv = write(tmp_path / "venv", {
        "pyvenv.cfg": f"home = {base / 'bin'}\ninclude-system-site-packages = {system_site}\nversion = 3.11.7\n",
        "lib/python3.11/site-packages/other/__init__.py": "",
    })
    assert venv_has_module(venv, "pytest") is found
    assert venv_has_module(venv, "other")
