"""change_file: the small profile's edit by description, written whole by a focused request."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from keel.agent import Agent
from keel.config import Config
from keel.context.preload import FileText
from keel.drive.change import change_request, fits, judge, kept_share, restore_dropped
from keel.drive.rewrite import extract_file
from keel.loop.limits import Limits
from keel.testing import ScriptedEngineServer
from keel.verify.gate import CheckOutcome

BROKEN = "def cost(cents, threshold=5000):\n    if cents > threshold:\n        return 0\n    return 499\n"
FIXED = BROKEN.replace("cents > threshold", "cents >= threshold")


def call(name: str, **args: object) -> dict[str, object]:
    return {"name": name, "arguments": args}


def fenced(text: str, lang: str = "python") -> str:
    return f"Here is the file:\n```{lang}\n{text}```\n"


@pytest.fixture
def shop(tmp_path: Path) -> Path:
    ws = tmp_path / "shop"
    ws.mkdir()
    (ws / "shipping.py").write_text(BROKEN)
    (ws / "test_shipping.py").write_text("from shipping import cost\n\ndef test_at_threshold():\n"
                                         "    assert cost(5000) == 0\n\ndef test_small():\n"
                                         "    assert cost(100) == 499\n")
    return ws


def small_config(server: ScriptedEngineServer, verify: bool) -> Config:
    cfg = Config()
    cfg.engine.base_url, cfg.engine.model, cfg.engine.profile = server.base_url, "scripted", "small"
    if not verify:
        cfg.verify.mode = "off"
    return cfg


# ---- the pure core ------------------------------------------------------------------------------

def test_the_request_shows_the_other_files_then_the_file_then_failures_task_and_change():
    messages = change_request("Shipping is charged at $50", "use >= for the threshold", "shipping.py", BROKEN,
                              [FileText("test_shipping.py", "def test(): ...\n")], "`pytest` fails (exit code 1)")
    assert messages[0]["role"] == "system" and "programmer" in messages[0]["content"]
    user = messages[1]["content"]
    order = [user.index(s) for s in ("=== test_shipping.py ===", "=== shipping.py ===\ndef cost",
                                     "The tests fail:\n`pytest` fails", "Task: Shipping is charged",
                                     "The change to make in shipping.py: use >= for the threshold")]
    assert order == sorted(order)
    # the note is a suggestion: told as an order, the editor followed a wrong one that weak tests passed
    assert user.rstrip().endswith("Reply with the complete corrected shipping.py in one code block. Fix the cause "
                                  "of the bug, where it is; the change above is only a suggestion.")
    task_only = change_request("Shipping is charged at $50", None, "shipping.py", BROKEN, [], "")[1]["content"]
    assert task_only.rstrip().endswith("in one code block.") and "suggestion" not in task_only


def test_a_long_task_is_said_before_the_file_so_every_request_repeats_the_one_before_up_to_it(shop: Path):
    """An Exercism task is ~1,100 tokens; said after the file, each request whose file differed from the
    last one's (a new round, a candidate from the file as the run found it) read it again, 12-14 s on the
    1.5B. A short task keeps its measured place at the end."""
    spec = "# Instructions\n\nShipping is free from $50 on. " + "A cart's cost is in cents. " * 60
    messages = change_request(spec, "use >=", "shipping.py", BROKEN, [FileText("test_shipping.py", "def test(): ...\n")],
                              "`pytest` fails (exit code 1)")
    user = messages[1]["content"]
    order = [user.index(s) for s in ("=== test_shipping.py ===", "Task: # Instructions", "=== shipping.py ===",
                                     "The tests fail:", "Task: the one above, before shipping.py.",
                                     "The change to make in shipping.py: use >=")]
    assert order == sorted(order) and user.count("A cart's cost") == 60
    # through a run: the second call's rewrite sees another file, and still repeats the first up to the task
    script = [{"tool_calls": [call("change_file", path="shipping.py", change="use >=")]},
              {"content": fenced(PRICE_500)}, {"content": fenced(PRICE_500)},
              {"tool_calls": [call("change_file", path="shipping.py", change="the price is 499")]},
              {"content": fenced(FIXED)},
              {"tool_calls": [call("finish", summary="fixed")]}]
    with ScriptedEngineServer(script) as server:
        cfg = small_config(server, verify=True)
        cfg.assists.candidates = False
        result = Agent(workspace=shop, config=cfg, log_path=False).run(spec)
        editor = [r["messages"][1]["content"] for r in server.requests if not r.get("tools")]
    assert result.status == "complete" and len(editor) == 3
    head = editor[0].split("=== shipping.py ===")[0]
    assert spec.strip() in head and all(e.startswith(head) for e in editor) and PRICE_500 in editor[2]


def test_a_new_file_is_asked_for_as_new():
    user = change_request("t", "add it", "util.py", None, [], "")[1]["content"]
    assert "util.py does not exist yet" in user and "The tests fail" not in user


@pytest.mark.parametrize(("reply", "expected"), [
    (fenced(FIXED), FIXED),
    (f"~~~\n{FIXED}~~~\n", FIXED),
    (fenced(FIXED) + "Use it like this:\n```python\ncost(1)\n```\n", FIXED),   # the longest block is the file
    (f"```python\n{FIXED}", None),                                              # cut before the fence closed
    ("Change `>` to `>=` on line 2.", None),                                   # prose, no block
])
def test_extract_file(reply: str, expected: str | None) -> None:
    assert extract_file(reply) == expected


def test_judge_keeps_a_real_change_and_says_why_it_refuses_the_rest():
    assert judge(BROKEN, FIXED, "shipping.py", cut=False).text == FIXED
    assert judge(None, "x = 1\n", "new.py", cut=False).text == "x = 1\n"   # a new file
    assert judge("a = 1", "a = 2\n", "v.py", cut=False).text == "a = 2"    # no final newline stays so
    unchanged = judge(BROKEN, BROKEN, "shipping.py", cut=False)
    assert unchanged.text is None and "came back unchanged" in unchanged.problem and "which line" in unchanged.problem
    assert "cut off" in judge(BROKEN, None, "shipping.py", cut=True).problem
    assert "no code block" in judge(BROKEN, None, "shipping.py", cut=False).problem
    broken = judge(BROKEN, FIXED.replace("    return 499", "return 499 ("), "shipping.py", cut=False)
    assert broken.text is None and "not valid Python" in broken.problem
    long = "".join(f"x{i} = {i}\n" for i in range(10))
    stub = judge(long, "x0 = 0\n", "values.py", cut=False)
    assert stub.text is None and "kept only 10% of its lines" in stub.problem
    # lines the run wrote itself may all go: the share is the user's file's, as the run found it
    stubs = "def encode(text):\n    pass\n\n\ndef decode(text):\n    pass\n"
    ours = stubs + "".join(f"\n\ndef _step{i}(text):\n    return text[{i}:]\n" for i in range(9))   # helpers it wrote
    again = "def encode(text):\n    return text\n\n\ndef decode(text):\n    return text\n"
    assert judge(ours, again, "rle.py", cut=False).text is None   # against the run's own lines: refused
    assert judge(ours, again, "rle.py", cut=False, held=stubs).text == again
    assert judge(ours, "x = 1\n", "rle.py", cut=False, held="").text == "x = 1\n"   # a file the run created
    assert judge(long, "x0 = 0\n", "values.py", cut=False, held=long).text is None
    assert judge("A shop.\n", "A shop that ships.\n", "README.md", cut=False).text   # a short file may all change
    assert "kept only 0%" in judge(BROKEN, "[output of edit_file]\n", "shipping.py", cut=False).problem
    assert judge("x = (\ny = 2\n", "x = (\ny = 3\n", "m.py", cut=False).text   # broken before: not ours to judge
    lazy = judge(long, long.replace("x9 = 9\n", "# ... rest unchanged\n"), "values.py", cut=False)
    assert lazy.text is None and "'# ... rest unchanged'" in lazy.problem


@pytest.mark.parametrize(("old", "new", "share"), [
    ("a\nb\nc\nd\n", "a\nb\nc\nd\ne\n", 1.0), ("a\nb\nc\nd\n", "a\nX\nc\nd\n", 0.75),
    ("a\n\nb\n", "a\nb\n", 1.0), ("", "x\n", 1.0), ("a\nb\n", "", 0.0)])
def test_kept_share_counts_the_old_lines_the_new_text_keeps(old: str, new: str, share: float) -> None:
    assert kept_share(old, new) == share


def test_a_file_too_long_for_one_reply_does_not_fit():
    assert fits("x = 1\n" * 50, 768) and fits(None, 10) and fits("x" * 10**6, None)
    assert not fits("x = 1\n" * 600, 768)


# ---- in a run, over real HTTP ---------------------------------------------------------------------

def test_change_file_asks_without_tools_writes_the_file_and_shows_the_checks(shop: Path):
    log = shop.parent / "session.jsonl"
    script = [{"tool_calls": [call("change_file", path="shipping.py", change="free shipping from exactly 5000")]},
              {"content": fenced(FIXED)},
              {"tool_calls": [call("finish", summary="free shipping from the threshold; tests pass")]}]
    with ScriptedEngineServer(script) as server:
        agent = Agent(workspace=shop, config=small_config(server, verify=True), log_path=log)
        result = agent.run("A cart of exactly $50 is charged shipping; fix it.")
        requests = server.requests
    first_tools = [t["function"]["name"] for t in requests[0]["tools"]]
    assert first_tools == ["read_file", "change_file", "edit_file", "run_shell", "finish"]
    edit_request = requests[1]
    assert not edit_request.get("tools")   # the edit request is plain text: no tools, no grammar
    user = edit_request["messages"][1]["content"]
    assert "=== shipping.py ===\n" + BROKEN in user and "assert 499 == 0" in user   # the failure it must fix
    assert "The change to make in shipping.py: free shipping from exactly 5000" in user
    assert len(edit_request["messages"]) == 2   # not the conversation: a fresh, short window
    assert (shop / "shipping.py").read_text() == FIXED
    tool_reply = next(m for m in result.messages if m.get("role") == "tool")["content"]
    assert "checks after this change" in tool_reply and "pass" in tool_reply
    assert result.status == "complete"
    events = [json.loads(line) for line in log.read_text().splitlines()]
    asked = next(e for e in events if e["type"] == "change_request")
    assert asked["path"] == "shipping.py" and asked["usage"]["prompt_tokens"] > 0
    change_call = next(e for e in events if e["type"] == "tool_call" and e["name"] == "change_file")
    assert "+    if cents >= threshold:" in change_call["diff"]
    # the edit request's tokens are the run's: three requests' prompts, not two
    assert result.usage.prompt_tokens >= sum(int(e["usage"]["prompt_tokens"]) for e in events
                                             if e["type"] in ("model_call", "change_request"))


PRICE_500 = FIXED.replace("return 499", "return 500")   # the threshold fixed, the price broken
ALWAYS_FREE = "def cost(cents, threshold=5000):\n    return 0\n\n\n# free\n"


def run_changes(shop: Path, script: list[dict[str, object]], *off: str,
                check_timeout_s: float = 300.0) -> tuple[list[str], list[dict[str, object]]]:
    """``off``: assists switched off (more rewrites judged by the gate, ``candidates``: tests/test_candidates.py)."""
    with ScriptedEngineServer([*script, {"tool_calls": [call("finish", summary="fixed")]}]) as server:
        cfg = small_config(server, verify=True)
        cfg.verify.check_timeout_s = check_timeout_s
        for name in off:
            setattr(cfg.assists, name, False)
        result = Agent(workspace=shop, config=cfg, log_path=False).run(
            "A cart of exactly $50 is charged shipping; fix it.")
        return [m["content"] for m in result.messages if m.get("role") == "tool"], server.requests


def test_when_the_notes_rewrite_fails_the_checks_a_rewrite_from_the_task_alone_may_replace_it(shop: Path):
    replies, requests = run_changes(shop, [
        {"tool_calls": [call("change_file", path="shipping.py", change="charge 500")]},
        {"content": fenced(PRICE_500)},     # with the note: test_small fails
        {"content": fenced(FIXED)}])        # the task alone: every test passes
    assert (shop / "shipping.py").read_text() == FIXED
    assert "Your note was not followed (with it the checks still failed)" in replies[0]
    assert "pass. If the task is done, call finish." in replies[0]
    second = requests[2]["messages"][1]["content"]
    assert "The change to make" not in second and "assert 499 == 0" in second   # no note; the same failures


def test_the_first_rewrite_stays_when_the_second_does_no_better(shop: Path):
    replies, _ = run_changes(shop, [
        {"tool_calls": [call("change_file", path="shipping.py", change="charge 500")]},
        {"content": fenced(PRICE_500)},     # 1 failing test
        {"content": fenced(ALWAYS_FREE)}], "candidates")  # 1 failing test too: a tie keeps the model's own change
    assert (shop / "shipping.py").read_text() == PRICE_500
    assert "not followed" not in replies[0] and "test_small" in replies[0]


def test_an_unchanged_rewrite_is_asked_again_from_the_task_alone_and_failures_follow(shop: Path):
    replies, requests = run_changes(shop, [
        {"tool_calls": [call("change_file", path="shipping.py", change="fix it")]},
        {"content": fenced(BROKEN)},        # unchanged: nothing written
        {"content": fenced(BROKEN)},        # unchanged again
        {"tool_calls": [call("change_file", path="shipping.py", change="line 2: cents >= threshold")]},
        {"content": fenced(FIXED)}])
    assert "came back unchanged" in replies[0] and "Nothing was written" not in replies[0]
    assert "assert 499 == 0" in requests[4]["messages"][1]["content"]   # the checks before any change
    assert "The change to make in shipping.py: line 2" in requests[4]["messages"][1]["content"]
    assert (shop / "shipping.py").read_text() == FIXED and "pass" in replies[1]


def test_tests_stay_as_they_are_unless_the_task_asks_and_the_change_goes_to_the_code_they_test(shop: Path):
    before = (shop / "test_shipping.py").read_text()
    replies, requests = run_changes(shop, [
        {"tool_calls": [call("change_file", path="test_shipping.py", change="expect 499 at the threshold")]},
        {"content": fenced(FIXED)}])   # the editor request, for shipping.py
    assert replies[0].startswith("test_shipping.py holds the project's tests and the task does not ask to change "
                                 "them, so the change was made in shipping.py")
    editor = requests[1]["messages"][1]["content"]
    assert not requests[1].get("tools") and "expect 499" not in editor and "assert 499 == 0" in editor
    assert (shop / "test_shipping.py").read_text() == before
    assert (shop / "shipping.py").read_text() == FIXED


def run_refused(shop: Path, task: str, *changes: dict[str, str]) -> tuple[list[str], list[dict[str, object]]]:
    """change_file called with each of ``changes`` (path, change) on a change request, checks off: the
    tool replies and the edit requests. Nothing changes, so finishing is sent back until the step limit:
    only the calls' replies matter (change_file is not run for an answer-only request)."""
    script = [*[{"tool_calls": [call("change_file", **c)]} for c in changes],
              *[{"tool_calls": [call("finish", summary="nothing")]}] * 3]
    with ScriptedEngineServer(script) as server:
        agent = Agent(workspace=shop, config=small_config(server, verify=False), log_path=False)
        result = agent.run(task, limits=Limits(max_steps=len(changes) + 2))
        editor = [r for r in server.requests if not r.get("tools")]
    return [m["content"] for m in result.messages if m.get("role") == "tool"], editor


