"""What a person sees in the terminal: the start line fits one 120-column row (the sandbox's details
are behind --verbose), a call the model wrote as text shows as its step line only (never the raw
`<tool_call>` text), and `keel log` never cuts a session id, at 120 or 80 columns."""

from __future__ import annotations

import io
import time

from conftest import call

from keel.cli.render import TextRenderer, start_line
from keel.cli.textcalls import CallTextFilter
from keel.testing.server import ScriptedEngineServer

LOOK = {"tool_calls": [call("list_dir", path=".")]}
ANSWER = {"content": "It holds server.py."}
HERMES = ('I will list the folder first.\n<tool_call>\n{"name": "list_dir", "arguments": {"path": "."}}\n'
          '</tool_call>')
QWEN3 = ("Listing it.\n<tool_call>\n<function=list_dir>\n<parameter=path>\n.\n</parameter>\n</function>\n"
         "</tool_call>")
RAW = ("<tool_call>", "</tool_call>", "<function", "<parameter", '"arguments"')


def _env(keel_env: dict[str, str], columns: int) -> dict[str, str]:
    return {**keel_env, "COLUMNS": str(columns), "LINES": "50"}


def _project(tmp_path, depth: int = 1):
    ws = tmp_path
    for i in range(depth):
        ws = ws / f"a-rather-long-directory-name-{i:02d}"
    ws = ws / "my-app"
    ws.mkdir(parents=True)
    (ws / "server.py").write_text("print('hi')\n")
    return ws


def test_the_start_line_fits_one_120_column_row(tmp_path, run_keel, keel_env):
    ws = _project(tmp_path, depth=6)   # a workspace path far longer than a row
    assert len(str(ws)) > 200
    for verbose in ((), ("--verbose",)):
        with ScriptedEngineServer([LOOK, ANSWER]) as server:
            r = run_keel("run", "what is in this folder?", "--cwd", str(ws), "--base-url", server.base_url,
                         "--model", "scripted", "--verify", "off", *verbose, env=_env(keel_env, 120))
        assert r.code == 0, r.stderr
        first, *rest = r.stderr.splitlines()
        assert len(first) <= 120, first
        assert first.startswith("keel · scripted · ") and "my-app" in first and " · sandbox: " in first
        tier = first.split(" · sandbox: ", 1)[1].split()[0]
        details = [line for line in rest if line.startswith("  sandbox: ")]
        if verbose:  # the whole protection summary, on a line of its own
            assert len(details) == 1 and details[0].split()[1] == tier and len(details[0]) > len(first) // 2
        else:
            assert details == []


def test_a_start_line_of_an_unconfined_run_says_so_within_the_row():
    event = {"model": "org/" + "m" * 90, "workspace": "/srv/" + "p/" * 80 + "proj", "sandbox": "none",
             "confining": False, "protection": "none (x)" * 50}
    line = start_line(event)
    assert len(line) <= 120 and line.endswith("sandbox: none (commands NOT confined: keel doctor)")
    assert "proj" in line and "…" in line


def test_calls_written_as_text_show_as_the_step_line_only(tmp_path, run_keel, keel_env):
    ws = _project(tmp_path)
    for written in (HERMES, QWEN3):
        with ScriptedEngineServer([{"content": written}, ANSWER]) as server:
            r = run_keel("run", "what is in this folder?", "--cwd", str(ws), "--base-url", server.base_url,
                         "--model", "scripted", "--verify", "off", env=_env(keel_env, 120))
        assert r.code == 0, r.stderr
        assert not any(raw in r.stdout for raw in RAW), r.stdout
        lines = r.stdout.splitlines()
        step = next(i for i, line in enumerate(lines) if line.startswith("[step 1] list_dir . → ok"))
        assert lines[step - 1] == written.split("\n", 1)[0]     # the words before the call, then its step line
        assert "It holds server.py." in r.stdout


