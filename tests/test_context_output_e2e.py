"""End to end: `keel run` against the scripted engine over real HTTP; a long failing test run reaches
the model as a short tool message naming the saved file, and the file holds the whole output."""

from __future__ import annotations

import re
from pathlib import Path

from conftest import call, git

from keel.testing.server import ScriptedEngineServer

PYTEST = "PYTEST_DISABLE_PLUGIN_AUTOLOAD=1 python -m pytest -v -p no:cacheprovider"


def test_the_model_sees_a_short_message_that_names_the_full_output(tmp_path: Path, run_keel) -> None:
    repo = tmp_path / "repo"
    repo.mkdir()
    tests = [f"def test_ok_{i}():\n    assert True\n" for i in range(300)]
    tests.append("def test_parse_header():\n    header = 'Content-Length: 12'\n"
                 "    assert header.split(':')[1] == '12', 'header value keeps its space'\n")
    (repo / "test_many.py").write_text("\n\n".join(tests))
    git(repo, "init", "-q")
    git(repo, "add", "-A")
    git(repo, "commit", "-qm", "init")
    script = [{"tool_calls": [call("run_shell", command=PYTEST)]},
              {"content": "One test fails: the header value keeps its leading space."}]
    with ScriptedEngineServer(script) as server:
        r = run_keel("run", "why does the test suite fail? explain only", "--cwd", str(repo), "--base-url",
                     server.base_url, "--model", "scripted", "--output-format", "json", "--verify", "off")
        requests = server.requests
    assert r.result["log"], r.stderr
    tool_message = requests[1]["messages"][-1]
    assert tool_message["role"] == "tool"
    text = tool_message["content"]
    saved = re.search(r"The full output is in (\S+\.log)", text)
    assert saved, text
    full = Path(saved.group(1)).read_text()
    session_dir = Path(r.result["log"]).with_suffix("")
    assert Path(saved.group(1)).parent == session_dir / "outputs"
    # the model's message: the failing test, its assertion and location, the summary line — and short
    assert "test_many.py::test_parse_header" in text and "header value keeps its space" in text
    assert "test_many.py:" in text and "1 failed, 300 passed" in text
    assert len(text.encode()) < 3_000 < len(full.encode()) // 5
    # the file: everything, including every passing test
    assert all(f"test_many.py::test_ok_{i} PASSED" in full for i in range(300))
    assert "test_ok_150" not in text
