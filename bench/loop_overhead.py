"""Harness overhead per step: keel's loop vs mini-swe-agent's, same scripted actions, same run.

500 steps of a trivial tool (a 2 KB observation) through each harness's deterministic model,
with each harness's trajectory logging on. "Harness time" is everything between the model
returning and the next model call starting (tool dispatch, history, stop checks, logging), so
the stand-in model's own cost is excluded on both sides.

Target: keel p50 ≤ mini p50, and keel's logging cost flat per step (append-only JSONL), while
mini rewrites its whole trajectory every step.

Run: python bench/loop_overhead.py [--steps 500]
"""

from __future__ import annotations

import argparse
import os
import statistics
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

import psutil

sys.path.insert(0, str(Path(__file__).resolve().parent))
from _peers import pip_target  # noqa: E402

OBSERVATION = ("x" * 79 + "\n") * 26  # ~2 KB


class Stamps:
    """Wall-clock stamps around each model call; harness time is the gap between calls."""

    def __init__(self) -> None:
        self.starts: list[float] = []
        self.ends: list[float] = []

    def gaps_ms(self) -> list[float]:
        return [(s - e) * 1000 for e, s in zip(self.ends, self.starts[1:], strict=False)]


def bench_keel(steps: int, log_dir: Path) -> tuple[list[float], float]:
    from keel.core.events import EventBus, JsonlWriter
    from keel.loop.limits import Limits
    from keel.loop.runner import Runner
    from keel.testing.inprocess import ScriptedModel
    from keel.tools.base import Tool, ToolAnnotations, ToolArgs, ToolContext, ToolResult, ToolSpec
    from keel.tools.registry import ToolRegistry
    from keel.tools.task import FINISH

    class ObserveArgs(ToolArgs):
        n: int

    def observe(args: ObserveArgs, _ctx: ToolContext) -> ToolResult:
        return ToolResult(ok=True, output=f"{args.n}\n{OBSERVATION}")

    tool = Tool(ToolSpec("observe", "Return an observation.", ObserveArgs, ToolAnnotations(read_only=True)), observe)
    script: list[dict[str, Any]] = [{"content": f"step {i}", "tool_calls": [{"name": "observe", "arguments": {"n": i}}],
                                     "usage": {"prompt_tokens": 100, "completion_tokens": 10}}
                                    for i in range(steps - 1)]
    script.append({"tool_calls": [{"name": "finish", "arguments": {"summary": "done"}}]})
    model = ScriptedModel(script)
    stamps = Stamps()
    inner = model.complete

    def timed(messages: Any, tools: Any, on_delta: Any = None) -> Any:
        stamps.starts.append(time.perf_counter())
        turn = inner(messages, tools, on_delta)
        stamps.ends.append(time.perf_counter())
        return turn

    model.complete = timed  # type: ignore[method-assign]
    writer = JsonlWriter(log_dir / "keel.jsonl")
    runner = Runner(model, ToolRegistry([tool, FINISH]), ToolContext(workspace=log_dir), EventBus("bench", [writer]),
                    limits=Limits(max_steps=steps + 5))
    rss0 = psutil.Process().memory_info().rss
    result = runner.run([{"role": "system", "content": "bench"}, {"role": "user", "content": "go"}])
    rss1 = psutil.Process().memory_info().rss
    writer.close()
    assert result.stop_reason == "complete", result.stop_reason
    return stamps.gaps_ms(), (rss1 - rss0) / 2**20


def bench_mini(steps: int, log_dir: Path) -> tuple[list[float], float]:
    target = pip_target("mini", "mini-swe-agent==2.4.6", "platformdirs")
    sys.path.append(str(target))  # after the interpreter's own packages: keel keeps its versions
    os.environ.setdefault("MSWEA_SILENT_STARTUP", "1")
    os.environ["MSWEA_GLOBAL_CONFIG_DIR"] = str(log_dir / "mini-config")
    from minisweagent.agents.default import DefaultAgent
    from minisweagent.exceptions import Submitted
    from minisweagent.models.test_models import DeterministicModel, make_output

    class NullEnvironment:
        def execute(self, action: dict, cwd: str = "") -> dict[str, Any]:
            if action["command"] == "submit":
                raise Submitted({"role": "exit", "content": "done",
                                 "extra": {"exit_status": "Submitted", "submission": ""}})
            return {"output": f"{action['command']}\n{OBSERVATION}", "returncode": 0, "exception_info": ""}

        def get_template_vars(self, **kwargs: Any) -> dict[str, Any]:
            return {}

        def serialize(self) -> dict[str, Any]:
            return {}

    outputs = [make_output(f"step {i}", [{"command": f"observe {i}"}], cost=0.0) for i in range(steps - 1)]
    outputs.append(make_output("done", [{"command": "submit"}], cost=0.0))
    model = DeterministicModel(outputs=outputs, cost_per_call=0.0)
    stamps = Stamps()
    inner = model.query

    def timed(messages: Any, **kwargs: Any) -> Any:
        stamps.starts.append(time.perf_counter())
        out = inner(messages, **kwargs)
        stamps.ends.append(time.perf_counter())
        return out

    model.query = timed  # type: ignore[method-assign]
    agent = DefaultAgent(model, NullEnvironment(), system_template="bench", instance_template="{{task}}",
                         step_limit=steps + 5, cost_limit=0, output_path=log_dir / "mini.traj.json")
    rss0 = psutil.Process().memory_info().rss
    info = agent.run("go")
    rss1 = psutil.Process().memory_info().rss
    assert info.get("exit_status") == "Submitted", info
    return stamps.gaps_ms(), (rss1 - rss0) / 2**20


def pct(values: list[float], q: float) -> float:
    return statistics.quantiles(values, n=100)[int(q) - 1]


def report(name: str, gaps: list[float], rss_mb: float) -> dict[str, float]:
    k = max(len(gaps) // 10, 1)
    first, last = statistics.mean(gaps[:k]), statistics.mean(gaps[-k:])
    row = {"p50": statistics.median(gaps), "p95": pct(gaps, 95), "first10%": first, "last10%": last,
           "growth": last / first if first else float("inf"), "rss": rss_mb}
    print(f"{name:6} p50 {row['p50']:7.3f} ms  p95 {row['p95']:7.3f} ms  first-10% {first:7.3f} ms  "
          f"last-10% {last:7.3f} ms  (last/first {row['growth']:5.2f}×)  RSS +{rss_mb:5.1f} MB")
    return row


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--steps", type=int, default=500)
    args = parser.parse_args()
    with tempfile.TemporaryDirectory() as tmp:
        keel_gaps, keel_rss = bench_keel(args.steps, Path(tmp))
        mini_gaps, mini_rss = bench_mini(args.steps, Path(tmp))
    print(f"harness ms per step over {args.steps} steps, model time excluded, logging on:")
    k = report("keel", keel_gaps, keel_rss)
    m = report("mini", mini_gaps, mini_rss)
    ratio = k["p50"] / m["p50"]
    print(f"ratio keel/mini p50: {ratio:.3f}  ({'PASS' if ratio <= 1.0 else 'FAIL'}: target ≤ 1.0)")
    flat = k["growth"] < 2.0
    print(f"keel logging cost flat per step (last-10%/first-10% < 2): {'PASS' if flat else 'FAIL'} "
          f"({k['growth']:.2f}×; mini {m['growth']:.2f}×)")
    return 0 if ratio <= 1.0 and flat else 1


if __name__ == "__main__":
    sys.exit(main())
