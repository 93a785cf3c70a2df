"""Acceptance checks extracted from the task text and from --accept, table-driven."""

from __future__ import annotations

from pathlib import Path

import pytest

from keel.core.request import parse_request
from keel.verify.acceptance import accept_checks, acceptance_checks, looks_like_command, protected_files


def acceptance_from_task(task: str, *, workspace=None):
    return acceptance_checks(parse_request(task), workspace=workspace)

# (task, [(command, expected output)])
CASES: list[tuple[str, list[tuple[str, str | None]]]] = [
    # The two tasks from issue 6, as real small models were given them.
    ("The app crashes with a KeyError when it loads settings.json. Find and fix the cause so that "
     "`python test_app.py` prints OK", [("python test_app.py", "OK")]),
    ("implement slugify() so that `python test_textutil.py` prints OK", [("python test_textutil.py", "OK")]),
    ("make sure `npm test` passes", [("npm test", None)]),
    ("Keep going until `pytest -q` is green.", [("pytest -q", None)]),
    ("Run `make test` to verify.", [("make test", None)]),
    ("`python3 -m pytest tests/test_api.py` must pass and `go test ./...` should pass too",
     [("python3 -m pytest tests/test_api.py", None), ("go test ./...", None)]),
    ("`python t.py` must print `all good`", [("python t.py", "all good")]),
    ('`node check.js` should print "done!" when it works', [("node check.js", "done!")]),
    ("Afterwards `./run_tests.sh` must exit 0.", [("./run_tests.sh", None)]),
    ("Ensure `bash scripts/smoke.sh` succeeds", [("bash scripts/smoke.sh", None)]),
    ("`cargo test` passes; `cargo build` too.", [("cargo test", None), ("cargo build", None)]),
    ("`cargo test` passes. I once ran `cargo build` by hand.", [("cargo test", None)]),
    ("Fix the parser.\nVerify with:\n```\n$ python -m pytest tests/test_x.py::test_a\n```",
     [("python -m pytest tests/test_x.py::test_a", None)]),
    ("make sure `python t.py` prints no errors", [("python t.py", None)]),
    ("Fix it so that `python app.py` prints 42.", [("python app.py", "42")]),
    ("Bump it: `python -c 'import app; print(app.VERSION)'` must print 1.2.0.",
     [("python -c 'import app; print(app.VERSION)'", "1.2.0")]),
    ("After the fix `node main.js` outputs: PASSED", [("node main.js", "PASSED")]),
    ("Make `python cli.py --verbose` pass and print the sum", [("python cli.py --verbose", None)]),
    # py-write-tests: the command that judges the tests, named without "must pass"
    ("Write tests in test_leap.py. `python check_tests.py test_leap.py` tells you whether the tests would catch "
     "real bugs.", [("python check_tests.py test_leap.py", None)]),
    ("`npm run lint` checks if the style holds.", [("npm run lint", None)]),
    # Negatives: prose without backticks, backticked non-commands, no wording of proof, installs.
    ("run python test_app.py to verify", []),
    ("Fix the KeyError in `settings.json` so it passes", []),
    ("Rename `load_settings` to `read_settings`, then make sure it works", []),
    ("I ran `python app.py` and it crashed with a KeyError.", []),
    ("`pip install requests` must succeed", []),
    ("make sure `npm install` passes", []),
    ("make sure `python` passes", []),
    ("Fix the bug so that `go mod tidy` passes", []),
    ("so that `bash -c 'exit 0'` passes", []),
    ("", []),
]


@pytest.mark.parametrize(("task", "expected"), CASES, ids=[c[0][:40] or "empty" for c in CASES])
def test_acceptance_from_task(task: str, expected: list[tuple[str, str | None]]) -> None:
    checks = acceptance_from_task(task)
    assert [(c.command, c.expect_output) for c in checks] == expected
    for check in checks:
        assert check.category == "acceptance" and check.source == "task"
        assert check.reason.startswith("the task names it: “")
        if check.expect_output is not None:
            assert f"its output must contain {check.expect_output!r}" in check.reason


def test_reason_quotes_the_sentence_that_named_the_command() -> None:
    (check,) = acceptance_from_task("The app crashes. Find and fix the cause so that `python test_app.py` prints OK")
    assert check.reason == ("the task names it: “Find and fix the cause so that `python test_app.py` prints OK”; "
                            "its output must contain 'OK'")