def test_change_file_stays_in_the_workspace_and_leaves_big_files_to_edit_file(shop: Path):
    (shop / "big.py").write_text("x = 1\n" * 5000)
    replies, editor = run_refused(shop, "Set x to 2 in big.py and create ../outside.py.",
                                  {"path": "../outside.py", "change": "create it"}, {"path": "big.py", "change": "x = 2"})
    assert "Cannot change ../outside.py" in replies[0] and not (shop.parent / "outside.py").exists()
    assert "too long to be rewritten whole" in replies[1] and "edit_file" in replies[1]
    assert not editor   # neither refusal cost an edit request


def test_change_file_given_a_directory_names_the_files_it_holds_and_asks_nothing(shop: Path):
    """Measured on the 1.5B (Exercism dominoes): it sent the workspace's own path four times, its note naming
    the module; the refusal did not name it and the run ended with the module unchanged."""
    (shop / "lib").mkdir()
    (shop / "lib" / "rates.py").write_text("RATE = 1\n")
    replies, editor = run_refused(shop, "Set RATE to 2 and fix cost in shipping.py.",
                                  {"path": str(shop), "change": "implement cost in shipping.py"},
                                  {"path": "lib", "change": "set RATE to 2"})
    assert "is the workspace directory itself, not a file; it holds the files shipping.py, test_shipping.py: " \
           "give one of them as the path." in replies[0]
    assert replies[1] == ("Cannot change lib: it is a directory, not a file; it holds the files lib/rates.py: "
                          "give one of them as the path.")
    assert not editor and (shop / "lib" / "rates.py").read_text() == "RATE = 1\n"


