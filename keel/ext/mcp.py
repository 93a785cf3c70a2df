"""MCP client: tools of Model Context Protocol servers as keel tools named ``mcp__SERVER__TOOL``.

Servers come from files in the widely used ``.mcp.json`` shape::

    {"mcpServers": {"NAME": {"command": "...", "args": [...], "env": {...}},      # stdio
                    "OTHER": {"url": "https://host/mcp", "headers": {...}}}}     # streamable HTTP

read from the user's ``~/.config/keel/mcp.json`` and the project's ``.mcp.json`` (project servers
start only in a trusted project: keel.ext.trust). The official ``mcp`` SDK (optional extra
``keel[mcp]``) speaks the protocol on one background event loop; each call waits at most the call
timeout (default 60 s). A server that crashes, hangs or fails to start becomes a tool error or a
warning — never a crashed run.

A stdio server starts through keel's runner (keel.policy.runner.prepare): keel's scrubbed
environment plus the server's own ``env``, the limits of a command (memory, file size, processes;
not CPU time), its network and filesystem as they are. ``"confine": false`` in the user's file starts
it as the SDK does by itself instead (its default environment plus the server's ``env``, no limits).

Every MCP call goes through the approval gate like an ask-class command: it runs when an allow rule
names it (``mcp__SERVER__TOOL``, ``mcp__SERVER`` or ``mcp__SERVER__*`` in ``[permissions] allow``),
after a yes from the person (interactive or auto-edit mode), or in full-auto mode; with no one to
ask it is refused unless allowed.
Deny rules win. Hooks, plan mode (a tool is read-only only when the server says so) and the event
log apply as to every tool.
"""

from __future__ import annotations

import asyncio
import contextlib
import json
import os
import re
import tempfile
import threading
from collections.abc import Callable, Coroutine
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, ClassVar
from urllib.parse import unquote, urlparse

from pydantic import BaseModel, ConfigDict

from keel.policy.paths import is_secret_name, is_secret_path, workspace_root
from keel.policy.reads import shows
from keel.policy.runner import Job, prepare
from keel.policy.sandbox import SandboxPolicy
from keel.policy.workspace import credential_problem
from keel.tools.base import Tool, ToolAnnotations, ToolContext, ToolResult, ToolSpec

USER_FILE = "mcp.json"
SERVER_CPU_S = 7 * 24 * 3600     # a server's CPU time limit: it runs as long as the session
PROJECT_FILE = ".mcp.json"
_SAFE = re.compile(r"[^A-Za-z0-9_-]")


class McpConfigError(ValueError):
    """A server file that cannot be used; the message names the file and the server."""


@dataclass(frozen=True)
class ServerSpec:
    name: str
    source: str                          # "user" or "project"
    command: str | None = None
    args: tuple[str, ...] = ()
    env: dict[str, str] = field(default_factory=dict)
    cwd: str | None = None
    url: str | None = None
    headers: dict[str, str] = field(default_factory=dict)
    # False ("confine": false in the *user's* mcp.json): started as the SDK does by itself (its default
    # environment plus ``env``), no limits. A project's .mcp.json cannot say it.
    confine: bool = True


def user_mcp_path() -> Path:
    base = os.environ.get("XDG_CONFIG_HOME") or str(Path.home() / ".config")
    return Path(base) / "keel" / USER_FILE


