"""The small-model profile: slim tools, the short prompt, the project's files in the first message."""

from __future__ import annotations

import json
import subprocess
from pathlib import Path

import pytest

from keel.agent import Agent, tool_profile
from keel.config import Config
from keel.context.preload import FileText, choose, collect, render
from keel.core.request import parse_request, words
from keel.testing import ScriptedEngineServer
from keel.tools.catalog import default_tools


def call(name: str, **args: object) -> dict[str, object]:
    return {"name": name, "arguments": args}


def small_config(server: ScriptedEngineServer) -> Config:
    cfg = Config()
    cfg.engine.base_url, cfg.engine.model, cfg.engine.profile = server.base_url, "scripted", "small"
    cfg.verify.mode = "off"
    return cfg


@pytest.fixture
def shop(tmp_path: Path) -> Path:
    ws = tmp_path / "shop"
    ws.mkdir()
    (ws / "shipping.py").write_text("def cost(cents, threshold=5000):\n    if cents > threshold:\n"
                                    "        return 0\n    return 499\n")
    (ws / "test_shipping.py").write_text("from shipping import cost\n\ndef test_at_threshold():\n"
                                         "    assert cost(5000) == 0\n")
    (ws / "README.md").write_text("A shop.\n")
    return ws


# ---- choosing the files (pure) ----------------------------------------------------------------

def test_files_the_task_names_come_first_and_the_budget_holds():
    files = [FileText("a/big.py", "x = 1\n" * 300), FileText("notes.txt", "hello\n"),
             FileText("pkg/calc.py", "def add(a, b):\n    return a - b\n")]
    chosen = choose(parse_request("add() in calc.py subtracts; fix it"), files, budget_chars=400)
    assert [f.path for f in chosen.shown] == ["pkg/calc.py", "notes.txt"]
    assert chosen.listed == ["a/big.py"]   # too big for what is left: named in the listing, not shown


def test_a_file_whose_name_is_a_word_of_the_task_outranks_one_that_is_not():
    files = [FileText("util.py", "def helper():\n    pass\n"), FileText("shipping.py", "def cost():\n    pass\n")]
    chosen = choose(parse_request("Shipping is charged at exactly $50"), files, budget_chars=80)
    assert [f.path for f in chosen.shown] == ["shipping.py"]


def test_unreadable_or_binary_files_are_listed_never_shown():
    chosen = choose(parse_request("anything"), [FileText("logo.png", None), FileText("a.py", "x = 1\n")], budget_chars=10_000)
    assert [f.path for f in chosen.shown] == ["a.py"] and chosen.listed == ["logo.png"]


def test_identifier_parts_count_as_task_words():
    assert {"shipping_cost", "shipping", "cost", "parsehttp", "parse", "http"} <= words("shipping_cost parseHttp")


def test_the_section_shows_contents_without_line_numbers_and_lists_the_rest():
    text = render(choose(parse_request("fix calc"), [FileText("calc.py", "def add(a, b):\n    return a - b\n"),
                                      FileText("huge.bin", None)], budget_chars=1000))
    assert "=== calc.py ===\ndef add(a, b):\n    return a - b\n=== end of calc.py ===" in text
    assert "Other files (use read_file to see one): huge.bin" in text
    assert "1\tdef add" not in text


def test_collect_follows_ignore_rules_and_leaves_secrets_out(shop: Path):
    subprocess.run(["git", "init", "-q"], cwd=shop, check=True)
    (shop / ".gitignore").write_text("build/\n")
    (shop / "build").mkdir()
    (shop / "build" / "out.py").write_text("generated = True\n")
    (shop / ".env").write_text("API_KEY=sk-secret\n")
    files, more = collect(shop)
    paths = {f.path for f in files}
    assert {"shipping.py", "test_shipping.py", "README.md"} <= paths
    assert "build/out.py" not in paths and ".env" not in paths and more == 0


# ---- the agent with the small profile ---------------------------------------------------------

def test_profile_auto_is_small_only_for_the_in_process_engine():
    cfg = Config()
    assert tool_profile(cfg) == "full"
    cfg.engine.local_model = "/models/x.gguf"
    assert tool_profile(cfg) == "small"
    cfg.engine.profile = "full"
    assert tool_profile(cfg) == "full"


