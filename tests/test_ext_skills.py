"""Skills: SKILL.md folders in the project and user config; names and descriptions in the system
prompt, the body only through the skill tool. Plugins: tools from a real installed entry point."""

from __future__ import annotations

import json
import os
from pathlib import Path

import pytest
from conftest import call

from keel.agent import Agent
from keel.config import load_config
from keel.ext.skills import discover_skills, parse_front_matter
from keel.testing.server import ScriptedEngineServer

RELEASE = """---
name: release-notes
description: >
  Write release notes from the git log,
  grouped by kind of change.
---
# Release notes
1. Run `git log --oneline` since the last tag.
2. Group entries under Added / Fixed / Changed.
"""


@pytest.fixture(autouse=True)
def _isolated(monkeypatch, tmp_path):
    monkeypatch.setenv("KEEL_HOME", str(tmp_path / "keel-home"))
    monkeypatch.setenv("XDG_CONFIG_HOME", str(tmp_path / "xdg"))


def _skill(root: Path, folder: str, text: str) -> Path:
    path = root / folder / "SKILL.md"
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text(text)
    return path


def _agent(repo: Path, server: ScriptedEngineServer, tmp_path: Path) -> Agent:
    user = tmp_path / "user.toml"
    user.write_text("")
    config, _ = load_config(repo, user_path=user, env={},
                            flags={"engine": {"base_url": server.base_url, "model": "scripted"},
                                   "verify": {"mode": "off"}})
    return Agent(workspace=repo, config=config, log_path=tmp_path / "log.jsonl")


def test_skills_are_listed_in_the_prefix_and_loaded_on_demand(calc_repo, tmp_path):
    _skill(calc_repo / ".keel" / "skills", "release", RELEASE)
    _skill(calc_repo / ".claude" / "skills", "pdf", "---\nname: pdf\ndescription: Fill PDF forms.\n---\nUse pdftk.\n")
    (calc_repo / ".claude" / "skills" / "pdf" / "forms.md").write_text("form notes")
    _skill(tmp_path / "xdg" / "keel" / "skills", "mine", "---\nname: mine\ndescription: The user's own.\n---\nHi\n")
    _skill(tmp_path / "xdg" / "keel" / "skills", "pdf-user", "---\nname: pdf\ndescription: shadowed\n---\nno\n")
    _skill(calc_repo / ".keel" / "skills", "broken", "no front matter here\n")
    _skill(tmp_path / "elsewhere", "x", "---\nname: outside\ndescription: points out\n---\n")
    (calc_repo / ".keel" / "skills" / "linked").symlink_to(tmp_path / "elsewhere" / "x")
    script = [{"tool_calls": [{"name": "skill", "arguments": {"name": "release-notes"}}]},
              {"tool_calls": [{"name": "skill", "arguments": {"name": "pdf"}}]},
              {"tool_calls": [{"name": "skill", "arguments": {"name": "nope"}}]},
              {"tool_calls": [{"name": "skill", "arguments": {"name": "pdf", "file": "forms.md"}},
                              {"name": "skill", "arguments": {"name": "pdf", "file": "../../../calc.py"}}]},
              {"content": "Loaded."}]
    with ScriptedEngineServer(script) as server:
        agent = _agent(calc_repo, server, tmp_path)
        agent.run("write release notes")
        requests = server.requests
    system = requests[0]["messages"][0]["content"]
    assert "- mine: The user's own." in system and "- pdf: Fill PDF forms." in system
    assert "- release-notes: Write release notes from the git log, grouped by kind of change." in system
    assert "Group entries under" not in system and "shadowed" not in system  # bodies load on demand
    assert all(r["messages"][0] == requests[0]["messages"][0] for r in requests)  # a stable prefix
    loaded = requests[1]["messages"][-1]["content"]
    assert loaded.startswith("Skill release-notes (.keel/skills/release)") and "Group entries under" in loaded
    assert "forms.md" in requests[2]["messages"][-1]["content"]
    assert "No skill named 'nope'" in requests[3]["messages"][-1]["content"]
    read, escaped = [m["content"] for m in requests[4]["messages"][-2:]]
    assert read == "form notes" and "has no file" in escaped  # confined to the skill's folder
    assert any("broken" in w for w in agent.ext.warnings)
    assert "points out" not in system and any("links outside the project" in w for w in agent.ext.warnings)


