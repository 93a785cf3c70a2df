"""Every code block in README.md and docs/ marked runnable is run, as a user would paste it.

The marker is an HTML comment on the line right before the fence (invisible where the Markdown is
rendered):

    <!-- keel:test -->
    ```python
    ...
    ```

Each marked block runs as a script in a real Python process, in a fresh directory holding
``myrepo`` (a small git project), with KEEL_BASE_URL/KEEL_MODEL/KEEL_API_KEY pointing at a scripted
engine on 127.0.0.1 that answers ``Done.``; it must exit 0, and a block that builds an ``Agent()``
from the environment must have reached that engine (the library once ignored KEEL_BASE_URL).
"""

from __future__ import annotations

import re
import subprocess
import sys
from pathlib import Path

import pytest
from conftest import git

from keel.testing.server import ScriptedEngineServer

ROOT = Path(__file__).resolve().parent.parent
MARKER = "<!-- keel:test -->"
# the marker, then a fence with its info string, the body, and the same fence closing it
_BLOCK = re.compile(r"^<!-- keel:test -->[ \t]*\n(?P<fence>`{3,})(?P<lang>[\w+-]*)[^\n]*\n(?P<body>.*?)^(?P=fence)[ \t]*$",
                    re.MULTILINE | re.DOTALL)
_MARKER_LINE = re.compile(r"^<!-- keel:test -->[ \t]*$", re.MULTILINE)
RUNNERS = {"python": [sys.executable, "-"], "bash": ["bash", "-e"], "sh": ["sh", "-e"]}


def _documents() -> list[Path]:
    return [ROOT / "README.md", *sorted((ROOT / "docs").glob("**/*.md"))]


def marked_blocks() -> list[tuple[str, str, str]]:
    """(where, language, code) of every marked block; a marker not followed by a fence is an error,
    so a typo cannot silently turn a tested example into an untested one."""
    found = []
    for doc in _documents():
        text = doc.read_text(encoding="utf-8")
        blocks = list(_BLOCK.finditer(text))
        markers = len(_MARKER_LINE.findall(text))  # a marker quoted in prose (`…`) is not one
        assert markers == len(blocks), f"{doc.name}: {markers} markers but {len(blocks)} fenced blocks after them"
        for m in blocks:
            line = text.count("\n", 0, m.start()) + 1
            found.append((f"{doc.relative_to(ROOT)}:{line}", m["lang"], m["body"]))
    return found


BLOCKS = marked_blocks()


def test_the_readme_library_example_is_marked():
    assert any(where.startswith("README.md") and "Agent(" in code for where, _, code in BLOCKS)


def test_a_marker_without_a_fence_is_noticed():
    text = f"intro\n{MARKER}\n```python\nprint(1)\n```\n\n{MARKER}\nno fence here\n"
    assert len(list(_BLOCK.finditer(text))) == 1 and len(_MARKER_LINE.findall(text)) == 2


@pytest.fixture
def example_dir(tmp_path: Path) -> Path:
    repo = tmp_path / "work" / "myrepo"
    repo.mkdir(parents=True)
    (repo / "calc.py").write_text("def add(a, b):\n    return a + b\n")
    git(repo, "init", "-q")
    git(repo, "add", "-A")
    git(repo, "commit", "-qm", "init")
    return repo.parent


@pytest.mark.parametrize(("where", "lang", "code"), BLOCKS, ids=[b[0] for b in BLOCKS])
def test_marked_block_runs(where, lang, code, example_dir, keel_env):
    assert lang in RUNNERS, f"{where}: no runner for a {lang or 'plain'} block"
    with ScriptedEngineServer([{"content": "Done."}] * 20) as server:
        env = {**keel_env, "KEEL_BASE_URL": server.base_url, "KEEL_MODEL": "scripted",
               "KEEL_API_KEY": "docs-example-key"}
        proc = subprocess.run(RUNNERS[lang], input=code, cwd=example_dir, env=env, capture_output=True,
                              text=True, timeout=120)
        requests = list(server.requests)
    assert proc.returncode == 0, f"{where} failed:\n{proc.stdout[-2000:]}\n{proc.stderr[-4000:]}"
    assert "Traceback" not in proc.stderr, proc.stderr
    if re.search(r"\bAgent\(", code):   # every example agent reaches the engine
        assert requests, f"{where}: Agent() never reached the engine named by KEEL_BASE_URL"
    if re.search(r"\bAgent\((?![^)]*(config|model)=)", code):  # the model from the environment
        assert all(r.get("model") == "scripted" for r in requests), "KEEL_MODEL was not used"
