"""Issue 35, items 2-6: what a command can read and see, tried with real processes on the real tiers,
as root and as the unprivileged ``kuser``, each next to a control that shows the attack works
without keel's protection.

2. keel's data dir (other projects' session logs, the snapshot pack holding a .env's bytes) is never
   visible to a command, wherever KEEL_HOME / XDG_DATA_HOME put it;
3. the gate's scratch run sees an empty copy of each secret file, never the real workspace's;
4. bubblewrap hides secret files by the one pattern list, at any depth, with no entry cap;
5. the command environment is an allow-list (never the engine key's variable), and a key a command
   prints never reaches the engine or the event log;
6. on Landlock (which cannot hide a workspace .env) an interpreter's inline program naming a secret
   file asks, as ``cat .env`` does.
"""

from __future__ import annotations

import os
from collections.abc import Iterator
from pathlib import Path

import pytest
from tier_user import TIERS, USERS, Person, people

from keel.policy.sandbox import SandboxPolicy
from keel.tools.base import ToolContext
from keel.verify.scratch import copy_workspace, scratch_context


@pytest.fixture(params=USERS)
def person(request: pytest.FixtureRequest) -> Iterator[Person]:
    yield from people(request.param)


def _write(root: Path, files: dict[str, str]) -> None:
    for rel, text in files.items():
        path = root / rel
        path.parent.mkdir(parents=True, exist_ok=True)
        path.write_text(text)


# -- 2. keel's data dir ------------------------------------------------------------------------------

@pytest.mark.parametrize("tier", TIERS)
def test_keel_data_dir_is_never_visible_to_a_command(person: Person, tier: str) -> None:
    moved = person.base / "xdg-data"
    _write(person.home, {".local/share/keel/sessions/other-project.jsonl": "OTHER-PROJECT-LOG\n",
                         ".local/share/keel/sessions/s1/checkpoints/blobs/pack": "PACKED-ENV-BYTES\n"})
    _write(person.base, {"keel-home/sessions/x.jsonl": "KEEL-HOME-SESSION\n",       # KEEL_HOME
                         "xdg-data/keel/trust.json": "XDG-DATA-TRUST\n"})            # a variant: XDG_DATA_HOME
    env = person.env(XDG_DATA_HOME=str(moved))
    files = [person.home / ".local/share/keel/sessions/other-project.jsonl",
             person.home / ".local/share/keel/sessions/s1/checkpoints/blobs/pack",
             person.base / "keel-home/sessions/x.jsonl", moved / "keel/trust.json"]
    command = "cat " + " ".join(map(str, files)) + f"; echo LS; ls -R {person.home}/.local/share/keel 2>/dev/null"
    control = person.sandboxed(command, env=env, enabled=False)
    for marker in ("OTHER-PROJECT-LOG", "PACKED-ENV-BYTES", "KEEL-HOME-SESSION", "XDG-DATA-TRUST"):
        assert marker in control["output"]
    ran = person.sandboxed(command, env=env, tier=tier)
    assert ran["kind"] == tier
    for marker in ("OTHER-PROJECT-LOG", "PACKED-ENV-BYTES", "KEEL-HOME-SESSION", "XDG-DATA-TRUST"):
        assert marker not in ran["output"], ran["output"]
    listing = ran["output"].rpartition("LS\n")[2]
    assert "sessions" not in listing and "other-project" not in listing, ran["output"]   # not even the names


# -- 3. the scratch run ------------------------------------------------------------------------------

