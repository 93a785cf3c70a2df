"""The tool registry: schemas for the model, validation, execution, result caps.

Errors never escape as exceptions: unknown tools, malformed JSON, invalid fields and executor
crashes all become a tool result whose text names the exact problem, so the model can correct
itself on the next turn.
"""

from __future__ import annotations

import json
import time
from collections.abc import Iterable, Iterator
from concurrent.futures import ThreadPoolExecutor
from typing import Any

from pydantic import BaseModel, ValidationError

from keel.engine.types import ToolCall
from keel.tools.base import Tool, ToolContext, ToolResult

RESULT_CAP_CHARS = 40_000
# One call's arguments. Far above any sensible edit; a 5 MB write_file is a model gone wrong, and
# parsing, logging and replaying it on every later turn would cost the whole run.
ARGUMENTS_CAP_CHARS = 1_000_000


def _clean_schema(schema: dict[str, Any]) -> dict[str, Any]:
    """Pydantic's JSON schema minus noise the model does not need (titles), with defs inlined."""
    defs = schema.pop("$defs", {})

    def walk(node: Any) -> Any:
        if isinstance(node, dict):
            if "$ref" in node:
                return walk(dict(defs[node["$ref"].split("/")[-1]]))
            return {k: walk(v) for k, v in node.items() if k != "title"}
        if isinstance(node, list):
            return [walk(v) for v in node]
        return node

    cleaned = walk(schema)
    cleaned.pop("additionalProperties", None)
    return cleaned


def format_validation_error(tool: str, err: ValidationError) -> str:
    lines = []
    for e in err.errors():
        field = ".".join(str(p) for p in e["loc"]) or "(arguments)"
        if e["type"] == "extra_forbidden":
            lines.append(f"- field '{field}': not an argument of {tool}")
        elif e["type"] == "missing":
            lines.append(f"- field '{field}': required but missing")
        else:
            lines.append(f"- field '{field}': {e['msg']} (got {json.dumps(e.get('input'), default=str)[:80]})")
    return f"Invalid arguments for {tool}:\n" + "\n".join(lines)


