"""Permission rules apply to every file tool the same way, through the real approval gate."""

from __future__ import annotations

import json

from keel.engine.types import ToolCall
from keel.policy.approval import Approver
from keel.policy.rules import RuleSet
from keel.tools.base import ToolContext
from keel.tools.catalog import default_tools
from keel.tools.registry import ToolRegistry
from keel.tools.session import FileSession


def ctx_for(ws, mode="unattended", **rules):
    approver = Approver(mode, RuleSet.from_config(rules.get("allow", []), rules.get("ask", []),
                                                  rules.get("deny", [])), workspace=ws)
    return ToolContext(workspace=ws, session=FileSession(), approval=approver)


def run(ctx, name, **args):
    return ToolRegistry(default_tools()).execute(ToolCall("c", name, json.dumps(args)), ctx)


def test_edit_rule_denies_edit_file_and_write_file(tmp_path):
    (tmp_path / "locked.py").write_text("x = 1\n")
    ctx = ctx_for(tmp_path, deny=["edit(locked.py)"])
    r = run(ctx, "edit_file", path="locked.py", old_text="x = 1", new_text="x = 2")
    assert not r.ok and "denied by rule" in r.output
    run(ctx, "read_file", path="locked.py")
    w = run(ctx, "write_file", path="locked.py", content="x = 3\n")
    assert not w.ok and "denied by rule" in w.output
    assert (tmp_path / "locked.py").read_text() == "x = 1\n"
    assert run(ctx, "write_file", path="free.py", content="ok\n").ok


def test_read_rule_denies_an_ordinary_file(tmp_path):
    (tmp_path / "internal.md").write_text("private notes\n")
    ctx = ctx_for(tmp_path, deny=["read(internal.md)"])
    r = run(ctx, "read_file", path="internal.md")
    assert not r.ok and "private notes" not in r.output


def test_secret_files_need_approval_but_a_read_rule_can_allow(tmp_path):
    (tmp_path / ".env").write_text("API_TOKEN=abc\n")
    assert "abc" not in run(ctx_for(tmp_path), "read_file", path=".env").output
    allowed = run(ctx_for(tmp_path, allow=["read(.env)"]), "read_file", path=".env")
    assert allowed.ok and "API_TOKEN=abc" in allowed.output


def test_interactive_edit_asks_and_respects_no(tmp_path):
    (tmp_path / "a.py").write_text("x = 1\n")
    questions: list[str] = []

    def say_no(q: str) -> str:
        questions.append(q)
        return "n"

    ctx = ToolContext(workspace=tmp_path, session=FileSession(),
                      approval=Approver("interactive", workspace=tmp_path, prompt=say_no))
    r = run(ctx, "edit_file", path="a.py", old_text="x = 1", new_text="x = 2")
    assert not r.ok and "refused by the user" in r.output
    assert questions and "a.py" in questions[0]
    assert (tmp_path / "a.py").read_text() == "x = 1\n"
