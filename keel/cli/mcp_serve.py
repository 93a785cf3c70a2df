"""`keel mcp-serve`: keel as an MCP server over stdio, for other agents to delegate work to (docs/mcp-server.md).

Tools: ``run_task`` (one unattended run, the same policy, sandbox, limits and gate as `keel run`;
returns its result object), ``session_status`` and ``list_sessions``. Each run goes on in its own
thread so the server keeps answering (status calls, refusals) while it works; keel.cli.mcp_runs
holds the logic, this module the protocol.
"""

# No `from __future__ import annotations`: the SDK reads the tools' annotations, which name
# types local to build_server, so they must be objects, not strings.
import argparse
import signal
import sys
import threading
from typing import Annotated, Any

from keel.cli.guard import UsageParser
from keel.cli.mcp_runs import (
    Job,
    Refused,
    Runs,
    ServerOptions,
    execute,
    list_sessions,
    progress_line,
    session_status,
)
from keel.cli.usage import add_engine_flags

POLL_S = 0.1   # how often a waiting call checks its run and sends progress


def _parser() -> argparse.ArgumentParser:
    p = UsageParser(prog="keel mcp-serve", description="Serve keel over MCP (stdio): tools run_task, "
                    "session_status, list_sessions. Runs are unattended: no person is asked anything.",
                    epilog="exit codes: 0 the client closed the connection, 2 usage error")
    add_engine_flags(p)
    p.add_argument("--approval", choices=["unattended", "auto-edit", "full-auto"],
                   help="unattended (default): edits proceed, ask-class commands are refused; auto-edit: the "
                        "same here, as no one is present to ask; full-auto: ask-class commands run, only under "
                        "a confining OS sandbox. Callers cannot change it")
    p.add_argument("--allow-any-cwd", action="store_true",
                   help="accept a system directory, $HOME or one of its ancestors as a workspace")
    return p


def build_server(runs: Runs) -> Any:
    from importlib.metadata import PackageNotFoundError, version

    from mcp.server.mcpserver import Context
    from mcp.server.mcpserver.exceptions import ToolError
    from pydantic import Field

    try:
        ours = version("keel")
    except PackageNotFoundError:
        ours = "unknown"

    app = _server_class()("keel", version=ours, log_level="WARNING",
                          instructions="keel carries a coding task to a verified stop in one workspace. run_task "
                                       "blocks until the run stops and returns its result; one run per workspace.")
    positive_int = Annotated[int | None, Field(ge=1)]
    positive_float = Annotated[float | None, Field(gt=0)]

    @app.tool()
    async def run_task(task: str, workspace: str, ctx: Context, max_steps: positive_int = None,
                       max_seconds: positive_float = None, max_tokens: positive_int = None,
                       budget_usd: positive_float = None, accept: list[str] | None = None) -> dict[str, Any]:
        """Carry a coding task to a stop in `workspace` (an absolute path), unattended, under keel's policy,
        OS sandbox and verification gate, and return the result: status (complete / incomplete / error),
        stop_reason, summary, verification, changes (diffstat), cost_usd, session_id, log. `accept`:
        commands that must pass before the run may complete. A workspace already running a task is refused."""
        if accept is not None and not all(a.strip() for a in accept):
            raise ToolError("accept needs commands; one was empty")
        try:
            job = runs.claim(task, workspace)
        except Refused as e:
            raise ToolError(str(e)) from None
        limits = {"max_steps": max_steps, "max_seconds": max_seconds, "max_tokens": max_tokens,
                  "budget_usd": budget_usd}
        try:
            return await _wait_for(job, runs, limits, accept or [], ctx)
        except Refused as e:
            raise ToolError(str(e)) from None

    @app.tool()
    def session_status(session_id: str) -> dict[str, Any]:
        """A session's status (running / complete / incomplete / interrupted / error / crashed), steps so
        far and its last events; works while run_task is still running it."""
        try:
            return _session_status(runs, session_id)
        except Refused as e:
            raise ToolError(str(e)) from None

    @app.tool()
    def list_sessions(workspace: str, limit: Annotated[int, Field(ge=1, le=200)] = 20) -> dict[str, Any]:
        """The sessions keel ran in `workspace`, newest first: id, status, task, start time."""
        try:
            return {"sessions": _list_sessions(runs, workspace, limit)}
        except Refused as e:
            raise ToolError(str(e)) from None

    return app


_session_status, _list_sessions = session_status, list_sessions   # the tools above shadow these names


