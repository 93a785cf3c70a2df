"""Issue 33's shapes through the real CLI (`keel tool run_shell`, `keel run`), with the OS sandbox off
(the policy alone) and on each tier, each next to a control: the same text run by plain bash runs
the hidden command.

The hidden commands write files a tier lets a command write — ``.envrc`` in the workspace (a file
that makes direnv run code later, so the policy asks on every tier) or a program a repository's
config names writing into the workspace — so where the file is missing after keel, the policy
stopped it, not the tier. The issue's own examples (``~/.bashrc``, ``rm -rf ~``) are denied
outright. Unattended (no terminal), an "ask" is refused.
"""

from __future__ import annotations

import json
import shutil
import subprocess
import sys
from pathlib import Path

import pytest
from conftest import call, make_repo

from keel.testing.server import ScriptedEngineServer

TIERS = ["off", pytest.param("bubblewrap", marks=pytest.mark.bubblewrap),
         pytest.param("landlock", marks=pytest.mark.landlock)]

# (id, command, the file bash creates when it runs the hidden command, relative to the workspace or ~)
HIDDEN = [
    ("continuation_in_double_quotes", 'echo "$\\\n(echo pwned > .envrc)"', ".envrc"),
    ("continuation_in_heredoc", "cat <<EOF\n$\\\n(echo pwned > .envrc)\nEOF", ".envrc"),
    ("heredoc_before_its_redirect", "cat <<EOF > .envrc\npwned\nEOF", ".envrc"),
    ("heredoc_before_redirect_home", "cat <<EOF > ~/.bashrc\npwned\nEOF", "~/.bashrc"),
    ("escaped_crlf_is_no_continuation", "echo SAFE \\\r\necho pwned > .envrc", ".envrc"),
    ("crlf_heredoc_delimiter", "cat <<EOF\nx\nEOF\r\nEOF\necho pwned > .envrc", ".envrc"),
    ("joined_delimiter_line", "cat <<EOF\nx\nEO\\\nF\necho pwned > .envrc", ".envrc"),
    ("heredoc_on_a_list", "true && bash <<EOF\necho pwned > .envrc\nEOF", ".envrc"),
]


@pytest.fixture
def tier_env(keel_env: dict[str, str], tmp_path: Path, request: pytest.FixtureRequest) -> dict[str, str]:
    """keel's environment with the user's config choosing the tier, and a HOME of the test's own."""
    tier = request.param
    config = Path(keel_env["XDG_CONFIG_HOME"]) / "keel" / "config.toml"
    config.parent.mkdir(parents=True, exist_ok=True)
    config.write_text(f'[shell]\nsandbox = "{tier}"\n')
    home = tmp_path / "home"
    home.mkdir()
    (home / ".bashrc").write_text("# rc\n")
    return {**keel_env, "HOME": str(home), "KEEL_TEST_TIER": tier}


def _target(rel: str, ws: Path, home: Path) -> Path:
    return home / rel[2:] if rel.startswith("~/") else ws / rel


def _written(path: Path) -> bool:
    return path.exists() and "pwned" in path.read_text(errors="replace")


def _workspace(tmp_path: Path, name: str) -> Path:
    return make_repo(tmp_path / name, {"file.txt": "one\n", "README.md": "notes\n"})


def _bash(command: str, ws: Path, env: dict[str, str]) -> None:
    subprocess.run(["bash", "-c", command], cwd=ws, env=env, stdin=subprocess.DEVNULL, capture_output=True,
                   timeout=30)


def _tool(run_keel, command: str, ws: Path, env: dict[str, str]):
    return run_keel("tool", "run_shell", json.dumps({"command": command}), "--cwd", str(ws), env=env, timeout=60)


@pytest.mark.parametrize("tier_env", TIERS, indirect=True)
@pytest.mark.parametrize(("shape", "command", "target"), HIDDEN, ids=[h[0] for h in HIDDEN])
def test_a_command_hidden_from_the_old_reading_never_runs(shape: str, command: str, target: str, tmp_path: Path,
                                                          tier_env: dict[str, str], run_keel) -> None:
    home = Path(tier_env["HOME"])
    control = _workspace(tmp_path, "control")
    _bash(command, control, tier_env)
    assert _written(_target(target, control, home)), "control: bash runs the hidden command"
    (home / ".bashrc").write_text("# rc\n")
    ws = _workspace(tmp_path, "ws")
    r = _tool(run_keel, command, ws, tier_env)
    assert r.code == 1 and "refused" in r.stdout.lower(), \
        r.stdout + r.stderr
    assert not _written(_target(target, ws, home)), r.stdout


# -- item 2: a repository's config turns a read into a run ----------------------------------------