def cap_result(text: str, cap: int = RESULT_CAP_CHARS) -> str:
    if len(text) <= cap:
        return text
    head, tail = text[: cap * 2 // 3], text[-(cap // 3):]
    cut = len(text) - len(head) - len(tail)
    return (f"{head}\n... [{cut} characters cut from the middle of this result; narrow the request "
            f"(offset/limit, a tighter pattern, or filter the command's output) to see them] ...\n{tail}")


class ToolRegistry:
    """The one set of tools a run offers: the built-ins, plugins and MCP servers' tools all come in
    through ``register``; wrappers (the checkpoint store's, the shell watch) go through ``replace``."""

    def __init__(self, tools: Iterable[Tool] = ()) -> None:
        self._tools: dict[str, Tool] = {}
        for tool in tools:
            self.register(tool)

    def register(self, tool: Tool) -> None:
        """Add ``tool`` after the others (the order the model sees); a second tool of a name is an error."""
        if tool.spec.name in self._tools:
            raise ValueError(f"tool {tool.spec.name!r} registered twice")
        self._tools[tool.spec.name] = tool

    def replace(self, name: str, tool: Tool) -> Tool:
        """Put ``tool`` in the place of the registered tool ``name`` (same position, so the schemas the
        model sees keep their order); returns the tool it replaced. KeyError for an unknown name."""
        old = self._tools[name]
        if tool.spec.name != name:
            raise ValueError(f"tool {tool.spec.name!r} cannot replace {name!r}")
        self._tools[name] = tool
        return old

    def tools(self) -> list[Tool]:
        """The registered tools in order."""
        return list(self._tools.values())

    @property
    def names(self) -> list[str]:
        return list(self._tools)

    def get(self, name: str) -> Tool | None:
        return self._tools.get(name)

    def schemas(self) -> list[dict[str, Any]]:
        """OpenAI tool definitions, in registration order, byte-stable across calls."""
        return [
            {"type": "function", "function": {
                "name": t.spec.name, "description": t.spec.description,
                "parameters": _clean_schema(t.spec.args.model_json_schema()),
            }}
            for t in self._tools.values()
        ]

    def parse(self, call: ToolCall) -> tuple[Tool, BaseModel] | str:
        """The tool and validated arguments, or an error message for the model."""
        tool = self._tools.get(call.name)
        if tool is None:
            return f"Unknown tool '{call.name}'. Available tools: {', '.join(self._tools)}."
        if len(call.arguments) > ARGUMENTS_CAP_CHARS:
            return (f"The arguments for {call.name} are {len(call.arguments):,} characters, over the "
                    f"{ARGUMENTS_CAP_CHARS:,}-character limit for one call; nothing was run. Send less per call: "
                    "write a large file in parts (write_file with the first part, then edit_file to append "
                    "the rest), or generate it with a script run by run_shell.")
        raw = call.arguments.strip() or "{}"
        try:
            data = json.loads(raw)
        except json.JSONDecodeError as e:
            return (f"The arguments for {call.name} are not valid JSON ({e.msg} at line {e.lineno} column "
                    f"{e.colno}). Send one JSON object, e.g. {self._example(tool)}.")
        if not isinstance(data, dict):
            return f"The arguments for {call.name} must be a JSON object, e.g. {self._example(tool)}."
        try:
            return tool, tool.spec.args.model_validate(data)
        except ValidationError as e:
            return format_validation_error(call.name, e)

    def _example(self, tool: Tool) -> str:
        required = tool.spec.args.model_json_schema().get("required", [])
        return json.dumps({name: "..." for name in required})

    def execute(self, call: ToolCall, ctx: ToolContext) -> ToolResult:
        parsed = self.parse(call)
        if isinstance(parsed, str):
            return ToolResult(ok=False, output=parsed, meta={"invalid": True})
        tool, args = parsed
        if ctx.cancel is not None and ctx.cancel.is_set():   # the run is being stopped: nothing new starts
            raise KeyboardInterrupt
        started, waited = time.perf_counter(), ctx.waited_s
        try:
            result = tool.execute(args, ctx)
        except Exception as e:  # an executor bug must not end the run; the model sees what broke
            result = ToolResult.error(f"{call.name} failed: {type(e).__name__}: {e}")
        except KeyboardInterrupt as stop:   # how long it ran before the interrupt, for its event
            stop.elapsed_ms = _own_ms(started, waited, ctx)  # type: ignore[attr-defined]
            raise
        result.meta.setdefault("elapsed_ms", _own_ms(started, waited, ctx))
        if ctx.redact is not None:   # a key a command printed never reaches the engine or the log
            result.output = ctx.redact(result.output)
            if isinstance(result.meta.get("diff"), str):
                result.meta["diff"] = ctx.redact(result.meta["diff"])
        result.output = cap_result(result.output)
        return result

    def is_read_only(self, call: ToolCall) -> bool:
        tool = self._tools.get(call.name)
        return bool(tool and tool.spec.annotations.read_only)

    def run_calls(self, calls: list[ToolCall], ctx: ToolContext) -> Iterator[ToolResult]:
        """Yield one result per call, in call order. Each run of consecutive read-only calls
        executes in parallel; anything that writes runs alone, in order."""
        i = 0
        while i < len(calls):
            j = i
            while j < len(calls) and self.is_read_only(calls[j]):
                j += 1
            if j - i > 1:
                with ThreadPoolExecutor(max_workers=min(4, j - i)) as pool:
                    yield from pool.map(lambda c: self.execute(c, ctx), calls[i:j])
                i = j
            else:
                yield self.execute(calls[i], ctx)
                i += 1


def _own_ms(started: float, waited: float, ctx: ToolContext) -> float:
    """A call's own time in ms: its wall time less what it waited on a person or the gate's baseline."""
    return max((time.perf_counter() - started - (ctx.waited_s - waited)) * 1000, 0.0)