def parse_servers(text: str, origin: str, source: str) -> list[ServerSpec]:
    """The servers of one file. Raises McpConfigError naming the file and server on bad shape."""
    try:
        data = json.loads(text) if text.strip() else {}
    except json.JSONDecodeError as e:
        raise McpConfigError(f"{origin}: not valid JSON ({e.msg} at line {e.lineno})") from e
    servers = data.get("mcpServers", {}) if isinstance(data, dict) else None
    if not isinstance(servers, dict):
        raise McpConfigError(f"{origin}: expected {{\"mcpServers\": {{NAME: {{...}}}}}}")
    out = []
    for name, spec in servers.items():
        where = f"{origin}: server {name!r}"
        if not isinstance(spec, dict):
            raise McpConfigError(f"{where}: expected an object with \"command\" or \"url\"")
        if not re.fullmatch(r"[A-Za-z0-9_.-]{1,40}", name):
            raise McpConfigError(f"{where}: names use letters, digits, '.', '_' and '-' (at most 40)")
        if spec.get("disabled") is True:
            continue
        command, url = spec.get("command"), spec.get("url")
        if bool(command) == bool(url):
            raise McpConfigError(f"{where}: give exactly one of \"command\" (stdio) or \"url\" (streamable HTTP)")
        args, env, headers = spec.get("args", []), spec.get("env", {}), spec.get("headers", {})
        if not (isinstance(args, list) and all(isinstance(a, str) for a in args)):
            raise McpConfigError(f"{where}: \"args\" must be a list of strings")
        for label, mapping in (("env", env), ("headers", headers)):
            if not (isinstance(mapping, dict) and all(isinstance(v, str) for v in mapping.values())):
                raise McpConfigError(f"{where}: \"{label}\" must map names to strings")
        if spec.get("type") not in (None, "stdio", "http", "streamable-http", "streamable_http"):
            raise McpConfigError(f"{where}: type {spec.get('type')!r} is not supported (stdio or http)")
        confine = spec.get("confine", True)
        if not isinstance(confine, bool):
            raise McpConfigError(f"{where}: \"confine\" must be true or false")
        out.append(ServerSpec(name, source, command=command or None, args=tuple(args), env=dict(env),
                              cwd=spec.get("cwd"), url=url or None, headers=dict(headers),
                              confine=confine or source == "project"))
    return out


def configured_servers(workspace: Path, *, trusted: bool) -> tuple[list[ServerSpec], list[str]]:
    """User servers, then project servers (a project server never replaces a user's of the same name)."""
    servers: dict[str, ServerSpec] = {}
    warnings: list[str] = []
    for path, source in ((user_mcp_path(), "user"), (workspace / PROJECT_FILE, "project")):
        try:
            text = path.read_text(encoding="utf-8")
        except OSError:
            continue
        parsed = parse_servers(text, str(path), source)
        if source == "project" and not trusted:
            continue  # keel.ext.trust already warned, listing what would run
        for spec in parsed:
            if spec.name in servers:
                warnings.append(f"{path}: server {spec.name!r} is also in your user config; the user's is used")
            else:
                servers[spec.name] = spec
    return list(servers.values()), warnings


# -- the connection: one event loop thread, one task per server ---------------------------------

class _Server:
    def __init__(self, spec: ServerSpec, workspace: Path) -> None:
        self.spec, self.workspace = spec, workspace
        self.session: Any = None
        self.tools: list[Any] = []
        self.error: str | None = None      # why it is not (or no longer) usable
        self.ready = threading.Event()
        self.stop: asyncio.Event | None = None
        # the server's stderr: kept out of the user's terminal, quoted when the server fails
        self.errlog = tempfile.TemporaryFile(mode="w+", encoding="utf-8", errors="replace")  # noqa: SIM115

    def stderr_tail(self, limit: int = 600) -> str:
        try:
            self.errlog.seek(0)
            return self.errlog.read()[-limit:].strip()
        except (OSError, ValueError):
            return ""

    async def serve(self) -> None:
        from contextlib import AsyncExitStack

        from mcp import ClientSession

        self.stop = asyncio.Event()
        try:
            async with AsyncExitStack() as stack:
                read, write = await stack.enter_async_context(self._transport())
                self.session = await stack.enter_async_context(ClientSession(read, write))
                await self.session.initialize()
                self.tools = list((await self.session.list_tools()).tools)
                self.ready.set()
                await self.stop.wait()
        except BaseException as exc:  # noqa: BLE001 - a dead server is reported, never raised
            if not self.ready.is_set() or self.error is None:
                self.error = _describe(exc, self.stderr_tail())
        finally:
            self.session = None
            if self.error is None:
                self.error = "the server was shut down"
            self.ready.set()

    def _transport(self) -> Any:
        spec = self.spec
        if spec.url:
            from mcp.client.streamable_http import streamable_http_client

            if spec.headers:
                import httpx2  # the SDK's own HTTP client package (mcp 2.x)

                return streamable_http_client(spec.url, http_client=httpx2.AsyncClient(headers=spec.headers))
            return streamable_http_client(spec.url)
        from mcp import StdioServerParameters
        from mcp.client.stdio import stdio_client

        cwd = (self.workspace / spec.cwd) if spec.cwd else self.workspace
        argv, env = [spec.command or "", *spec.args], dict(spec.env) or None
        if spec.confine:
            # keel's runner: the scrubbed environment plus the server's own variables, the limits of
            # a command (CPU time excepted: a server lives the whole session), its network kept
            job = Job(self.workspace, argv=argv, cwd=cwd, sandbox=False, network=True, extra_env=spec.env,
                      policy=SandboxPolicy(cpu_seconds=SERVER_CPU_S), aftercare=False)
            prepared = prepare(job)
            argv, env = prepared.argv, prepared.env
        params = StdioServerParameters(command=argv[0], args=argv[1:], env=env, cwd=str(cwd))
        return stdio_client(params, errlog=self.errlog)


