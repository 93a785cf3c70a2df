"""Linear time on text from outside (keel issue 22): every function in tests/linear_text_cases.py
finishes on each pathological input of a quarter megabyte within a bound far above its real cost
(tens of milliseconds) and far below what the quadratic regexes took (a 20,000-character word: 5 s).
A regression fails within the bound (SIGALRM), it does not hang the suite."""

from __future__ import annotations

import signal
import subprocess
import time
from collections.abc import Callable, Iterator
from contextlib import contextmanager

import pytest
from linear_text_cases import FUNCTIONS, pathological

SIZE = 256 * 1024
BOUND_SECONDS = 3.0


class TooSlow(Exception):
    pass


@contextmanager
def deadline(seconds: float) -> Iterator[None]:
    def expire(_signum: int, _frame: object) -> None:
        raise TooSlow
    previous = signal.signal(signal.SIGALRM, expire)
    signal.setitimer(signal.ITIMER_REAL, seconds)
    try:
        yield
    finally:
        signal.setitimer(signal.ITIMER_REAL, 0)
        signal.signal(signal.SIGALRM, previous)


INPUTS = pathological(SIZE)


@pytest.mark.parametrize("name", sorted(FUNCTIONS))
def test_function_is_linear_on_pathological_text(name: str) -> None:
    function: Callable[[str], object] = FUNCTIONS[name]
    slow: list[str] = []
    for kind, text in INPUTS.items():
        started = time.perf_counter()
        try:
            with deadline(BOUND_SECONDS):
                function(text)
        except TooSlow:
            slow.append(f"{kind}: over {BOUND_SECONDS} s")
            continue
        elapsed = time.perf_counter() - started
        if elapsed > BOUND_SECONDS:       # a C-level scan may only notice the alarm when it returns
            slow.append(f"{kind}: {elapsed:.1f} s")
    assert not slow, f"{name} on {SIZE:,} characters: " + "; ".join(slow)


def test_one_long_word_task_finds_no_names_and_still_reads_normal_tasks() -> None:
    from keel.core.request import parse_request
    from keel.verify.selfcheck import unrelated_changes
    from keel.verify.snapshot import FileChange

    changes = [FileChange("src/app.py", "modified", 1, 0, ("x = 1",), (1,)),
               FileChange("lib/other.py", "modified", 1, 0, ("y = 2",), (1,))]
    with deadline(BOUND_SECONDS):
        assert unrelated_changes(changes, parse_request("a" * 1_000_000)) == []   # names nothing: flags nothing
    # the same task tokenizer still reads a normal task: app.py is named, other.py is not
    assert unrelated_changes(changes, parse_request("fix the parse_config bug in app.py")) == ["lib/other.py"]


def test_keel_run_with_a_one_megabyte_one_word_task_ends_like_a_short_one(calc_repo, run_keel, tmp_path) -> None:
    """End to end: the measured hang (a 200,000-character word: over 150 s after the run stopped) is gone.
    The same scripted run (fix calc.py, finish) with a short task and with a 1 MB one-word task."""
    from conftest import call

    from keel.testing.server import ScriptedEngineServer

    script = [{"tool_calls": [call("edit_file", path="calc.py", old_text="return a - b", new_text="return a + b")]},
              {"tool_calls": [call("finish", summary="Fixed add().")]}]
    long_task = tmp_path / "task.txt"
    long_task.write_text("fix calc.py " + "a" * 1_000_000)
    durations = {}
    for label, task_args in (("short", ["fix calc.py"]), ("long", ["--task-file", str(long_task)])):
        git_clean = subprocess.run(["git", "checkout", "--", "calc.py"], cwd=calc_repo, check=True)
        assert git_clean.returncode == 0
        with ScriptedEngineServer(script) as server:
            r = run_keel("run", *task_args, "--cwd", str(calc_repo), "--base-url", server.base_url,
                         "--model", "scripted", "--output-format", "json", timeout=120)
        assert r.stdout.strip(), r.stderr[-2000:]
        assert "status" in r.result, r.stdout[-2000:]
        durations[label] = r.duration_s
    assert durations["long"] < 30, durations
    assert durations["long"] < 5 * durations["short"] + 5, durations
