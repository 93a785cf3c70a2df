"""Wiring a session's checkpoints into the tools, and giving a resumed run's gate its true start.

A resumed run must judge the work against the workspace as it was before the *session* began, not
as the crash left it: otherwise a test the agent broke before the crash would pass for a failure
that was already there (a false done). The gate's baseline is saved with the state; its start
snapshot is rebuilt from the checkpoints (each file's bytes before the session first changed it).
"""

from __future__ import annotations

import contextlib
from collections.abc import Callable
from typing import Any

from keel.tools.base import Tool, ToolContext, ToolResult
from keel.tools.registry import ToolRegistry
from keel.trace.checkpoints import UNKNOWN, CheckpointStore, read_manifest
from keel.trace.shellwatch import ShellWatch
from keel.trace.snapshot import Caps

SHELL_TOOLS = ("run_shell",)


def watch_tools(registry: ToolRegistry, store: CheckpointStore, emit: Callable[..., Any],
                caps: Caps | None = None) -> None:
    """Tools that may change files tell the store their name (the manifest's "by"); run_shell is
    also watched for the files it changes, with a snapshot before it runs (``caps``: its limits)."""
    watch = ShellWatch(store, emit, caps)
    for tool in registry.tools():
        if tool.spec.annotations.read_only:
            continue
        name, named = tool.spec.name, _named(tool, store)
        registry.replace(name, watch.wrap(named) if name in SHELL_TOOLS else named)


def _named(tool: Tool, store: CheckpointStore) -> Tool:
    def execute(args: Any, ctx: ToolContext) -> ToolResult:
        store.tool = tool.spec.name
        return tool.execute(args, ctx)
    return Tool(tool.spec, execute)


def baseline_to_json(baseline: Any) -> dict[str, Any] | None:
    if baseline is None:
        return None
    return {"digest": baseline.digest, "failed": {k: list(v) for k, v in baseline.failed.items()},
            "passed": sorted(baseline.passed)}


def baseline_from_json(data: dict[str, Any] | None) -> Any:
    if data is None:
        return None
    from keel.verify.gate import Baseline

    return Baseline(data["digest"], {k: tuple(v) for k, v in data["failed"].items()}, frozenset(data["passed"]))


def restore_verifier(verifier: Any, baseline: dict[str, Any] | None, store: CheckpointStore) -> None:
    from keel.verify.snapshot import TEXT_FILE_LIMIT, Snapshot, _digest

    if baseline is not None:
        verifier.baseline = baseline_from_json(baseline)
    now: Snapshot = verifier.start
    files, texts = dict(now.files), dict(now.texts)
    firsts: dict[str, str | None] = {}
    for change in read_manifest(store.dir):
        if change.kind in ("before", "change") and change.path not in firsts:
            firsts[change.path] = change.before
    for path, before in firsts.items():
        if before == UNKNOWN:
            continue  # a shell command changed it first; keel never had the old bytes
        texts.pop(path, None)
        if before is None:
            files.pop(path, None)
            continue
        files[path] = before
        data = store.blob(before)
        if data is not None and len(data) < TEXT_FILE_LIMIT and b"\0" not in data:
            with contextlib.suppress(UnicodeDecodeError):
                texts[path] = data.decode("utf-8")
    verifier.start = Snapshot(root=now.root, files=files, texts=texts, digest=_digest(files))
