"""Issue 35, item 1: one read decision on every path that sends a file's content or name to the model.

A real unattended `keel run` (the scripted engine over real HTTP: every request it receives is
checked), as root and as kuser: change_file on .env (the issue's example) and on a credentials file
it is asked to move to a plain name (a variant of the move), grep over a folder, list_dir and
find_files under a `read(...)` deny rule, edit_file's near-miss lines, write_file's diff in the event
log, a delegate's sub-agent, an MCP server's embedded resource. Each next to a control: the same tool
on a plain file does send its content.
"""

from __future__ import annotations

import json
import sys
from collections.abc import Iterator
from pathlib import Path

import pytest
from tier_user import USERS, Person, people

FIXTURE = Path(__file__).parent / "fixtures" / "mcp_server.py"
SECRET = {".env": "DB_PASSWORD=ENV-SECRET-7731\n", "credentials.json": '{"token": "CRED-SECRET-4410"}\n',
          "private/plan.txt": "PRIVATE-PLAN-5512\n", "deploy.key": "KEY-SECRET-9093\n"}
MARKS = ("ENV-SECRET-7731", "CRED-SECRET-4410", "PRIVATE-PLAN-5512", "KEY-SECRET-9093")


@pytest.fixture(params=USERS)
def person(request: pytest.FixtureRequest) -> Iterator[Person]:
    who = next(people(request.param))
    for rel, text in {**SECRET, "notes.txt": "PLAIN-NOTES-1234\n", "app.py": "API = 'PLAIN-APP'\n",
                      "settings.json": '{"debug": true}\n'}.items():
        (who.work / rel).parent.mkdir(parents=True, exist_ok=True)
        (who.work / rel).write_text(text)
    who.own(who.work)
    yield who
    who.remove()


def _calls(*calls: tuple[str, dict[str, object]]) -> list[dict[str, object]]:
    return [{"tool_calls": [{"name": name, "arguments": args}]} for name, args in calls]


def _no_secret_sent(ran: object, marks: tuple[str, ...] = MARKS) -> None:
    for mark in marks:
        assert mark not in ran.sent(), mark          # type: ignore[attr-defined]
        assert mark not in ran.log, mark             # type: ignore[attr-defined]


def test_change_file_and_a_move_never_send_a_secret_file_to_the_engine(person: Person) -> None:
    person.extra_config = '[engine]\nprofile = "small"\n'       # type: ignore[attr-defined]
    script = [*_calls(("change_file", {"path": ".env", "change": "set DEBUG=1 at the end"}),
                      ("change_file", {"path": "credentials.json", "change": "rename it to settings2.json"})),
              # control: a plain file goes to the editor request, whose reply rewrites it
              {"tool_calls": [{"name": "change_file", "arguments": {"path": "notes.txt", "change": "say hello"}}]},
              {"content": "```\nPLAIN-NOTES-1234 hello\n```"}]
    ran = person.run(script)
    texts = ran.tool_texts()
    assert "needs approval" in texts[0] and "needs approval" in texts[1], texts
    assert (person.work / "credentials.json").exists() and not (person.work / "settings2.json").exists()
    assert "PLAIN-NOTES-1234" in json.dumps(ran.requests[3])           # the editor request had the plain file
    assert (person.work / "notes.txt").read_text() == "PLAIN-NOTES-1234 hello\n"
    _no_secret_sent(ran, ("ENV-SECRET-7731", "CRED-SECRET-4410", "KEY-SECRET-9093"))   # private/ has no rule here


def test_walks_edits_diffs_delegates_and_mcp_resources_apply_the_read_decision(person: Person) -> None:
    mcp = person.base / "xdg" / "keel" / "mcp.json"
    mcp.parent.mkdir(parents=True, exist_ok=True)
    mcp.write_text(json.dumps({"mcpServers": {"fx": {"command": sys.executable, "args": [str(FIXTURE)]}}}))
    person.extra_config = ('\n[permissions]\ndeny = ["read(private/**)"]\nallow = ["mcp__fx"]\n'   # type: ignore[attr-defined]
                           '[extensions]\nmcp_startup_timeout_s = 120\n')
    script = [*_calls(("grep", {"pattern": "SECRET|PLAN|PLAIN", "path": "."}),
                      ("grep", {"pattern": "SECRET", "path": ".env"}),
                      ("list_dir", {"path": "."}),
                      ("find_files", {"pattern": "*.txt"}),
                      ("edit_file", {"path": ".env", "old_text": "DB_PASSWORD=nope", "new_text": "X=1"}),
                      ("write_file", {"path": "new.key", "content": "NEW-KEY-CONTENT-0001\n"}),
                      ("mcp__fx__embed", {"path": ".env"}),
                      ("mcp__fx__embed", {"path": "notes.txt"}),
                      ("delegate", {"task": "what is in .env?"})),
              *_calls(("read_file", {"path": ".env"}), ("grep", {"pattern": "SECRET", "path": "."})),  # the sub-agent
              {"content": "The sub-agent could not read it."}]
    ran = person.run(script, env=None)
    texts = ran.tool_texts()
    grep, grep_one, listing, found, edit, written, embedded, plain_embedded = texts[:8]
    assert "PLAIN-APP" in grep and "PLAIN-NOTES-1234" in grep                    # control: plain files shown
    assert "needs approval" in grep_one or "requires approval" in grep_one
    assert "notes.txt" in listing and "plan.txt" not in listing                  # the deny rule hides the name
    assert ".env" in listing                                                     # a secret's name alone is listed
    assert "notes.txt" in found and "plan.txt" not in found
    assert "needs approval" in edit and "DB_PASSWORD" not in edit
    assert written.startswith("Created new.key")
    assert "not shown" in embedded and "PLAIN-NOTES-1234" in plain_embedded
    events = [json.loads(line) for line in ran.log.splitlines()]
    [write_event] = [e for e in events if e["type"] == "tool_call" and e["name"] == "write_file"]
    assert "diff" not in write_event and "NEW-KEY-CONTENT-0001" not in json.dumps(write_event.get("result_preview"))
    sub_reads = [e for e in events if e["type"] == "tool_call" and e["name"] == "read_file"]
    assert sub_reads and not any(e["ok"] for e in sub_reads)                    # the sub-agent was refused too
    assert any("reading .env needs approval" in json.dumps(r) for r in ran.requests)
    _no_secret_sent(ran)
