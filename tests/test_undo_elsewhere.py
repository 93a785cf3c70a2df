"""`keel undo --session S` works on S's own workspace, wherever it is run from, and says so: the
person must see which directory is about to change when it is not the one they are in."""

from __future__ import annotations

import json
import subprocess
from pathlib import Path

from conftest import call

from keel.testing.server import ScriptedEngineServer


def test_undo_of_a_session_from_another_directory_names_the_workspace_it_changes(tmp_path, keel_env, run_keel):
    repo, elsewhere = tmp_path / "repo", tmp_path / "elsewhere"
    repo.mkdir(), elsewhere.mkdir()
    (repo / "notes.txt").write_bytes(b"one\r\ntwo\r\n")
    (elsewhere / "notes.txt").write_bytes(b"not keel's\n")
    subprocess.run(["git", "init", "-q"], cwd=repo, check=True)
    script = [{"tool_calls": [call("read_file", path="notes.txt")]},
              {"tool_calls": [call("edit_file", path="notes.txt", old_text="two", new_text="TWO")]}]
    with ScriptedEngineServer(script) as server:
        r = run_keel("run", "shout", "--cwd", str(repo), "--base-url", server.base_url, "--model", "scripted",
                     "--verify", "off", "--max-steps", "2", "--output-format", "json")
    session = r.result["session_id"]
    assert (repo / "notes.txt").read_bytes() == b"one\r\nTWO\r\n", r.stderr

    dry = run_keel("undo", "--cwd", str(elsewhere), "--session", session, "--dry-run", "--json")
    assert dry.code == 0, dry.stderr
    assert Path(json.loads(dry.stdout)["workspace"]).resolve() == repo.resolve()

    done = run_keel("undo", "--cwd", str(elsewhere), "--session", session)
    assert done.code == 0, done.stderr
    assert f"session {session} in {repo.resolve()}" in done.stdout
    assert (repo / "notes.txt").read_bytes() == b"one\r\ntwo\r\n"
    assert (elsewhere / "notes.txt").read_bytes() == b"not keel's\n"

    here = run_keel("undo", "--cwd", str(repo), "--dry-run")   # in its own workspace: no directory named
    assert f"session {session}, the whole session" in here.stdout
