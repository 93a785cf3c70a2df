"""Prefix stability: one scripted 200-step session through keel and through mini-swe-agent, same window.

Each step the model asks for one observation (~1.6 KB of test-run-like text, different every step)
and the harness appends the result; the last step submits. Both harnesses start from the same fixed
prefix: keel's system prompt and tool schemas (mini gets the same text in its system message, since
it sends no tool list). Requests are counted as the scripted engine counts them (compact JSON, four
characters a token) against one window; a request that would not fit with the reply cap is what a
server answers with a context-length error, so a harness that sends one has overflowed.

Measured per harness, on the requests it sent:
  reuse overall     characters each request repeats from the start of the previous one / the previous
                    requests' characters (what an engine's prefix cache can serve)
  reuse off-compaction   the same over the steps that are not the first request after a compaction
  peak prompt tokens, whether it finished, compactions (keel)

keel runs its real loop (keel.loop.runner.Runner) with its context manager, the scripted model in
process, and a scripted summariser for the one small summarising call per compaction. mini runs its
DefaultAgent with its DeterministicModel.

Target: keel ≥ 95% overall, ≥ 99% off-compaction, and keel finishes where mini overflows.

Run: python bench/prefix_stability.py [--steps 200] [--window 24576]
"""

from __future__ import annotations

import argparse
import json
import os
import sys
import tempfile
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

sys.path.insert(0, str(Path(__file__).resolve().parent))
sys.path.insert(0, str(Path(__file__).resolve().parent.parent))
from _peers import pip_target  # noqa: E402

REPLY_CAP = 4096
CHARS_PER_TOKEN = 4


def observation(i: int) -> str:
    lines = [f"tests/test_module_{i % 17}.py::test_case_{i}_{j} PASSED [{(j * 7) % 100:3d}%]" for j in range(20)]
    return f"step {i}: collected 20 items\n" + "\n".join(lines) + f"\n===== 20 passed in 0.{i % 10}s ====="


def compact(value: Any) -> str:
    return json.dumps(value, ensure_ascii=False, separators=(",", ":"))


def request_text(tools: list[dict[str, Any]], messages: list[dict[str, Any]]) -> str:
    return compact(tools) + "".join(compact(m) for m in messages)


