"""Assembles the extensions for one Agent: trust, hooks, skills, MCP servers, plugins, sub-agents,
plan mode. The Agent calls three things: ``register_tools(registry)`` and ``wrap(registry)`` for its
registry, ``prompt_addendum()`` for the stable prefix, and the hook points (``session_start``,
``prompt_submit``, ``hooks.on_stop``).

Order of tool wrapping matters: hooks wrap each tool first, then plan mode replaces what may not
run — so a PreToolUse hook sees every call the model makes, and plan mode refuses writes even
when a hook would allow them.
"""

from __future__ import annotations

from collections.abc import Callable
from pathlib import Path
from typing import TYPE_CHECKING, Any

from keel.ext.hooks import HookRunner, specs_from_config
from keel.ext.plan import plan_mode_tools
from keel.tools.registry import ToolRegistry

if TYPE_CHECKING:
    from keel.config import Config


class Extensions:
    def __init__(self, workspace: Path, config: Config, *, profile: str, session_id: Callable[[], str],
                 transcript: Callable[[], str | None], emit: Callable[..., Any], protection: Callable[[], str],
                 prompt: Callable[[str], str] | None = None, written: Callable[[], set[str]] | None = None) -> None:
        """Plain values and callbacks from the Agent (the composition root), never the Agent itself:
        ``session_id``/``transcript``/``written`` (the files the session wrote) for hooks, ``emit``
        for events, ``protection`` for sub-agents."""
        from keel.ext.trust import decide_trust
        from keel.policy.sandbox import policy_for

        self.workspace, self.config, self.profile = workspace, config, profile
        self.emit, self.protection = emit, protection
        self.warnings: list[str] = []
        # Asked only when someone can answer (interactive approval gives a prompt); unattended runs
        # skip untrusted project hooks and servers with a warning.
        self.trusted, warnings = decide_trust(workspace, prompt=prompt)
        self.warnings += warnings
        specs = specs_from_config(config.hooks, trusted_project=self.trusted)
        shell = config.shell
        self.hooks = HookRunner(specs, workspace, session_id=session_id, transcript=transcript, emit=emit,
                                policy=policy_for(shell.sandbox, network=shell.network, allow_sockets=shell.allow_sockets),
                                written=written, ask=prompt)
        self.skills: list[Any] = []
        self.mcp: Any = None

    # -- tools ---------------------------------------------------------------------------------

    def register_tools(self, registry: ToolRegistry) -> None:
        """Register the tools beyond the built-in set: delegate, skill, MCP servers' tools, plugins."""
        from keel.drive.delegate import make_delegate_tool

        ext = self.config.extensions
        # a small model's sub-agent would be as small: the small profile leaves delegate out
        if self.profile != "small":
            registry.register(make_delegate_tool(ext.subagent_max_steps, self.protection))
        if ext.skills:
            from keel.ext.skills import discover_skills, make_skill_tool

            self.skills, warnings = discover_skills(self.workspace)
            self.warnings += warnings
            if self.skills:
                registry.register(make_skill_tool(self.skills))
        if ext.mcp:
            self._register_mcp(registry)
        if ext.plugins:
            from keel.tools.plugins import plugin_tools

            found, warnings = plugin_tools()
            for tool in found:
                registry.register(tool)
            self.warnings += warnings

    def _register_mcp(self, registry: ToolRegistry) -> None:
        from keel.engine.types import EngineError
        from keel.ext.mcp import McpConfigError, start_servers

        ext, perms = self.config.extensions, self.config.permissions
        try:
            self.mcp, mcp_tools, warnings = start_servers(
                self.workspace, trusted=self.trusted, call_timeout_s=ext.mcp_call_timeout_s,
                startup_timeout_s=ext.mcp_startup_timeout_s,
                rules={"allow": perms.allow, "ask": perms.ask, "deny": perms.deny},
                emit=self.emit)
        except McpConfigError as e:
            raise EngineError("config", f"MCP configuration error: {e}") from e
        for tool in mcp_tools:
            registry.register(tool)
        self.warnings += warnings

    def wrap(self, registry: ToolRegistry, *, plan_mode: bool) -> None:
        """Put every registered tool behind the hooks, then (in plan mode) refuse what could change
        the workspace; each keeps its place in the registry."""
        for tool in registry.tools():
            wrapped = self.hooks.wrap(tool)
            registry.replace(tool.spec.name, plan_mode_tools([wrapped])[0] if plan_mode else wrapped)

    def prompt_addendum(self) -> str:
        """Skill names and descriptions for the system prompt (sorted: a stable prefix)."""
        if not self.skills:
            return ""
        from keel.ext.skills import skills_prompt

        return skills_prompt(self.skills)

    # -- hook points ---------------------------------------------------------------------------

    def start_context(self, task: str) -> tuple[str | None, list[str]]:
        """SessionStart and UserPromptSubmit hooks: (refusal of the prompt or None, context lines)."""
        context = self.hooks.run("SessionStart", {"source": "startup"}).context
        verdict = self.hooks.run("UserPromptSubmit", {"prompt": task})
        if verdict.blocked:
            return verdict.reason, context
        return None, context + verdict.context

    def close(self) -> None:
        if self.mcp is not None:
            self.mcp.close()
            self.mcp = None