@pytest.mark.parametrize("tier", TIERS)
def test_a_scratch_run_sees_a_copy_never_the_real_workspaces_secrets(person: Person, tier: str) -> None:
    real = person.work
    _write(real, {".env": "REAL-ENV-SECRET\n", "config/prod.env": "REAL-PROD-SECRET\n", "app.py": "x = 1\n",
                  "node_modules/dep/index.js": "DEP-IS-READABLE\n", "tests/test_app.py": "def test(): pass\n"})
    scratch = person.base / "keel-home" / "scratch" / "restored-tests-1" / "work"
    copy_workspace(real, scratch)
    assert (scratch / ".env").read_bytes() == b"" and (scratch / "config/prod.env").read_bytes() == b""
    assert (scratch / "app.py").read_text() == "x = 1\n"
    person.own(person.base)
    command = (f"cat {real}/.env {real}/config/prod.env; echo ---; cat .env config/prod.env; "
               "cat node_modules/dep/index.js; cat app.py")
    policy = scratch_context(ToolContext(workspace=real, sandbox=SandboxPolicy(tier=tier)), scratch).sandbox
    assert policy is not None
    fields = {"tier": tier, "hide_paths": policy.hide_paths, "exposed": list(policy.exposed)}
    person.work = scratch
    try:
        # control: the scratch workspace under the tier as it was before (bubblewrap: / is readable, only
        # the scratch's own secrets hidden), and with no tier
        control = person.sandboxed(command, tier=tier) if tier == "bubblewrap" else person.sandboxed(command,
                                                                                                   enabled=False)
        assert "REAL-ENV-SECRET" in control["output"] and "REAL-PROD-SECRET" in control["output"]
        ran = person.sandboxed(command, **fields)
    finally:
        person.work = real
    assert ran["kind"] == tier
    assert "REAL-ENV-SECRET" not in ran["output"] and "REAL-PROD-SECRET" not in ran["output"], ran["output"]
    assert "DEP-IS-READABLE" in ran["output"] and "x = 1" in ran["output"], ran["output"]   # the checks still run


# -- 4. hidden by pattern, any depth, no entry cap ---------------------------------------------------

SECRETS = {"prod.env": "PROD-ENV-MARK", "certs/server.key": "SERVER-KEY-MARK", "certs/ca.pem": "CA-PEM-MARK",
           "a/b/c/d/e/f/g/h/.env": "DEEP-ENV-MARK", "config/secrets.yaml": "SECRETS-YAML-MARK",
           "deploy/keys/id_ed25519": "ID-KEY-MARK", "svc/.ENV.local": "UPPER-ENV-MARK"}


@pytest.mark.bubblewrap
def test_bubblewrap_hides_secret_files_by_pattern_at_any_depth_past_60000_entries(person: Person) -> None:
    ws = person.work
    for i in range(60_000):      # more entries than the old scan ever looked at, all before the secrets
        (ws / f"f{i:05d}.txt").touch()
    _write(ws, {rel: mark + "\n" for rel, mark in SECRETS.items()})
    _write(ws, {"certs/README.md": "PUBLIC-README\n", ".env.example": "TEMPLATE-MARK\n"})
    person.own(ws)
    command = "cat " + " ".join(SECRETS) + " certs/README.md .env.example; echo rc=$?"
    control = person.sandboxed(command, tier="bubblewrap", scan_secrets=False)
    assert all(mark in control["output"] for mark in SECRETS.values()), control["output"]
    ran = person.sandboxed(command, tier="bubblewrap")
    for rel, mark in SECRETS.items():
        assert mark not in ran["output"], (rel, ran["output"])
    assert "rc=0" in ran["output"]                     # empty files, not errors that break dotenv loaders
    assert "PUBLIC-README" in ran["output"] and "TEMPLATE-MARK" in ran["output"]


@pytest.mark.bubblewrap
def test_where_hiding_cannot_be_complete_the_command_is_put_to_a_person(tmp_path: Path) -> None:
    from keel.policy import hide
    from keel.policy.approval import Approver
    from keel.tools.shell import RunShellArgs, run_shell

    ws = tmp_path / "ws"
    for i in range(hide.MAX_HIDDEN + 5):     # each folder also holds a plain file: none can be hidden whole
        _write(ws, {f"svc{i}/.env": f"K{i}\n", f"svc{i}/main.py": "x\n"})
    policy = SandboxPolicy(tier="bubblewrap")
    refused = run_shell(RunShellArgs(command="cat svc1/main.py"),
                        ToolContext(workspace=ws, sandbox=policy, approval=Approver("unattended", workspace=ws)))
    assert not refused.ok and "cannot hide" in refused.output and "no one is present" in refused.output
    asked: list[str] = []
    gate = Approver("interactive", workspace=ws, prompt=lambda q: asked.append(q) or "y", confined=True)
    allowed = run_shell(RunShellArgs(command="cat svc1/main.py"), ToolContext(workspace=ws, sandbox=policy,
                                                                              approval=gate))
    assert allowed.ok and "x" in allowed.output and "secret" in asked[0]


# -- 5. the environment ------------------------------------------------------------------------------

LEAKY = {"DB_PASS": "db-pass-9f8e7d6c", "SLACK_WEBHOOK_URL": "https://hooks.slack.com/services/T0/B0/slack-hook-x1",
         "SENTRY_DSN": "https://sentry-dsn-key@o1.ingest.sentry.io/1", "GITLAB_PAT": "glpat-gitlab-pat-00000000",
         "MY_LLM_KEY": "sk-engine-key-1a2b3c4d5e6f"}


