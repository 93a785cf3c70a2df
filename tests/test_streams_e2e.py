"""Streams and encodings through the real `keel` process: a reader that leaves after the first line
stops no run, every command is quiet on a closed pipe, input that is not UTF-8 is a clear exit 2,
JSON modes always print a result object, a stop signal before the loop still writes a result, and
the library's Agent() reads the environment and config files the CLI reads."""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
import time
from pathlib import Path

import pytest
from conftest import call

from keel.testing.server import ScriptedEngineServer

KEEL = [sys.executable, "-m", "keel.cli.main"]
NO_ENGINE = ("--base-url", "http://127.0.0.1:9/v1", "--model", "m")


def _events(log: Path) -> list[dict]:
    return [json.loads(line) for line in log.read_text(encoding="utf-8").splitlines()]


def _alive_with(token: str) -> list[int]:
    """Live (not zombie) processes whose command line carries ``token``."""
    found = []
    for entry in filter(str.isdigit, os.listdir("/proc")):
        try:
            cmdline = Path(f"/proc/{entry}/cmdline").read_bytes()
            stat = Path(f"/proc/{entry}/stat").read_bytes()
        except OSError:
            continue
        if token.encode() in cmdline and stat[stat.rfind(b")") + 2:][:1] != b"Z":
            found.append(int(entry))
    return found


# -- a reader that leaves ---------------------------------------------------------------------

def _steps_after_the_reader_leaves() -> list[dict]:
    """A line for the reader, then (after it has left) steps whose output meets a closed pipe.
    Read-only, so the run may complete without a check."""
    return [{"content": "Looking.", "tool_calls": [call("list_dir", path=".")]},
            {"delay_s": 1, "tool_calls": [call("read_file", path="calc.py")]},
            {"tool_calls": [call("read_file", path="test_calc.py")]},
            {"tool_calls": [call("finish", summary="calc.py subtracts; test_calc.py expects a sum.")]},
            {"content": "Done."}, {"content": "Done."}]


