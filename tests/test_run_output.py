"""What `keel run` prints in text mode, through the real CLI against the scripted engine (real HTTP):
what tools did, the finish summary whole, diffs with --verbose."""

from __future__ import annotations

from pathlib import Path

from conftest import call

from keel.testing.server import ScriptedEngineServer

FIX = call("edit_file", path="calc.py", old_text="return a - b", new_text="return a + b")
SUMMARY = "Fixed `add`: it subtracted.\n\n- calc.py: `a - b` became `a + b`\n- the test passes now"


def _run(server: ScriptedEngineServer, repo, run_keel, *flags: str):
    return run_keel("run", "fix add", "--cwd", str(repo), "--base-url", server.base_url, "--model", "scripted",
                    *flags)


def test_verbose_text_shows_the_diff_and_a_commands_first_lines_and_the_summary_whole(calc_repo, run_keel):
    script = [{"tool_calls": [FIX]},
              {"tool_calls": [call("run_shell", command="printf 'one\\ntwo\\nthree\\nfour\\nfive\\nsix\\n'")]},
              {"tool_calls": [call("finish", summary=SUMMARY)]}]
    with ScriptedEngineServer(script) as server:
        r = _run(server, calc_repo, run_keel, "--verbose")
    out = r.stdout
    assert "    -    return a - b\n    +    return a + b" in out          # the edit's diff under its row
    assert "    one\n    two\n    three\n    four\n    … +2 lines" in out   # the command's output, folded
    assert "] finish → ok" in out and SUMMARY in out                        # the summary whole, not in the row


def test_without_verbose_rows_stay_one_line_each_but_the_summary_is_whole(calc_repo, run_keel):
    script = [{"tool_calls": [FIX]}, {"tool_calls": [call("finish", summary=SUMMARY)]}]
    with ScriptedEngineServer(script) as server:
        r = _run(server, calc_repo, run_keel)
    assert "return a - b" not in r.stdout and SUMMARY in r.stdout


def test_an_unknown_cost_is_null_in_the_stop_event_and_every_result(calc_repo, run_keel, keel_env):
    import json

    script = [{"tool_calls": [call("read_file", path="calc.py")]}, {"content": "An add function."}]
    with ScriptedEngineServer(script) as server:
        r = run_keel("run", "what is in calc.py?", "--cwd", str(calc_repo), "--base-url", server.base_url,
                     "--model", "scripted", "--output-format", "stream-json")
    events = [json.loads(line) for line in r.stdout.splitlines()]
    stop = next(e for e in events if e["type"] == "stop")
    assert stop["cost_usd"] is None and events[-1]["cost_usd"] is None      # never $0 when no prices are set
    flag_error = run_keel("run", "x", "--max-steps", "0", "--output-format", "json")
    engine_error = run_keel("run", "x", "--cwd", str(calc_repo), "--base-url", "http://127.0.0.1:9/v1",
                            "--model", "m", "--output-format", "json")
    assert flag_error.code == 2 and flag_error.result["cost_usd"] is None
    assert engine_error.result["status"] != "complete" and engine_error.result["cost_usd"] is None
    config = __import__("pathlib").Path(keel_env["XDG_CONFIG_HOME"]) / "keel" / "config.toml"
    config.parent.mkdir(parents=True, exist_ok=True)
    config.write_text("[prices]\ninput_per_m = 1.0\noutput_per_m = 2.0\n")
    with ScriptedEngineServer(script) as server:
        priced = run_keel("run", "what is in calc.py?", "--cwd", str(calc_repo), "--base-url", server.base_url,
                          "--model", "scripted", "--output-format", "stream-json")
    stop = next(json.loads(line) for line in priced.stdout.splitlines() if '"type": "stop"' in line)
    assert stop["cost_usd"] > 0


def test_a_limit_stop_says_how_to_go_on_and_the_resume_keeps_its_limits(calc_repo, run_keel):
    """limit:steps at --max-steps 2: the text output names the session and the command that carries it
    on; `--continue` keeps the limit (as an answer does), so without a higher one it says which flag to
    raise instead of stopping again at once; with --max-steps 4 it resumes from step 2, says so, and
    stops at 4 in all."""
    look = [{"tool_calls": [call("read_file", path="calc.py", offset=n)]} for n in range(1, 7)]
    with ScriptedEngineServer(look) as server:
        base = ["--cwd", str(calc_repo), "--base-url", server.base_url, "--model", "scripted"]
        first = run_keel("run", "study calc.py", *base, "--max-steps", "2")
        assert first.code == 1 and "■ incomplete (limit:steps) · 2 steps" in first.stdout
        hint = next(line for line in first.stderr.splitlines() if "carry it on" in line)
        assert "(limit:steps)" in hint and hint.endswith("--max-steps 4") and "keel run --resume " in hint
        same = run_keel("run", "--continue", *base)
        assert same.code == 2 and "stopped at limit:steps (--max-steps 2, 2 used" in same.stderr
        assert "--max-steps 4" in same.stderr
        more = run_keel("run", "--continue", *base, "--max-steps", "4")
    assert "resumed session " in more.stderr and "from step 2" in more.stderr
    assert "■ incomplete (limit:steps) · 4 steps" in more.stdout


