"""Issue 35, item 7: folder walks against a concurrent writer. A second process exchanges a workspace
directory with a symlink to a folder of keys outside the workspace (``renameat2(RENAME_EXCHANGE)``, as
fast as it can) while keel's grep (ripgrep and the in-process search), list_dir and find_files walk
the workspace, as root and as kuser. Nothing from outside may appear: not a key's content, not a
file's name. A control that checks with the jail and then lists by path (what list_dir did) shows the race is won
on this machine, so the zero is evidence. (On the code before this issue the same driver printed
leaks from every tool but the in-process grep: rg on the folder 15 of 63, list_dir 32 of 720.)
"""

from __future__ import annotations

import json
import platform
import subprocess
import sys
import textwrap
from collections.abc import Iterator
from pathlib import Path

import pytest
from tier_user import USERS, Person, people

pytestmark = pytest.mark.skipif(sys.platform != "linux" or platform.machine() not in ("x86_64", "aarch64"),
                                reason="renameat2(RENAME_EXCHANGE) by syscall number: Linux x86_64/aarch64")

MARKER = "KEEL-WALK-RACE-7c2d"
DRIVER = textwrap.dedent(r"""
    import json, os, sys, time
    from pathlib import Path
    sys.path.insert(0, sys.argv[3])
    from test_file_race import Swapper
    from keel.policy.paths import PathJailError, resolve_in_workspace
    from keel.tools.base import ToolContext
    from keel.tools.files import LIST_DIR
    from keel.tools.search import FIND_FILES, GREP

    ws, outside, seconds = Path(sys.argv[1]), Path(sys.argv[2]), 3.0
    marker = os.environ["RACE_MARKER"]

    def naive() -> bool | None:
        # the control: what list_dir did before, the jail's check then a listing by path (None: refused)
        try:
            real = resolve_in_workspace(ws, "sub")
        except PathJailError:
            return None
        try:
            return any(marker in name for name in os.listdir(real))
        except OSError:
            return False

    python = {"grep_backend": "python"}
    runs = {}
    for where in ("sub", "."):   # the swapped folder itself (the issue's example), and the whole workspace
        runs.update({
            f"grep_rg {where}": lambda ctx, w=where: GREP.execute(GREP.spec.args(pattern="BEGIN", path=w), ctx).output,
            f"grep_python {where}": lambda ctx, w=where: GREP.execute(GREP.spec.args(pattern="BEGIN", path=w),
                                                                      ToolContext(workspace=ws, extra=python)).output,
            f"list_dir {where}": lambda ctx, w=where: LIST_DIR.execute(LIST_DIR.spec.args(path=w, depth=3), ctx).output,
            f"find_files {where}": lambda ctx, w=where: FIND_FILES.execute(FIND_FILES.spec.args(pattern="*", path=w),
                                                                          ctx).output,
        })
    tally = {}
    with Swapper(ws, "sub", "sub_link", outside):
        for name, run in [*runs.items(), ("control", None)]:
            leaks = tries = 0
            started = time.monotonic()
            # tries: walks that went ahead (when "sub" is the link at the jail's check, the tool refuses at once)
            while time.monotonic() - started < seconds or tries < 40 and time.monotonic() - started < 60:
                if run is None:
                    if (leaked := naive()) is not None:
                        tries, leaks = tries + 1, leaks + leaked
                    continue
                out = run(ToolContext(workspace=ws))
                if "resolves to" not in out and "cannot be resolved" not in out:
                    tries, leaks = tries + 1, leaks + (marker in out)
            tally[name] = {"tries": tries, "leaks": leaks}
    print(json.dumps(tally))
""")


@pytest.fixture(params=USERS)
def person(request: pytest.FixtureRequest) -> Iterator[Person]:
    yield from people(request.param)


def test_folder_walks_never_follow_a_symlink_a_concurrent_writer_swaps_in(person: Person) -> None:
    outside = person.home / ".ssh"
    outside.mkdir(parents=True)
    (outside / f"{MARKER}.txt").write_text(f"-----BEGIN OPENSSH PRIVATE KEY----- {MARKER}\n")
    (outside / "id_rsa.pub.txt").write_text(f"BEGIN {MARKER}\n")
    sub = person.work / "sub"
    sub.mkdir()
    for i in range(30):
        (sub / f"plain{i}.txt").write_text("BEGIN plain workspace text\n")
    (person.work / "sub_link").symlink_to(outside)
    person.own(person.base)
    argv = [sys.executable, "-c", DRIVER, str(person.work), str(outside), str(Path(__file__).parent)]
    from bwrap_runner import as_user

    proc = subprocess.run([*as_user(person.user), *argv], capture_output=True, text=True, timeout=300, cwd="/",
                          env=person.env(RACE_MARKER=MARKER))
    assert proc.returncode == 0, proc.stderr[-3000:]
    tally = json.loads(proc.stdout.strip().splitlines()[-1])
    assert tally["control"]["leaks"] > 0, tally          # the race is won here: a walk by path leaks
    for tool in (f"{t} {w}" for t in ("grep_rg", "grep_python", "list_dir", "find_files") for w in ("sub", ".")):
        assert tally[tool]["tries"] >= 40 and tally[tool]["leaks"] == 0, (tool, tally)
