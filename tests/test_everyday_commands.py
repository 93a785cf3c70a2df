"""Everyday work runs unattended under a confining tier (issue 33, item 4).

tests/fixtures/everyday_commands.json lists commands from real projects' contributor docs,
scripts, Makefiles and CI files, each with where it comes from. Every one runs unattended under
bubblewrap through the run path (``keel run`` with a scripted engine calling ``run_shell``), in a
workspace holding the files they name — a ``.env`` among them, which the tier hides. The policy
judges each the same way on its own (the tier confines it, the snapshot undoes it), and without a
confining tier the ones that write or run the project's code still ask.
"""

from __future__ import annotations

import json
import subprocess
from pathlib import Path

import pytest
from conftest import call

from keel.policy.shell.risk import classify_command
from keel.testing.server import ScriptedEngineServer

DATA = json.loads((Path(__file__).parent / "fixtures" / "everyday_commands.json").read_text())
COMMANDS = [c["command"] for c in DATA["commands"]]

FILES = {
    "Lib/test/bad_coding.py": "x = 1\n", "Lib/test/bad_coding2.py": "x = 2\n", "resources/test/fixtures/a.py": "x = 1\n",
    "fastapi/__init__.py": "", "fastapi/app.py": "def f(x: int) -> int:\n    return x\n", "tests/__init__.py": "",
    "tests/test_app.py": "def test_ok():\n    assert True\n", "docs_src/a.py": "x = 1\n", "docs/tutorial/src/t.py": "x = 1\n",
    "scripts/format.sh": "#!/bin/sh -e\necho formatting\n", "scripts/test.sh": "#!/usr/bin/env bash\necho testing\n",
    "scripts/sync-version": "#!/bin/sh\necho synced\n", "scripts/check": "#!/bin/sh\necho checked\n",
    "scripts/test": "#!/bin/sh\necho tested\n", "scripts/build.js": "console.log('build')\n", "httpx/__init__.py": "",
    "test_requests.py": "def test_invalid_timeout():\n    assert 1\n", "docs/Makefile": "html:\n\techo built html\n",
    "urllib3/urllib3/__init__.py": "", "requests/packages/__init__.py": "", "bin/learn": "#!/bin/sh\n",
    "bin/check": "#!/bin/sh\n", "bin/checkmain": "#!/bin/sh\n", "bin/server": "#!/bin/sh\necho serve\n",
    "src/index.ts": "export const x = 1\n", "config.example.js": "module.exports = {}\n", "LICENSE": "MIT\n",
    "dist-readme": "readme\n", "build/compile_commands.json": "[]\n", "Makefile": "test:\n\ttrue\n",
    ".env": "API_KEY=not-for-the-model\n", "notes.txt": "TODO: write notes\n", "dist/.keep": "",
    "Cargo.toml": '[package]\nname = "demo"\nversion = "0.1.0"\nedition = "2021"\n\n[dependencies]\n',
    "src/main.rs": 'fn main() {\n    println!("hi");\n}\n', "go.mod": "module demo\n\ngo 1.19\n",
    "main.go": "package main\n\nfunc main() {}\n",
    "package.json": '{"name": "demo", "scripts": {"format": "echo format", "check": "echo check", '
                    '"build": "echo build", "start": "echo start", "test": "echo test"}}\n',
}
EXECUTABLE = ("scripts/format.sh", "scripts/test.sh", "scripts/sync-version", "scripts/check", "scripts/test",
              "bin/server")


def make_project(root: Path) -> Path:
    for rel, text in FILES.items():
        (root / rel).parent.mkdir(parents=True, exist_ok=True)
        (root / rel).write_text(text)
    for rel in EXECUTABLE:
        (root / rel).chmod(0o755)
    subprocess.run(["git", "init", "-q"], cwd=root, check=True)
    return root


def test_the_list_is_long_enough_and_cited() -> None:
    assert len(COMMANDS) >= 60 and len(set(COMMANDS)) == len(COMMANDS)
    assert all(c["source"].count("/") >= 2 for c in DATA["commands"]), "each names repo/path"


@pytest.mark.parametrize("command", COMMANDS)
def test_each_is_allowed_where_bubblewrap_confines_it(command: str, tmp_path: Path) -> None:
    ws = make_project(tmp_path / "ws")
    verdict = classify_command(command, ws, confined=True, pid_namespace=True, snapshot=True)
    assert verdict.decision == "allow", verdict


@pytest.mark.bubblewrap
def test_every_one_runs_unattended_on_bubblewrap(tmp_path: Path, keel_env: dict[str, str], run_keel) -> None:
    ws = make_project(tmp_path / "ws")
    config = Path(keel_env["XDG_CONFIG_HOME"]) / "keel" / "config.toml"
    config.parent.mkdir(parents=True, exist_ok=True)
    config.write_text('[shell]\nsandbox = "bubblewrap"\n')
    script = [{"tool_calls": [call("run_shell", command=c, timeout=120)]} for c in COMMANDS]
    script.append({"content": "Ran the project's everyday commands."})
    with ScriptedEngineServer(script) as server:
        r = run_keel("run", "run the everyday commands", "--cwd", str(ws), "--base-url", server.base_url,
                     "--model", "scripted", "--output-format", "json", "--max-steps", "200", "--verify", "off",
                     env=keel_env, timeout=900)
    ran = [e for e in r.events() if e["type"] == "tool_call" and e["name"] == "run_shell"]
    refused = [(json.loads(e["arguments"])["command"], e["result_preview"][:120]) for e in ran
               if e["not_run"] or e["result_preview"].startswith(("Not run", "Refused"))]
    assert len(ran) == len(COMMANDS), r.stderr[-2000:]
    assert not refused, refused
    start = next(e for e in r.events() if e["type"] == "session_start")
    assert start["protection"].startswith("bubblewrap"), start["protection"]
    grep = next(e for e in ran if json.loads(e["arguments"])["command"].startswith("grep -r -H TODO:"))
    assert "notes.txt: TODO" in grep["result_preview"] and "not-for-the-model" not in grep["result_preview"]


@pytest.mark.parametrize("command", ["black fastapi tests docs_src scripts", "chmod +x bin/server",
                                     "sh scripts/format.sh", "npm run format", "cargo fmt --all",
                                     "ANTICIPATE_ECHO=true cargo make test-cli", "tar -czf ./dist/archive.tar.gz -C ./src ."])
def test_without_a_confining_tier_the_writers_and_runners_still_ask(command: str, tmp_path: Path) -> None:
    ws = make_project(tmp_path / "ws")
    assert classify_command(command, ws, confined=False, snapshot=True).decision == "ask"
