"""Project memory: AGENTS.md discovery (nested, fallbacks, user file), the cap and its notice, and the
byte-stable first message of a real scripted session over HTTP."""

from __future__ import annotations

import json
from pathlib import Path

import pytest
from conftest import call, git

from keel.agent import Agent
from keel.config import Config, EngineSettings, VerifySettings
from keel.context.memory import MemoryFile, discover_memory, project_memory, render_memory
from keel.testing.server import ScriptedEngineServer

FAST_PYTEST = "PYTEST_DISABLE_PLUGIN_AUTOLOAD=1 python -m pytest -q -p no:cacheprovider"


@pytest.fixture
def user_dir(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Path:
    """keel's config directory, found the way keel finds config.toml (XDG_CONFIG_HOME)."""
    monkeypatch.setenv("XDG_CONFIG_HOME", str(tmp_path / "xdg"))
    (tmp_path / "xdg" / "keel").mkdir(parents=True)
    return tmp_path / "xdg" / "keel"


@pytest.fixture
def nested(tmp_path: Path) -> Path:
    """A git repository; the workspace is two levels below its root."""
    root = tmp_path / "repo"
    (root / "services" / "api").mkdir(parents=True)
    git(root, "init", "-q")
    (root / "AGENTS.md").write_text("Root rule: use tabs.\n")
    (root / "services" / "CLAUDE.md").write_text("Services rule: no global state.\n")
    (root / "services" / "QWEN.md").write_text("Qwen rule: never shown, CLAUDE.md comes first.\n")
    (root / "services" / "api" / "AGENTS.md").write_text("API rule: use spaces here.\n")
    (root / "services" / "api" / "CLAUDE.md").write_text("Claude-only API rule: never shown.\n")
    return root / "services" / "api"


def test_files_from_the_repository_root_down_to_the_workspace_nearest_last(nested: Path, user_dir: Path) -> None:
    (user_dir / "AGENTS.md").write_text("User rule: answer briefly.\n")
    files = discover_memory(nested)
    assert [f.label for f in files] == [str(user_dir / "AGENTS.md"),
                                        str(nested.parent.parent / "AGENTS.md"),
                                        str(nested.parent / "CLAUDE.md"), "AGENTS.md"]
    text = project_memory(nested)
    order = [text.index(rule) for rule in ("User rule", "Root rule", "Services rule", "API rule")]
    assert order == sorted(order)
    assert "never shown" not in text
    assert "nearer file wins" in text


def test_qwen_md_is_the_last_fallback(tmp_path: Path, user_dir: Path) -> None:
    (tmp_path / "QWEN.md").write_text("Qwen rule: run make check.\n")
    assert [f.label for f in discover_memory(tmp_path)] == ["QWEN.md"]


def test_without_git_only_the_workspace_counts(tmp_path: Path, user_dir: Path) -> None:
    (tmp_path / "AGENTS.md").write_text("Parent rule, not this project's.\n")
    ws = tmp_path / "project"
    ws.mkdir()
    (ws / "AGENTS.md").write_text("Project rule.\n")
    assert "Parent rule" not in project_memory(ws) and "Project rule." in project_memory(ws)


def test_no_files_no_block(tmp_path: Path, user_dir: Path) -> None:
    assert project_memory(tmp_path) == ""


def test_user_file_under_home_is_shown_with_a_tilde(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("HOME", str(tmp_path / "home"))
    monkeypatch.delenv("XDG_CONFIG_HOME", raising=False)
    (tmp_path / "home" / ".config" / "keel").mkdir(parents=True)
    (tmp_path / "home" / ".config" / "keel" / "AGENTS.md").write_text("Mine.\n")
    ws = tmp_path / "ws"
    ws.mkdir()
    assert [f.label for f in discover_memory(ws)] == ["~/.config/keel/AGENTS.md"]


def test_the_cap_keeps_the_nearest_file_whole_and_says_where_it_cut() -> None:
    root = "\n".join(f"root line {i}: " + "x" * 60 for i in range(100))      # ~7.5 kB
    near = "\n".join(f"near line {i}" for i in range(40))
    files = [MemoryFile("/repo/AGENTS.md", root, len(root), False), MemoryFile("AGENTS.md", near, len(near), True)]
    text = render_memory(files, cap=2_000)
    assert near in text                                        # the nearest file is whole
    assert "root line 0:" in text and "root line 99:" not in text
    assert "[/repo/AGENTS.md cut here:" in text and f"of its {len(root):,} bytes shown" in text
    assert "the rest is in /repo/AGENTS.md" in text
    # a file with no room left is named, not silently dropped
    text = render_memory(files, cap=len(near.encode()))
    assert "[/repo/AGENTS.md (7," in text and "left out" in text
    # a workspace file that is cut points at read_file
    big = MemoryFile("AGENTS.md", root, len(root), True)
    assert "read_file AGENTS.md for the rest" in render_memory([big], cap=500)


def test_prefix_is_byte_stable_across_a_scripted_session(calc_repo: Path, user_dir: Path,
                                                         monkeypatch: pytest.MonkeyPatch, tmp_path: Path) -> None:
    """Memory sits in the first user message; a `remember` mid-run changes AGENTS.md on disk, not the
    prefix of the requests that follow."""
    monkeypatch.setenv("KEEL_HOME", str(tmp_path / "keel-home"))
    (calc_repo / "AGENTS.md").write_text("# calc\n\nRun tests with `python -m pytest -q`.\n")
    (user_dir / "AGENTS.md").write_text("Prefer small diffs.\n")
    script = [
        {"tool_calls": [call("read_file", path="calc.py")]},
        {"tool_calls": [call("remember", learning="calc.add is covered by test_calc.py::test_add.")]},
        {"tool_calls": [call("edit_file", path="calc.py", old_text="a - b", new_text="a + b")]},
        {"tool_calls": [call("run_shell", command=FAST_PYTEST)]},
        {"tool_calls": [call("finish", summary="fixed add")]},
    ]
    with ScriptedEngineServer(script) as server:
        config = Config(engine=EngineSettings(base_url=server.base_url, model="scripted"),
                        verify=VerifySettings(mode="off"))   # the gate is tested elsewhere; keep this fast
        result = Agent(workspace=calc_repo, config=config).run("fix the failing test")
        requests = server.requests
    assert result.status == "complete", result
    assert "AGENTS.md" in result.files_changed and "calc.py" in result.files_changed
    prefix = json.dumps(requests[0]["messages"][:2]) + json.dumps(requests[0]["tools"])
    assert all(json.dumps(r["messages"][:2]) + json.dumps(r["tools"]) == prefix for r in requests)
    first_user = requests[0]["messages"][1]["content"]
    assert first_user.startswith("fix the failing test")
    assert "Prefer small diffs." in first_user and "Run tests with `python -m pytest -q`." in first_user
    assert first_user.index("Prefer small diffs.") < first_user.index("Run tests with")
    assert "test_calc.py::test_add" not in first_user
    assert "## Learnings\n\n- calc.add is covered by test_calc.py::test_add.\n" in (calc_repo / "AGENTS.md").read_text()
    assert "remember" in [t["function"]["name"] for t in requests[0]["tools"]]


def test_the_cap_is_the_memory_share_of_the_window(calc_repo: Path, user_dir: Path) -> None:
    """An 8k-token local model gets ~1.6 kB of instructions (5% of its window), with the cut visible."""
    (calc_repo / "AGENTS.md").write_text("\n".join(f"Rule {i}: keep functions under 40 lines." for i in range(200)))
    with ScriptedEngineServer([]) as server:
        small = Config(engine=EngineSettings(base_url=server.base_url, model="scripted", context_window=8192))
        first = Agent(workspace=calc_repo, config=small, log_path=False).initial_messages("task")[1]["content"]
        big = Config(engine=EngineSettings(base_url=server.base_url, model="scripted", context_window=200_000))
        whole = Agent(workspace=calc_repo, config=big, log_path=False).initial_messages("task")[1]["content"]
        off = Config.model_validate({"engine": {"base_url": server.base_url, "model": "scripted"},
                                     "context": {"budget": {"memory": 0}}})
        none = Agent(workspace=calc_repo, config=off, log_path=False).initial_messages("task")[1]["content"]
    assert "Rule 0:" in first and "Rule 199:" not in first
    assert "[AGENTS.md cut here:" in first and "capped at 1,638 bytes" in first and "read_file AGENTS.md" in first
    assert "Rule 199:" in whole and "cut here" not in whole
    assert "Rule 0:" not in none
