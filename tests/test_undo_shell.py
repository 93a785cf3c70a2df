"""Nothing a shell command does is lost: in a workspace that is not a git repository, a scripted model
runs `rm -f *.py`, `sed -i`, `mv` and `rm -rf sub` through run_shell under a real unattended `keel run`,
on files keel never read; the real `keel undo` puts every file back byte for byte, permission bits
included, from the snapshot keel took before each command. A workspace over the snapshot caps, and a
file over the per-file limit, are said to be not undoable, in the tool result and in an event."""

from __future__ import annotations

import hashlib
import importlib.util
import json
import os
import stat
from pathlib import Path

import pytest
from conftest import call

from keel.core.schema import read_log
from keel.testing.server import ScriptedEngineServer

FILES: dict[str, tuple[bytes, int]] = {
    "app.py": (b"print('hello')\r\n# caf\xe9\r\n", 0o644),
    "run.py": (b"#!/usr/bin/env python3\nprint('run')\n", 0o755),
    "blob.py": (bytes(range(256)) * 8 + b"\x00\xff", 0o600),        # binary-ish, private
    "notes.txt": (b"one\ntwo\nthree\n", 0o640),
    "old.txt": (b"moved away\n", 0o644),
    "sub/x.py": (b"x = 1\n", 0o644),
    "sub/deep/y.dat": (b"\x00\x01\x02 deep\n", 0o751),
    ".gitignore": (b"*.local\n", 0o644),
    "settings.local": (b"debug = true\n", 0o600),                  # git-ignored, lost to rm all the same
}


def _workspace(tmp_path: Path) -> Path:
    work = tmp_path / "work"
    for rel, (data, mode) in FILES.items():
        path = work / rel
        path.parent.mkdir(parents=True, exist_ok=True)
        path.write_bytes(data)
        os.chmod(path, mode)
    assert not any((p / ".git").exists() for p in (work, *work.parents))
    return work


def _run(run_keel, work: Path, commands: list[str], fmt: str = "json"):
    """The real CLI, unattended; returns the run and what the model was shown of each command."""
    script = [{"tool_calls": [call("run_shell", command=c)]} for c in commands]
    script.append({"tool_calls": [call("list_dir", path=".")]})   # one more turn: the last result is sent
    with ScriptedEngineServer(script) as server:
        r = run_keel("run", "tidy up the project", "--cwd", str(work), "--base-url", server.base_url,
                     "--model", "scripted", "--approval", "unattended", "--verify", "off",
                     "--max-steps", str(len(script)), "--output-format", fmt)
        shown = [m["content"] for m in server.requests[-1]["messages"] if m["role"] == "tool"]
    assert fmt != "json" or r.result["stop_reason"] == "limit:steps", r.stdout + r.stderr
    return r, shown[:len(commands)]


def test_a_models_rm_and_edits_in_a_non_git_workspace_are_undone_byte_for_byte(tmp_path, run_keel):
    work = _workspace(tmp_path)
    r, _shown = _run(run_keel, work, ["rm -f *.py",
                              "sed -i 's/two/TWO/' notes.txt && mv old.txt new.txt && rm -rf sub && rm -f settings.local"])
    assert not list(work.glob("*.py")) and not (work / "sub").exists() and not (work / "settings.local").exists()
    assert (work / "notes.txt").read_bytes() == b"one\nTWO\nthree\n" and (work / "new.txt").exists()
    events = read_log(Path(r.result["log"])).events
    refused = [e for e in events if e["type"] == "approval" and e.get("action") == "shell"]
    assert refused == [], refused                                  # the policy let both commands run
    changes = {c["path"]: (c["status"], c["undoable"])
               for e in events if e["type"] == "workspace_change" for c in e["changes"]}
    assert changes == {"app.py": ("deleted", True), "run.py": ("deleted", True), "blob.py": ("deleted", True),
                       "notes.txt": ("modified", True), "old.txt": ("deleted", True), "new.txt": ("added", True),
                       "sub/x.py": ("deleted", True), "sub/deep/y.dat": ("deleted", True),
                       "settings.local": ("deleted", True)}

    undone = run_keel("undo", "--cwd", str(work), "--json")
    assert undone.code == 0, undone.stdout + undone.stderr
    actions = {f["path"]: f["action"] for f in json.loads(undone.stdout)["files"]}
    assert actions["new.txt"] == "remove" and actions["app.py"] == "restore"
    for rel, (data, mode) in FILES.items():
        path = work / rel
        assert path.read_bytes() == data, rel
        assert stat.S_IMODE(os.stat(path).st_mode) == mode, rel
    assert not (work / "new.txt").exists()
    again = run_keel("undo", "--cwd", str(work))                   # a second undo has nothing left to do
    assert again.code == 0 and "restored" not in again.stdout.replace("already as it was", "")


