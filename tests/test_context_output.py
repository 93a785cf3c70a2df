"""Long command output: real pytest / ruff / mypy failures through run_shell, reduced for the model,
saved in full under the session directory, and readable again with read_file."""

from __future__ import annotations

import json
import os
import sys
from pathlib import Path

from keel.context.output import CHECKS_DIR, OUTPUTS_DIR, VERBATIM_MAX_BYTES, OutputSpill
from keel.engine.types import ToolCall
from keel.policy.approval import Approver
from keel.policy.rules import RuleSet
from keel.policy.sandbox import SandboxPolicy
from keel.tools.base import ToolContext
from keel.tools.catalog import default_tools
from keel.tools.registry import ToolRegistry
from keel.tools.shell import RUN_SHELL, RunShellArgs, run_shell

PY = sys.executable
PYTEST = f"PYTEST_DISABLE_PLUGIN_AUTOLOAD=1 {PY} -m pytest -p no:cacheprovider"


def failing_suite(root: Path, passing: int = 60, failing: int = 4) -> Path:
    """A test file with many passing tests and a few failing ones whose assertions name their inputs."""
    parts = []
    for i in range(passing):
        parts.append(f"def test_ok_{i}():\n    assert {i} + 1 == {i + 1}\n")
    for i in range(failing):
        parts.append(f"def test_total_{i}():\n    items = list(range({10 + i}))\n"
                     f"    assert sum(items) == {1000 + i}, 'total of {10 + i} items'\n")
    (root / "test_suite.py").write_text("\n\n".join(parts))
    return root


def lint_target(root: Path, functions: int = 120) -> Path:
    body = "import os\nimport sys\n\n" + "\n".join(
        f"def helper_{i}(a):\n    return a.value + undefined_{i}\n" for i in range(functions))
    (root / "lib.py").write_text(body)
    return root


def ws_dir(tmp_path: Path) -> Path:
    (tmp_path / "ws").mkdir()
    return tmp_path / "ws"


def context(root: Path, session: Path | None) -> ToolContext:
    """An unattended context whose configuration allows every command (the tests run their own)."""
    approval = Approver("unattended", rules=RuleSet.from_config(allow=["shell(*)"]), workspace=root)
    return ToolContext(workspace=root, session_dir=session, approval=approval, sandbox=SandboxPolicy(enabled=False))


def model_view(command: str, ctx: ToolContext):
    return RUN_SHELL.execute(RunShellArgs(command=command, timeout=120), ctx)


def saved_files(session: Path) -> list[Path]:
    return sorted((session / OUTPUTS_DIR).glob("*.log")) if (session / OUTPUTS_DIR).exists() else []


def test_pytest_failures_are_reduced_and_the_full_output_is_saved(tmp_path: Path) -> None:
    ws, session = failing_suite(ws_dir(tmp_path)), tmp_path / "session"
    command = f"{PYTEST} -v"
    before = run_shell(RunShellArgs(command=command), context(ws, session))   # what the gate still gets
    after = model_view(command, context(ws, session))
    assert not after.ok and after.check is not None and after.check.exit_code == 1
    text = after.output
    saved = Path(after.meta["saved_output"])
    assert saved.parent == session / OUTPUTS_DIR and str(saved) in text
    # what matters: each failing test, its assertion with the message, its location, the summary line
    for i in range(4):
        assert f"test_suite.py::test_total_{i}" in text
    assert "AssertionError: total of 10 items" in text
    assert "test_suite.py:" in text
    assert "4 failed, 60 passed" in text
    # what does not: the 60 passing tests
    assert "test_ok_17 PASSED" not in text and "test_ok_17 PASSED" in before.output
    # nothing is lost: the file holds every line the command printed
    full = saved.read_text()
    assert all(f"test_suite.py::test_ok_{i} PASSED" in full for i in range(60))
    assert len(text.encode()) * 3 < len(before.output.encode())


def test_ruff_findings_are_reduced_to_locations_and_its_summary(tmp_path: Path) -> None:
    ws, session = lint_target(tmp_path), tmp_path / "session"
    command = f"{PY} -m ruff check --no-cache --isolated --select F,E,ANN lib.py"
    before = run_shell(RunShellArgs(command=command), context(ws, session))
    after = model_view(command, context(ws, session))
    assert before.check and before.check.exit_code == 1
    text = after.output
    assert "lib.py:1:8: F401" in text and "F821 Undefined name `undefined_0`" in text
    assert "Found " in text and " errors" in text           # ruff's own summary line, from the tail
    full = Path(after.meta["saved_output"]).read_text()
    assert "Undefined name `undefined_119`" in full and "Undefined name `undefined_119`" not in text
    assert len(text.encode()) * 5 < len(before.output.encode())


def test_mypy_errors_are_reduced(tmp_path: Path) -> None:
    ws, session = lint_target(tmp_path, functions=200), tmp_path / "session"
    command = f"{PY} -m mypy --strict --no-incremental --cache-dir=/dev/null lib.py"
    after = model_view(command, context(ws, session))
    assert after.check and after.check.exit_code == 1
    assert "lib.py:4: error: Function is missing a type annotation" in after.output
    assert 'lib.py:5: error: Name "undefined_0" is not defined' in after.output
    assert "Found " in after.output and "errors in 1 file" in after.output
    assert len(after.output.encode()) < 4_000 < after.meta["total_bytes"]


def test_short_output_stays_verbatim_and_nothing_is_saved(tmp_path: Path) -> None:
    ws, session = failing_suite(tmp_path, passing=2, failing=1), tmp_path / "session"
    after = model_view(f"{PYTEST} -q", context(ws, session))
    assert after.meta["total_bytes"] < VERBATIM_MAX_BYTES
    assert "def test_total_0" in after.output          # pytest's own report, as it printed it
    assert after.meta["saved_output"] is None and saved_files(session) == []


