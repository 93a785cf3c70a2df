"""Which projects the user trusts to run their own hooks and MCP servers.

A cloned repository can carry ``.keel/config.toml`` hooks and a ``.mcp.json``: both start programs
on this machine. They run only after the user trusted the project (``keel trust`` or a yes at the
attended prompt). Trust is recorded per directory together with a fingerprint of exactly those
files, so a later ``git pull`` that changes a hook or adds a server is untrusted again until the
user looks at it.

The store is ``data_dir()/trust.json``: ``{"projects": {"/real/path": {"fingerprint", "trusted_at"}}}``.
"""

from __future__ import annotations

import hashlib
import json
import os
import time
import tomllib
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from keel.core.events import data_dir
from keel.core.files import write_atomic

PROJECT_MCP_FILE = ".mcp.json"


def store_path() -> Path:
    return data_dir() / "trust.json"


def _project_hooks(workspace: Path) -> dict[str, Any]:
    try:
        with (workspace / ".keel" / "config.toml").open("rb") as fh:
            hooks = tomllib.load(fh).get("hooks", {})
    except (OSError, tomllib.TOMLDecodeError):
        return {}
    return hooks if isinstance(hooks, dict) else {}


def _project_mcp(workspace: Path) -> bytes:
    try:
        return (workspace / PROJECT_MCP_FILE).read_bytes()
    except OSError:
        return b""


@dataclass(frozen=True)
class ProjectExtensions:
    """What a project would run on this machine if trusted."""

    hooks: list[str]          # "PreToolUse run_shell: ./check.sh"
    mcp_servers: list[str]    # "NAME: command args" / "NAME: url"
    fingerprint: str

    @property
    def empty(self) -> bool:
        return not self.hooks and not self.mcp_servers

    def describe(self) -> str:
        lines = [f"  hook {h}" for h in self.hooks] + [f"  MCP server {s}" for s in self.mcp_servers]
        return "\n".join(lines) or "  (nothing)"


def project_extensions(workspace: Path) -> ProjectExtensions:
    hooks = _project_hooks(workspace)
    described = []
    for event, entries in sorted(hooks.items()):
        for e in entries if isinstance(entries, list) else []:
            if isinstance(e, dict):
                matcher = f" {e['matcher']}" if e.get("matcher") else ""
                described.append(f"{event}{matcher}: {e.get('command', '')}")
    raw_mcp = _project_mcp(workspace)
    servers = []
    try:
        parsed = json.loads(raw_mcp) if raw_mcp.strip() else {}
        for name, spec in (parsed.get("mcpServers") or {}).items():
            if isinstance(spec, dict):
                target = spec.get("url") or " ".join([str(spec.get("command", ""))]
                                                     + [str(a) for a in spec.get("args", [])])
                servers.append(f"{name}: {target}")
    except (json.JSONDecodeError, AttributeError):
        servers.append(f"(unreadable {PROJECT_MCP_FILE})")
    digest = hashlib.sha256(json.dumps(hooks, sort_keys=True, default=str).encode() + b"\0" + raw_mcp).hexdigest()
    return ProjectExtensions(described, servers, digest)


def _load() -> dict[str, Any]:
    try:
        data = json.loads(store_path().read_text(encoding="utf-8"))
    except (OSError, json.JSONDecodeError):
        return {"projects": {}}
    return data if isinstance(data.get("projects"), dict) else {"projects": {}}


def _key(workspace: Path) -> str:
    return os.path.realpath(workspace)


def trust_state(workspace: Path) -> str:
    """"trusted", "changed" (trusted before, but its hooks or servers differ now) or "untrusted"."""
    entry = _load()["projects"].get(_key(workspace))
    if not isinstance(entry, dict):
        return "untrusted"
    return "trusted" if entry.get("fingerprint") == project_extensions(workspace).fingerprint else "changed"


def is_trusted(workspace: Path) -> bool:
    return trust_state(workspace) == "trusted"


def trust(workspace: Path) -> None:
    data = _load()
    data["projects"][_key(workspace)] = {"fingerprint": project_extensions(workspace).fingerprint,
                                         "trusted_at": time.strftime("%Y-%m-%dT%H:%M:%SZ", time.gmtime())}
    _save(data)


def revoke(workspace: Path) -> bool:
    data = _load()
    removed = data["projects"].pop(_key(workspace), None) is not None
    _save(data)
    return removed


def trusted_projects() -> dict[str, Any]:
    return dict(_load()["projects"])


def _save(data: dict[str, Any]) -> None:
    path = store_path()
    path.parent.mkdir(parents=True, exist_ok=True)
    write_atomic(path, (json.dumps(data, indent=2, sort_keys=True) + "\n").encode("utf-8"))  # never half-written


def decide_trust(workspace: Path, *, prompt: Any = None) -> tuple[bool, list[str]]:
    """Whether the project's own hooks and MCP servers may run, plus warnings. Asks the person when
    ``prompt`` is given (attended, interactive) and the project is not trusted yet."""
    found = project_extensions(workspace)
    if found.empty:
        return True, []
    state = trust_state(workspace)
    if state == "trusted":
        return True, []
    why = "changed since you trusted it" if state == "changed" else "not trusted"
    if prompt is not None:
        try:
            answer = str(prompt(f"This project ({workspace}) is {why}. It would run:\n{found.describe()}\n"
                                "  Trust it and run them? [y] yes, remember   [n] no, skip them this session"))
        except (EOFError, KeyboardInterrupt):
            answer = "n"
        if answer.strip().lower() in ("y", "yes"):
            trust(workspace)
            return True, []
    return False, [f"project hooks / MCP servers skipped: this project is {why}. It would run:\n"
                   f"{found.describe()}\nReview them, then run `keel trust --cwd {workspace}`."]
