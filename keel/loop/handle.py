"""The run handle tools get at call time (keel.tools.base.RunHandle): a read-only view of the running
Runner, built by it when a run starts."""

from __future__ import annotations

import time
from typing import Any

from keel.core.events import EventBus
from keel.core.request import Request
from keel.engine.types import Engine
from keel.loop import limits as lim
from keel.tools.base import BudgetLeft, Tool

DEFAULT_WINDOW = 32768   # tokens, when the runner has no context manager (the engine default's own)


class RunView:
    """A read-only view of one running Runner."""

    def __init__(self, runner: Any) -> None:   # a keel.loop.runner.Runner (typed loosely: no import circle)
        self._runner = runner

    @property
    def engine(self) -> Engine:
        return self._runner.engine

    @property
    def bus(self) -> EventBus:
        return self._runner.bus

    @property
    def task(self) -> str:
        return self._runner.state.task

    @property
    def request(self) -> Request:
        return self._runner.state.request

    @property
    def step(self) -> int:
        return self._runner.steps

    @property
    def verifier(self) -> Any:
        return self._runner.verifier

    @property
    def prices(self) -> lim.Prices:
        return self._runner.prices

    @property
    def window_tokens(self) -> int:
        context = self._runner.context
        return context.window.tokens if context is not None else DEFAULT_WINDOW

    def tools(self) -> list[Tool]:
        return self._runner.registry.tools()

    def budget_left(self) -> BudgetLeft:
        """Tokens, cost and seconds the run's limits leave (negative or zero: spent)."""
        r = self._runner
        tokens = r.limits.max_tokens - r.usage.total if r.limits.max_tokens is not None else None
        cost = r.limits.max_cost_usd - r.cost_usd() if r.limits.max_cost_usd is not None else None
        seconds = max(r.ctx.deadline - time.monotonic(), 0.001) if r.ctx.deadline is not None else None
        return BudgetLeft(tokens=tokens, cost_usd=cost, seconds=seconds)
