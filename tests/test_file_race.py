"""keel's file tools against a real process that swaps workspace files for symlinks (issue 21, item 4).

A second process exchanges a workspace file (or directory) with a symlink to a secret outside the
workspace, ``renameat2(RENAME_EXCHANGE)``, as fast as it can, while keel's own read_file, write_file
and edit_file (and `keel undo`) run on that path. The jail's check and the open are separate steps,
so the swap lands between them often; the secret must never appear in any tool output or checkpoint
and nothing outside the workspace may change. A control loop that checks then opens by name shows
the race is really being won on this machine, so the zero is evidence.
"""

from __future__ import annotations

import contextlib
import os
import platform
import signal
import subprocess
import sys
import time
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import pytest

from keel.policy.paths import PathJailError, resolve_in_workspace
from keel.tools.base import Tool, ToolContext, ToolResult
from keel.tools.edit import EDIT_FILE
from keel.tools.files import READ_FILE, WRITE_FILE
from keel.tools.session import FileSession
from keel.trace.checkpoints import CheckpointStore
from keel.trace.undo import undo_session

pytestmark = pytest.mark.skipif(sys.platform != "linux" or platform.machine() not in ("x86_64", "aarch64"),
                                reason="renameat2(RENAME_EXCHANGE) by syscall number: Linux x86_64/aarch64")

MARKER = "KEEL-RACE-MARKER-5f1c9e"
SECRET = f"-----BEGIN OPENSSH PRIVATE KEY----- {MARKER}\nvalue = 1\n"
ITERATIONS = 2000
SECONDS = 15.0

# The attacker: exchanges two names in the workspace until SIGTERM, then prints how many swaps it made.
SWAPPER = r"""
import ctypes, os, platform, signal, sys
ws, a, b, target = sys.argv[1:5]
os.chdir(ws)
libc = ctypes.CDLL(None, use_errno=True)
nr = {"x86_64": 316, "aarch64": 276}[platform.machine()]
stop = []
signal.signal(signal.SIGTERM, lambda *_: stop.append(1))
ea, eb = a.encode(), b.encode()
n = 0
print("ready", flush=True)
while not stop:
    libc.syscall(nr, -100, ea, -100, eb, 2)   # renameat2(AT_FDCWD, a, AT_FDCWD, b, RENAME_EXCHANGE)
    n += 1
    if n % 256 == 0 and not os.path.islink(a) and not os.path.islink(b):
        # keel's atomic rename may have replaced the link itself: put one back so the race goes on
        try:
            os.unlink(b)
        except FileNotFoundError:
            pass
        os.symlink(target, b)
print(n, flush=True)
"""


class Swapper:
    def __init__(self, ws: Path, a: str, b: str, target: Path) -> None:
        self.proc = subprocess.Popen([sys.executable, "-c", SWAPPER, str(ws), a, b, str(target)],
                                     stdout=subprocess.PIPE, text=True)
        assert self.proc.stdout is not None and self.proc.stdout.readline().strip() == "ready"
        self.swaps = 0

    def __enter__(self) -> Swapper:
        return self

    def __exit__(self, *exc: Any) -> None:
        self.proc.send_signal(signal.SIGTERM)
        out, _ = self.proc.communicate(timeout=30)
        self.swaps = int(out.split()[-1])


def run(tool: Tool, ctx: ToolContext, **args: Any) -> ToolResult:
    return tool.execute(tool.spec.args(**args), ctx)


@dataclass
class Tally:
    iterations: int = 0
    refused_as_swapped: int = 0
    leaks: list[str] = field(default_factory=list)

    def see(self, result: ToolResult) -> None:
        if MARKER in result.output:
            self.leaks.append(result.output)
        if "changed into a symbolic link while keel was using it; not followed" in result.output:
            self.refused_as_swapped += 1


@pytest.fixture
def home(tmp_path: Path) -> Path:
    ssh = tmp_path / "home" / ".ssh"
    ssh.mkdir(parents=True)
    (ssh / "id_rsa").write_text(SECRET)
    (ssh / "victim.py").write_text(SECRET)     # what a swapped directory would lead to
    return ssh


