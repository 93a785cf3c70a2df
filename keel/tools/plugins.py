"""Custom tools from installed packages: Python entry points in the group ``keel.tools``.

A plugin package declares, in its pyproject.toml::

    [project.entry-points."keel.tools"]
    jira = "keel_jira:TOOLS"

The object may be a ``keel.tools.base.Tool``, a list of them, or a function returning either. A tool
is a ``ToolSpec`` (what the model sees: name, description, pydantic argument model, annotations) and
an executor ``(args, ctx) -> ToolResult``, exactly like the built-in tools, so a plugin tool goes
through the same registry (validation, error capture, result caps), hooks, plan mode (a tool not
annotated read-only is refused while planning) and event log. A plugin that fails to load, or a
tool whose name is taken, is skipped with a warning: a broken package must not stop keel.
"""

from __future__ import annotations

import re
from importlib.metadata import entry_points
from typing import Any

from keel.tools.base import Tool

GROUP = "keel.tools"
_NAME = re.compile(r"^[A-Za-z0-9_-]{1,64}$")
RESERVED = frozenset({"list_dir", "read_file", "find_files", "grep", "edit_file", "write_file", "run_shell",
                      "todo_write", "remember", "ask_user", "finish", "delegate", "skill"})


def plugin_tools() -> tuple[list[Tool], list[str]]:
    tools: list[Tool] = []
    warnings: list[str] = []
    seen: set[str] = set(RESERVED)
    for ep in sorted(entry_points(group=GROUP), key=lambda e: e.name):
        try:
            loaded: Any = ep.load()
            if callable(loaded) and not isinstance(loaded, Tool):
                loaded = loaded()
        except Exception as exc:  # a broken plugin is the plugin's problem, not the run's
            warnings.append(f"plugin {ep.name} ({ep.value}) failed to load: {type(exc).__name__}: {exc}")
            continue
        items = loaded if isinstance(loaded, list | tuple) else [loaded]
        for item in items:
            if not isinstance(item, Tool):
                warnings.append(f"plugin {ep.name}: {type(item).__name__} is not a keel.tools.base.Tool; skipped")
                continue
            name = item.spec.name
            if not _NAME.match(name) or name.startswith("mcp__"):
                warnings.append(f"plugin {ep.name}: tool name {name!r} is not allowed; skipped")
            elif name in seen:
                warnings.append(f"plugin {ep.name}: tool {name!r} is already defined; skipped")
            else:
                seen.add(name)
                tools.append(item)
    return tools, warnings