def test_definitions_a_rewrite_left_out_go_back_where_they_were_unless_the_change_names_them():
    old = "import re\n\n\ndef a():\n    return 1\n\n\n@cache\ndef b():\n    return 2\n\n\nclass C:\n    pass\n"
    new, names = restore_dropped(old, "import re\n\n\n@cache\ndef b():\n    return 3\n", "make b return 3")
    assert names == ["a", "C"]
    assert new.index("def a()") < new.index("@cache") < new.index("return 3") < new.index("class C")
    assert "@cache" in new and compile(new, "m.py", "exec")
    assert restore_dropped(old, "import re\n\n\ndef a():\n    return 1\n", "remove b() and the class C") == \
        ("import re\n\n\ndef a():\n    return 1\n", [])
    assert restore_dropped(old, "def (:\n", "x") == ("def (:\n", [])   # unparsable: left to judge()
    # named, not asked to go: measured, "Add the encode and decode functions" and a rewrite of decode() alone
    new, names = restore_dropped(old, "import re\n\n\ndef a():\n    return 3\n", "fix a() and b(), keep C")
    assert names == ["b", "C"] and "return 2" in new
    assert restore_dropped(old, old.replace("def b", "def b2"), "rename b to b2")[1] == []


@pytest.mark.parametrize(("name", "note", "gone"), [
    ("encode", "Add the encode and decode functions to the rle.py file.", False),
    ("parse", "implement parse() as the docstring says", False),
    ("format_duration", "remove format_duration", True),
    ("fmtMoney", "Rename fmtMoney to formatMoney", True),
    ("helper", "helper is unused, so it goes", True),
    ("old_api", "Replace old_api() with new_api() everywhere", True),
    ("b", "a returns 3 and b must be removed", True),
    ("a", "a returns 3; remove b", False),   # the verb is b's, in another clause
])
def test_which_definitions_a_note_asks_to_go(name: str, note: str, gone: bool) -> None:
    from keel.drive.rewrite import asked_gone
    assert asked_gone(name, note) is gone