def snapshot_outside(home: Path) -> dict[str, tuple[bytes, int]]:
    return {p.name: (p.read_bytes(), p.stat().st_mtime_ns) for p in sorted(home.iterdir())}


def hammer(ctx: ToolContext, path: str) -> Tally:
    """read_file, write_file and edit_file on ``path`` in a bounded loop; every output is checked."""
    tally = Tally()
    deadline = time.monotonic() + SECONDS
    while tally.iterations < ITERATIONS and time.monotonic() < deadline:
        tally.iterations += 1
        n = tally.iterations
        tally.see(run(READ_FILE, ctx, path=path))
        tally.see(run(WRITE_FILE, ctx, path=path, content=f"value = 1\n# write {n}\n"))
        tally.see(run(READ_FILE, ctx, path=path))
        tally.see(run(EDIT_FILE, ctx, path=path, old_text="value = 1\n", new_text=f"value = {n + 1}\n"))
    return tally


def checkpoints_hold_no_secret(session: Path) -> None:
    blobs = session / "checkpoints" / "blobs"
    for blob in blobs.iterdir() if blobs.exists() else []:
        assert MARKER.encode() not in blob.read_bytes(), "a checkpoint stored the secret"


def workspace(tmp_path: Path) -> tuple[Path, ToolContext]:
    ws = tmp_path / "ws"
    ws.mkdir()
    session = tmp_path / "session"
    ctx = ToolContext(workspace=ws, session=FileSession(store=CheckpointStore(session / "checkpoints", ws)))
    return ws, ctx


def test_the_race_is_real_a_check_then_open_by_name_leaks(tmp_path: Path, home: Path) -> None:
    """The control: what keel did before (jail check, then open by name) under the same swapper."""
    ws, _ = workspace(tmp_path)
    (ws / "victim.py").write_text("value = 1\n")
    (ws / "link").symlink_to(home / "id_rsa")
    leaked = tries = 0
    with Swapper(ws, "victim.py", "link", home / "id_rsa"):
        deadline = time.monotonic() + 5
        while not leaked and time.monotonic() < deadline:
            tries += 1
            with contextlib.suppress(PathJailError, OSError):
                leaked += MARKER.encode() in resolve_in_workspace(ws, "victim.py").read_bytes()
    assert leaked, f"no leak in {tries} naive reads: the swapper did not win the race, so the test proves nothing"


def test_swapping_a_file_for_a_symlink_never_leaks_or_writes_outside(tmp_path: Path, home: Path) -> None:
    ws, ctx = workspace(tmp_path)
    (ws / "victim.py").write_text("value = 1\n")
    (ws / "link").symlink_to(home / "id_rsa")
    before = snapshot_outside(home)
    with Swapper(ws, "victim.py", "link", home / "id_rsa") as swapper:
        tally = hammer(ctx, "victim.py")
    print(f"file swap: {tally.iterations} iterations, {swapper.swaps} swaps, "
          f"{tally.refused_as_swapped} refusals as swapped, {len(tally.leaks)} leaks")
    assert tally.leaks == []
    assert snapshot_outside(home) == before
    assert tally.refused_as_swapped > 0          # the race was hit, and refused with the clear message
    checkpoints_hold_no_secret(tmp_path / "session")


def test_swapping_a_directory_for_a_symlink_never_leaks_or_writes_outside(tmp_path: Path, home: Path) -> None:
    ws, ctx = workspace(tmp_path)
    (ws / "sub").mkdir()
    (ws / "sub" / "victim.py").write_text("value = 1\n")
    (ws / "sublink").symlink_to(home)
    before = snapshot_outside(home)
    with Swapper(ws, "sub", "sublink", home) as swapper:
        tally = hammer(ctx, "sub/victim.py")
    print(f"directory swap: {tally.iterations} iterations, {swapper.swaps} swaps, "
          f"{tally.refused_as_swapped} refusals as swapped, {len(tally.leaks)} leaks")
    assert tally.leaks == []
    assert snapshot_outside(home) == before
    assert tally.refused_as_swapped > 0
    checkpoints_hold_no_secret(tmp_path / "session")


