"""Workspace snapshots and the diff between two of them."""

from __future__ import annotations

import subprocess
from pathlib import Path

import pytest

from keel.verify.snapshot import FileChange, diff_snapshots, take_snapshot


def make_tree(root: Path, files: dict[str, str | bytes]) -> None:
    for rel, content in files.items():
        path = root / rel
        path.parent.mkdir(parents=True, exist_ok=True)
        if isinstance(content, bytes):
            path.write_bytes(content)
        else:
            path.write_bytes(content.encode())


@pytest.fixture
def repo(tmp_path: Path) -> Path:
    root = tmp_path / "repo"
    root.mkdir()
    subprocess.run(["git", "init", "-q"], cwd=root, check=True)
    make_tree(root, {
        ".gitignore": "*.log\nout/\n",
        "app.py": "def main():\n    return 1\n",
        "pkg/util.py": "X = 1\n",
        "logo.png": b"\x89PNG\r\n\x1a\n\x00\x00binary",
    })
    return root


SKIPPED = [".git/config2", "node_modules/x/index.js", "__pycache__/app.cpython-311.pyc", ".venv/lib/x.py",
           "venv/lib/x.py", ".keel/state.json", ".mypy_cache/x.json", ".pytest_cache/v", ".ruff_cache/x",
           "pkg/__pycache__/util.pyc", "debug.log", "out/build.txt"]


def test_snapshot_lists_kept_files_by_relative_posix_path(repo):
    make_tree(repo, {rel: "skip me\n" for rel in SKIPPED})
    snap = take_snapshot(repo)
    assert sorted(snap.files) == [".gitignore", "app.py", "logo.png", "pkg/util.py"]
    assert all(len(h) == 64 for h in snap.files.values())


@pytest.mark.parametrize(("path", "text"), [
    ("app.py", "def main():\n    return 1\n"),
    ("logo.png", None),                      # binary: hashed, no text
    ("missing.py", None),
])
def test_snapshot_keeps_text_of_text_files(repo, path, text):
    assert take_snapshot(repo).text(path) == text


def test_text_is_byte_faithful(repo):
    make_tree(repo, {"win.txt": b"a\r\nb\r\n", "latin1.txt": b"caf\xe9\n"})
    snap = take_snapshot(repo)
    assert snap.text("win.txt") == "a\r\nb\r\n"
    assert snap.text("latin1.txt") is None          # not UTF-8: restoring it as text would change it
    assert "latin1.txt" in snap.files


def test_big_files_are_hashed_without_text(repo):
    make_tree(repo, {"big.txt": "x" * (1 << 20) + "\n"})
    snap = take_snapshot(repo)
    assert "big.txt" in snap.files and snap.text("big.txt") is None


def test_text_budget(repo):
    snap = take_snapshot(repo, keep_text_bytes=0)
    assert snap.files and all(snap.text(p) is None for p in snap.files)


def test_digest_is_stable_and_names_the_whole_state(repo):
    first, second = take_snapshot(repo), take_snapshot(repo)
    assert first.digest == second.digest and len(first.digest) == 64
    (repo / "app.py").write_text("def main():\n    return 2\n")
    changed = take_snapshot(repo)
    assert changed.digest != first.digest
    (repo / "app.py").write_text("def main():\n    return 1\n")
    assert take_snapshot(repo).digest == first.digest
    (repo / "pkg/util.py").rename(repo / "pkg/util2.py")
    assert take_snapshot(repo).digest != first.digest        # same bytes, other path: another state


def test_ignored_files_do_not_change_the_digest(repo):
    before = take_snapshot(repo)
    make_tree(repo, {"run.log": "noise\n", "__pycache__/x.pyc": b"\x00", ".keel/log.jsonl": "{}\n"})
    assert take_snapshot(repo).digest == before.digest


EDITS = [
    # name, files written after the first snapshot (None deletes), expected changes
    ("modify", {"app.py": "def main():\n    print('hi')\n    return 2\n"},
     [FileChange("app.py", "modified", 2, 1, ("    print('hi')", "    return 2"), (2, 3))]),
    ("add", {"new.py": "a = 1\nb = 2\n"}, [FileChange("new.py", "added", 2, 0, ("a = 1", "b = 2"), (1, 2))]),
    ("delete", {"pkg/util.py": None}, [FileChange("pkg/util.py", "deleted", 0, 1)]),
    ("binary", {"logo.png": b"\x89PNG\x00other"}, [FileChange("logo.png", "modified", None, None)]),
    ("add_binary", {"data.bin": b"\x00\x01"}, [FileChange("data.bin", "added", None, 0)]),
    ("no_change", {"app.py": "def main():\n    return 1\n"}, []),
    ("several", {"pkg/util.py": "X = 1\nY = 2\n", "app.py": None},
     [FileChange("app.py", "deleted", 0, 2), FileChange("pkg/util.py", "modified", 1, 0, ("Y = 2",), (2,))]),
]


@pytest.mark.parametrize(("name", "writes", "expected"), EDITS, ids=[e[0] for e in EDITS])
def test_diff_snapshots(repo, name, writes, expected):
    before = take_snapshot(repo)
    for rel, content in writes.items():
        if content is None:
            (repo / rel).unlink()
        else:
            make_tree(repo, {rel: content})
    assert diff_snapshots(before, take_snapshot(repo)) == expected


def test_diff_of_an_edit_in_the_middle_of_a_long_file(repo):
    lines = [f"line {i}" for i in range(5000)]
    (repo / "long.py").write_text("\n".join(lines) + "\n")
    before = take_snapshot(repo)
    lines[2500] = "changed"
    lines.insert(4000, "inserted")
    (repo / "long.py").write_text("\n".join(lines) + "\n")
    [change] = diff_snapshots(before, take_snapshot(repo))
    assert (change.added_lines, change.removed_lines) == (2, 1)
    assert change.added_text == ("changed", "inserted") and change.added_line_numbers == (2501, 4001)