CONFIGS = {
    "textconv": ('[diff "pwn"]\n\ttextconv = "echo pwned > textconv-ran; cat"\n', "*.txt diff=pwn\n"),
    "external": ('[diff]\n\texternal = "echo pwned > external-ran; true"\n', ""),
    "driver_command": ('[diff "pwn"]\n\tcommand = "echo pwned > driver-ran; true"\n', "*.txt diff=pwn\n"),
}
READS = [("textconv", "git log -p -1", "textconv-ran"), ("textconv", "git show HEAD", "textconv-ran"),
         ("textconv", "git blame file.txt", "textconv-ran"), ("textconv", "git diff", "textconv-ran"),
         ("external", "git diff", "external-ran"), ("driver_command", "git diff", "driver-ran")]


def _configured_repo(root: Path, kind: str) -> Path:
    ws = _workspace(root.parent, root.name)
    config, attributes = CONFIGS[kind]
    with (ws / ".git" / "config").open("a") as handle:
        handle.write(config)
    if attributes:
        (ws / ".git" / "info").mkdir(exist_ok=True)
        (ws / ".git" / "info" / "attributes").write_text(attributes)
    (ws / "file.txt").write_text("one\ntwo\n")        # a change in HEAD for log -p and show
    subprocess.run(["git", "-c", "user.name=t", "-c", "user.email=t@t", "commit", "-qam", "two"],
                   cwd=ws, check=True, capture_output=True)
    (ws / "file.txt").write_text("one\ntwo\nthree\n")  # an unstaged change for git diff
    return ws


@pytest.mark.parametrize("tier_env", TIERS, indirect=True)
@pytest.mark.parametrize(("kind", "command", "marker"), READS, ids=[f"{k}-{c.split()[1]}" for k, c, _ in READS])
def test_a_repository_config_cannot_turn_a_read_into_a_run(kind: str, command: str, marker: str, tmp_path: Path,
                                                           tier_env: dict[str, str], run_keel) -> None:
    control = _configured_repo(tmp_path / "control", kind)
    _bash(command, control, tier_env)
    assert _written(control / marker), f"control: git runs the configured program for {command}"
    ws = _configured_repo(tmp_path / "ws", kind)
    r = _tool(run_keel, command, ws, tier_env)
    assert r.code == 1 and "may run a program" in r.stdout, r.stdout + r.stderr
    assert not (ws / marker).exists()
    plain = _workspace(tmp_path, "plain")              # the same read in a repository without the config runs
    (plain / "file.txt").write_text("one\ntwo\n")
    assert _tool(run_keel, command, plain, tier_env).code == 0


@pytest.mark.parametrize("tier_env", TIERS, indirect=True)
def test_rg_search_zip_asks(tmp_path: Path, tier_env: dict[str, str], run_keel) -> None:
    rg = shutil.which("rg")
    if rg is None:
        pytest.skip("no rg binary")
    control = _workspace(tmp_path, "control")
    fake = tmp_path / "fakebin"
    fake.mkdir()
    (fake / "gzip").write_text(f"#!/bin/sh\necho pwned > {control}/zip-ran\ncat\n")
    (fake / "gzip").chmod(0o755)
    (control / "a.gz").write_bytes(b"\x1f\x8b\x08\x00")
    _bash(f"PATH={fake}:$PATH {rg} -z pwned a.gz", control, tier_env)
    assert _written(control / "zip-ran"), "control: rg -z runs the gzip it finds on PATH"
    ws = _workspace(tmp_path, "ws")
    for command in ("rg -z pwned .", "rg --search-zip pwned ."):
        r = _tool(run_keel, command, ws, tier_env)
        assert r.code == 1 and ("rg -z" in r.stdout or "search-zip" in r.stdout), r.stdout


# -- item 3: a call cut short never runs --------------------------------------------------------

CONTENT = "line one\nline two\nline three\n"


def _cut_steps(path: str) -> dict[str, dict[str, object]]:
    """One reply per shape, each ending inside a write_file call of ``path``."""
    xml = ("<tool_call>\n<function=write_file>\n<parameter=path>\n" + path +
           "\n</parameter>\n<parameter=content>\nline one\nline tw")
    args = '{"name": "write_file", "arguments": {"path": "' + path + '", "content": "line one\\nline tw'
    cut_call = call("write_file", path=path, content="line one\nline tw")
    return {
        "qwen3_coder_xml_text": {"content": xml},
        "hermes_json_text": {"content": "<tool_call>\n" + args},
        "bare_json_text": {"content": args},
        "xml_text_at_length": {"content": xml + "o\n", "finish_reason": "length"},
        "structured_at_length": {"tool_calls": [cut_call], "finish_reason": "length"},
        # vLLM/Ollama: a reply cut at max_tokens whose call the server's parser read says "tool_calls"
        "structured_at_max_tokens": {"tool_calls": [cut_call],
                                     "usage": {"prompt_tokens": 100, "completion_tokens": 4096}},
    }