def test_a_file_over_the_per_file_limit_is_streamed_into_the_snapshot_and_undone(tmp_path, run_keel):
    """Issue 35: an unattended rm of a file over 8 MiB could not be undone; the snapshot now streams it
    into a blob of its own (never read whole into memory)."""
    work = _workspace(tmp_path)
    big = os.urandom(9 * 2**20)                                    # over the 8 MiB a pack blob keeps
    (work / "big.bin").write_bytes(big)
    r, [output] = _run(run_keel, work, ["rm -f big.bin app.py"])
    assert "cannot undo" not in output, output
    events = read_log(Path(r.result["log"])).events
    assert not [e for e in events if e["type"] == "workspace_snapshot"]
    [change] = [e for e in events if e["type"] == "workspace_change"]
    assert change["not_undoable"] == []

    undone = run_keel("undo", "--cwd", str(work))
    assert undone.code == 0, undone.stdout
    assert (work / "big.bin").read_bytes() == big
    assert (work / "app.py").read_bytes() == FILES["app.py"][0]


def test_a_workspace_over_the_snapshot_cap_says_so_and_names_the_setting(tmp_path, run_keel, keel_env):
    work = _workspace(tmp_path)
    config = Path(keel_env["XDG_CONFIG_HOME"]) / "keel" / "config.toml"
    config.parent.mkdir(parents=True)
    config.write_text("[shell]\nsnapshot_max_files = 5\n")
    r, (first, second, third) = _run(run_keel, work, ["true", "rm -f app.py", "echo more >> notes.txt"], fmt="text")
    assert "snapshot_max_files" in first and "9 files" in first, first   # said once, in the result
    assert "snapshot" not in third
    # Issue 35: with no snapshot a deletion would be lost, so it is stopped before it runs (unattended:
    # refused); a command that deletes nothing still runs, and what it changed is said not undoable.
    assert "refused" in second and "no snapshot" in second and (work / "app.py").exists(), second
    [log] = (Path(keel_env["KEEL_HOME"]) / "sessions").glob("*.jsonl")
    events = read_log(log).events
    [off] = [e for e in events if e["type"] == "workspace_snapshot"]
    assert off["enabled"] is False and "[shell] snapshot_max_files" in off["reason"]
    assert "no workspace snapshot" in r.stderr and "[shell] snapshot_max_files" in r.stderr   # the person is told
    changes = [c for e in events if e["type"] == "workspace_change" for c in e["changes"]]
    assert [(c["path"], c["undoable"]) for c in changes] == [("notes.txt", False)]
    undone = run_keel("undo", "--cwd", str(work))
    assert undone.code == 1 and "cannot undo: notes.txt" in undone.stdout


