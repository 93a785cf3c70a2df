"""How many tests a runner's output says ran (keel.outputs.counts), and whether a command runs the whole
suite (keel.outputs.checks.whole_test_run): where keel finds no check to run, the agent's own test run is
evidence only when at least one test ran and none was deselected (keel issue 32).

The pytest and unittest outputs are made by running them for real on a small project."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

import pytest

from keel.outputs.checks import whole_test_run
from keel.outputs.counts import RunCounts, run_counts

TEXTS = [
    ("pytest -q, all pass", "....\n4 passed in 0.01s\n", RunCounts(passed=4)),
    ("pytest, failures and a selection", "=== 1 failed, 3 passed, 2 deselected in 0.2s ===", RunCounts(3, 1, 2)),
    ("pytest, errors count as failures", "= 1 error, 1 passed in 0.1s =", RunCounts(passed=1, failed=1)),
    ("pytest, nothing collected", "no tests ran in 0.01s", RunCounts()),
    ("unittest, ok", "...\n----------------------------------------------------------------------\nRan 3 tests in 0.001s\n\nOK",
     RunCounts(passed=3)),
    ("unittest, failed", "Ran 3 tests in 0.001s\n\nFAILED (failures=1, errors=1)", RunCounts(passed=1, failed=2)),
    ("jest", "Tests:       1 failed, 4 passed, 5 total", RunCounts(passed=4, failed=1)),
    ("node --test (TAP)", "# tests 3\n# pass 2\n# fail 1\n", RunCounts(passed=2, failed=1)),
    ("mocha", "  3 passing (5ms)\n  1 failing\n", RunCounts(passed=3, failed=1)),
    ("cargo", "test result: ok. 7 passed; 0 failed; 1 ignored; 0 measured", RunCounts(passed=7, skipped=1)),
    ("go", "--- PASS: TestA (0.00s)\n--- FAIL: TestB (0.00s)\nFAIL\tex/a\t0.01s\n", RunCounts(passed=1, failed=2)),
]


@pytest.mark.parametrize(("name", "output", "counts"), TEXTS, ids=[t[0] for t in TEXTS])
def test_counts_from_each_runner(name: str, output: str, counts: RunCounts):
    assert run_counts(output) == counts


def test_output_of_no_known_runner_has_no_counts():
    assert run_counts("hello\nworld\n") is None


@pytest.fixture(scope="module")
def project(tmp_path_factory) -> Path:
    root = tmp_path_factory.mktemp("proj")
    (root / "test_a.py").write_text("def test_one():\n    pass\n\n\ndef test_two():\n    pass\n")
    return root


def _run(project: Path, *args: str) -> str:
    done = subprocess.run([sys.executable, *args], cwd=project, capture_output=True, text=True, timeout=120,
                          env={"PYTEST_DISABLE_PLUGIN_AUTOLOAD": "1", "PATH": "/usr/bin:/bin"})
    return done.stdout + done.stderr


def test_real_pytest_runs_are_counted(project: Path):
    assert run_counts(_run(project, "-m", "pytest", "-q", "-p", "no:cacheprovider")) == RunCounts(passed=2)
    selected = run_counts(_run(project, "-m", "pytest", "-q", "-p", "no:cacheprovider", "-k", "one"))
    assert selected == RunCounts(passed=1, deselected=1)
    nothing = run_counts(_run(project, "-m", "pytest", "-q", "-p", "no:cacheprovider", "-k", "nomatch"))
    assert nothing is not None and nothing.ran == 0


def test_real_unittest_with_nothing_to_run_ran_nothing(project: Path):
    counts = run_counts(_run(project, "-m", "unittest", "discover", "-p", "nothing_*.py"))
    assert counts is not None and counts.ran == 0


@pytest.mark.parametrize(("command", "whole"), [
    ("python -m pytest -q", True),
    ("pytest -q tests/", True),                       # a folder of the suite: all of it there
    ("cd src && python3 -m pytest", True),
    ("python -m unittest discover", True),
    ("npm test", True),
    ("go test ./...", True),
    ("cargo test", True),
    ("pytest test_x.py", False),                      # one file
    ("pytest tests/test_a.py::test_b", False),        # one test
    ("python3 -m pytest -k add", False),              # a selection
    ("python -m pytest -m slow", False),
    ("python -m unittest test_calc", False),          # one module
    ("npm test -- -t add", False),
    ("go test -run TestX ./...", False),
    ("cargo test parse", False),
    ("ls", False),                                    # not a test runner
    ("python app.py", False),
    ("pytest " + "a" * 5000, False),                  # too long to be a command keel reads
])
def test_whole_test_run(command: str, whole: bool):
    assert whole_test_run(command) is whole