SHAPES = list(_cut_steps("x"))


@pytest.mark.parametrize("tier_env", TIERS, indirect=True)
def test_a_cut_call_never_runs_and_the_model_is_asked_again(tmp_path: Path, tier_env: dict[str, str],
                                                            run_keel) -> None:
    """Each shape cut short, then the model's complete call: the cut ones never write, each is told."""
    ws = _workspace(tmp_path, "ws")
    script: list[dict[str, object]] = []
    for shape in SHAPES:
        script += [_cut_steps(f"cut-{shape}.txt")[shape],
                   {"tool_calls": [call("write_file", path=f"ok-{shape}.txt", content=CONTENT)]}]
    script.append({"content": "Wrote the files."})
    with ScriptedEngineServer(script) as server:
        r = run_keel("run", "write the files", "--cwd", str(ws), "--base-url", server.base_url,
                     "--model", "scripted", "--output-format", "json", env=tier_env, timeout=180)
        requests = server.requests
    assert len(requests) >= 2 * len(SHAPES), r.stderr
    for shape, request in zip(SHAPES, requests[1::2], strict=False):
        told = json.dumps(request["messages"][-2:])       # the answer to the cut reply, or the pushback
        assert "cut off" in told or "ended inside a tool call" in told, (shape, told)
    for shape in SHAPES:
        assert not (ws / f"cut-{shape}.txt").exists(), shape
        assert (ws / f"ok-{shape}.txt").read_text() == CONTENT, shape


@pytest.mark.parametrize("tier_env", TIERS, indirect=True)
def test_control_the_complete_call_writes(tmp_path: Path, tier_env: dict[str, str], run_keel) -> None:
    ws = _workspace(tmp_path, "ws")
    whole = _cut_steps("out.txt")["qwen3_coder_xml_text"]["content"]
    whole = str(whole).replace("line one\nline tw", CONTENT) + "\n</parameter>\n</function>\n</tool_call>"
    with ScriptedEngineServer([{"content": whole}, {"content": "Wrote out.txt."}]) as server:
        r = run_keel("run", "write out.txt with three lines", "--cwd", str(ws), "--base-url", server.base_url,
                     "--model", "scripted", "--output-format", "json", env=tier_env, timeout=120)
    assert (ws / "out.txt").read_text() == CONTENT, r.stderr


# -- the same shapes as an unprivileged user ---------------------------------------------------

def _kuser() -> str | None:
    from bwrap_runner import ensure_unprivileged_user

    return ensure_unprivileged_user()


@pytest.mark.bubblewrap
@pytest.mark.parametrize("tier", ["off", "bubblewrap"])
def test_the_hidden_commands_never_run_for_an_unprivileged_user(tier: str) -> None:
    """As `kuser`, in a workspace it owns: the policy refuses each shape; the control, plain bash as
    the same user, runs it."""
    from bwrap_runner import as_user, make_workspace, remove_workspace, user_env

    user = _kuser()
    if user is None:
        pytest.skip("needs root and an unprivileged user that can run keel")
    root = make_workspace(user)
    try:
        env = {**user_env(user), "XDG_CONFIG_HOME": str(root / "xdg"), "KEEL_HOME": str(root / "keel-home")}
        (root / "xdg" / "keel").mkdir(parents=True)
        (root / "xdg" / "keel" / "config.toml").write_text(f'[shell]\nsandbox = "{tier}"\n')
        for i, (shape, command, target) in enumerate(h for h in HIDDEN if not h[2].startswith("~")):
            control, ws = root / f"control{i}", root / f"ws{i}"
            for place in (control, ws):
                place.mkdir()
                (place / "README.md").write_text("notes\n")
            subprocess.run(["chown", "-R", user, str(root)], check=True)
            subprocess.run([*as_user(user), "bash", "-c", command], cwd=control, env=env, capture_output=True,
                           timeout=30)
            assert _written(control / target), f"control ({shape}): bash runs the hidden command"
            r = subprocess.run([*as_user(user), sys.executable, "-m", "keel.cli.main", "tool", "run_shell",
                                json.dumps({"command": command}), "--cwd", str(ws)], env=env, capture_output=True,
                               text=True, timeout=60)
            assert r.returncode == 1 and "refused" in r.stdout.lower(), (shape, r.stdout, r.stderr[-500:])
            assert not _written(ws / target), shape
    finally:
        remove_workspace(root)