@pytest.mark.parametrize("output_format", ["text", "stream-json"])
def test_a_reader_that_leaves_after_one_line_stops_no_run(calc_repo, keel_env, tmp_path, output_format):
    log = tmp_path / "run.jsonl"
    with ScriptedEngineServer(_steps_after_the_reader_leaves()) as server:
        proc = subprocess.Popen([*KEEL, "run", "What does calc.py do? Just explain.", "--cwd", str(calc_repo),
                                 "--base-url", server.base_url, "--model", "scripted", "--log", str(log),
                                 "--output-format", output_format],
                                env=keel_env, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
        assert proc.stdout is not None and proc.stderr is not None
        first = proc.stdout.readline()  # `| head -1`: one line, then the reader is gone
        proc.stdout.close()
        err = proc.stderr.read()
        proc.wait(timeout=60)
    assert first.strip()
    assert "Traceback" not in err and "BrokenPipe" not in err and "cannot write the event log" not in err, err
    events = _events(log)
    calls = [e["name"] for e in events if e["type"] == "tool_call"]
    assert calls == ["list_dir", "read_file", "read_file", "finish"]  # every step after the reader left ran
    assert events[-1]["type"] == "stop" and events[-1]["status"] == "complete"
    assert proc.returncode == 0  # the run's own code: it completed


@pytest.fixture
def one_session(calc_repo, keel_env):
    """A finished session in KEEL_HOME, for the commands that read sessions."""
    with ScriptedEngineServer([{"tool_calls": [call("write_file", path="n.txt", content="x")]},
                               {"content": "Done."}]) as server:
        subprocess.run([*KEEL, "run", "write n.txt", "--cwd", str(calc_repo), "--base-url", server.base_url,
                        "--model", "scripted", "--verify", "off"], env=keel_env, capture_output=True, timeout=60)
    return calc_repo


@pytest.mark.parametrize("command", [
    ["checks"], ["checks", "--json"], ["policy", "ls -la"], ["undo", "--dry-run"], ["eval", "list"], ["log"],
    ["stats"], ["doctor", *NO_ENGINE], ["tool", "list_dir"], ["--help"], ["run", "--help"],
], ids=lambda c: " ".join(c[:2]))
def test_every_command_is_quiet_on_a_closed_pipe(one_session, keel_env, command):
    read_end, write_end = os.pipe()
    os.close(read_end)  # the reader left before keel wrote anything
    try:
        proc = subprocess.run([*KEEL, *command], cwd=one_session, env=keel_env, stdout=write_end,
                              stderr=subprocess.PIPE, text=True, timeout=60)
    finally:
        os.close(write_end)
    assert "Traceback" not in proc.stderr and "BrokenPipe" not in proc.stderr, proc.stderr
    assert proc.returncode == 141, (proc.returncode, proc.stderr)


def test_undo_on_a_closed_pipe_still_restores_everything(one_session, keel_env):
    """Quiet must not mean half-done: the files are restored, then exit 141 for the lost output."""
    assert (one_session / "n.txt").exists()
    read_end, write_end = os.pipe()
    os.close(read_end)
    try:
        proc = subprocess.run([*KEEL, "undo"], cwd=one_session, env=keel_env, stdout=write_end,
                              stderr=subprocess.PIPE, text=True, timeout=60, stdin=subprocess.DEVNULL)
    finally:
        os.close(write_end)
    assert "Traceback" not in proc.stderr, proc.stderr
    assert not (one_session / "n.txt").exists(), proc.stderr
    assert proc.returncode in (0, 141), proc.stderr


# -- input that is not UTF-8 ------------------------------------------------------------------

def _run_bytes(argv: list[bytes], env: dict[str, str], stdin: bytes = b"") -> subprocess.CompletedProcess[bytes]:
    return subprocess.run([os.fsencode(sys.executable), b"-m", b"keel.cli.main", *argv], input=stdin, env=env,
                          capture_output=True, timeout=60)


def _result(stdout: bytes) -> dict:
    return json.loads(stdout.decode("utf-8").strip().splitlines()[-1])


@pytest.mark.parametrize("output_format", [b"json", b"stream-json", b"text"])
def test_a_task_argument_that_is_not_utf8_is_a_usage_error(calc_repo, keel_env, output_format):
    proc = _run_bytes([b"run", b"fix \xff the bug", b"--cwd", os.fsencode(calc_repo), *map(os.fsencode, NO_ENGINE),
                       b"--output-format", output_format], keel_env)
    err = proc.stderr.decode("utf-8")
    assert proc.returncode == 2 and "Traceback" not in err, err
    assert "argument 2 is not valid UTF-8 (byte 0xff at position 4)" in err
    if output_format == b"text":
        assert proc.stdout == b""
    else:
        result = _result(proc.stdout)
        assert result["status"] == "error" and "not valid UTF-8" in result["error"]
        assert result.get("type") == ("result" if output_format == b"stream-json" else None)


def test_a_flag_value_that_is_not_utf8_is_named(calc_repo, keel_env):
    proc = _run_bytes([b"run", b"x", b"--accept", b"pytest \xe9", b"--cwd", os.fsencode(calc_repo),
                       *map(os.fsencode, NO_ENGINE), b"--output-format", b"json"], keel_env)
    assert proc.returncode == 2
    assert "the value of --accept is not valid UTF-8 (byte 0xe9" in _result(proc.stdout)["error"]


def test_a_task_on_stdin_that_is_not_utf8_is_a_usage_error(calc_repo, keel_env):
    proc = _run_bytes([b"run", b"-", b"--cwd", os.fsencode(calc_repo), *map(os.fsencode, NO_ENGINE),
                       b"--output-format", b"json"], keel_env, stdin=b"first line\nfix \xc3( it\n")
    err = proc.stderr.decode("utf-8")
    assert proc.returncode == 2 and "Traceback" not in err, err
    message = "the task read from stdin is not valid UTF-8 (byte 0xc3 at offset 15, line 2)"
    assert message in err and message in _result(proc.stdout)["error"]


def test_a_task_file_that_is_not_utf8_is_a_usage_error(calc_repo, keel_env, tmp_path):
    task = tmp_path / "task.txt"
    task.write_bytes(b"r\xe9sum\xe9 in latin-1")
    proc = _run_bytes([b"run", b"--task-file", os.fsencode(task), b"--cwd", os.fsencode(calc_repo),
                       *map(os.fsencode, NO_ENGINE), b"--output-format", b"json"], keel_env)
    assert proc.returncode == 2 and b"Traceback" not in proc.stderr
    assert "is not valid UTF-8 (byte 0xe9 at offset 1, line 1)" in _result(proc.stdout)["error"]


def test_a_config_file_that_is_not_utf8_is_a_configuration_error(calc_repo, keel_env):
    cfg = Path(keel_env["XDG_CONFIG_HOME"]) / "keel" / "config.toml"
    cfg.parent.mkdir(parents=True)
    cfg.write_bytes(b'[engine]\nmodel = "caf\xe9"\n')
    proc = _run_bytes([b"run", b"x", b"--cwd", os.fsencode(calc_repo), b"--output-format", b"json"], keel_env)
    assert proc.returncode == 2 and b"Traceback" not in proc.stderr
    assert "config.toml: not valid UTF-8 (byte 0xe9" in _result(proc.stdout)["error"]


# -- argument errors in json modes --------------------------------------------------------------

@pytest.mark.parametrize(("flags", "needle"), [
    (["--max-steps", "0"], "argument --max-steps: must be at least 1, got 0"),
    (["--max-seconds=-1"], "argument --max-seconds"),
    (["--approval", "always"], "argument --approval: invalid choice"),
    (["--no-such-flag"], "unrecognized arguments: --no-such-flag"),
])
@pytest.mark.parametrize("output_format", ["json", "stream-json"])
def test_a_bad_flag_in_json_mode_still_prints_a_result(run_keel, calc_repo, flags, needle, output_format):
    r = run_keel("run", "x", "--cwd", str(calc_repo), "--output-format", output_format, *flags)
    assert r.code == 2 and "Traceback" not in r.stderr and needle in r.stderr, r.stderr
    result = r.result
    assert result["status"] == "error" and result["stop_reason"] == "config_error" and needle in result["error"]


def test_a_bad_flag_in_text_mode_prints_no_json(run_keel, calc_repo):
    r = run_keel("run", "x", "--cwd", str(calc_repo), "--max-steps", "0")
    assert r.code == 2 and r.stdout == "" and "must be at least 1" in r.stderr


# -- a stop signal before the loop began --------------------------------------------------------

def test_sigterm_during_a_start_hook_writes_a_result_and_a_stop(calc_repo, keel_env, tmp_path):
    cfg = Path(keel_env["XDG_CONFIG_HOME"]) / "keel" / "config.toml"
    cfg.parent.mkdir(parents=True)
    flag = calc_repo / "hook-started"   # hooks run sandboxed: the workspace is where they may write
    token = f"{os.getpid()}{time.monotonic_ns()}"
    cfg.write_text(f'[[hooks.SessionStart]]\ncommand = "touch {flag}; sleep 30 # {token}"\n')
    log = tmp_path / "run.jsonl"
    with ScriptedEngineServer([{"content": "Done."}]) as server:
        proc = subprocess.Popen([*KEEL, "run", "x", "--cwd", str(calc_repo), "--base-url", server.base_url,
                                 "--model", "scripted", "--log", str(log), "--output-format", "json"],
                                env=keel_env, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
        deadline = time.monotonic() + 30
        while time.monotonic() < deadline and not flag.exists():
            time.sleep(0.05)
        assert flag.exists(), "the SessionStart hook never ran"
        proc.send_signal(signal.SIGTERM)
        out, err = proc.communicate(timeout=60)
        assert not server.requests  # stopped before the first model call
    assert proc.returncode == 143 and "Traceback" not in err, err
    result = json.loads(out.strip().splitlines()[-1])
    assert result["status"] == "incomplete" and result["stop_reason"] == "interrupted"
    stop = _events(log)[-1]
    assert stop["type"] == "stop" and stop["reason"] == "interrupted"
    time.sleep(0.3)
    assert not _alive_with(token), "the hook's processes outlived keel"


# -- the library reads what the CLI reads ----------------------------------------------------------

def test_agent_reads_the_environment_and_the_user_config(calc_repo, keel_env):
    cfg = Path(keel_env["XDG_CONFIG_HOME"]) / "keel" / "config.toml"
    cfg.parent.mkdir(parents=True)
    cfg.write_text("[limits]\nmax_steps = 7\n[engine]\napi_key_env = \"MY_KEY\"\n")
    code = ("from keel.agent import Agent\n"
            f"a = Agent(workspace={str(calc_repo)!r}, log_path=False)\n"
            "print(a.config.engine.base_url, a.engine.model, a.config.limits.max_steps)\n"
            "r = a.run('say done')\n"
            "print(r.status)\n")
    with ScriptedEngineServer([{"content": "Done."}] * 5, model="from-env", api_key="k-123") as server:
        env = {**keel_env, "KEEL_BASE_URL": server.base_url, "KEEL_MODEL": "from-env", "MY_KEY": "k-123"}
        proc = subprocess.run([sys.executable, "-c", code], env=env, capture_output=True, text=True, timeout=120)
        reached = len(server.requests)
    assert proc.returncode == 0, proc.stderr
    assert proc.stdout.splitlines()[0] == f"{server.base_url} from-env 7"
    assert reached >= 1  # with the key the user config names: the server refuses any other
