"""The remember tool: a learning appended to AGENTS.md under "## Learnings", through the same approval
and snapshot as any edit, and never a secret."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from keel.context.secrets import secret_kind
from keel.engine.types import ToolCall
from keel.policy.approval import Approver
from keel.policy.rules import RuleSet
from keel.tools.base import ToolContext, ToolResult
from keel.tools.catalog import default_tools
from keel.tools.registry import ToolRegistry
from keel.tools.remember import append_learning

REGISTRY = ToolRegistry(default_tools())


def remember(ctx: ToolContext, learning: str) -> ToolResult:
    return REGISTRY.execute(ToolCall("m1", "remember", json.dumps({"learning": learning})), ctx)


def unattended(ws: Path, **rules: list[str]) -> ToolContext:
    return ToolContext(workspace=ws, approval=Approver("unattended", rules=RuleSet.from_config(**rules), workspace=ws))


def test_creates_agents_md_with_a_learnings_section(tmp_path: Path) -> None:
    result = remember(unattended(tmp_path), "Tests need `make fixtures` before pytest.")
    assert result.ok and result.files_changed == ["AGENTS.md"]
    assert (tmp_path / "AGENTS.md").read_text() == "## Learnings\n\n- Tests need `make fixtures` before pytest.\n"
    assert "Created AGENTS.md" in result.output


def test_appends_inside_an_existing_section_before_the_next_heading(tmp_path: Path) -> None:
    original = ("# Project\n\nUse tabs.\n\n## Learnings\n\n- First fact.\n\n## Release\n\nTag with vX.Y.\n")
    (tmp_path / "AGENTS.md").write_text(original)
    ctx = unattended(tmp_path)
    assert remember(ctx, "Second   fact,\nsaid on two lines.").ok
    assert (tmp_path / "AGENTS.md").read_text() == (
        "# Project\n\nUse tabs.\n\n## Learnings\n\n- First fact.\n- Second fact, said on two lines.\n\n"
        "## Release\n\nTag with vX.Y.\n")
    # the same learning again changes nothing
    again = remember(ctx, "Second fact, said on two lines.")
    assert again.ok and again.files_changed == [] and "Already in AGENTS.md" in again.output
    # the snapshot holds the file as it was before keel's first change, so the edit can be undone
    real = (tmp_path / "AGENTS.md").resolve()
    assert ctx.session.snapshots[real] == original.encode()
    ctx.session.restore(real)
    assert (tmp_path / "AGENTS.md").read_text() == original


@pytest.mark.parametrize(("before", "after"), [
    ("", "## Learnings\n\n- L.\n"),
    ("# T\n", "# T\n\n## Learnings\n\n- L.\n"),
    ("# T\n\n## Learnings\n", "# T\n\n## Learnings\n\n- L.\n"),
    ("# T\r\n\r\nText.\r\n", "# T\r\n\r\nText.\r\n\r\n## Learnings\r\n\r\n- L.\r\n"),
    ("## learnings ##\n- a\n### Detail\n- b\n", "## learnings ##\n- a\n### Detail\n- b\n- L.\n"),
])
def test_append_learning_table(before: str, after: str) -> None:
    assert append_learning(before, "L.") == after


def test_unattended_mode_follows_the_edit_rules(tmp_path: Path) -> None:
    (tmp_path / "AGENTS.md").write_text("# Rules\n")
    denied = remember(unattended(tmp_path, deny=["edit(AGENTS.md)"]), "A fact.")
    asked = remember(unattended(tmp_path, ask=["edit(*.md)"]), "A fact.")
    assert not denied.ok and "denied by rule edit(AGENTS.md)" in denied.output
    assert not asked.ok and "needs approval" in asked.output and "no one is present" in asked.output
    assert (tmp_path / "AGENTS.md").read_text() == "# Rules\n"
    assert remember(unattended(tmp_path), "A fact.").ok          # no rule: edits in the workspace proceed


def test_interactive_mode_asks_the_person(tmp_path: Path) -> None:
    questions: list[str] = []

    def answer(text: str) -> str:
        questions.append(text)
        return "n" if len(questions) == 1 else "y"

    ctx = ToolContext(workspace=tmp_path, attended=True,
                      approval=Approver("interactive", workspace=tmp_path, prompt=answer))
    refused = remember(ctx, "A fact.")
    assert not refused.ok and "refused by the user" in refused.output and not (tmp_path / "AGENTS.md").exists()
    assert remember(ctx, "A fact.").ok and "keel wants to edit AGENTS.md" in questions[0]


SECRETS = [
    "The deploy key is AKIAIOSFODNN7EXAMPLE for staging.",
    "use ghp_abcdefghijklmnopqrstuvwxyz0123456789 to clone",
    "github_pat_11ABCDEFG0123456789_abcdefghijklmnopqrstuvwxyz",
    "OPENAI_API_KEY=sk-proj-abcdefghijklmnopqrstuvwxyz123456",
    "anthropic key sk-ant-api03-abcdefghijklmnopqrstuvwx",
    "stripe sk_live_abcdefghijklmnop1234",
    "slack xoxb-1234567890-abcdefghij",
    "maps key AIzaSyA-abcdefghijklmnopqrstuvwxyz12345",
    "hf_abcdefghijklmnopqrstuvwxyzABCDEF is the hub token",
    "-----BEGIN OPENSSH PRIVATE KEY----- b3BlbnNzaC1rZXk",
    "-----BEGIN RSA PRIVATE KEY-----",
    "the db is postgres://admin:s3cretpw@db.internal:5432/app",
    "Authorization: Bearer abcdefghijklmnopqrstuvwxyz.0123456789",
    "eyJhbGciOiJIUzI1NiJ9.eyJzdWIiOiIxMjM0NTY3ODkwIn0.dozjgNryP4J3jVmNHl0w5N_XgL0n3I9PlFUP0THsR8U",
    "the admin password is Hunter2!",
    "DB_PASSWORD=correcthorse42",
    "api_key: 'q8f7a6s5d4f3g2h1'",
    "set --token=9f8e7d6c5b4a3f2e1d0c",
    "client_secret = Zm9vYmFyYmF6cXV4",
]
NOT_SECRETS = [
    "Run tests with `make test`; plain pytest misses the fixtures.",
    "The API key is read from $SERVICE_API_KEY; tests use a fake.",
    "password = os.environ['DB_PASSWORD'] in settings.py",
    "Set TOKEN=<your token> in .env.example style files only.",
    "the token is stored in the keyring, never in files",
    "Commit 3f2a9c1d4e5b6a7980f1e2d3c4b5a69788f7e6d5 fixed the race.",
    "Use `sk-` prefixed keys only via the vault.",
    "auth is handled by middleware/auth.py",
    "password: required",
]


@pytest.mark.parametrize("text", SECRETS)
def test_secret_looking_text_is_recognised(text: str) -> None:
    assert secret_kind(text) is not None


@pytest.mark.parametrize("text", NOT_SECRETS)
def test_ordinary_learnings_are_not_flagged(text: str) -> None:
    assert secret_kind(text) is None


def test_a_secret_is_refused_with_a_clear_message_and_nothing_is_written(tmp_path: Path) -> None:
    result = remember(unattended(tmp_path), "Staging uses AKIAIOSFODNN7EXAMPLE as its key.")
    assert not result.ok and result.files_changed == []
    assert "Not remembered" in result.output and "an AWS access key id" in result.output
    assert "without its value" in result.output
    assert not (tmp_path / "AGENTS.md").exists()


def test_agents_md_that_is_a_directory_is_reported(tmp_path: Path) -> None:
    (tmp_path / "AGENTS.md").mkdir()
    result = remember(unattended(tmp_path), "A fact.")
    assert not result.ok and "not a regular file" in result.output