@pytest.mark.parametrize("tier", [*TIERS, "off"])
def test_the_command_environment_is_an_allow_list(person: Person, tier: str) -> None:
    env = person.env(**LEAKY, VIRTUAL_ENV="/opt/venv", GOPATH="/srv/go", MY_TOOL_HOME="/opt/tool", KEEL_OTHER="kept?")
    fields = {"tier": tier} if tier != "off" else {"enabled": False}
    control = person.sandboxed("env", env=env, enabled=False, env_pass=["*"])    # every variable, as before
    assert all(value in control["output"] for value in LEAKY.values())
    ran = person.sandboxed("env", env=env, env_pass=["MY_TOOL_*", "MY_LLM_KEY"], env_block=["MY_LLM_KEY"], **fields)
    for name, value in LEAKY.items():
        assert value not in ran["output"] and f"{name}=" not in ran["output"], name
    for kept in ("VIRTUAL_ENV=/opt/venv", "GOPATH=/srv/go", "MY_TOOL_HOME=/opt/tool", f"HOME={person.home}"):
        assert kept in ran["output"], kept
    assert "KEEL_OTHER" not in ran["output"]


@pytest.mark.parametrize("tier", TIERS)
def test_a_key_a_command_prints_never_reaches_the_engine_or_the_event_log(person: Person, tier: str) -> None:
    key = "sk-engine-key-1a2b3c4d5e6f7a8b"
    (person.work / "notes.txt").write_text(f"left here by mistake: {key}\nand the db: db-pass-9f8e7d6c\n")
    person.extra_config = 'env_pass = ["MY_TOOL_HOME"]\n'        # type: ignore[attr-defined]
    env = person.env(MY_LLM_KEY=key, DB_PASS="db-pass-9f8e7d6c", MY_TOOL_HOME="/opt/tool")
    command = "env; echo key=$MY_LLM_KEY; cat notes.txt"
    ran = person.run([{"tool_calls": [{"name": "run_shell", "arguments": {"command": command}}]}], env=env,
                     args=("--api-key-env", "MY_LLM_KEY"), api_key=key, tier=tier)
    assert ran.code == 1 and ran.result["stop_reason"] == "limit:steps", ran.stderr
    [shown] = ran.tool_texts()[:1]
    assert "MY_TOOL_HOME=/opt/tool" in shown and "left here by mistake" in shown   # the command did run
    assert key not in ran.sent() and "db-pass-9f8e7d6c" not in ran.sent()
    assert key not in ran.log and "db-pass-9f8e7d6c" not in ran.log
    assert "[redacted" in shown
    control = person.sandboxed("cat notes.txt", enabled=False)                   # the file does hold it
    assert key in control["output"]


@pytest.mark.parametrize("tier", TIERS)
def test_a_venv_a_node_project_and_a_go_module_run_their_checks_under_it(person: Person, tier: str) -> None:
    import shutil
    import subprocess
    import sys

    ws = person.work
    _write(ws, {"test_calc.py": "def test_add():\n    assert 1 + 1 == 2\n",
                "package.json": '{"name": "calc", "version": "1.0.0", "scripts": {"test": "node --test"}}\n',
                "test/calc.test.js": "const t = require('node:test');\nt.test('adds', () => {});\n",
                "gomod/go.mod": "module example.com/calc\n\ngo 1.19\n",
                "gomod/calc.go": "package calc\n\nfunc Add(a, b int) int { return a + b }\n",
                "gomod/calc_test.go": "package calc\n\nimport \"testing\"\n\nfunc TestAdd(t *testing.T) {\n"
                                      "\tif Add(1, 1) != 2 {\n\t\tt.Fatal(\"no\")\n\t}\n}\n"})
    subprocess.run([sys.executable, "-m", "venv", "--system-site-packages", str(ws / ".venv")], check=True)
    person.own(ws)
    venv_bin = ws / ".venv" / "bin"
    env = person.env(VIRTUAL_ENV=str(ws / ".venv"), PATH=f"{venv_bin}:{os.environ['PATH']}", **LEAKY)
    checks = ["python -c 'import sys; print(\"prefix=\" + sys.prefix)' && python -m pytest -q -p no:cacheprovider",
              "npm test --silent"]
    if shutil.which("go"):
        checks.append("cd gomod && go test ./...")
    for check in checks:
        ran = person.sandboxed(check, env=env, tier=tier)
        assert ran["exit"] == 0, (check, ran["output"][-2000:])
    assert f"prefix={ws / '.venv'}" in person.sandboxed(checks[0], env=env, tier=tier)["output"]
    if not shutil.which("go"):
        pytest.skip("go is not installed here: the Go module was not run (apt-get install golang-go)")