def test_long_passing_run_keeps_its_start_problem_lines_and_summary(tmp_path: Path) -> None:
    ws, session = failing_suite(tmp_path, passing=400, failing=0), tmp_path / "session"
    (ws / "test_warn.py").write_text("import warnings\n\ndef test_warns():\n    warnings.warn('slow path used')\n")
    after = model_view(f"{PYTEST} -v", context(ws, session))
    assert after.ok
    assert "401 passed, 1 warning" in after.output
    assert "test session starts" in after.output              # the head
    assert after.output.count("PASSED") < 40
    assert len(after.output.encode()) < 5_000


def test_a_failed_command_of_no_known_format_keeps_error_lines_and_tail(tmp_path: Path) -> None:
    session = tmp_path / "session"
    script = "seq 1 4000; echo 'fatal: could not lock config file'; seq 1 50; exit 4"
    after = model_view(script, context(tmp_path, session))
    assert after.output.startswith("exit code: 4")
    assert "fatal: could not lock config file" in after.output
    assert "50" in after.output.splitlines()[-1]
    assert len(after.output.encode()) < 2_000


def test_same_output_twice_names_the_same_file(tmp_path: Path) -> None:
    """The loop's repetition guard compares results byte for byte: a rerun must not look new."""
    ws, session = lint_target(tmp_path), tmp_path / "session"
    command = f"{PY} -m ruff check --no-cache --isolated --select F lib.py"
    first, second = model_view(command, context(ws, session)), model_view(command, context(ws, session))
    assert first.output == second.output and len(saved_files(session)) == 1


def test_read_file_pages_through_a_saved_output_but_nothing_else_outside(tmp_path: Path) -> None:
    ws, session = lint_target(ws_dir(tmp_path)), tmp_path / "sess"
    ctx = context(ws, session)
    saved = model_view(f"{PY} -m ruff check --no-cache --isolated --select F lib.py", ctx).meta["saved_output"]
    registry = ToolRegistry(default_tools())

    def read(path: str, **extra: int) -> str:
        return registry.execute(ToolCall("r", "read_file", json.dumps({"path": path, **extra})), ctx).output

    page = read(saved, offset=200, limit=5)
    assert "showing lines 200-204" in page and "F821" in page
    (session / "secret.log").write_text("not for the model")
    assert "not for the model" not in read(str(session / "secret.log"))
    (session / OUTPUTS_DIR / "escape.log").symlink_to(session / "secret.log")
    assert "not for the model" not in read(str(session / OUTPUTS_DIR / "escape.log"))
    assert "not for the model" not in read(os.path.relpath(session / "secret.log", ws))


def test_read_file_reads_the_gates_saved_check_output_by_the_path_its_pushback_gave_or_named_short(
        tmp_path: Path) -> None:
    """The pushback says "full output: <session>/checks/002-test-….log"; the 1.5B read it as
    "session/checks/002-test-….log" and was told "File not found" (py-config-default)."""
    ws, session = ws_dir(tmp_path), tmp_path / "sess"
    (session / CHECKS_DIR).mkdir(parents=True)
    log = session / CHECKS_DIR / "002-test-python3-m-pytest-q.log"
    log.write_text("FAILED test_settings.py::test_timeout_is_read\n")
    ctx = context(ws, session)
    registry = ToolRegistry(default_tools())

    def read(path: str) -> str:
        return registry.execute(ToolCall("r", "read_file", json.dumps({"path": path})), ctx).output

    assert "test_timeout_is_read" in read(str(log))
    assert "test_timeout_is_read" in read("session/checks/002-test-python3-m-pytest-q.log")
    assert "File not found" in read("session/checks/003-none.log")
    (session / "secret.log").write_text("not for the model")
    (session / CHECKS_DIR / "escape.log").symlink_to(session / "secret.log")
    assert "not for the model" not in read("sess/checks/escape.log")
    assert "not for the model" not in read("checks/../secret.log")
    (ws / "checks").mkdir()
    (ws / "checks" / "002-test-python3-m-pytest-q.log").write_text("the project's own log\n")
    assert "the project's own log" in read("checks/002-test-python3-m-pytest-q.log")   # the workspace's first


def test_without_a_session_directory_output_is_only_capped(tmp_path: Path) -> None:
    ws = lint_target(tmp_path)
    after = model_view(f"{PY} -m ruff check --no-cache --isolated --select F,E,ANN lib.py", context(ws, None))
    assert "undefined_0" in after.output and after.meta["saved_output"] is None


def test_spill_keeps_a_bounded_prefix_and_says_where_it_cut(tmp_path: Path) -> None:
    spill = OutputSpill(tmp_path, "yes | head", max_bytes=100_000)
    for _ in range(100):
        spill.feed(b"y\n" * 1000)     # 200 kB in all: past memory, past the file's limit
    path = spill.save()
    assert path is not None
    data = path.read_bytes()
    assert data.startswith(b"y\ny\n") and b"output cut here after 100000 bytes" in data
    assert b"wrote 200000 bytes in all" in data and len(data) < 100_200
    assert [p.name for p in tmp_path.iterdir()] == [path.name]   # no partial file left behind


def test_output_that_cannot_be_saved_stays_capped_with_a_note(tmp_path: Path) -> None:
    ws = lint_target(ws_dir(tmp_path))
    blocker = tmp_path / "session"
    blocker.write_text("a file where the session directory should be")
    after = model_view(f"{PY} -m ruff check --no-cache --isolated --select F lib.py", context(ws, blocker))
    assert "could not save the full output" in after.output and "undefined_0" in after.output