def _describe(exc: BaseException, stderr: str) -> str:
    while isinstance(exc, BaseExceptionGroup) and exc.exceptions:
        exc = exc.exceptions[0]
    text = f"{type(exc).__name__}: {exc}".strip()
    return text + (f"\nserver stderr:\n{stderr}" if stderr else "")


class McpManager:
    """Owns the event loop thread and the servers; ``close`` stops them all."""

    def __init__(self, workspace: Path) -> None:
        self.workspace = workspace
        self.loop = asyncio.new_event_loop()
        self.thread = threading.Thread(target=self.loop.run_forever, name="keel-mcp", daemon=True)
        self.thread.start()
        self.servers: dict[str, _Server] = {}
        self._tasks: list[Any] = []

    def start(self, specs: list[ServerSpec], timeout_s: float) -> list[str]:
        """Start every server at once; wait up to ``timeout_s`` for them. Returns warnings."""
        for spec in specs:
            server = _Server(spec, self.workspace)
            self.servers[spec.name] = server
            self._tasks.append(asyncio.run_coroutine_threadsafe(server.serve(), self.loop))
        warnings = []
        for name, server in self.servers.items():
            if not server.ready.wait(timeout_s):
                server.error = f"did not start within {timeout_s:g} s"
            if server.session is None or server.error:
                warnings.append(f"MCP server {name!r} is unavailable: {server.error}")
        return warnings

    def call(self, server_name: str, tool: str, arguments: dict[str, Any], timeout_s: float,
             may_show: Callable[[str], bool] | None = None) -> tuple[bool, str]:
        """The tool's result as text; ``may_show(uri)`` decides whether an embedded resource's text is shown."""
        server = self.servers[server_name]
        if server.session is None:
            return False, f"MCP server {server_name!r} is not running: {server.error or 'not started'}"
        future = self._submit(server.session.call_tool(tool, arguments))
        try:
            result = future.result(timeout_s)
        except TimeoutError:
            future.cancel()
            return False, (f"MCP server {server_name!r} did not answer {tool} within {timeout_s:g} s; the call "
                           "was abandoned (it may still be running on the server).")
        except Exception as exc:  # the server died or broke the protocol mid-call
            if server.session is not None and _is_closed(exc):  # dead: later calls say so at once
                server.error, server.session = _describe(exc, server.stderr_tail()), None
                if server.stop is not None:
                    self.loop.call_soon_threadsafe(server.stop.set)
            return False, f"MCP server {server_name!r} failed during {tool}: {_describe(exc, server.stderr_tail())}"
        return _render(result, may_show)

    def _submit(self, coro: Coroutine[Any, Any, Any]) -> Any:
        return asyncio.run_coroutine_threadsafe(coro, self.loop)

    def close(self) -> None:
        for server in self.servers.values():
            if server.stop is not None:
                self.loop.call_soon_threadsafe(server.stop.set)
        for task in self._tasks:
            with contextlib.suppress(Exception):  # shutting down: whatever a server did is over
                task.result(5)
        self.loop.call_soon_threadsafe(self.loop.stop)
        self.thread.join(5)


def _is_closed(exc: BaseException) -> bool:
    text = str(exc).lower()
    return "closed" in text or isinstance(exc, EOFError | BrokenPipeError | ConnectionError)