def test_a_rewrite_that_makes_the_checks_fail_worse_than_before_is_undone(shop: Path):
    worse = BROKEN.replace("return 0", "return 1").replace("return 499", "return 498")   # both tests fail
    replies, _ = run_changes(shop, [
        {"tool_calls": [call("change_file", path="shipping.py", change="change page_count")]},
        {"content": fenced(worse)},
        {"content": fenced(BROKEN)}], "candidates")   # the task alone: unchanged, nothing to try
    assert (shop / "shipping.py").read_text() == BROKEN
    assert "Nothing was kept" in replies[0] and "(2 failing, 1 before)" in replies[0]


def test_a_rewrite_that_stops_the_tests_loading_counts_worse_than_any_failing_test_and_is_undone(shop: Path):
    """pytest reports a module that fails at import as one error: it scored like one failing test, so a
    rewrite that broke the import tied with the file it replaced and was written (py-todo-due)."""
    unloadable = "import nosuchmod_keel_xyz\n" + FIXED
    replies, _ = run_changes(shop, [
        {"tool_calls": [call("change_file", path="shipping.py", change="use >=")]},
        {"content": fenced(unloadable)},
        {"content": fenced(unloadable)}], "candidates")
    assert (shop / "shipping.py").read_text() == BROKEN
    assert "Nothing was kept" in replies[0] and "(a test file that cannot load, 1 failing before)" in replies[0]