def test_front_matter_and_discovery_without_skills(tmp_path):
    meta, body = parse_front_matter('---\nname: "x"\ndescription: |\n  two\n  lines\n---\nbody\n')
    assert meta == {"name": "x", "description": "two lines"} and body == "body"
    assert parse_front_matter("# just markdown\n") == ({}, "# just markdown\n")
    assert discover_skills(tmp_path) == ([], [])


PLUGIN = '''
from pydantic import Field
from keel.tools.base import Tool, ToolAnnotations, ToolArgs, ToolResult, ToolSpec

class WordCountArgs(ToolArgs):
    path: str = Field(description="file to count")

def count(args, ctx):
    text = (ctx.workspace / args.path).read_text()
    return ToolResult(ok=True, output=f"{len(text.split())} words")

TOOLS = [Tool(ToolSpec("word_count", "Count words in a file.", WordCountArgs,
                       ToolAnnotations(read_only=True)), count)]

def broken():
    raise RuntimeError("plugin exploded")

def not_a_tool():
    return "nope"
'''


def _install_plugin(site: Path) -> None:
    """A real distribution on sys.path: a module plus dist-info with entry_points.txt."""
    site.mkdir(parents=True, exist_ok=True)
    (site / "keel_wc_plugin.py").write_text(PLUGIN)
    info = site / "keel_wc_plugin-0.1.dist-info"
    info.mkdir()
    (info / "METADATA").write_text("Metadata-Version: 2.1\nName: keel-wc-plugin\nVersion: 0.1\n")
    (info / "entry_points.txt").write_text("[keel.tools]\nwc = keel_wc_plugin:TOOLS\n"
                                           "bad = keel_wc_plugin:broken\nodd = keel_wc_plugin:not_a_tool\n"
                                           "missing = keel_wc_plugin_gone:TOOLS\n")


def test_plugin_tools_from_entry_points_run_like_built_ins(calc_repo, run_keel, keel_env, tmp_path):
    site = tmp_path / "site"
    _install_plugin(site)
    env = dict(keel_env, PYTHONPATH=os.pathsep.join([str(site), str(Path(__file__).parents[1])]))
    script = [{"tool_calls": [call("word_count", path="calc.py")]},
              {"tool_calls": [call("word_count", path="calc.py", extra=1)]},
              {"content": "calc.py has 7 words."}]
    with ScriptedEngineServer(script) as server:
        r = run_keel("run", "count words in calc.py", "--cwd", str(calc_repo), "--base-url", server.base_url,
                     "--model", "scripted", "--output-format", "json", "--verify", "off", env=env)
        requests = server.requests
    assert r.code == 0, r.stderr
    names = [t["function"]["name"] for t in requests[0]["tools"]]
    assert names[-1] == "word_count"
    assert requests[1]["messages"][-1]["content"] == "7 words"
    assert "not an argument of word_count" in requests[2]["messages"][-1]["content"]  # same validation
    assert "plugin bad" in r.stderr and "plugin exploded" in r.stderr and "plugin odd" in r.stderr
    assert "plugin missing" in r.stderr
    tool_events = [e for e in r.events() if e["type"] == "tool_call"]
    assert tool_events[0]["name"] == "word_count" and tool_events[0]["ok"]
    start = next(e for e in r.events() if e["type"] == "session_start")
    assert "word_count" in start["tools"] and json.dumps(start)  # logged like every tool


def test_plan_mode_refuses_a_plugin_tool_not_marked_read_only(tmp_path):
    from keel.ext.plan import plan_mode_tools
    from keel.tools.base import Tool, ToolArgs, ToolContext, ToolResult, ToolSpec

    ran = []
    tool = Tool(ToolSpec("deploy", "Deploy.", ToolArgs), lambda a, c: ran.append(1) or ToolResult(ok=True, output=""))
    [planned] = plan_mode_tools([tool])
    result = planned.execute(ToolArgs(), ToolContext(workspace=tmp_path))
    assert not result.ok and "plan mode" in result.output and ran == []