def tokens(text: str) -> int:
    return -(-len(text) // CHARS_PER_TOKEN)


@dataclass
class Outcome:
    name: str
    texts: list[str] = field(default_factory=list)   # every request sent, as the engine's cache sees it
    after_compaction: set[int] = field(default_factory=set)  # request indexes right after a compaction
    finished: bool = False
    note: str = ""

    def reuse(self, skip_compactions: bool) -> float:
        shared = base = 0
        for i in range(1, len(self.texts)):
            if skip_compactions and i in self.after_compaction:
                continue
            prev, cur = self.texts[i - 1], self.texts[i]
            n = min(len(prev), len(cur))
            k = 0
            while k < n and prev[k] == cur[k]:
                k += 1
            shared, base = shared + k, base + len(prev)
        return shared / base if base else 0.0

    @property
    def peak(self) -> int:
        return max(map(tokens, self.texts), default=0)


def run_keel(steps: int, window: int, workdir: Path) -> Outcome:
    from keel.config import ContextSettings
    from keel.context.manager import ContextManager
    from keel.context.window import Window
    from keel.core.events import EventBus
    from keel.engine.prompts import system_prompt
    from keel.loop.limits import Limits
    from keel.loop.runner import Runner
    from keel.testing.inprocess import ScriptedModel
    from keel.tools.base import Tool, ToolAnnotations, ToolArgs, ToolContext, ToolResult, ToolSpec
    from keel.tools.catalog import default_tools
    from keel.tools.registry import ToolRegistry

    class ObserveArgs(ToolArgs):
        n: int

    def observe(args: ObserveArgs, _ctx: ToolContext) -> ToolResult:
        return ToolResult(ok=True, output=observation(args.n))

    tool = Tool(ToolSpec("observe", "Return the next observation.", ObserveArgs, ToolAnnotations(read_only=True)),
                observe)
    script: list[dict[str, Any]] = [
        {"content": f"Looking at part {i}.", "tool_calls": [{"name": "observe", "arguments": {"n": i}}]}
        for i in range(steps - 1)]
    script.append({"tool_calls": [{"name": "finish", "arguments": {"summary": "observed every part"}}]})
    model = ScriptedModel(script, record=True)
    summary = {"content": "## Approaches ruled out\n- none\n## Decisions and findings\n- every part passed so far\n"
                          "## Unresolved problems\n- none\n## Next step\n- observe the next part"}
    summarizer = ScriptedModel([summary] * steps)
    events: list[dict[str, Any]] = []
    bus = EventBus("bench", [events.append])
    manager = ContextManager(bus, Window(window, "bench"), reply_cap=REPLY_CAP, settings=ContextSettings(),
                             summarizer=summarizer, workspace=workdir)
    registry = ToolRegistry([*default_tools(), tool])
    runner = Runner(model, registry, ToolContext(workspace=workdir), bus, limits=Limits(max_steps=steps + 5),
                    context=manager)
    result = runner.run([{"role": "system", "content": system_prompt()},
                         {"role": "user", "content": "Observe every part, then finish."}])
    out = Outcome("keel", finished=result.stop_reason == "complete")
    out.texts = [request_text(r["tools"], r["messages"]) for r in model.requests]
    # request index of the first request after each compaction (a model_call's step counts from 1)
    out.after_compaction = {e["step"] - 1 for e in events if e["type"] == "cache_break" and e["cause"] == "compaction"}
    compactions = [e for e in events if e["type"] == "compaction"]
    out.note = (f"{len(compactions)} compactions ({sum(e['summarizer'] == 'model' for e in compactions)} summarised "
                f"by the model), stop: {result.stop_reason}")
    over = [tokens(t) for t in out.texts if tokens(t) + REPLY_CAP > window]
    if over:
        out.finished, out.note = False, out.note + f"; {len(over)} requests over the window"
    return out


class ContextWindowExceeded(Exception):
    """What a server answers (HTTP 400) to a prompt that does not fit with its reply cap."""


def run_mini(steps: int, window: int, workdir: Path) -> Outcome:
    target = pip_target("mini", "mini-swe-agent==2.4.6", "platformdirs")
    sys.path.append(str(target))  # after the interpreter's own packages: keel keeps its versions
    os.environ.setdefault("MSWEA_SILENT_STARTUP", "1")
    os.environ["MSWEA_GLOBAL_CONFIG_DIR"] = str(workdir / "mini-config")
    from minisweagent.agents.default import DefaultAgent
    from minisweagent.exceptions import Submitted
    from minisweagent.models.test_models import DeterministicModel, make_output

    from keel.engine.prompts import system_prompt
    from keel.tools.catalog import default_tools
    from keel.tools.registry import ToolRegistry

    class Environment:
        def execute(self, action: dict, cwd: str = "") -> dict[str, Any]:
            if action["command"] == "submit":
                raise Submitted({"role": "exit", "content": "done", "extra": {"exit_status": "Submitted",
                                                                             "submission": ""}})
            return {"output": observation(int(action["command"].split()[-1])), "returncode": 0,
                    "exception_info": ""}

        def get_template_vars(self, **kwargs: Any) -> dict[str, Any]:
            return {}

        def serialize(self) -> dict[str, Any]:
            return {}

    fence = "```"
    outputs = [make_output(f"Looking at part {i}.\n\n{fence}mswea_bash_command\nobserve {i}\n{fence}",
                           [{"command": f"observe {i}"}], cost=0.0) for i in range(steps - 1)]
    outputs.append(make_output(f"{fence}mswea_bash_command\nsubmit\n{fence}", [{"command": "submit"}], cost=0.0))
    model = DeterministicModel(outputs=outputs, cost_per_call=0.0)
    out = Outcome("mini")
    inner = model.query

    def query(messages: list[dict[str, Any]], **kwargs: Any) -> Any:
        wire = [{"role": m["role"], "content": m["content"]} for m in messages]  # "extra" never leaves mini
        text = request_text([], wire)
        out.texts.append(text)
        if tokens(text) + REPLY_CAP > window:
            raise ContextWindowExceeded(f"request {len(out.texts)}: {tokens(text)} prompt tokens + {REPLY_CAP} "
                                        f"reply > {window}")
        return inner(messages, **kwargs)

    model.query = query  # type: ignore[method-assign]
    tools_text = json.dumps(ToolRegistry(default_tools()).schemas(), ensure_ascii=False)
    system = "{% raw %}" + system_prompt() + "\n\nTools:\n" + tools_text + "{% endraw %}"
    agent = DefaultAgent(model, Environment(), system_template=system,
                         instance_template="Observe every part, then finish.", step_limit=steps + 5, cost_limit=0,
                         output_path=None)
    try:
        info = agent.run("go")
        out.finished = info.get("exit_status") == "Submitted"
        out.note = f"exit: {info.get('exit_status')}"
    except ContextWindowExceeded as exc:
        out.note = f"overflowed: {exc}"
    return out


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--steps", type=int, default=200)
    parser.add_argument("--window", type=int, default=24576, help="context window in tokens (default 24576)")
    args = parser.parse_args()
    with tempfile.TemporaryDirectory() as tmp:
        keel = run_keel(args.steps, args.window, Path(tmp))
        mini = run_mini(args.steps, args.window, Path(tmp))
    print(f"{args.steps}-step session, window {args.window} tokens, reply cap {REPLY_CAP}, "
          f"~{tokens(observation(1))} tokens per observation")
    print(f"{'':6} {'requests':>8} {'reuse overall':>14} {'off-compaction':>15} {'peak tokens':>12} {'finished':>9}")
    for o in (keel, mini):
        print(f"{o.name:6} {len(o.texts):8d} {o.reuse(False):14.2%} {o.reuse(True):15.2%} {o.peak:12d} "
              f"{'yes' if o.finished else 'no':>9}  {o.note}")
    ok = keel.reuse(False) >= 0.95 and keel.reuse(True) >= 0.99 and keel.finished and not mini.finished
    print(f"target keel ≥ 95% overall, ≥ 99% off-compaction, finishes where mini overflows: "
          f"{'met' if ok else 'NOT met'}")
    return 0 if ok else 1


if __name__ == "__main__":
    sys.exit(main())
