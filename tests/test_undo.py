"""`keel undo` puts back, byte for byte, what a real `keel run` changed: edits that kept CRLF, a BOM
or latin-1 bytes, files it created, a file a shell command deleted or appended to (from the snapshot
taken before the command, though keel never read the file), and never overwrites work done after the
session. What a command changed that keel could not snapshot is in tests/test_undo_shell.py."""

from __future__ import annotations

import json
import os
import subprocess
from pathlib import Path

from conftest import call

from keel.core.schema import read_log
from keel.testing.server import ScriptedEngineServer
from keel.tools.session import FileSession
from keel.trace.checkpoints import CheckpointStore
from keel.trace.undo import undo, undo_session

ORIGINAL = {
    "crlf.txt": b"one\r\ntwo\r\nthree\r\n",
    "bom.txt": b"\xef\xbb\xbfhello\nworld\n",
    "latin1.txt": b"caf\xe9 au lait\nsecond\n",
    "gone.txt": b"deleted by a command\n",
    "bin.dat": bytes(range(256)) * 4,
}


def _repo(tmp_path: Path) -> Path:
    repo = tmp_path / "repo"
    repo.mkdir()
    for name, data in ORIGINAL.items():
        (repo / name).write_bytes(data)
    subprocess.run(["git", "init", "-q"], cwd=repo, check=True)
    return repo


SCRIPT = [
    {"tool_calls": [call("read_file", path=p) for p in ("gone.txt", "crlf.txt", "bom.txt", "latin1.txt")]},
    {"tool_calls": [call("edit_file", path="crlf.txt", old_text="two", new_text="TWO"),
                    call("edit_file", path="bom.txt", old_text="world", new_text="there"),
                    call("edit_file", path="latin1.txt", old_text="second", new_text="2nd"),
                    call("write_file", path="new/dir/made.txt", content="made by keel\n")]},
    {"tool_calls": [call("run_shell", command="rm gone.txt && echo x > shell_made.txt && printf x >> bin.dat")]},
]


def _session(repo: Path, run_keel) -> dict:
    with ScriptedEngineServer(SCRIPT) as server:
        r = run_keel("run", "tidy the files", "--cwd", str(repo), "--base-url", server.base_url, "--model",
                     "scripted", "--approval", "auto-edit", "--verify", "off", "--max-steps", "3",
                     "--output-format", "json")
    assert r.result["stop_reason"] == "limit:steps", r.stderr
    return r.result


def _undo(run_keel, repo: Path, *args: str):
    return run_keel("undo", "--cwd", str(repo), *args)


def test_undo_restores_every_byte_and_reports_what_a_command_did(tmp_path, run_keel):
    repo = _repo(tmp_path)
    result = _session(repo, run_keel)
    assert (repo / "crlf.txt").read_bytes() == b"one\r\nTWO\r\nthree\r\n"
    assert (repo / "latin1.txt").read_bytes() == b"caf\xe9 au lait\n2nd\n"
    assert not (repo / "gone.txt").exists() and (repo / "shell_made.txt").exists()
    [change] = [e for e in read_log(Path(result["log"])).events if e["type"] == "workspace_change"]
    assert {c["path"]: (c["status"], c["undoable"]) for c in change["changes"]} == {
        "bin.dat": ("modified", True), "gone.txt": ("deleted", True), "shell_made.txt": ("added", True)}
    assert change["not_undoable"] == [] and change["step"] == 3

    dry = _undo(run_keel, repo, "--dry-run", "--json")
    assert json.loads(dry.stdout)["dry_run"] is True and not (repo / "gone.txt").exists()

    partial = _undo(run_keel, repo, "--to", "2")         # keep steps 1-2, undo the command of step 3
    assert partial.code == 0, partial.stdout
    assert "restored: bin.dat" in partial.stdout           # never read by keel: the snapshot held it
    assert (repo / "gone.txt").read_bytes() == ORIGINAL["gone.txt"]
    assert not (repo / "shell_made.txt").exists()
    assert (repo / "crlf.txt").read_bytes() == b"one\r\nTWO\r\nthree\r\n"

    full = _undo(run_keel, repo, "--json")
    report = json.loads(full.stdout)
    assert report["session_id"] == result["session_id"]
    actions = {f["path"]: f["action"] for f in report["files"]}
    assert actions == {"crlf.txt": "restore", "bom.txt": "restore", "latin1.txt": "restore",
                       "new/dir/made.txt": "remove", "gone.txt": "unchanged", "shell_made.txt": "unchanged",
                       "bin.dat": "unchanged"}
    for name, data in ORIGINAL.items():
        assert (repo / name).read_bytes() == data, name
    assert not (repo / "new" / "dir" / "made.txt").exists()


def test_undo_leaves_files_changed_after_the_session_unless_forced(tmp_path, run_keel):
    repo = _repo(tmp_path)
    _session(repo, run_keel)
    (repo / "crlf.txt").write_bytes(b"my own work\n")
    r = _undo(run_keel, repo)
    assert r.code == 1 and "NOT restored: crlf.txt" in r.stdout
    assert (repo / "crlf.txt").read_bytes() == b"my own work\n"
    assert (repo / "bom.txt").read_bytes() == ORIGINAL["bom.txt"]          # the rest was undone
    r = _undo(run_keel, repo, "--force")
    assert (repo / "crlf.txt").read_bytes() == ORIGINAL["crlf.txt"]
    assert "restored: crlf.txt" in r.stdout


def test_undo_without_a_session_is_a_usage_error(tmp_path, run_keel):
    r = _undo(run_keel, tmp_path)
    assert r.code == 2 and "no keel session" in r.stderr
    r = _undo(run_keel, tmp_path, "--to", "-1")
    assert r.code == 2


def test_checkpoints_restore_binary_files_and_modes_through_the_library(tmp_path, monkeypatch):
    monkeypatch.setenv("KEEL_HOME", str(tmp_path / "home"))
    work = tmp_path / "w"
    work.mkdir()
    blob, script = work / "data.bin", work / "run.sh"
    blob.write_bytes(b"\x00\xff\r\n\x89PNG" * 100)
    script.write_bytes(b"#!/bin/sh\r\necho hi\r\n")
    os.chmod(script, 0o755)
    session_dir = tmp_path / "home" / "sessions" / "s1"
    store = CheckpointStore(session_dir / "checkpoints", work)
    files = FileSession(store=store)
    for step, (path, data) in enumerate([(blob, b"new"), (script, b"echo bye\n"), (blob, b"newer")], 1):
        store.step = step
        files.snapshot(path)
        path.write_bytes(data)
        files.record_write(path, data)
    os.chmod(script, 0o600)
    report = undo_session(session_dir, work, to_step=2)   # only step 3's change is undone
    assert [(f.path, f.action) for f in report.files] == [("data.bin", "restore")]
    assert blob.read_bytes() == b"new"
    report = undo_session(session_dir, work)
    assert report.ok
    assert blob.read_bytes() == b"\x00\xff\r\n\x89PNG" * 100
    assert script.read_bytes() == b"#!/bin/sh\r\necho hi\r\n"
    assert os.stat(script).st_mode & 0o777 == 0o755
    # the REPL's /undo calls this; with no session for the workspace it says so
    try:
        undo(tmp_path / "elsewhere")
    except ValueError as e:
        assert "no keel session" in str(e)
    else:
        raise AssertionError("undo without a session must raise")
