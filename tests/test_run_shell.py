"""run_command (timeouts, tree kill, output cap) and the run_shell tool, with real processes."""

from __future__ import annotations

import os
import socket
import time
import tracemalloc
from dataclasses import dataclass
from pathlib import Path

import psutil
import pytest

from keel.engine.types import ToolCall
from keel.policy.process import run_command
from keel.policy.sandbox import SandboxPolicy
from keel.tools.base import ToolContext
from keel.tools.registry import ToolRegistry
from keel.tools.shell import RUN_SHELL, RunShellArgs, run_shell

ENV = {k: v for k, v in os.environ.items() if k in ("PATH", "HOME", "LANG")}


def run(command: str, cwd: Path, timeout: float = 20, cap: int = 30_000):
    return run_command(command, cwd, timeout_s=timeout, output_cap_bytes=cap, env=dict(ENV))


def gone(pid: int) -> bool:
    try:
        return psutil.Process(pid).status() == psutil.STATUS_ZOMBIE
    except psutil.NoSuchProcess:
        return True


def pids_in(path: Path) -> list[int]:
    return [int(x) for x in path.read_text().split()]


# ---------------------------------------------------------------- run_command


def test_exit_code_and_merged_output(tmp_path: Path) -> None:
    result = run("echo out; echo err >&2; exit 3", tmp_path)
    assert result.exit_code == 3 and result.signal is None and not result.timed_out
    assert result.output == "out\nerr\n" and result.total_bytes == 8


def test_death_by_signal_is_reported(tmp_path: Path) -> None:
    result = run("kill -KILL $$", tmp_path)
    assert result.exit_code is None and result.signal == 9


def test_stdin_is_closed(tmp_path: Path) -> None:
    result = run("cat; read line; echo read=$?", tmp_path, timeout=10)
    assert result.exit_code == 0 and "read=1" in result.output and result.elapsed_s < 2


def test_timeout_kills_child_and_grandchild(tmp_path: Path) -> None:
    pidfile = tmp_path / "pids"
    command = (f"sleep 100 & echo $! >> {pidfile}; "
               f"bash -c 'sleep 100 & echo $! >> {pidfile}; wait' & echo $! >> {pidfile}; "
               f"setsid sleep 100 & echo $! >> {pidfile}; wait")
    result = run(command, tmp_path, timeout=1)
    assert result.timed_out and result.exit_code is None and result.elapsed_s < 4
    pids = pids_in(pidfile)
    assert len(pids) == 4
    assert all(gone(pid) for pid in pids), [p for p in pids if not gone(p)]


def test_reading_stops_even_if_an_escaped_process_holds_the_pipe(tmp_path: Path) -> None:
    pidfile = tmp_path / "pid"
    # The subshell exits at once, so the setsid'd sleep is neither in the group nor a descendant
    # when the timeout hits; it keeps stdout open for 30 s.
    result = run(f"(setsid sleep 30 & echo $! > {pidfile}); echo started; sleep 100", tmp_path, timeout=1)
    try:
        assert result.timed_out and "started" in result.output
        assert result.elapsed_s < 4
    finally:
        for pid in pids_in(pidfile):
            if not gone(pid):
                os.kill(pid, 9)


def test_background_jobs_do_not_outlive_the_command(tmp_path: Path) -> None:
    pidfile = tmp_path / "pid"
    result = run(f"sleep 100 & echo $! > {pidfile}; echo done", tmp_path)
    assert result.exit_code == 0 and result.output == "done\n" and result.elapsed_s < 2
    assert all(gone(pid) for pid in pids_in(pidfile))


def test_output_cap_keeps_head_and_tail_and_counts_the_rest(tmp_path: Path) -> None:
    result = run("seq 1 700000", tmp_path, cap=10_000)
    total = sum(len(f"{i}\n") for i in range(1, 700001))
    assert result.truncated and result.total_bytes == total
    head, marker, tail = result.output.partition("\n... [")
    assert head.startswith("1\n2\n3\n") and tail.endswith("699999\n700000\n")
    omitted = marker + tail.split("\n", 1)[0]
    assert f"total {total} bytes] ..." in omitted
    kept_lines = head.count("\n") + 1 + tail.split("\n", 1)[1].count("\n")
    omitted_lines = int(omitted.split("(")[1].split(" lines")[0])
    assert kept_lines + omitted_lines == 700000
    assert len(result.output) < 10_000 + 200


