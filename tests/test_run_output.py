"""What `keel run` prints in text mode, through the real CLI against the scripted engine (real HTTP):
what tools did, the finish summary whole, diffs with --verbose."""

from __future__ import annotations

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