def test_the_snapshot_never_reads_through_a_symlink(tmp_path):
    from keel.trace.checkpoints import CheckpointStore
    from keel.trace.snapshot import Snapshotter

    outside, work = tmp_path / "outside", tmp_path / "work"
    outside.mkdir(), work.mkdir()
    (outside / "id_rsa").write_bytes(b"PRIVATE KEY\n")
    (work / "plain.txt").write_bytes(b"mine\n")
    (work / "key").symlink_to(outside / "id_rsa")     # as a command that swapped a file for a link leaves it
    (work / "dir").symlink_to(outside)
    snap = Snapshotter(CheckpointStore(tmp_path / "session" / "checkpoints", work))
    assert snap.hold("key") is None and snap.hold("dir/id_rsa") is None
    held = snap.hold("plain.txt")
    assert held is not None and held.sha is not None and snap.store.blob(held.sha) == b"mine\n"
    stored = b"".join(f.read_bytes() for f in (tmp_path / "session" / "checkpoints").rglob("*") if f.is_file())
    assert b"mine" in stored and b"PRIVATE" not in stored


@pytest.mark.skipif(importlib.util.find_spec("keel.policy.beneath") is None,
                    reason="undo's writes beneath the workspace (keel.policy.beneath) have not landed yet")
def test_undo_does_not_write_through_a_directory_a_command_replaced_with_a_symlink(tmp_path, run_keel):
    work = _workspace(tmp_path)
    outside = tmp_path / "outside"
    outside.mkdir()
    swap = f"rm -rf sub && python3 -c \"import os; os.symlink('{outside}', 'sub')\""
    _run(run_keel, work, [swap])
    assert (work / "sub").is_symlink()
    undone = run_keel("undo", "--cwd", str(work))
    assert list(outside.iterdir()) == [], undone.stdout           # nothing written outside the workspace
    assert "sub/x.py" in undone.stdout


def test_the_approval_gate_knows_whether_a_snapshot_holds_the_workspace(tmp_path, monkeypatch):
    from keel.agent import Agent
    from keel.config import Config
    from keel.engine.client import OpenAICompatEngine

    monkeypatch.setenv("KEEL_HOME", str(tmp_path / "home"))
    work = _workspace(tmp_path)
    engine = OpenAICompatEngine(base_url="http://127.0.0.1:9/v1", model="scripted")
    logged = Agent(engine, workspace=work)
    assert logged.ctx.approval.snapshot is True                    # a session store: snapshots on
    assert Agent(engine, workspace=work, log_path=False).ctx.approval.snapshot is False
    config = Config.model_validate({"shell": {"snapshot_max_files": 3}})
    capped = Agent(engine, workspace=work, config=config)
    assert capped.ctx.approval.snapshot is True                    # until the first command finds it too big
    shell = capped.registry.get("run_shell")
    assert shell is not None
    result = shell.execute(shell.spec.args(command="true"), capped.ctx)
    assert "snapshot_max_files" in result.output
    assert not capped.ctx.approval.snapshot                       # the watch's Holdings, now off
    assert Agent(engine, workspace=work, config=Config.model_validate(
        {"shell": {"snapshot_max_mb": 0}})).ctx.approval.snapshot is False


def test_the_pack_survives_a_torn_index_line_and_refuses_corrupted_bytes(tmp_path):
    from keel.trace.pack import Pack

    pack = Pack(tmp_path)
    one, two = b"first blob\n", bytes(range(256))
    sha_one, sha_two = (hashlib.sha256(b).hexdigest() for b in (one, two))
    pack.add({sha_one: one, sha_two: two})
    pack.add({sha_one: one})                                       # held already: not appended again
    assert (tmp_path / "pack").stat().st_size == len(one) + len(two)
    with (tmp_path / "pack.idx").open("a") as fh:
        fh.write("deadbeef 0")                                     # a crash mid-line
    three = b"after the crash\n"
    Pack(tmp_path).add({hashlib.sha256(three).hexdigest(): three})   # a resumed session goes on appending
    fresh = Pack(tmp_path)                                         # as `keel undo` reads it later
    assert fresh.get(sha_one) == one and fresh.get(sha_two) == two and fresh.get("deadbeef") is None
    assert fresh.get(hashlib.sha256(three).hexdigest()) == three
    data = bytearray((tmp_path / "pack").read_bytes())
    data[0] ^= 1
    (tmp_path / "pack").write_bytes(bytes(data))
    assert Pack(tmp_path).get(sha_one) is None and Pack(tmp_path).get(sha_two) == two