HANGS = "def cost(cents, threshold=5000):\n    while True:\n        pass\n"


def test_a_rewrite_whose_checks_time_out_counts_worse_than_any_failing_test(shop: Path):
    """A check cut at its limit names no failing test: it scored 1, tied with a rewrite failing one test,
    and the first of a tie stayed, so the loop was written over a file that ran."""
    replies, _ = run_changes(shop, [
        {"tool_calls": [call("change_file", path="shipping.py", change="loop")]},
        {"content": fenced(HANGS)},          # with the note: the tests never end
        {"content": fenced(ALWAYS_FREE)}],   # the task alone: 1 failing, as before
        "candidates", check_timeout_s=2)
    assert (shop / "shipping.py").read_text() == ALWAYS_FREE
    assert "Your note was not followed (with it the checks timed out)" in replies[0]


def test_when_every_rewrite_times_out_nothing_is_kept(shop: Path):
    replies, _ = run_changes(shop, [
        {"tool_calls": [call("change_file", path="shipping.py", change="loop")]},
        {"content": fenced(HANGS)},
        {"content": fenced(HANGS.replace("pass", "continue"))}], "candidates", check_timeout_s=2)
    assert (shop / "shipping.py").read_text() == BROKEN
    assert "Nothing was kept" in replies[0] and "(a check that timed out, 1 failing before)" in replies[0]