def test_grep_of_a_file_swapped_for_a_symlink_never_leaks(tmp_path: Path, home: Path) -> None:
    """grep on one named file reads it through keel (rg would open the swapped path by name)."""
    from keel.tools.search import GREP
    ws, ctx = workspace(tmp_path)
    (ws / "victim.py").write_text("value = 1\n")
    (ws / "link").symlink_to(home / "id_rsa")
    tally = Tally()
    with Swapper(ws, "victim.py", "link", home / "id_rsa") as swapper:
        deadline = time.monotonic() + SECONDS / 3
        while tally.iterations < ITERATIONS and time.monotonic() < deadline:
            tally.iterations += 1
            tally.see(run(GREP, ctx, pattern="KEEL|value", path="victim.py"))
    print(f"grep on a swapped file: {tally.iterations} iterations, {swapper.swaps} swaps, {len(tally.leaks)} leaks")
    assert tally.leaks == [] and tally.iterations > 50


def _session_that_changed(tmp_path: Path) -> tuple[Path, Path, int]:
    """A workspace whose sub/notes.txt a session changed ("old" -> "new"), and a descriptor of the
    real sub directory (it keeps naming it wherever a swap moves it)."""
    ws, ctx = workspace(tmp_path)
    ctx.session.store.step = 1
    (ws / "sub").mkdir()
    (ws / "sub" / "notes.txt").write_text("old\n")
    assert run(READ_FILE, ctx, path="sub/notes.txt").ok
    assert run(WRITE_FILE, ctx, path="sub/notes.txt", content="new\n").ok
    return ws, tmp_path / "session", os.open(ws / "sub", os.O_RDONLY | os.O_DIRECTORY)


def test_undo_through_a_directory_replaced_by_a_symlink_says_cannot(tmp_path: Path, home: Path) -> None:
    ws, session, real_sub = _session_that_changed(tmp_path)
    os.close(real_sub)
    (home / "notes.txt").write_text(SECRET)
    before = snapshot_outside(home)
    os.rename(ws / "sub", ws / "moved")
    (ws / "sub").symlink_to(home)
    report = undo_session(session, ws)
    [item] = report.files
    assert item.action == "cannot" and "symbolic link" in item.why
    assert "cannot undo: sub/notes.txt (a symbolic link stands where" in report.lines()[0]
    assert snapshot_outside(home) == before
    assert (ws / "moved" / "notes.txt").read_text() == "new\n"


def test_undo_racing_a_directory_swap_never_writes_outside(tmp_path: Path, home: Path) -> None:
    ws, session, real_sub = _session_that_changed(tmp_path)
    (home / "notes.txt").write_text(SECRET)
    (ws / "sublink").symlink_to(home)
    before = snapshot_outside(home)
    actions: dict[str, int] = {}
    deadline = time.monotonic() + SECONDS / 2
    with Swapper(ws, "sub", "sublink", home) as swapper:
        while sum(actions.values()) < ITERATIONS // 4 and time.monotonic() < deadline:
            # the session's bytes back in the real directory (through its descriptor), then undo again
            fd = os.open("notes.txt", os.O_WRONLY | os.O_CREAT | os.O_TRUNC | os.O_NOFOLLOW, 0o644, dir_fd=real_sub)
            os.write(fd, b"new\n")
            os.close(fd)
            for item in undo_session(session, ws, force=True).files:
                actions[item.action] = actions.get(item.action, 0) + 1
    os.close(real_sub)
    print(f"undo under a directory swap: {actions} in {swapper.swaps} swaps")
    assert snapshot_outside(home) == before
    assert actions.get("cannot", 0) > 0 and actions.get("restore", 0) > 0
    assert set(actions) <= {"cannot", "restore"}
