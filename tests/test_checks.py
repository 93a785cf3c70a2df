"""Which shell commands count as verification evidence."""

from __future__ import annotations

import pytest

from keel.outputs.checks import classify_check


@pytest.mark.parametrize(("command", "kind"), [
    ("python -m pytest -q", "test"),
    ("cd pkg && pytest -q tests/test_a.py", "test"),
    ("PYTHONPATH=. timeout 60 python -m pytest", "test"),
    ("uv run pytest", "test"),
    ("ruff check .", "lint"),
    ("mypy src", "type"),
    ("cargo test", "test"),
    ("npm run build", "build"),
    ("python3 -c 'import sys; print(1)'", "run"),
    ("python calc.py", "run"),
    ("ls -la", None),
    ("git status", None),
    ("cat README.md", None),
    # a 0 exit of these does not prove the check passed, so they are not evidence
    ("python -m pytest | tail -5", None),
    ("pytest || true", None),
    ("pytest; echo done", None),
    ("ls; pytest -q", "test"),
])
def test_which_commands_count_as_checks(command, kind):
    assert classify_check(command) == kind