def test_output_memory_stays_bounded(tmp_path: Path) -> None:
    tracemalloc.start()
    try:
        result = run("yes 0123456789abcdef | head -c 20000000", tmp_path, cap=30_000)
        _, peak = tracemalloc.get_traced_memory()
    finally:
        tracemalloc.stop()
    assert result.total_bytes == 20_000_000 and result.truncated
    assert peak < 1_000_000, f"peak Python allocation {peak} bytes for 20 MB of output"


def test_cut_never_splits_a_character(tmp_path: Path) -> None:
    result = run("python3 -c \"print('é' * 50000, end='')\"", tmp_path, cap=1001)
    assert result.truncated and "\ufffd" not in result.output
    assert result.output.startswith("éé") and result.output.endswith("éé")


# ---------------------------------------------------------------- the run_shell tool


@dataclass
class Outcome:
    allowed: bool
    message: str
    decision: str
    network: bool = False


class Gate:
    """An approval gate with a fixed answer; records what it was asked."""

    def __init__(self, allowed: bool = True, network: bool = False, message: str = "") -> None:
        self.outcome = Outcome(allowed, message, "allow" if allowed else "deny", network)
        self.asked: list[str] = []

    def authorize_shell(self, command: str) -> Outcome:
        self.asked.append(command)
        return self.outcome


def ctx_for(ws: Path, gate: Gate | None = None, **kw) -> ToolContext:
    return ToolContext(workspace=ws, approval=gate if gate is not None else Gate(), **kw)


@pytest.mark.bubblewrap
def test_result_reports_exit_code_first_and_a_check(tmp_path: Path) -> None:
    (tmp_path / "fail.py").write_text("import sys\nprint('hi')\nsys.exit(3)\n")
    result = run_shell(RunShellArgs(command="python3 fail.py"), ctx_for(tmp_path))
    assert not result.ok
    assert result.output.splitlines() == ["exit code: 3", "hi"]
    assert result.check is not None and result.check.exit_code == 3 and result.check.kind == "run"
    assert result.meta["sandbox"] == "bubblewrap" and result.meta["truncated"] is False

    ok = run_shell(RunShellArgs(command="true"), ctx_for(tmp_path))
    assert ok.ok and ok.output == "exit code: 0\n(no output)" and ok.check is not None and ok.check.kind is None


def test_timeout_result(tmp_path: Path) -> None:
    result = run_shell(RunShellArgs(command="echo before; sleep 50", timeout=1), ctx_for(tmp_path))
    assert not result.ok
    assert result.output.startswith("timed out after 1 s — the whole process tree was killed\nbefore")
    assert result.check is not None and result.check.timed_out and result.check.exit_code is None


def test_refusal_by_the_gate_runs_nothing(tmp_path: Path) -> None:
    gate = Gate(allowed=False, message="Refused: deleting the repository is not allowed.")
    result = run_shell(RunShellArgs(command="touch marker"), ctx_for(tmp_path, gate))
    assert not result.ok and result.output == "Refused: deleting the repository is not allowed."
    assert gate.asked == ["touch marker"] and not (tmp_path / "marker").exists()


def test_without_a_gate_a_dangerous_command_is_refused_unrun(tmp_path: Path) -> None:
    # With no approval gate, the risk classifier decides; where none exists, nothing runs at all.
    result = run_shell(RunShellArgs(command="touch marker && rm -rf --no-preserve-root /"),
                       ToolContext(workspace=tmp_path))
    assert not result.ok and result.check is None
    assert not (tmp_path / "marker").exists()


def test_network_follows_the_approval(tmp_path: Path) -> None:
    server = socket.socket()
    server.bind(("127.0.0.1", 0))
    server.listen(4)
    port = server.getsockname()[1]
    command = f"python3 -c \"import socket; socket.create_connection(('127.0.0.1', {port}), timeout=3)\""
    try:
        assert not run_shell(RunShellArgs(command=command), ctx_for(tmp_path, Gate(network=False))).ok
        assert run_shell(RunShellArgs(command=command), ctx_for(tmp_path, Gate(network=True))).ok
    finally:
        server.close()


