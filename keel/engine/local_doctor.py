"""``keel doctor --local MODEL``: does the GGUF load in process, and does it answer a tool call?"""

from __future__ import annotations

import time

from keel.engine.doctor import PROBE_MESSAGES, PROBE_TOOL, DoctorCheck, format_doctor
from keel.engine.provenance import engine_serving, keel_version, serving_line
from keel.engine.types import EngineError

PROBE_REPLY_TOKENS = 96


def run_local_doctor(spec: str) -> list[DoctorCheck]:
    from keel.engine.local import LocalEngine
    from keel.engine.local_model import resolve_model

    checks: list[DoctorCheck] = []
    try:
        path = resolve_model(spec)
    except EngineError as e:
        return [DoctorCheck("model file", False, e.message)]
    checks.append(DoctorCheck("model file", True, str(path)))
    started = time.monotonic()
    try:
        engine = LocalEngine(path, n_ctx=4096, max_tokens=PROBE_REPLY_TOKENS, constrain=True)
    except EngineError as e:
        checks.append(DoctorCheck("loads", False, e.message,
                                  "pip install 'keel[local]'" if "llama-cpp-python" in e.message else None))
        return checks
    kernels = "" if engine.extra_buffers else ("; AMX/repacking kernels off (the CPU advertises AMX, which "
                                               "crashes on VMs without it; [engine] local_extra_buffers)")
    checks.append(DoctorCheck("loads", True, f"llama.cpp loaded it in {time.monotonic() - started:.1f} s; "
                                             f"context {engine.context_window} tokens{kernels}"))
    # what served it, as session_start and the result record it (keel.engine.provenance)
    checks.append(DoctorCheck("serving", True, serving_line({"keel_version": keel_version(), **engine_serving(engine)})))
    try:
        turn = engine.complete(list(PROBE_MESSAGES), [PROBE_TOOL])
        again = engine.complete(list(PROBE_MESSAGES), [PROBE_TOOL])
    except EngineError as e:
        checks.append(DoctorCheck("tool calls", False, e.message))
        return checks
    finally:
        engine.close()
    speed = f"{engine.tokens_per_s:.1f} tokens/s" if engine.tokens_per_s else "speed not measured"
    if turn.tool_calls and turn.tool_calls[0].name == "get_time":
        checks.append(DoctorCheck("tool calls", True, f"called get_time({turn.tool_calls[0].arguments}) "
                                                      f"in {turn.latency_s:.1f} s (prompt {engine.prompt_eval_s:.1f} s, "
                                                      f"{speed})"))
    else:
        checks.append(DoctorCheck("tool calls", False, f"answered without a tool call: {turn.content[:200]!r}",
                                  "try a larger or instruction-tuned model with a tool-calling chat template"))
    share = again.usage.cached_tokens / again.usage.prompt_tokens if again.usage.prompt_tokens else 0.0
    checks.append(DoctorCheck("cached tokens", again.usage.cached_tokens > 0,
                              f"a repeated prompt reused {again.usage.cached_tokens} of "
                              f"{again.usage.prompt_tokens} tokens ({share:.0%}) from the KV cache"))
    return checks


def local_doctor_main(spec: str) -> int:
    checks = run_local_doctor(spec)
    print(format_doctor(checks))
    return 0 if all(c.ok is not False for c in checks) else 1
