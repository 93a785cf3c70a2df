"""Run limits and the current usage against them. Pure data; the decider compares."""

from __future__ import annotations

from dataclasses import dataclass


@dataclass(frozen=True)
class Prices:
    """USD per million tokens. Cached input is billed at its own rate when the engine reports it."""

    input_per_m: float = 0.0
    cached_input_per_m: float = 0.0
    output_per_m: float = 0.0

    @property
    def known(self) -> bool:
        """Whether any price is set: without one a run's cost is unknown (None), never $0."""
        return any(p > 0 for p in (self.input_per_m, self.cached_input_per_m, self.output_per_m))

    def cost(self, prompt_tokens: int, cached_tokens: int, completion_tokens: int) -> float:
        uncached = max(prompt_tokens - cached_tokens, 0)
        return (uncached * self.input_per_m + cached_tokens * self.cached_input_per_m
                + completion_tokens * self.output_per_m) / 1_000_000


@dataclass(frozen=True)
class Limits:
    max_steps: int = 50
    max_seconds: float | None = None
    max_tokens: int | None = None
    max_cost_usd: float | None = None
    max_pushbacks_without_progress: int = 3
    # Turns in a row whose every call was invalid or a refused repeat (a model stuck emitting
    # broken calls gets feedback each time, but must not burn the whole step budget).
    max_idle_turns: int = 6
    max_repeats: int = 2     # the second refusal of the same (call, result) stops the run
    # Refused completion claims per failing check category before the run stops as
    # limit:verification with a report, instead of looping on a fix the model cannot find.
    max_repair_rounds: int = 2


@dataclass(frozen=True)
class Consumed:
    """What the run has consumed so far, against the limits (tokens: keel.engine.types.Usage.total)."""

    steps: int = 0
    elapsed_s: float = 0.0
    tokens: int = 0
    cost_usd: float = 0.0


def exceeded_limit(limits: Limits, used: Consumed) -> str | None:
    """The stop reason for the first limit reached, or None."""
    if used.steps >= limits.max_steps:
        return "limit:steps"
    if limits.max_seconds is not None and used.elapsed_s >= limits.max_seconds:
        return "limit:wall_clock"
    if limits.max_tokens is not None and used.tokens >= limits.max_tokens:
        return "limit:tokens"
    if limits.max_cost_usd is not None and used.cost_usd >= limits.max_cost_usd:
        return "limit:cost"
    return None