def test_small_profile_offers_five_short_tools_and_the_files_and_edits_them_unread(shop: Path):
    script = [{"tool_calls": [call("edit_file", path="shipping.py", old_text="    if cents > threshold:",
                                   new_text="    if cents >= threshold:")]},
              {"tool_calls": [call("run_shell", command="python -m pytest -q")]},
              {"tool_calls": [call("finish", summary="free shipping from the threshold; tests pass")]}]
    with ScriptedEngineServer(script) as server:
        agent = Agent(workspace=shop, config=small_config(server), log_path=False)
        result = agent.run("A cart of exactly $50 is charged shipping; fix it.")
        first = server.requests[0]
    tools = {t["function"]["name"]: t["function"]["parameters"] for t in first["tools"]}
    assert list(tools) == ["read_file", "change_file", "edit_file", "run_shell", "finish"]  # no delegate
    assert set(tools["change_file"]["required"]) == {"path", "change"}
    assert set(tools["edit_file"]["properties"]) == {"path", "old_text", "new_text"}
    assert set(tools["edit_file"]["required"]) == {"path", "old_text", "new_text"}
    assert set(tools["run_shell"]["properties"]) == {"command"}
    system, user = first["messages"][0]["content"], first["messages"][1]["content"]
    assert "one tool call at a time" in system and len(system) < 1000
    assert "=== shipping.py ===\ndef cost(cents, threshold=5000):" in user
    assert user.rstrip().endswith("Your task: A cart of exactly $50 is charged shipping; fix it.")
    sandbox_line = next(line for line in user.splitlines() if line.startswith("Command sandbox: "))
    assert len(sandbox_line) < 60 and "not confined" not in user   # the tier's name, not its details
    # the preloaded file counts as read: the edit went through without a read_file turn
    assert "cents >= threshold" in (shop / "shipping.py").read_text()
    edit_result = next(m for m in result.messages if m.get("role") == "tool")
    assert "not read" not in edit_result["content"].lower()
    assert result.status == "complete"


def test_a_slim_call_with_a_full_tools_option_is_refused_by_name(shop: Path):
    script = [{"tool_calls": [call("read_file", path="shipping.py", offset=1, limit=5)]},
              {"tool_calls": [call("finish", summary="looked")]}]
    with ScriptedEngineServer(script) as server:
        agent = Agent(workspace=shop, config=small_config(server), log_path=False)
        result = agent.run("Describe shipping.py; change nothing.")
    refusal = next(m for m in result.messages if m.get("role") == "tool")["content"]
    assert "offset" in refusal and "read_file" in refusal


def test_a_read_rule_that_asks_keeps_the_file_out_of_the_first_message(shop: Path):
    script = [{"tool_calls": [call("finish", summary="nothing to do")]}]
    with ScriptedEngineServer(script) as server:
        cfg = small_config(server)
        cfg.permissions.ask = ["read(shipping.py)"]
        Agent(workspace=shop, config=cfg, log_path=False).run("Explain the shop.")
        user = server.requests[0]["messages"][1]["content"]
    assert "=== test_shipping.py ===" in user and "=== shipping.py ===" not in user
    assert "shipping.py" in user.split("Other files", 1)[1]


def test_the_full_profile_is_unchanged_for_servers(shop: Path):
    script = [{"tool_calls": [call("finish", summary="nothing to do")]}]
    with ScriptedEngineServer(script) as server:
        cfg = small_config(server)
        cfg.engine.profile = "auto"
        Agent(workspace=shop, config=cfg, log_path=False).run("Explain the shop.")
        first = server.requests[0]
    names = [t["function"]["name"] for t in first["tools"]]
    assert "grep" in names and "todo_write" in names
    assert "=== shipping.py ===" not in json.dumps(first["messages"])


def test_an_overwrite_that_guts_a_file_to_one_line_is_refused_and_the_file_kept(shop: Path):
    (shop / "big.py").write_text("".join(f"x{i} = {i}\n" for i in range(8)))
    script = [{"tool_calls": [call("read_file", path="big.py"), call("read_file", path="README.md")]},
              {"tool_calls": [call("write_file", path="big.py", content="[output of edit_file]")]},
              {"tool_calls": [call("write_file", path="README.md", content="A shop that ships.\n")]},
              {"tool_calls": [call("finish", summary="done")]}]
    with ScriptedEngineServer(script) as server:
        cfg = small_config(server)
        cfg.engine.profile = "full"   # the full write_file, which may overwrite
        result = Agent(workspace=shop, config=cfg, log_path=False).run("Tidy the shop.")
    refusal = [m for m in result.messages if m.get("role") == "tool"][2]["content"]
    assert "replace the file's 8 lines with the single line '[output of edit_file]'" in refusal
    assert (shop / "big.py").read_text().count("\n") == 8
    assert (shop / "README.md").read_text() == "A shop that ships.\n"   # a one-line file may be rewritten