def test_protects_the_script_the_command_runs() -> None:
    (check,) = acceptance_from_task("implement slugify() so that `python test_textutil.py` prints OK")
    assert check.protects == ("test_textutil.py",)


@pytest.mark.parametrize(("command", "files"), [
    ("python test_app.py", ("test_app.py",)),
    ("python -m pytest tests/test_api.py::test_get -q", ("tests/test_api.py",)),
    ("./run_tests.sh --fast", ("run_tests.sh",)),
    ("node --test test/a.test.js", ("test/a.test.js",)),
    ("npm test", ()),
    ("python -c 'import app'", ()),
    ("python -m unittest", ()),
])
def test_protected_files(command: str, files: tuple[str, ...]) -> None:
    assert protected_files(command) == files


def test_with_a_workspace_only_existing_files_are_protected(tmp_path: Path) -> None:
    (tmp_path / "test_app.py").write_text("print('OK')\n")
    assert protected_files("python test_app.py other.py ../x.py", tmp_path) == ("test_app.py",)
    (check,) = acceptance_from_task("so that `python test_app.py` prints OK", workspace=tmp_path)
    assert check.protects == ("test_app.py",)


@pytest.mark.parametrize(("text", "ok"), [
    ("python test_app.py", True), ("python3.11 -m pytest", True), ("pytest", True), ("npm test", True),
    ("make", True), ("./check", True), ("go test ./...", True), ("go mod tidy", False), ("settings.json", False),
    ("ls -la", False), ("python", False), ("node", False), ("cargo fmt", False), ("sh run.sh", True),
    ("rm -rf build", False), ("", False),
])
def test_looks_like_command(text: str, ok: bool) -> None:
    assert looks_like_command(text) is ok


def test_accept_checks_take_any_command_as_written() -> None:
    checks = accept_checks(["curl -fsS localhost:8000/health", " python test_app.py ", "python test_app.py"])
    assert [(c.command, c.source, c.category) for c in checks] == [
        ("curl -fsS localhost:8000/health", "accept", "acceptance"), ("python test_app.py", "accept", "acceptance")]
    assert checks[1].protects == ("test_app.py",)
    assert checks[0].reason == "given by the user (--accept or [verify] accept)"
    with pytest.raises(ValueError, match="empty"):   # a blank one is an error, never silently dropped
        accept_checks(["python test_app.py", "  "])


# A script of the workspace the task tells to run is its acceptance check, with or without a code span.
NAMED_SCRIPTS: list[tuple[str, list[str]]] = [
    ("Fix the bug in calc.py, then run check.py.", ["python check.py"]),
    ("Fix calc.py, then run `python3 check.py`.", ["python3 check.py"]),
    ("Fix it, then run ./check.sh", ["./check.sh"]),
    ("Fix it and run `check.sh`", ["bash check.sh"]),
    ("Fix the parser and make sure `python3 tests/run.py` passes.", ["python3 tests/run.py"]),
    ("Fix calc.py, then run python3 tests/run.py and check.py", ["python3 tests/run.py"]),
    ("Do not run deploy.sh; fix calc.py.", []),
    ("Never run ./deploy.sh.", []),
    ("You don't need to run check.py.", []),
    ("I ran check.py yesterday and it failed.", []),
    ("run missing.py", []),            # not in the workspace: nothing to run
    ("Run the tests", []),
]


@pytest.mark.parametrize(("task", "expected"), NAMED_SCRIPTS, ids=[c[0][:40] for c in NAMED_SCRIPTS])
def test_a_script_the_task_says_to_run_is_an_acceptance_check(tmp_path: Path, task: str, expected: list[str]) -> None:
    (tmp_path / "tests").mkdir()
    for name in ("check.py", "tests/run.py", "check.sh", "deploy.sh"):
        (tmp_path / name).write_text("print('OK')\n")
    (tmp_path / "check.sh").chmod(0o755)
    checks = acceptance_from_task(task, workspace=tmp_path)
    assert [c.command for c in checks] == expected
    for check in checks:
        assert check.source == "task" and check.reason.startswith("the task names it: “")
        assert check.protects      # editing the named script to pass is tampering


def test_a_named_script_needs_the_workspace_to_exist() -> None:
    assert acceptance_from_task("Fix the bug in calc.py, then run check.py.") == []