def _render(result: Any, may_show: Callable[[str], bool] | None = None) -> tuple[bool, str]:
    """A CallToolResult as text for the model (1.x camelCase and 2.x snake_case fields); a resource
    ``may_show`` refuses is named, its text left out."""
    parts = []
    for block in getattr(result, "content", []) or []:
        kind = getattr(block, "type", "")
        if kind == "text":
            parts.append(block.text)
        elif kind in ("image", "audio"):
            parts.append(f"[{kind}: {getattr(block, 'mime_type', None) or getattr(block, 'mimeType', '')}]")
        elif kind == "resource":
            res = block.resource
            uri = str(getattr(res, "uri", ""))
            if may_show is not None and not may_show(uri):
                parts.append(f"[resource {uri}: not shown, reading it needs approval (keel's read rules)]")
            else:
                parts.append(getattr(res, "text", None) or f"[resource {uri}]")
        else:
            parts.append(f"[{kind} content]")
    structured = getattr(result, "structured_content", None) or getattr(result, "structuredContent", None)
    if not parts and structured is not None:
        parts.append(json.dumps(structured, ensure_ascii=False, default=str))
    is_error = bool(getattr(result, "is_error", False) or getattr(result, "isError", False))
    return not is_error, "\n".join(parts) or "(no content)"


# -- tools -------------------------------------------------------------------------------------

def tool_name(server: str, tool: str) -> str:
    return f"mcp__{_SAFE.sub('_', server)}__{_SAFE.sub('_', tool)}"[:64]


def _args_model(name: str, schema: dict[str, Any]) -> type[BaseModel]:
    """A pydantic model that takes any object and shows the server's own JSON schema to the model."""
    shown = dict(schema) if isinstance(schema, dict) else {}
    shown.setdefault("type", "object")
    shown.setdefault("properties", {})

    class McpArgs(BaseModel):
        model_config = ConfigDict(extra="allow")
        input_schema: ClassVar[dict[str, Any]] = shown

        @classmethod
        def model_json_schema(cls, *_args: Any, **_kwargs: Any) -> dict[str, Any]:
            return json.loads(json.dumps(cls.input_schema))  # a copy: the registry edits it

    McpArgs.__name__ = f"{name}_args"
    return McpArgs


def rule_decision(name: str, server: str, rules: dict[str, list[str]]) -> str | None:
    """"deny", "ask" or "allow" from rules naming this tool or its server; deny, then ask, then allow."""
    forms = {name, f"mcp__{_SAFE.sub('_', server)}", f"mcp__{_SAFE.sub('_', server)}__*"}
    for kind in ("deny", "ask", "allow"):
        if any(r.strip() in forms for r in rules.get(kind, [])):
            return kind
    return None


def make_tool(manager: McpManager, server: str, remote: Any, call_timeout_s: float,
              rules: dict[str, list[str]], emit: Callable[..., Any] | None = None) -> Tool:
    name = tool_name(server, remote.name)
    schema = getattr(remote, "input_schema", None) or getattr(remote, "inputSchema", None) or {}
    hints = getattr(remote, "annotations", None)
    read_only = bool(getattr(hints, "read_only_hint", None) or getattr(hints, "readOnlyHint", None))
    description = (getattr(remote, "description", None) or f"{remote.name} from MCP server {server}").strip()
    required = [r for r in schema.get("required", []) if isinstance(r, str)] if isinstance(schema, dict) else []

    def run(args: BaseModel, ctx: ToolContext) -> ToolResult:
        arguments = args.model_dump()
        missing = [r for r in required if r not in arguments]
        if missing:
            return ToolResult.error(f"Invalid arguments for {name}: required but missing: {', '.join(missing)}",
                                    invalid=True)
        refusal, how = _authorize(name, server, arguments, ctx, rules)
        if emit is not None and how != "allowed by rule":  # like keel.trace.approvals: all but plain allows
            emit("approval", action="mcp", target=name, decision=rule_decision(name, server, rules) or "ask",
                 allowed=refusal is None, how=(refusal or how)[:500])
        if refusal is not None:
            return ToolResult.error(refusal)
        ok, text = manager.call(server, remote.name, arguments, call_timeout_s,
                                lambda uri: resource_shows(uri, ctx))
        return ToolResult(ok=ok, output=text, meta={"mcp_server": server})

    spec = ToolSpec(name, f"[MCP {server}] {description}"[:1024], _args_model(name, schema),
                    ToolAnnotations(read_only=read_only, needs_network=bool(manager.servers[server].spec.url)))
    return Tool(spec, run)


