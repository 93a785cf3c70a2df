"""Checks named in documents: AGENTS.md-style instructions (planned) and CI workflow files (hints only).

A fake ``which`` (and ``has_module``) decides what is "installed"."""

from __future__ import annotations

from pathlib import Path

import pytest
from conftest import fake_which
from conftest import module_probe_yes as yes
from conftest import write_tree as write

from keel.verify.detect import detect_checks
from keel.verify.detect.agents_md import commands_in_markdown
from keel.verify.detect.ci import run_commands
from keel.verify.detect.commands import categorize
from keel.verify.plan import CheckSet


def commands(plan: CheckSet) -> list[tuple[str, str]]:
    return [(c.category, c.command) for c in plan.ordered()]


def skipped(plan: CheckSet) -> dict[str, str]:
    return {s.command: s.note for s in plan.skipped}


def python_project(root: Path) -> Path:
    """pyproject with ruff and pytest configured, and one test: inference plans ruff and pytest."""
    return write(root, {"pyproject.toml": "[tool.ruff]\n[tool.pytest.ini_options]\n",
                        "tests/test_demo.py": "def test_demo():\n    pass\n"})


# -- AGENTS.md --------------------------------------------------------------------------------

AGENTS = """\
# Agent notes

Use `uv` for environments.

## Testing

Run the suite with `python3 -m pytest -q tests` before you finish.

## Lint and types

```bash
$ ruff format .
$ ruff check src
mypy src
```

## Style
Keep `settings.json` sorted.
"""


def test_agents_md_commands_take_precedence_in_their_category(tmp_path: Path) -> None:
    write(tmp_path, {"AGENTS.md": AGENTS})
    python_project(tmp_path)
    plan = detect_checks(tmp_path, which=fake_which("ruff", "mypy", "python3"), has_module=yes)
    assert commands(plan) == [("static", "ruff check src"), ("types", "mypy src"),
                              ("test", "python3 -m pytest -q tests")]
    assert all(c.source == "agents_md" for c in plan.checks)
    assert plan.checks[0].reason.startswith("AGENTS.md line 13 names it")
    assert any("`ruff check .` not planned: the agent instructions (AGENTS.md)" in h for h in plan.hints)


def test_agents_md_parsing_ignores_formatters_and_non_commands() -> None:
    named = [(c.command, c.category) for c in commands_in_markdown(AGENTS, "AGENTS.md")]
    assert named == [("python3 -m pytest -q tests", "test"), ("ruff check src", "static"), ("mypy src", "types")]


def test_agents_md_development_commands_list() -> None:
    text = ("## Development Commands\n\n- Build Go only: `go build -v ./...`\n- Run Go vet: `go vet ./...`\n"
            "- Install UI dependencies: `npm --prefix ui install`\n- Run UI lint: `npm --prefix ui run lint`\n"
            "- Format all supported files: `./dev/tasks/format.sh`\n- Run presubmit: `make presubmit`\n")
    named = [(c.command, c.category) for c in commands_in_markdown(text, "AGENTS.md")]
    assert named == [("go build -v ./...", "build"), ("go vet ./...", "static"), ("npm --prefix ui run lint", "static")]


def test_agents_md_command_whose_tool_is_missing_is_skipped_and_inference_stands(tmp_path: Path) -> None:
    write(tmp_path, {"CLAUDE.md": "## Tests\nRun `tox -e py311` to test.\n"})
    python_project(tmp_path)
    plan = detect_checks(tmp_path, which=fake_which("python3"), has_module=yes)
    assert ("test", "python3 -m pytest -q") in commands(plan)
    assert "tox is not installed" in skipped(plan)["tox -e py311"]


def test_agents_md_project_script_must_exist(tmp_path: Path) -> None:
    write(tmp_path, {"AGENTS.md": "## Checks\n- `./scripts/check.sh` runs every check\n- `./scripts/gone.sh` tests\n",
                     "scripts/check.sh": "#!/bin/sh\n"})
    plan = detect_checks(tmp_path, which=fake_which())
    assert commands(plan) == [("test", "./scripts/check.sh")]
    assert "does not exist" in skipped(plan)["./scripts/gone.sh"]


# -- CI hints ---------------------------------------------------------------------------------

WORKFLOW = """\
name: ci
on: [push]
jobs:
  test:
    runs-on: ubuntu-latest
    steps:
      - uses: actions/checkout@v4
      - run: pip install -e '.[dev]'
      - name: Lint
        run: ruff check .
      - name: Tests
        run: |
          python -m pytest -q
          echo done
      - run: "mypy keel"
"""


def test_ci_workflow_commands_are_hints_never_checks(tmp_path: Path) -> None:
    write(tmp_path, {".github/workflows/ci.yml": WORKFLOW,
                     ".gitlab-ci.yml": "test:\n  script:\n    - npm ci\n    - npm test\n"})
    plan = detect_checks(tmp_path, which=fake_which("ruff", "python3", "mypy", "npm"))
    assert plan.checks == ()
    assert plan.hints == (
        ".github/workflows/ci.yml runs `ruff check .` in CI (not run by keel)",
        ".github/workflows/ci.yml runs `python -m pytest -q` in CI (not run by keel)",
        ".github/workflows/ci.yml runs `mypy keel` in CI (not run by keel)",
        ".gitlab-ci.yml runs `npm test` in CI (not run by keel)",
    )


def test_ci_run_step_parsing() -> None:
    assert run_commands(WORKFLOW) == ["pip install -e '.[dev]'", "ruff check .", "python -m pytest -q",
                                      "echo done", "mypy keel"]


@pytest.mark.parametrize(("command", "category"), [
    ("pytest -q", "test"), ("make lint", "static"), ("npm run typecheck", "types"), ("cargo check", "build"),
    ("black --check .", "static"), ("black .", None), ("ruff check --fix .", None), ("pip install -e .", None),
    ("npm run dev", None), ("settings.json", None), ("git push", None), ("conftest.py", None),
    ("tests/test_api.py", None), ("test.sh", None), ("scripts/test.sh", "test"), ("./check", "test"),
    (".venv/bin/pytest -q", "test"), ("python -m venv .venv", None), ("node scripts/deploy.js", None),
    ("python scripts/run_checks.py", "test"), ("make install", None), ("make presubmit", "test"),
    ("npm --prefix ui run lint", "static"), ("pnpm -C web test", "test"), ("npm exec foo", None),
    ("npm run test-ci", "test"), ("yarn typecheck:all", "types"), ("npm run lint:fix", None),
    ("npm run format:check", None),
])
def test_categorize_commands_found_in_documents(command: str, category: str | None) -> None:
    # Under a "Testing" heading, so commands that only run something take "test" from it.
    assert categorize(command, "## Testing") == category
