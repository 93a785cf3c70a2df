"""Issue 35, item 9: nothing a command deletes is lost unsaid. A real unattended `keel run` (scripted
engine, real HTTP) runs the model's commands on bubblewrap and Landlock, as root and as kuser; the real
`keel undo` then puts back what the commands took: a file over 8 MiB removed or truncated, a
git-ignored folder and a dependency folder removed. What no snapshot can hold is stopped before it
runs (a big file past the session's budget, a tree too large to take first), and what code removes
anyway is reported as not undoable (never "nothing to undo"). Each next to a control: the command
really deletes (it ran, or it runs directly in the sandbox).
"""

from __future__ import annotations

import hashlib
import json
import os
from collections.abc import Iterator
from pathlib import Path

import pytest
from tier_user import TIERS, USERS, Person, people

BIG = 9 * 2**20


@pytest.fixture(params=USERS)
def person(request: pytest.FixtureRequest) -> Iterator[Person]:
    yield from people(request.param)


def _workspace(person: Person) -> dict[str, bytes]:
    files = {".gitignore": b"data/\n*.bin\nbuild/\n", "app.py": b"print('app')\n",
             "big.bin": os.urandom(BIG), "big2.bin": os.urandom(BIG + 123), "data/raw.csv": b"a,b\n1,2\n",
             "data/deep/notes.md": b"# mine\n", "node_modules/lib/index.js": b"module.exports = 1;\n",
             "node_modules/lib/package.json": b'{"name": "lib"}\n', "build/out/app.js": b"built\n",
             "build/out/keep.map": b"map\n"}
    for rel, data in files.items():
        path = person.work / rel
        path.parent.mkdir(parents=True, exist_ok=True)
        path.write_bytes(data)
    person.own(person.work)
    return files


def _shell(*commands: str) -> list[dict[str, object]]:
    return [{"tool_calls": [{"name": "run_shell", "arguments": {"command": c}}]} for c in commands]


def _digest(path: Path) -> str:
    return hashlib.sha256(path.read_bytes()).hexdigest()


@pytest.mark.parametrize("tier", TIERS)
def test_typed_deletions_and_truncations_of_what_no_snapshot_held_are_undone(person: Person, tier: str) -> None:
    files = _workspace(person)
    ran = person.run(_shell("rm -f big.bin",                           # the three examples
                            "truncate -s 0 big2.bin",
                            "rm -rf node_modules",
                            "rm -rf data",                             # variants: a small ignored folder,
                            "find build -name '*.map' -delete"), tier=tier)   # find -delete in build output
    assert ran.result.get("stop_reason") == "limit:steps", ran.stderr + ran.stdout
    texts = ran.tool_texts()
    assert all(t.startswith("exit code: 0") for t in texts[:5]), texts          # the policy let them all run
    work = person.work
    assert not (work / "big.bin").exists() and (work / "big2.bin").stat().st_size == 0   # control: they did
    assert not (work / "node_modules").exists() and not (work / "data").exists()
    assert not (work / "build/out/keep.map").exists()
    undone = person.keel("undo", "--cwd", str(work), "--json")
    assert undone.returncode == 0, undone.stdout + undone.stderr
    for rel, data in files.items():
        assert (work / rel).read_bytes() == data, rel


@pytest.mark.parametrize("tier", TIERS)
def test_what_inline_code_removes_is_taken_first_and_undone(person: Person, tier: str) -> None:
    """The paths an inline program names are judged as rm's arguments are: the snapshot takes the
    git-ignored node_modules before ``shutil.rmtree`` runs (it said "cannot undo" before), so undo
    brings everything back."""
    files = _workspace(person)
    ran = person.run(_shell("python3 -c \"import shutil; shutil.rmtree('node_modules')\"",
                            "python3 -c \"open('big.bin', 'w').close()\"",          # a truncation by code
                            "python3 -c \"import os; os.remove('data/raw.csv')\""), tier=tier)
    texts = ran.tool_texts()
    assert all(t.startswith("exit code: 0") for t in texts[:3]), texts
    assert not (person.work / "node_modules").exists() and (person.work / "big.bin").stat().st_size == 0   # control
    undone = person.keel("undo", "--cwd", str(person.work), "--json")
    report = json.loads(undone.stdout)
    assert undone.returncode == 0 and report["ok"], undone.stdout
    assert "cannot" not in {f["action"] for f in report["files"]}, report
    for rel, data in files.items():
        assert (person.work / rel).read_bytes() == data, rel


@pytest.mark.parametrize("tier", TIERS)
def test_what_code_removes_out_of_sight_is_said_lost_never_nothing_to_undo(person: Person, tier: str) -> None:
    """A path built at run time is not seen by the policy: what the program removed that no snapshot
    held is reported as not undoable."""
    _workspace(person)
    ran = person.run(_shell("python3 -c \"import shutil; shutil.rmtree('node' + '_modules')\""), tier=tier)
    texts = ran.tool_texts()
    assert "node_modules/" in texts[0] and "cannot bring" in texts[0], texts[0]   # the model is told
    assert not (person.work / "node_modules").exists()
    undone = person.keel("undo", "--cwd", str(person.work), "--json")
    report = json.loads(undone.stdout)
    actions = {f["path"]: f["action"] for f in report["files"]}
    assert actions == {"node_modules/": "cannot"}, actions
    assert undone.returncode == 1 and not report["ok"]
    text = person.keel("undo", "--cwd", str(person.work), "--dry-run")
    assert "nothing to undo" not in text.stdout and "cannot undo: node_modules/" in text.stdout, text.stdout


@pytest.mark.parametrize("tier", TIERS)
def test_what_no_snapshot_can_take_is_stopped_before_the_command_runs(person: Person, tier: str) -> None:
    files = _workspace(person)
    for i in range(40):
        (person.work / "node_modules" / f"m{i}.js").write_bytes(b"x\n")
    person.own(person.work)
    # 8 MB for copies of large files per session (big.bin does not fit) and room for 20 files only
    person.extra_config = "snapshot_max_mb = 8\nsnapshot_max_files = 20\n"   # type: ignore[attr-defined]
    ran = person.run(_shell("rm -f big.bin", ": > big2.bin", "rm -rf node_modules", "rm -f app.py",
                            "python3 -c \"import shutil; shutil.rmtree('node_modules')\""), tier=tier)
    texts = ran.tool_texts()
    for text in [*texts[:3], texts[4]]:   # the last: inline code naming the tree, judged as rm's argument
        assert text.startswith("refused") and ("undo could not bring" in text or "no longer copies" in text), text
    assert texts[3].startswith("exit code: 0")                    # a file the snapshot holds still goes
    for rel in ("big.bin", "big2.bin", "node_modules/lib/index.js", "node_modules/m0.js"):
        assert (person.work / rel).read_bytes() == files.get(rel, b"x\n"), rel
    control = person.sandboxed("rm -f big.bin && rm -rf node_modules && echo gone", tier=tier)
    assert "gone" in control["output"] and not (person.work / "big.bin").exists()   # the commands do delete
