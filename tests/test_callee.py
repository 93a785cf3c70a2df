"""Where change_file carries a change that left the checks failing (keel.drive.callee): the module the
changed file calls, or else the modules the failing tests test, judged together."""

from __future__ import annotations

import shutil
from pathlib import Path
from typing import Any

from conftest import run_small

CASE = Path(__file__).resolve().parent.parent / "evals" / "py-config-default"


def call(name: str, **args: object) -> dict[str, Any]:
    return {"tool_calls": [{"name": name, "arguments": args}]}


def fenced(name: str, lang: str = "python") -> dict[str, Any]:
    return {"content": f"```{lang}\n{(CASE / 'solution' / name).read_text()}```\n"}


def run(ws: Path, script: list[dict[str, Any]], **assists: bool) -> tuple[Any, list[dict[str, Any]]]:
    result, events, requests = run_small(ws, (CASE / "task.md").read_text(), [*script, call("finish", summary="done")],
                                         **assists)
    return result, [*events, {"requests": requests}]


def test_a_change_the_tests_need_elsewhere_goes_to_the_modules_they_test(tmp_path: Path) -> None:
    """py-config-default on the 1.5B: the task's three-file change sent to config.toml eight times, the
    tests that failed testing settings.py and client.py, which neither the task nor the model named.
    client.py's change alone fails as many tests (load_settings() has no timeout yet): judged together
    with settings.py's, both stay."""
    ws = tmp_path / "ws"
    shutil.copytree(CASE / "repo", ws)
    task = (CASE / "task.md").read_text()
    result, events = run(ws, [call("change_file", path="config.toml", change=task),
                              fenced("config.toml", "toml"), fenced("config.toml", "toml"),
                              fenced("client.py"), fenced("client.py"), fenced("settings.py")])
    for name in ("config.toml", "client.py", "settings.py"):
        assert (ws / name).read_text() == (CASE / "solution" / name).read_text(), name
    reply = next(m["content"] for m in result.messages if m.get("role") == "tool")
    assert reply.startswith("Overwrote config.toml")
    assert ("The cause was in the code the failing tests test: keel made the change in client.py, settings.py, "
            "which the failing tests test.") in reply
    asked = events[-1]["requests"][3]["messages"][1]["content"]
    assert "they test request_options() from client.py" in asked
    assert result.status == "complete"


def test_changes_that_do_not_lower_the_count_together_are_put_back(tmp_path: Path) -> None:
    ws = tmp_path / "ws"
    shutil.copytree(CASE / "repo", ws)
    client, settings = (ws / "client.py").read_text(), (ws / "settings.py").read_text()
    task = (CASE / "task.md").read_text()
    result, _ = run(ws, [call("change_file", path="config.toml", change=task),
                         fenced("config.toml", "toml"), fenced("config.toml", "toml"),
                         fenced("client.py"), fenced("client.py"),
                         {"content": f"```python\n{settings}\n# timeout_s: later\n```\n"},
                         {"content": f"```python\n{settings}```\n"}])
    assert (ws / "client.py").read_text() == client and (ws / "settings.py").read_text() == settings
    reply = next(m["content"] for m in result.messages if m.get("role") == "tool")
    assert "keel also tried the change in client.py, settings.py, which the failing tests test; the checks did " \
           "not fail less, so they are as they were." in reply


def test_without_the_assist_only_the_named_file_changes(tmp_path: Path) -> None:
    ws = tmp_path / "ws"
    shutil.copytree(CASE / "repo", ws)
    client = (ws / "client.py").read_text()
    task = (CASE / "task.md").read_text()
    run(ws, [call("change_file", path="config.toml", change=task), fenced("config.toml", "toml"),
             fenced("config.toml", "toml")], callee_change=False)
    assert (ws / "client.py").read_text() == client
    assert (ws / "config.toml").read_text() == (CASE / "solution" / "config.toml").read_text()