def test_the_first_message_says_which_checks_fail_before_any_change_and_the_gate_reuses_it(shop: Path):
    script = [{"tool_calls": [call("edit_file", path="shipping.py", old_text="    if cents > threshold:",
                                   new_text="    if cents >= threshold:")]},
              {"tool_calls": [call("finish", summary="free shipping from the threshold")]}]
    log = shop.parent / "session.jsonl"
    with ScriptedEngineServer(script) as server:
        cfg = small_config(server)
        cfg.verify.mode = Config().verify.mode
        result = Agent(workspace=shop, config=cfg, log_path=log).run("A cart of exactly $50 pays shipping; fix it.")
        user = server.requests[0]["messages"][1]["content"]
    section = user.split("The project's checks now, before any change:", 1)[1]
    assert "pytest -q` fails (exit code 1)" in section and "assert 499 == 0" in section
    assert section.index("fails") < section.index("Your task:")
    events = [json.loads(line) for line in log.read_text().splitlines()]
    kinds = [e["type"] for e in events]
    assert kinds[0] == "session_start" and "checks_before" in kinds   # held until the session started
    before = next(e for e in events if e["type"] == "checks_before")["results"]
    assert before[0]["passed"] is False
    assert result.status == "complete"


def test_a_slim_call_breaking_a_full_tools_rule_is_an_invalid_argument_not_a_crash(shop: Path):
    same = "    if cents > threshold:"
    script = [{"tool_calls": [call("edit_file", path="shipping.py", old_text=same, new_text=same)]},
              {"tool_calls": [call("finish", summary="looked")]}]
    with ScriptedEngineServer(script) as server:
        result = Agent(workspace=shop, config=small_config(server), log_path=False).run("Fix shipping.")
    refusal = next(m for m in result.messages if m.get("role") == "tool")["content"]
    assert refusal.startswith("Invalid arguments for edit_file:")
    assert "old_text and new_text are identical" in refusal and "ValidationError" not in refusal


def test_an_edit_that_breaks_python_is_undone_and_says_where(shop: Path):
    glued = "def cost(cents, threshold=5000, free=True):    if cents > threshold:"
    script = [{"tool_calls": [call("edit_file", path="shipping.py", old_text="def cost(cents, threshold=5000):\n"
                                   "    if cents > threshold:", new_text=glued)]},
              {"tool_calls": [call("edit_file", path="README.md", old_text="A shop.", new_text="A shop (")]},
              {"tool_calls": [call("finish", summary="done")]}]
    before = (shop / "shipping.py").read_text()
    with ScriptedEngineServer(script) as server:
        result = Agent(workspace=shop, config=small_config(server), log_path=False).run("Add a free flag to cost().")
    outputs = [m["content"] for m in result.messages if m.get("role") == "tool"]
    assert outputs[0].startswith("edit_file was undone: it made shipping.py invalid Python (line 1:")
    assert (shop / "shipping.py").read_text() == before
    assert (shop / "README.md").read_text() == "A shop (\n"   # not Python: not judged


@pytest.mark.parametrize(("extra", "accepted"), [
    ({"required": ["path", "old_text", "new_text"]}, True),   # measured: the schema's own list echoed back
    ({"type": "object"}, True),
    ({"required": ["path", "colour"]}, False),                # names no argument of the tool: still an error
    ({"required": True}, False),
    ({"type": "function"}, False),
])
def test_schema_keywords_echoed_into_arguments_are_dropped_nothing_else(extra: dict[str, object],
                                                                       accepted: bool) -> None:
    from keel.drive.change import make_change_tool
    from keel.engine.types import ToolCall
    from keel.tools.registry import ToolRegistry
    from keel.tools.small import small_tools

    args = {"path": "a.py", "old_text": "x > 1", "new_text": "x >= 1", **extra}
    for registry in (ToolRegistry(small_tools(make_change_tool())), ToolRegistry(default_tools())):
        parsed = registry.parse(ToolCall("c1", "edit_file", json.dumps(args)))
        if accepted:
            assert not isinstance(parsed, str), parsed
            assert parsed[1].model_dump()["new_text"] == "x >= 1"
        else:
            assert isinstance(parsed, str) and "not an argument of edit_file" in parsed