def resource_shows(uri: str, ctx: ToolContext) -> bool:
    """The one read decision (keel.policy.reads) for a resource an MCP server embeds in its result: a
    file in the workspace as the file tools decide; outside it, never a secret-looking file or one in
    a credential folder; any other URI by the name it ends in."""
    parsed = urlparse(uri)
    if parsed.scheme != "file":
        return not is_secret_name(unquote(parsed.path).rstrip("/"))
    real = Path(os.path.realpath(unquote(parsed.path)))
    root = workspace_root(ctx.workspace)
    if real == root or root in real.parents:
        return shows(ctx.approval)(real)
    return not is_secret_path(real) and credential_problem(real) is None


def _authorize(name: str, server: str, arguments: dict[str, Any], ctx: ToolContext,
               rules: dict[str, list[str]]) -> tuple[str | None, str]:
    """(the refusal for the model, or None to go ahead; how it was settled, for the log)."""
    decision = rule_decision(name, server, rules)
    if decision == "deny":
        return f"Refused: {name} is denied by a rule in [permissions] deny.", "denied by rule"
    if decision == "allow":
        return None, "allowed by rule"
    approver = ctx.approval
    mode = getattr(approver, "mode", "unattended")
    remembered: set[str] = ctx.extra.setdefault("mcp_always", set())
    if name in remembered:
        return None, "approved for this session by the user"
    if mode == "full-auto" and decision is None:
        return None, "auto-approved (full-auto)"
    prompt = getattr(approver, "prompt", None)
    if mode == "unattended" or prompt is None:
        return (f"Refused: MCP tool {name} needs approval and no one is present. It runs unattended only when "
                f"allowed by a rule (\"{name}\" or \"mcp__{server}\" in [permissions] allow)."), "no one to ask"
    shown = json.dumps(arguments, ensure_ascii=False)[:400]
    try:
        answer = str(prompt(f"keel wants to call MCP tool {name} with {shown}\n"
                            f"  [y] yes, once   [a] always allow {name} this session   [n] no")).strip().lower()
    except EOFError:   # an interrupt stops the run, as at any approval (keel.policy.approval)
        answer = "n"
    if answer in ("a", "always"):
        remembered.add(name)
        return None, "approved for this session by the user"
    if answer in ("y", "yes"):
        return None, "approved once by the user"
    return f"Refused by the user: do not call {name} again unless asked.", "refused by the user"


def start_servers(workspace: Path, *, trusted: bool, call_timeout_s: float, startup_timeout_s: float,
                  rules: dict[str, list[str]] | None = None,
                  emit: Callable[..., Any] | None = None) -> tuple[McpManager | None, list[Tool], list[str]]:
    """Start the configured servers and return (manager or None, their tools, warnings).
    Raises McpConfigError for a file that is not in the .mcp.json shape."""
    specs, warnings = configured_servers(workspace, trusted=trusted)
    if not specs:
        return None, [], warnings
    try:
        import mcp  # noqa: F401
    except ImportError:
        names = ", ".join(s.name for s in specs)
        return None, [], warnings + [f"MCP servers configured ({names}) but the mcp package is not installed: "
                                     "pip install 'keel[mcp]'"]
    manager = McpManager(workspace)
    warnings += manager.start(specs, startup_timeout_s)
    tools: list[Tool] = []
    seen: set[str] = set()
    for server_name, server in manager.servers.items():
        for remote in server.tools:
            tool = make_tool(manager, server_name, remote, call_timeout_s, rules or {}, emit)
            if tool.spec.name in seen:
                warnings.append(f"MCP server {server_name!r}: tool {remote.name!r} clashes with another after "
                                "renaming; skipped")
                continue
            seen.add(tool.spec.name)
            tools.append(tool)
    return manager, tools, warnings
