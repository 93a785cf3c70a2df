"""The in-process engine: its pure parts always; a real GGUF in the opt-in tier.

``pytest -m real_engine`` with KEEL_TEST_MODEL=/path/model.gguf runs the engine and a bundled eval
case end to end in this process (slow on a CPU: minutes). Without the variable those tests skip.
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import pytest

from keel.engine.local import shared_prefix, slot_choice, speed_cap, template_messages
from keel.engine.local_model import DEFAULT_LOCAL_MODEL, is_hf_spec, resolve_model
from keel.engine.runaway import ReplyWatch, call_deadline, repeated_lines, repeating_tail
from keel.engine.types import EngineError

ROOT = Path(__file__).resolve().parent.parent
MODEL_ENV = "KEEL_TEST_MODEL"


# ---- history as the chat template sees it ------------------------------------------------------

def test_call_arguments_reach_the_template_as_objects_and_results_name_their_tool() -> None:
    history = [{"role": "user", "content": "fix it"},
               {"role": "assistant", "content": "", "tool_calls": [
                   {"id": "c1", "type": "function", "function": {"name": "read_file", "arguments": '{"path": "a.py"}'}},
                   {"id": "c2", "type": "function", "function": {"name": "grep", "arguments": "{broken"}}]},
               {"role": "tool", "tool_call_id": "c1", "content": "1\tx = 1"},
               {"role": "tool", "tool_call_id": "c2", "content": "Invalid arguments"}]
    out = template_messages(history)
    calls = out[1]["tool_calls"]
    assert calls[0]["function"]["arguments"] == {"path": "a.py"}   # templates tojson it: no double encoding
    assert calls[1]["function"]["arguments"] == "{broken"          # the model's own text, kept
    assert out[2]["content"].startswith("[output of read_file, the tool you called; not a message from the user]\n")
    assert out[2]["content"].endswith("1\tx = 1")
    assert out[3]["content"].startswith("[output of grep,")
    assert history[1]["tool_calls"][0]["function"]["arguments"] == '{"path": "a.py"}'  # caller's list untouched
    assert template_messages(history, label_tool_results=False)[2]["content"] == "1\tx = 1"


def test_the_reply_cap_follows_the_measured_speed() -> None:
    assert speed_cap(768, None) == 768      # nothing measured yet
    assert speed_cap(768, 20.0) == 768      # fast: the configured cap
    assert speed_cap(768, 2.0) == 360       # 2 tokens/s: about three minutes' worth
    assert speed_cap(768, 0.2) == 192       # very slow: a floor that still fits a small edit
    assert speed_cap(100, 0.2) == 100       # never above what the user configured


def test_shared_prefix() -> None:
    assert shared_prefix([1, 2, 3, 4], [1, 2, 9]) == 2
    assert shared_prefix([], [1]) == 0
    assert shared_prefix([1, 2], [1, 2, 3]) == 2


# ---- runaway replies and the per-call deadline -------------------------------------------------

CONVERSATION = list(range(1000, 1600))          # a 600-token conversation
EDIT_REQUEST = [1000, 1001, *range(5000, 5300)]  # the same system prompt's first tokens, then its own


@pytest.mark.parametrize(("current", "saved", "prompt", "choice"), [
    (CONVERSATION, [], EDIT_REQUEST, "save"),                        # keep the conversation before it goes
    (EDIT_REQUEST, CONVERSATION, CONVERSATION + [7, 8], "swap"),     # back to the conversation: load it
    (CONVERSATION, EDIT_REQUEST, CONVERSATION + [7, 8], "keep"),     # the next step of the conversation
    (list(range(100)), [], EDIT_REQUEST, "keep"),                   # too short to be worth keeping
    (CONVERSATION, CONVERSATION[:100], CONVERSATION[:500] + [9], "keep"),   # the current one shares more
    (CONVERSATION, [], CONVERSATION[:30] + [9], "save"),             # most of a long state would be lost
    (EDIT_REQUEST, CONVERSATION, CONVERSATION[:300] + [9] * 50, "swap"),  # a compacted history: its prefix
])
def test_slot_choice(current: list[int], saved: list[int], prompt: list[int], choice: str) -> None:
    assert slot_choice(current, saved, prompt) == choice


OTHER_FILE = [1000, 1001, *range(7000, 7300)]   # the editor's request for another file (or from the start text)


@pytest.mark.parametrize(("current", "saved", "prompt", "holds", "choice"), [
    (EDIT_REQUEST, CONVERSATION, OTHER_FILE, True, "keep"),     # the conversation stays saved; this state goes
    (EDIT_REQUEST, CONVERSATION, OTHER_FILE, False, "save"),    # a side request's state saved over another's
    (EDIT_REQUEST, CONVERSATION, CONVERSATION + [7], True, "swap"),   # back to the conversation
    (CONVERSATION, EDIT_REQUEST, OTHER_FILE, False, "save"),    # the conversation is saved before it goes
])
def test_a_side_request_never_saves_its_state_over_the_conversations(
        current: list[int], saved: list[int], prompt: list[int], holds: bool, choice: str) -> None:
    assert slot_choice(current, saved, prompt, holds_conversation=holds) == choice


def test_a_plan_restated_in_a_loop_is_seen_but_varied_prose_is_not() -> None:
    plan = "I will open calc.py and change the minus to a plus. "
    assert repeating_tail("Plan: " + plan * 8)
    assert not repeating_tail(" ".join(f"step {i} reads file {i * 37 % 101}" for i in range(60)))
    assert repeated_lines("\n".join(["First, read calc.py carefully to find add.", "ok"] * 5))
    assert not repeated_lines("\n".join(["short", "short"] * 10))  # short lines (e.g. '}') are ignored
    # a plan restated on one line (measured on a 1.5B model): its sentences repeat, not the line
    looping = " ".join(["Find the code the task is about in the project's files.",
                        "Then, change it with edit_file: copy old_text exactly.", "Now,"] * 5)
    assert repeated_lines(looping) == "Then, change it with edit_file: copy old_text exactly."
    assert not repeated_lines("Read calc.py. Then run the tests. Then finish. " * 2)


def test_the_watch_cuts_prose_loops_and_the_deadline_but_not_tool_arguments() -> None:
    watch = ReplyWatch()
    piece = "Let me restate the plan once more for clarity. "
    assert next((r for _ in range(40) if (r := watch.feed(piece))), None) == "repeating"

    in_call = ReplyWatch()
    in_call.feed("<tool_call>\n")
    assert all(in_call.feed("assert f(1) == 1\n") is None for _ in range(200))  # a file of similar lines
    bare = ReplyWatch()   # py-rename-constant: a note repeating two assignments, in the bare call object
    bare.feed('```json\n{"name": "change_file", "arguments": {"path": "settings.py", "change": "')
    assert all(bare.feed("MAX_RETRY = MAX_RETRIES; MAX_RETRY_DELAY_S = MAX_RETRY_DELAY_S; ") is None for _ in range(40))

    # change_file's editor writing a ledger (measured: cut at its fifth `if name not in self.accounts:`)
    code = ReplyWatch()
    code.feed("Here is the file:\n```python\nclass Ledger:\n")
    method = ("    def m{}(self, name):\n        if name not in self.accounts:\n"
              "            raise LedgerError(\"Unknown account\")\n        return self.accounts[name]\n\n")
    assert all(code.feed(method.format(i)) is None for i in range(12))
    assert next((r for _ in range(60) if (r := code.feed("x = 1  # the same line\n"))), None) == "repeating"

    now = [100.0]
    timed = ReplyWatch(deadline=105.0, clock=lambda: now[0])
    assert timed.feed("a") is None
    now[0] = 105.0
    assert timed.feed("b") == "deadline"


def test_one_call_may_take_at_most_half_of_the_remaining_time_with_a_floor() -> None:
    assert call_deadline(None, 10.0) is None
    assert call_deadline(1010.0, 10.0) == 510.0    # 1000 s left: half
    assert call_deadline(100.0, 10.0) == 70.0      # 90 s left: the 60 s floor
    assert call_deadline(40.0, 10.0) == 40.0       # 30 s left: never past the run's own deadline


# ---- which model file ---------------------------------------------------------------------------

def test_model_specs(tmp_path: Path) -> None:
    assert is_hf_spec(DEFAULT_LOCAL_MODEL)
    assert not is_hf_spec(str(tmp_path / "m.gguf"))
    assert not is_hf_spec("model.gguf")
    with pytest.raises(EngineError, match="does not exist"):
        resolve_model(str(tmp_path / "missing.gguf"))
    (tmp_path / "notes.txt").write_text("not a model")
    with pytest.raises(EngineError, match="not a GGUF file"):
        resolve_model(str(tmp_path / "notes.txt"))
    fake = tmp_path / "ok.gguf"
    fake.write_bytes(b"GGUF" + b"\0" * 16)
    assert resolve_model(str(fake)) == fake.resolve()


def test_keel_run_local_with_a_missing_model_is_a_usage_error(tmp_path: Path, keel_env: dict[str, str]) -> None:
    proc = subprocess.run([sys.executable, "-m", "keel.cli.main", "run", "fix it", "--local",
                           str(tmp_path / "none.gguf"), "--cwd", str(tmp_path), "--output-format", "json"],
                          env=keel_env, capture_output=True, text=True, timeout=60)
    result = json.loads(proc.stdout.strip().splitlines()[-1])
    assert proc.returncode == 2
    assert result["stop_reason"] == "config_error" and "does not exist" in result["error"]


def test_a_project_config_cannot_choose_the_local_model(tmp_path: Path) -> None:
    from keel.config import load_config

    (tmp_path / ".keel").mkdir()
    (tmp_path / ".keel" / "config.toml").write_text('[engine]\nlocal_model = "evil.gguf"\n')
    config, warnings = load_config(tmp_path, user_path=tmp_path / "none.toml", env={})
    assert config.engine.local_model is None
    assert any("local_model" in w for w in warnings)


# ---- opt-in: a real GGUF ------------------------------------------------------------------------

def _real_model() -> Path:
    pytest.importorskip("llama_cpp", reason="llama-cpp-python is not installed (pip install 'keel[local]')")
    value = os.environ.get(MODEL_ENV)
    if not value or not Path(value).is_file():
        pytest.skip(f"{MODEL_ENV} does not name a GGUF file")
    return Path(value)


@pytest.mark.real_engine
@pytest.mark.timeout(1800)
def test_real_model_steps_reuse_the_kv_cache_and_ctrl_c_cancels() -> None:
    from keel.engine.local import LocalEngine
    from keel.engine.types import StreamDelta

    engine = LocalEngine(_real_model(), n_ctx=2048, max_tokens=24)
    tools = [{"type": "function", "function": {"name": "read_file", "description": "Read a file.",
              "parameters": {"type": "object", "properties": {"path": {"type": "string"}}, "required": ["path"]}}}]
    # a system prompt long enough (> SLOT_MIN_TOKENS) for its KV state to be worth keeping aside
    messages = [{"role": "system", "content": "You are a coding agent. Use the tools to do the work. " * 30},
                {"role": "user", "content": "What is in notes.txt? Read it."}]
    first = engine.complete(messages, tools)
    assert first.tool_calls and first.tool_calls[0].name == "read_file"   # constrained: a real call
    messages += [first.to_message(),
                 {"role": "tool", "tool_call_id": first.tool_calls[0].id, "content": "The answer is 42."}]
    pieces: list[str] = []

    def interrupt(delta: StreamDelta) -> None:
        pieces.append(delta.text)
        if len(pieces) == 2:
            raise KeyboardInterrupt

    with pytest.raises(KeyboardInterrupt):
        engine.complete(messages, tools, interrupt)
    second = engine.complete(messages, tools)
    assert second.usage.cached_tokens >= 0.8 * second.usage.prompt_tokens, second.usage
    assert second.finish_reason in ("stop", "length")
    # a request of its own in between (change_file's) keeps the conversation's cache in the other slot
    aside = engine.complete([{"role": "system", "content": "You fix code. " * 60},
                             {"role": "user", "content": "Reply with x = 1 in a code block."}], [])
    assert aside.usage.cached_tokens < 0.2 * aside.usage.prompt_tokens
    # ... and a second one for another file does not save its state over the conversation's
    other = engine.complete([{"role": "system", "content": "You write tests. " * 60},
                             {"role": "user", "content": "Reply with y = 2 in a code block."}], [])
    assert other.usage.cached_tokens < 0.2 * other.usage.prompt_tokens
    third = engine.complete(messages, tools)
    assert third.usage.cached_tokens >= 0.8 * third.usage.prompt_tokens, third.usage
    assert third.content == second.content and [c.arguments for c in third.tool_calls] == \
        [c.arguments for c in second.tool_calls]   # the restored state answers as the kept one did


@pytest.mark.real_engine
@pytest.mark.timeout(3600)
def test_real_model_runs_a_bundled_eval_case_to_a_stated_stop(tmp_path: Path) -> None:
    from keel.agent import Agent
    from keel.config import Config
    from keel.engine.local import LocalEngine
    from keel.eval.cases import grade, load_case, materialize
    from keel.loop.limits import Limits

    case = load_case(ROOT / "evals" / "py-wrong-operator")
    workspace = materialize(case, tmp_path / "ws")
    engine = LocalEngine(_real_model(), n_ctx=6144, max_tokens=384)
    result = Agent(engine, workspace=workspace, config=Config(), log_path=tmp_path / "s.jsonl").run(
        case.task, limits=Limits(max_steps=8, max_seconds=1500))
    assert result.stop_reason and result.status in ("complete", "incomplete")
    if result.status == "complete":  # never a false done
        assert grade(case, workspace).passed
