"""keel's one atomic write (keel.core.files), shared by its data files and the workspace writes."""

from __future__ import annotations

import os
import stat

import pytest

from keel.core.files import sha256, write_atomic
from keel.policy.beneath import write_beneath_atomic


def test_replaces_the_file_whole_and_keeps_its_mode(tmp_path):
    path = tmp_path / "state.json"
    path.write_text("old")
    os.chmod(path, 0o600)
    write_atomic(path, b"new")
    assert path.read_bytes() == b"new"
    assert stat.S_IMODE(path.stat().st_mode) == 0o600
    write_atomic(path, b"newer", mode=0o640)
    assert stat.S_IMODE(path.stat().st_mode) == 0o640
    assert sorted(p.name for p in tmp_path.iterdir()) == ["state.json"]


def test_an_error_leaves_the_old_file_and_no_temp_file(tmp_path):
    path = tmp_path / "trust.json"
    path.write_text("old")
    with pytest.raises(TypeError):
        write_atomic(path, "not bytes")  # type: ignore[arg-type]
    assert path.read_text() == "old"
    assert sorted(p.name for p in tmp_path.iterdir()) == ["trust.json"]
    with pytest.raises(TypeError):
        write_beneath_atomic(tmp_path, "trust.json", "not bytes")  # type: ignore[arg-type]
    assert sorted(p.name for p in tmp_path.iterdir()) == ["trust.json"]


def test_make_parents_and_the_digest(tmp_path):
    path = tmp_path / "runs" / "a" / "record.json"
    write_atomic(path, b"{}", make_parents=True)
    assert path.read_bytes() == b"{}"
    assert sha256(b"abc") == "ba7816bf8f01cfea414140de5dae2223b00361a396177a9cb410ff61f20015ad"