def test_secret_variables_of_keel_do_not_reach_commands(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("KEEL_TEST_TOKEN", "tok-123")
    monkeypatch.setenv("KEEL_TEST_VISIBLE", "plain")
    monkeypatch.setenv("VIRTUAL_ENV", "/some/venv")
    result = run_shell(RunShellArgs(command="env"), ctx_for(tmp_path))
    # an allow-list: a toolchain variable passes, a name not on it does not (plain or not)
    assert "VIRTUAL_ENV=/some/venv" in result.output and "tok-123" not in result.output
    assert "KEEL_TEST_VISIBLE" not in result.output


@pytest.mark.bubblewrap
def test_sandbox_failures_are_explained(tmp_path: Path) -> None:
    result = run_shell(RunShellArgs(command="touch /usr/keel-x"), ctx_for(tmp_path))
    assert not result.ok and "only the workspace and /tmp are writable" in result.output


@pytest.mark.bubblewrap
def test_a_git_commit_refused_by_the_read_only_git_dir_is_explained(tmp_path: Path) -> None:
    """Under bubblewrap .git is read-only (its hooks and config run code later, outside any
    sandbox): a model's `git commit` fails, and the result says why instead of leaving a puzzle."""
    import subprocess
    subprocess.run(["git", "init", "-q"], cwd=tmp_path, check=True)
    (tmp_path / "a.txt").write_text("x\n")
    result = run_shell(RunShellArgs(command="git add a.txt && git commit -qm x"), ctx_for(tmp_path))
    assert not result.ok and ".git and .keel are read-only for commands" in result.output
    log = subprocess.run(["git", "log", "--oneline"], cwd=tmp_path, capture_output=True, text=True)
    assert log.stdout == ""


def test_output_cap_and_disabled_sandbox_from_the_context(tmp_path: Path) -> None:
    ctx = ctx_for(tmp_path, sandbox=SandboxPolicy(enabled=False), output_cap_bytes=2_000)
    result = run_shell(RunShellArgs(command="seq 1 100000"), ctx)
    assert result.ok and result.meta["truncated"] and result.meta["sandbox"] == "rlimits"
    assert "omitted; total 588895 bytes" in result.output and len(result.output) < 2_300


def test_arguments_are_validated_for_the_model(tmp_path: Path) -> None:
    registry = ToolRegistry([RUN_SHELL])
    bad = registry.execute(ToolCall("1", "run_shell", '{"command": "ls", "timeout": 601}'), ctx_for(tmp_path))
    assert not bad.ok and "timeout" in bad.output
    missing = registry.execute(ToolCall("2", "run_shell", "{}"), ctx_for(tmp_path))
    assert not missing.ok and "command" in missing.output
    started = time.monotonic()
    good = registry.execute(ToolCall("3", "run_shell", '{"command": "echo hi"}'), ctx_for(tmp_path))
    assert good.ok and good.output == "exit code: 0\nhi" and time.monotonic() - started < 5


def test_cpu_limit_death_is_named(tmp_path: Path) -> None:
    for enabled in (True, False):
        ctx = ctx_for(tmp_path, sandbox=SandboxPolicy(enabled=enabled, cpu_seconds=1))
        result = run_shell(RunShellArgs(command="python3 -c 'while True: pass'"), ctx)
        assert not result.ok and "SIGXCPU (the CPU time limit was reached)" in result.output.splitlines()[0]


def test_timeout_never_exceeds_the_runs_remaining_wall_clock(tmp_path: Path) -> None:
    started = time.monotonic()
    result = run_shell(RunShellArgs(command="sleep 30", timeout=600), ctx_for(tmp_path, deadline=started + 2))
    assert result.meta["timed_out"] and time.monotonic() - started < 8
    assert "cut to the run's remaining wall-clock time" in result.output.splitlines()[0]
    late = run_shell(RunShellArgs(command="touch m"), ctx_for(tmp_path, deadline=time.monotonic() + 0.5))
    assert not late.ok and "wall-clock limit" in late.output and not (tmp_path / "m").exists()


def test_the_runner_hands_its_deadline_to_the_shell(tmp_path: Path) -> None:
    from conftest import call

    from keel.agent import Agent
    from keel.loop.limits import Limits
    from keel.testing import ScriptedModel

    script = [{"tool_calls": [call("run_shell", command="sleep 60", timeout=600)]}, {"content": "done"}]
    started = time.monotonic()
    Agent(ScriptedModel(script), workspace=tmp_path, log_path=False).run("wait", limits=Limits(max_seconds=3))
    assert time.monotonic() - started < 20