# -- 6. Landlock cannot hide a workspace .env: the policy asks ---------------------------------------

INLINE = {"python3 -c \"print(open('.env').read())\"": "ROOT-ENV-MARK",                     # the issue's example
          "node -e \"console.log(require('fs').readFileSync('config/prod.env', 'utf8'))\"": "PROD-ENV-MARK",
          "python3 - <<'EOF'\nprint(open('deploy/id_rsa').read())\nEOF": "ID-RSA-MARK"}


@pytest.mark.parametrize("tier", TIERS)
def test_inline_code_naming_a_secret_file_asks_where_the_tier_cannot_hide_it(person: Person, tier: str) -> None:
    _write(person.work, {".env": "ROOT-ENV-MARK\n", "config/prod.env": "PROD-ENV-MARK\n",
                         "deploy/id_rsa": "ID-RSA-MARK\n", "data.txt": "PLAIN-DATA\n"})
    person.own(person.work)
    for command, mark in INLINE.items():
        direct = person.sandboxed(command, tier=tier)     # the tier alone: Landlock shows it, bubblewrap hides it
        assert (mark in direct["output"]) is (tier == "landlock"), (command, direct["output"])
    plain = "python3 -c \"print(open('data.txt').read())\""
    calls = [{"tool_calls": [{"name": "run_shell", "arguments": {"command": c}}]} for c in [*INLINE, plain]]
    ran = person.run(calls, tier=tier)
    texts = ran.tool_texts()
    for text, mark in zip(texts, INLINE.values(), strict=False):
        assert mark not in text and "needs approval" in text and "secret file" in text, text
    assert "PLAIN-DATA" in texts[len(INLINE)]            # code naming no secret still runs unasked
    for mark in INLINE.values():
        assert mark not in ran.sent()


def test_env_pass_is_the_users_word_never_the_projects(tmp_path: Path) -> None:
    from keel.config import ConfigError, load_config

    ws = tmp_path / "ws"
    (ws / ".keel").mkdir(parents=True)
    (ws / ".keel" / "config.toml").write_text('[shell]\nenv_pass = ["AWS_*"]\n')
    user = tmp_path / "user.toml"
    user.write_text('[shell]\nenv_pass = ["MY_TOOL_HOME", "ACME_*"]\n')
    config, warnings = load_config(ws, user_path=user, env={})
    assert config.shell.env_pass == ["MY_TOOL_HOME", "ACME_*"]
    assert any("env_pass" in w for w in warnings)
    user.write_text('[shell]\nenv_pass = ["$(id)"]\n')
    with pytest.raises(ConfigError, match="env_pass"):
        load_config(ws, user_path=user, env={})


@pytest.mark.bubblewrap
def test_a_read_allow_rule_unhides_a_secret_file_for_commands_too(person: Person) -> None:
    """One read decision: a test fixture's key a read(...) rule lets the model read is readable by the
    project's tests as well; a .env beside it stays hidden."""
    _write(person.work, {"tests/fixtures/server.key": "FIXTURE-KEY-MARK\n", ".env": "ENV-HIDDEN-MARK\n"})
    person.own(person.work)
    script = [{"tool_calls": [{"name": "run_shell", "arguments": {
        "command": "python3 -c \"import pathlib; print(pathlib.Path('tests/fixtures/server.key').read_text(), "
                   "pathlib.Path('.e' + 'nv').read_text())\""}}]}]
    control = person.run(script, tier="bubblewrap").tool_texts()[0]     # no rule: both hidden
    assert "FIXTURE-KEY-MARK" not in control and "ENV-HIDDEN-MARK" not in control, control
    person.extra_config = '\n[permissions]\nallow = ["read(tests/fixtures/**)"]\n'   # type: ignore[attr-defined]
    [shown] = person.run(script, tier="bubblewrap").tool_texts()[:1]
    assert "FIXTURE-KEY-MARK" in shown and "ENV-HIDDEN-MARK" not in shown, shown