def test_an_interrupted_run_names_its_session_and_how_to_go_on(calc_repo, keel_env):
    import signal
    import subprocess
    import sys
    import time

    script = [{"tool_calls": [call("run_shell", command="sleep 30")]}, {"content": "never"}]
    with ScriptedEngineServer(script) as server:
        proc = subprocess.Popen([sys.executable, "-m", "keel.cli.main", "run", "wait", "--cwd", str(calc_repo),
                                 "--base-url", server.base_url, "--model", "scripted", "--approval", "auto-edit"],
                                env=keel_env, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True,
                                stdin=subprocess.DEVNULL,
                                # a Ctrl-C as a terminal sends it: under a shell's background job (nohup
                                # pytest … &) SIGINT arrives ignored, and Python then never raises it
                                preexec_fn=lambda: signal.signal(signal.SIGINT, signal.SIG_DFL))
        while not server.requests:
            time.sleep(0.1)
        time.sleep(1.5)   # the command runs
        proc.send_signal(signal.SIGINT)
        out, err = proc.communicate(timeout=60)
    assert proc.returncode == 130, err
    assert "■ incomplete (interrupted)" in out
    hint = next(line for line in err.splitlines() if "carry it on" in line)
    assert "(interrupted)" in hint and "keel run --resume " in hint


def test_a_refused_key_says_whether_one_was_sent_and_from_where(calc_repo, run_keel, keel_env):
    with ScriptedEngineServer([{"content": "x"}] * 4, api_key="right-key") as server:
        base = ["run", "x", "--cwd", str(calc_repo), "--base-url", server.base_url, "--model", "scripted"]
        unset = run_keel(*base, "--api-key-env", "MY_SERVER_KEY")
        none = run_keel(*base)
        wrong = run_keel(*base, "--api-key-env", "MY_SERVER_KEY", env={**keel_env, "MY_SERVER_KEY": "wrong"})
        default = run_keel(*base, env={**keel_env, "KEEL_API_KEY": "wrong"})
        doctor = run_keel("doctor", "--base-url", server.base_url, "--api-key-env", "MY_SERVER_KEY")
    assert unset.code == none.code == wrong.code == default.code == 2
    assert "no API key was sent: --api-key-env / [engine] api_key_env names $MY_SERVER_KEY, which is not set" \
        in unset.stderr and "rejected" not in unset.stderr
    assert "no API key was sent: KEEL_API_KEY and OPENAI_API_KEY are not set" in none.stderr
    assert "the server rejected the API key from $MY_SERVER_KEY" in wrong.stderr
    assert "the server rejected the API key from $KEEL_API_KEY" in default.stderr
    assert "names $MY_SERVER_KEY, which is not set" in doctor.stdout


def test_a_refused_workspace_is_named_once_and_as_the_user_gave_it(run_keel, tmp_path):
    here = run_keel("run", "x", "--base-url", "http://127.0.0.1:9/v1", "--model", "m", cwd=Path("/"))
    assert here.code == 2 and "refusing / (the current directory) as the workspace" in here.stderr
    assert "--cwd ." not in here.stderr                       # nobody typed a --cwd
    gone = run_keel("run", "x", "--cwd", "nope", "--base-url", "http://127.0.0.1:9/v1", "--model", "m", cwd=tmp_path)
    assert f"keel: --cwd nope ({tmp_path / 'nope'}): no such directory" in gone.stderr
    absolute = run_keel("run", "x", "--cwd", str(tmp_path / "nope"), "--base-url", "http://127.0.0.1:9/v1",
                        "--model", "m")
    assert f"keel: --cwd {tmp_path / 'nope'}: no such directory" in absolute.stderr   # the path once


def test_an_unknown_flag_gets_the_commands_own_usage_and_the_flag_meant(run_keel):
    bogus = run_keel("run", "--bogus", "x")
    assert bogus.code == 2 and bogus.stderr.startswith("usage: keel run ")   # not the top-level list of commands
    assert "keel run: error: unrecognized arguments: --bogus" in bogus.stderr and "did you mean" not in bogus.stderr
    typo = run_keel("run", "fix it", "--max-stepz", "3", "--output-format", "json")
    assert typo.code == 2 and "(did you mean --max-steps?)" in typo.stderr
    assert typo.result["status"] == "error" and "did you mean --max-steps?" in typo.result["error"]


def test_trust_list_says_when_nothing_is_trusted(run_keel, calc_repo):
    empty = run_keel("trust", "--list")
    assert empty.code == 0 and "no project is trusted" in empty.stdout
    assert run_keel("trust", "--cwd", str(calc_repo)).code == 0
    listed = run_keel("trust", "--list")
    assert str(calc_repo) in listed.stdout and "no project is trusted" not in listed.stdout