def test_an_answer_with_code_is_shown_whole(tmp_path, run_keel, keel_env):
    ws = _project(tmp_path)
    # held back while it streams (a fence may hold a call), shown whole once nothing was recovered from it
    answer = ("Run it like this:\n```python\nprint('hi')\n```\nand <response> tags in the output are its own;\n"
              "the name functions.list_dir is a tool's, not a call here.")
    with ScriptedEngineServer([LOOK, {"content": answer}]) as server:
        r = run_keel("run", "how do I run server.py?", "--cwd", str(ws), "--base-url", server.base_url,
                     "--model", "scripted", "--verify", "off", env=_env(keel_env, 120))
    assert r.code == 0, r.stderr
    assert answer in r.stdout


def _render(deltas: list[str], **model_call) -> tuple[str, list[str]]:
    """The text shown while the deltas stream (after each), and in full once the reply ended."""
    out = io.StringIO()
    r = TextRenderer(out=out, err=io.StringIO())
    seen = []
    for d in deltas:
        r({"type": "assistant_delta", "kind": "content", "text": d})
        seen.append(out.getvalue())
    r({"type": "model_call", "tool_calls": 0, "tool_call_format": "", "content": "".join(deltas), **model_call})
    return out.getvalue(), seen


def test_streamed_call_text_is_held_back_even_split_across_deltas():
    text = "Let me check.\n<tool_call>\n{\"name\": \"list_dir\", \"arguments\": {}}\n</tool_call>\nDone, it is empty."
    shown, seen = _render(list(text), tool_calls=1, tool_call_format="hermes", content="Let me check.")
    assert shown == "Let me check.\n"
    assert all("<" not in s for s in seen)    # not even the first character of the marker flashed by
    # prose that only mentions a marker is shown in full when nothing was recovered from it
    prose = "Models write a <tool_call> tag.\nfunctions.x is a name."
    shown, seen = _render(list(prose))
    assert shown == prose
    assert seen[-1] == "Models write a "   # while it streamed: shown up to the tag, the rest held


def test_the_call_text_filter_is_linear_on_hostile_text():
    for text in ("<" * 1_000_000, "{" * 1_000_000, "\nf" * 500_000, "``" * 500_000, "<t" * 500_000):
        f = CallTextFilter()
        started = time.perf_counter()
        shown = "".join(f.feed(text[i:i + 1000]) for i in range(0, len(text), 1000)) + f.end(False, "")
        assert shown == text
        assert time.perf_counter() - started < 3.0


def _ids_shown(run_keel, keel_env, columns: int) -> str:
    r = run_keel("log", env=_env(keel_env, columns))
    assert r.code == 0, r.stderr
    assert all(len(line) <= columns for line in r.stdout.splitlines()), r.stdout
    return r.stdout


def test_keel_log_never_cuts_a_session_id(tmp_path, run_keel, keel_env):
    ws = _project(tmp_path)
    ids = []
    for _ in range(2):
        with ScriptedEngineServer([LOOK, ANSWER]) as server:
            r = run_keel("run", "what is in this folder? " + "word " * 30, "--cwd", str(ws), "--base-url",
                         server.base_url, "--model", "scripted", "--verify", "off", "--output-format", "json")
        ids.append(r.result["session_id"])
    assert ids[0][:9] == ids[1][:9]   # they share a prefix: a cut id would not say which is which
    for columns in (120, 80):
        shown = _ids_shown(run_keel, keel_env, columns)
        for sid in ids:
            assert sid in shown, (columns, shown)
            assert run_keel("log", sid).code == 0


def test_the_repl_keeps_the_words_not_the_call_text():
    from rich.console import Console

    from keel.cli.repl.render import ReplRenderer, Tally
    from keel.loop.limits import Prices

    out = io.StringIO()
    r = ReplRenderer(Console(file=out, width=120, force_terminal=False), Tally(Prices(), False))
    for piece in (HERMES[i:i + 7] for i in range(0, len(HERMES), 7)):
        r({"type": "assistant_delta", "kind": "content", "text": piece})
    r({"type": "model_call", "usage": {}, "tool_calls": 1, "tool_call_format": "hermes",
       "content": "I will list the folder first.", "replay": {"calls": []}})
    r.pause()
    assert "I will list the folder first." in out.getvalue()
    assert not any(raw in out.getvalue() for raw in RAW), out.getvalue()
