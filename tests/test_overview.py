"""The project overview (keel/context/overview.py, keel/context/outline.py): each file with what it defines,
in the first message for every model, the task's files first, bounded, byte-stable; through real HTTP to
the scripted engine."""

from __future__ import annotations

from pathlib import Path

from keel.agent import Agent
from keel.config import Config
from keel.context.outline import outline
from keel.context.overview import HEADER, OTHERS, render_overview
from keel.context.preload import FileText, collect
from keel.core.request import parse_request
from keel.testing import ScriptedEngineServer

STORE = "def get_user(user_id):\n    return USERS.get(user_id)\n\n\nclass Store:\n    def add(self, user):\n        pass\n"
API = "from users.store import get_user\n\n\ndef profile(user_id):\n    return get_user(user_id)\n"
JS = "class Emitter {\n  on(event, fn) { return this; }\n}\nconst once = (event, fn) => fn;\nfunction emit(e, ...args) {}\n"


def workspace(tmp_path: Path) -> Path:
    ws = tmp_path / "ws"
    (ws / "users").mkdir(parents=True)
    (ws / "users" / "store.py").write_text(STORE)
    (ws / "api.py").write_text(API)
    (ws / "emitter.js").write_text(JS)
    (ws / "README.md").write_text("# users\n")
    (ws / "broken.py").write_text("def ok(a):\n    pass\n\ndef bad(:\n")
    for i in range(30):
        (ws / f"zz_module_{i:02}.py").write_text(f"def helper_{i}(x, y, z):\n    return x\n")
    return ws


def test_each_file_with_its_signatures_the_tasks_files_first(tmp_path: Path):
    files, _ = collect(workspace(tmp_path))
    text = render_overview(files, parse_request("Rename get_user in users/store.py to find_user."), 2000)
    lines = text.splitlines()
    assert lines[0] == HEADER
    assert lines[1] == "users/store.py: def get_user(user_id); class Store {add(self, user)}"
    assert "api.py: def profile(user_id)" in lines
    assert "emitter.js: class Emitter {on(event, fn)}; const once = (event, fn) =>; function emit(e, ...args)" in lines
    assert "README.md" in lines   # a file that stops parsing: what parses
    assert next(line for line in lines if line.startswith("broken.py")).startswith("broken.py: def ok(a)")
    assert render_overview(files, parse_request("Rename get_user in users/store.py to find_user."), 2000) == text   # byte-stable


def test_the_overview_keeps_to_its_budget_naming_what_it_leaves_out(tmp_path: Path):
    files, _ = collect(workspace(tmp_path))
    text = render_overview(files, parse_request("fix profile() in api.py"), 120)
    assert len(text) <= 120 * 3.5
    assert text.splitlines()[1].startswith("api.py: def profile")
    assert text.splitlines()[-1].startswith("… and ") and text.endswith(" more files")
    assert render_overview(files, parse_request("x"), 0) == ""


def test_outline_reads_python_and_javascript_and_says_where_a_file_breaks():
    py = outline("m.py", "import os\nMAX = 3\n@dec\nasync def f(a, *b, c=1) -> int:\n    return 1\n")
    assert py is not None and [d.signature for d in py.definitions] == ["MAX", "async def f(a, *b, c=1) -> int"]
    js = outline("m.js", "export function a(x) {}\nexport default class B extends C { m() {} }\n")
    assert js is not None and [d.signature for d in js.definitions] == ["function a(x)", "class B extends C"]
    broken = outline("m.js", "function a(x) {\n  return (1;\n}\n")
    assert broken is not None and broken.error is not None and broken.error.startswith("line 2")
    assert outline("notes.txt", "def x(): pass") is None


def run(ws: Path, profile: str, rules: list[str] | None = None) -> list[dict]:
    script = [{"tool_calls": [{"name": "read_file", "arguments": {"path": "api.py"}}]},
              {"tool_calls": [{"name": "finish", "arguments": {"summary": "looked"}}]}]
    with ScriptedEngineServer(script) as server:
        cfg = Config()
        cfg.engine.base_url, cfg.engine.model, cfg.engine.profile = server.base_url, "scripted", profile
        cfg.verify.mode = "off"
        cfg.engine.context_window = 8192   # the in-process engine's window
        cfg.permissions.deny = rules or []
        Agent(workspace=ws, config=cfg, log_path=False).run("What does profile() in api.py return? Change nothing.")
        return server.requests


def test_every_model_gets_the_overview_in_the_stable_prefix(tmp_path: Path):
    ws = workspace(tmp_path)
    requests = run(ws, "full", rules=["read(users/store.py)"])
    first = requests[0]["messages"][1]["content"]
    assert HEADER in first and "api.py: def profile(user_id)" in first
    assert "\nusers/store.py\n" in first and "get_user" not in first   # a file keel may not read is named only
    # the next request repeats the first messages byte for byte: the prefix cache keeps working
    assert requests[1]["messages"][:2] == requests[0]["messages"][:2]


def test_the_small_profile_outlines_the_files_it_does_not_show_whole(tmp_path: Path):
    ws = workspace(tmp_path)
    for name in ("big_a.py", "big_b.py", "big_c.py"):   # together more than the files' share of the window
        (ws / name).write_text("def huge(a, b):\n" + "    x = 1\n" * 400)
    (ws / "large.py").write_text("def vast(a):\n" + "    x = 1\n" * 3000)   # too large to read: named only
    first = run(ws, "small")[0]["messages"][1]["content"]
    assert "=== api.py ===" in first and OTHERS in first
    others = first[first.index(OTHERS):]
    outlined = [f for f in ("big_a.py", "big_b.py", "big_c.py") if f"{f}: def huge(a, b)" in others]
    assert outlined and all(f"=== {f} ===" not in first for f in outlined)
    assert "\nlarge.py\n" in others
    assert "api.py" not in others.splitlines()[1:]   # shown whole above, not outlined again
    assert first.rstrip().endswith("Your task: What does profile() in api.py return? Change nothing.")


def test_fileText_without_text_is_named():
    assert render_overview([FileText("secret/thing.bin", None)], parse_request("x"), 100) == f"{HEADER}\nsecret/thing.bin"