async def _wait_for(job: Job, runs: Runs, limits: dict[str, Any], accept: list[str], ctx: Any) -> dict[str, Any]:
    """Run ``job`` on its own thread and wait, sending progress; a cancelled call (the client's
    notifications/cancelled, or the connection gone) stops the run now — a running command is
    killed, no further call starts — saved as interrupted, and releases the workspace only once the
    run has stopped."""
    import anyio

    box: dict[str, Any] = {}

    def work() -> None:
        try:
            box["result"] = execute(runs, job, limits, accept)
        except Refused as e:
            box["refused"] = e
        except Exception as e:   # a fault in keel: the client gets its one line, stderr the traceback
            import traceback
            traceback.print_exc(file=sys.stderr)
            box["refused"] = Refused(f"keel failed: {type(e).__name__}: {e}")

    thread = threading.Thread(target=work, name=f"keel-run {job.workspace}", daemon=False)
    thread.start()
    try:
        while thread.is_alive():
            await _send_progress(job, ctx)
            await anyio.sleep(POLL_S)
    except anyio.get_cancelled_exc_class():   # the caller cancelled or went away: nobody waits for more
        job.request_stop(now=True)
        with anyio.CancelScope(shield=True):
            await anyio.to_thread.run_sync(thread.join)
        raise
    await _send_progress(job, ctx)
    if "refused" in box:
        raise box["refused"]
    return dict(box["result"])


async def _send_progress(job: Job, ctx: Any) -> None:
    while job.pending:
        line = progress_line(job.pending.popleft())
        if line is None:
            continue
        job.notified += 1   # the protocol wants progress to grow with every notification
        try:
            await ctx.report_progress(job.notified, None, line)
        except Exception:   # progress is a courtesy: a client that stopped listening does not stop the run
            job.pending.clear()
            return


def _server_class() -> Any:
    """The SDK's MCPServer, with keel's wording of what it shows."""
    from mcp.server.mcpserver import MCPServer
    from mcp.server.mcpserver.exceptions import ToolError, UnexpectedToolError
    from pydantic import ValidationError

    class Server(MCPServer):
        """Tool descriptions as one paragraph each (not the docstrings' indentation), and arguments that
        fail validation said in one line per field, as keel's config errors are (not pydantic's text
        with its documentation URL)."""

        def tool(self, **kwargs: Any) -> Any:   # type: ignore[override]
            def described(fn: Any) -> Any:
                if fn.__doc__:
                    kwargs.setdefault("description", " ".join(fn.__doc__.split()))
                return MCPServer.tool(self, **kwargs)(fn)
            return described

        async def call_tool(self, name: str, arguments: dict[str, Any], *rest: Any, **kw: Any) -> Any:
            try:
                return await super().call_tool(name, arguments, *rest, **kw)
            except UnexpectedToolError:
                raise
            except ToolError as exc:
                if isinstance(exc.__cause__, ValidationError):
                    raise ToolError(f"{name}: {argument_problems(exc.__cause__)}") from None
                raise ToolError(f"{name}: {str(exc).removeprefix(f'Error executing tool {name}: ')}") from None

    return Server


def argument_problems(error: Any) -> str:
    """A pydantic ValidationError as `max_steps: must be at least 1 (got 0); …`: the field, the rule,
    the value, one clause each."""
    said = []
    for err in error.errors():
        where = ".".join(str(p) for p in err.get("loc", ()) if p != "run_taskArguments") or "arguments"
        what = _RULES.get(err.get("type", ""), "").format(**(err.get("ctx") or {})) or \
            str(err.get("msg", "invalid")).split("[", 1)[0].strip().rstrip(",")
        got = f" (got {err['input']!r})" if "input" in err and err.get("type") != "missing" else ""
        said.append(f"{where}: {what}{got}")
    return "; ".join(said)


_RULES = {"greater_than_equal": "must be at least {ge}", "greater_than": "must be more than {gt}",
          "less_than_equal": "must be at most {le}", "int_parsing": "must be a whole number",
          "int_from_float": "must be a whole number", "float_parsing": "must be a number",
          "string_type": "must be a string", "list_type": "must be a list", "missing": "is required"}


def _on_stop_signal(runs: Runs) -> Any:
    """SIGTERM / SIGHUP (a client shutting the server down): runs stop now, each saved with its
    `stop` event, then the process exits; without runs it exits at once."""
    def handle(signum: int, _frame: Any) -> None:
        jobs = runs.stop_all(now=True)
        signal.signal(signum, signal.SIG_DFL)

        def exit_after() -> None:
            for job in jobs:
                while job.workspace and str(job.workspace) in runs.jobs:
                    threading.Event().wait(POLL_S)
            import os
            os.kill(os.getpid(), signum)
        threading.Thread(target=exit_after, name="keel-mcp-exit", daemon=True).start()
    return handle


def mcp_serve_main(argv: list[str]) -> int:
    args = _parser().parse_args(argv)   # a usage error exits 2 with the message, as every subcommand does
    try:
        import mcp  # noqa: F401
    except ImportError:
        print("keel: keel mcp-serve needs the MCP SDK: pip install 'keel[mcp]'", file=sys.stderr)
        return 2
    from keel.cli.run import local_flag

    runs = Runs(ServerOptions(args.base_url, args.model, args.api_key_env, args.approval, args.allow_any_cwd,
                              local_flag(args.local)))
    for sig in (signal.SIGTERM, signal.SIGHUP):
        if signal.getsignal(sig) is not signal.SIG_IGN:
            signal.signal(sig, _on_stop_signal(runs))
    app = build_server(runs)
    try:
        app.run()   # stdio; returns when the client closes stdin
    except KeyboardInterrupt:
        runs.stop_all(now=True)
    return 0


if __name__ == "__main__":
    sys.exit(mcp_serve_main(sys.argv[1:]))