@pytest.mark.parametrize(("score", "words"), [
    (0, "0 failing"), (3, "3 failing"), (1000, "a test file that cannot load"),
    (2001, "2 test files that cannot load and 1 failing"), (1_000_000, "a check that timed out"),
    (2_001_003, "2 checks that timed out and a test file that cannot load and 3 failing")])
def test_a_failure_score_in_words(score: int, words: str) -> None:
    from keel.drive.check_text import failing_words
    assert failing_words(score) == words


def test_the_edit_request_gets_the_end_of_each_failing_checks_own_output_or_its_summary():
    from keel.drive.check_text import MAX_FAILURE_CHARS, failing_output
    from keel.verify.plan import PlannedCheck

    def outcome(command: str, code: int, path: str | None, summary: str = "") -> CheckOutcome:
        return CheckOutcome(PlannedCheck("test", command, "inferred"), code, 0.1, "d", summary=summary,
                            output_path=path)

    long_log = "".join(f"line {i}\n" for i in range(2000)) + "E   assert 21 == 1\n1 failed\n"
    saved = {"/s/1.log": long_log}
    text = failing_output([outcome("pytest", 1, "/s/1.log"), outcome("ruff .", 0, "/s/2.log"),
                           outcome("mypy", 1, None, "mypy: 1 error")], saved.get)
    first, second = text.split("\n\n")
    assert first.endswith("E   assert 21 == 1\n1 failed") and first.startswith("line ")   # from a line start
    assert len(first) <= MAX_FAILURE_CHARS and second == "mypy: 1 error"


def test_a_saved_output_is_read_from_its_end_with_the_same_result_as_the_whole_file(tmp_path: Path):
    from keel.drive.check_text import MAX_FAILURE_CHARS, failing_output, saved_tail
    from keel.verify.plan import PlannedCheck

    log = tmp_path / "1.log"   # multi-byte characters throughout, so the read starts inside one
    log.write_text("".join(f"ligne {i} — échec ✗ 𝒳\n" for i in range(5000)) + "E   assert 21 == 1\n1 failed\n",
                   encoding="utf-8")
    failed = [CheckOutcome(PlannedCheck("test", "pytest", "inferred"), 1, 0.1, "d", output_path=str(log))]
    whole = failing_output(failed, lambda p: Path(p).read_text(encoding="utf-8"))
    assert failing_output(failed, saved_tail) == whole
    assert whole.endswith("1 failed") and len(whole) <= MAX_FAILURE_CHARS
    assert saved_tail(str(tmp_path / "missing.log")) is None


def test_the_request_frame_the_editor_copied_into_its_file_is_dropped() -> None:
    """Measured on the 1.5B (py-discount-cent): a candidate began with "=== checkout.py ===" (the request's
    own frame line) and was refused as not parsing."""
    from keel.drive.rewrite import unframed

    body = "def total(lines):\n    return 0\n"
    assert unframed(f"=== checkout.py ===\n{body}=== end ===\n", "checkout.py") == body
    assert unframed(body, "checkout.py") == body and unframed(None, "checkout.py") is None
    assert unframed(f"=== other.py ===\n{body}", "checkout.py") == f"=== other.py ===\n{body}"   # not its frame
