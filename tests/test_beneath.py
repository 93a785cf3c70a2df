"""keel.policy.beneath on real files: nothing is opened, written or removed through a symlink."""

from __future__ import annotations

import os
import stat
import threading
from pathlib import Path

import pytest

from keel.policy.beneath import (
    EscapeError,
    NotRegularFileError,
    anchor,
    makedirs_beneath,
    open_beneath,
    read_beneath,
    stat_beneath,
    unlink_beneath,
    write_beneath_atomic,
)

SECRET = b"-----BEGIN OPENSSH PRIVATE KEY----- beneath-test-marker\n"


@pytest.fixture
def ws(tmp_path: Path) -> Path:
    """A workspace with a file, a subdirectory, and links to an outside 'home' holding a key."""
    home = tmp_path / "home" / ".ssh"
    home.mkdir(parents=True)
    (home / "id_rsa").write_bytes(SECRET)
    root = tmp_path / "ws"
    (root / "src").mkdir(parents=True)
    (root / "src" / "app.py").write_text("x = 1\n")
    (root / "key").symlink_to(home / "id_rsa")          # a link at the end of a path
    (root / "dotssh").symlink_to(home)                  # a link in the middle of a path
    (root / "alias.py").symlink_to("src/app.py")        # a link that stays inside
    return root


def outside_untouched(ws: Path) -> None:
    home = ws.parent / "home" / ".ssh"
    assert sorted(p.name for p in home.iterdir()) == ["id_rsa"]
    assert (home / "id_rsa").read_bytes() == SECRET


def test_plain_paths_are_read_written_and_stat_ed(ws: Path) -> None:
    assert read_beneath(ws, "src/app.py") == b"x = 1\n"
    assert read_beneath(str(ws), "./src//app.py", limit=3) == b"x ="
    write_beneath_atomic(ws, "src/app.py", b"x = 2\n")
    assert (ws / "src/app.py").read_bytes() == b"x = 2\n"
    assert stat_beneath(ws, "src/app.py").st_size == 6
    assert stat.S_ISDIR(stat_beneath(ws, ".").st_mode)
    assert [p.name for p in (ws / "src").iterdir()] == ["app.py"]    # no temp file left behind


def test_dot_dot_and_absolute_paths_are_refused_before_anything_is_opened(ws: Path) -> None:
    for rel in ("../home/.ssh/id_rsa", "src/../../home/.ssh/id_rsa", str(ws.parent / "home/.ssh/id_rsa")):
        with pytest.raises(EscapeError):
            read_beneath(ws, rel)
        with pytest.raises(EscapeError):
            write_beneath_atomic(ws, rel, b"pwned", make_parents=True)
    outside_untouched(ws)


def test_a_symlink_at_the_end_is_never_followed(ws: Path) -> None:
    with pytest.raises(EscapeError, match="changed into a symbolic link while keel was using it; not followed"):
        read_beneath(ws, "key")
    with pytest.raises(EscapeError):
        write_beneath_atomic(ws, "key", b"pwned")
    with pytest.raises(EscapeError):
        open_beneath(ws, "key", os.O_WRONLY | os.O_CREAT | os.O_TRUNC)
    with pytest.raises(EscapeError):
        open_beneath(ws, "key", os.O_PATH)
    with pytest.raises(EscapeError):   # even a link that stays inside: callers pass the jail's real path
        read_beneath(ws, "alias.py")
    assert stat.S_ISLNK(stat_beneath(ws, "key").st_mode)    # lstat semantics
    assert (ws / "key").is_symlink()
    outside_untouched(ws)


def test_a_symlink_in_the_middle_is_never_followed(ws: Path) -> None:
    with pytest.raises(EscapeError, match="dotssh .a directory on the way to dotssh/id_rsa."):
        read_beneath(ws, "dotssh/id_rsa")
    with pytest.raises(EscapeError):
        stat_beneath(ws, "dotssh/id_rsa")
    with pytest.raises(EscapeError):
        write_beneath_atomic(ws, "dotssh/id_rsa", b"pwned", make_parents=True)
    with pytest.raises(EscapeError):
        write_beneath_atomic(ws, "dotssh/new/authorized_keys", b"pwned", make_parents=True)
    with pytest.raises(EscapeError):
        makedirs_beneath(ws, "dotssh/new")
    with pytest.raises(EscapeError):
        unlink_beneath(ws, "dotssh/id_rsa")
    outside_untouched(ws)


def test_unlink_removes_a_link_itself_never_its_target(ws: Path) -> None:
    unlink_beneath(ws, "key")
    assert not (ws / "key").is_symlink()
    unlink_beneath(ws, "key", missing_ok=True)
    unlink_beneath(ws, "no/such/dir/file", missing_ok=True)
    with pytest.raises(FileNotFoundError):
        unlink_beneath(ws, "key")
    outside_untouched(ws)


def test_parents_are_made_one_component_at_a_time(ws: Path) -> None:
    write_beneath_atomic(ws, "a/b/c/new.txt", b"hi\n", make_parents=True)
    assert (ws / "a/b/c/new.txt").read_bytes() == b"hi\n"
    makedirs_beneath(ws, "a/b/d/e")
    assert (ws / "a/b/d/e").is_dir()
    with pytest.raises(FileNotFoundError):
        write_beneath_atomic(ws, "x/y.txt", b"hi\n")     # without make_parents


def test_modes_are_kept_or_follow_the_umask(ws: Path) -> None:
    (ws / "src/app.py").chmod(0o751)
    write_beneath_atomic(ws, "src/app.py", b"y\n")
    assert stat.S_IMODE((ws / "src/app.py").stat().st_mode) == 0o751
    write_beneath_atomic(ws, "src/app.py", b"z\n", 0o600)
    assert stat.S_IMODE((ws / "src/app.py").stat().st_mode) == 0o600
    umask = os.umask(0o022)
    os.umask(umask)
    write_beneath_atomic(ws, "fresh.txt", b"f\n")
    assert stat.S_IMODE((ws / "fresh.txt").stat().st_mode) == 0o666 & ~umask


def test_a_failed_write_leaves_no_temp_file(ws: Path) -> None:
    (ws / "src" / "adir").mkdir()
    with pytest.raises(IsADirectoryError):
        write_beneath_atomic(ws, "src/adir", b"data")
    assert sorted(p.name for p in (ws / "src").iterdir()) == ["adir", "app.py"]


def test_a_fifo_is_refused_without_blocking(ws: Path) -> None:
    os.mkfifo(ws / "pipe")
    outcome: list[BaseException] = []

    def read() -> None:
        try:
            read_beneath(ws, "pipe")
        except BaseException as exc:   # noqa: BLE001 - handed to the test thread
            outcome.append(exc)

    reader = threading.Thread(target=read, daemon=True)
    reader.start()
    reader.join(5)
    assert not reader.is_alive(), "read_beneath blocked on a FIFO"
    assert isinstance(outcome[0], NotRegularFileError)
    with pytest.raises(IsADirectoryError):
        read_beneath(ws, "src")


def test_anchor_splits_a_real_path_below_its_root(ws: Path) -> None:
    assert anchor(ws / "src/app.py", ws) == (str(ws), "src/app.py")
    assert anchor(ws / "src/app.py") == ("/", str(ws / "src/app.py")[1:])
    with pytest.raises(EscapeError):
        anchor(ws.parent / "home", ws)
    assert read_beneath(*anchor(ws / "src/app.py")) == b"x = 1\n"
