"""Whether a run exports OpenTelemetry traces, and where: decided from the environment and the user
config alone, without importing OpenTelemetry, so a keel without an endpoint starts exactly as before.

The standard variables win: ``OTEL_EXPORTER_OTLP_TRACES_ENDPOINT`` (the full traces URL), else
``OTEL_EXPORTER_OTLP_ENDPOINT`` (a base URL; traces go to ``/v1/traces``), else ``[telemetry]
endpoint`` in the user config. ``OTEL_SDK_DISABLED=true`` turns export off. Prompt, reply and tool
text go into spans only on opt-in: ``[telemetry] content = true`` or the GenAI instrumentations'
``OTEL_INSTRUMENTATION_GENAI_CAPTURE_MESSAGE_CONTENT=true``. Export is OTLP over HTTP (protobuf).
"""

from __future__ import annotations

import os
import sys
from dataclasses import dataclass
from typing import Any

from keel.config import Config
from keel.core.events import EventBus

_TRUE = ("1", "true", "yes", "on")


@dataclass(frozen=True)
class TelemetrySetup:
    traces_url: str          # where OTLP/HTTP trace requests go
    content: bool            # prompt, reply and tool text in the spans
    source: str              # which variable or config key named the endpoint


def telemetry_setup(config: Config, env: dict[str, str] | None = None) -> TelemetrySetup | None:
    """The export this run makes, or None (no endpoint, or the SDK switched off)."""
    env = dict(os.environ) if env is None else env
    if env.get("OTEL_SDK_DISABLED", "").strip().lower() in _TRUE:
        return None
    content = (config.telemetry.content
               or env.get("OTEL_INSTRUMENTATION_GENAI_CAPTURE_MESSAGE_CONTENT", "").strip().lower() in _TRUE)
    if url := env.get("OTEL_EXPORTER_OTLP_TRACES_ENDPOINT", "").strip():
        return TelemetrySetup(url, content, "OTEL_EXPORTER_OTLP_TRACES_ENDPOINT")
    base, source = env.get("OTEL_EXPORTER_OTLP_ENDPOINT", "").strip(), "OTEL_EXPORTER_OTLP_ENDPOINT"
    if not base and config.telemetry.endpoint:
        base, source = config.telemetry.endpoint.strip(), "[telemetry] endpoint"
    if not base:
        return None
    return TelemetrySetup(base.rstrip("/") + "/v1/traces", content, source)


_warned = False


def attach_telemetry(bus: EventBus, config: Config) -> Any:
    """Subscribe a span exporter to ``bus`` when an endpoint is set; the sink, or None. Without the
    extra installed, one line on stderr says how to get it and the run goes on unchanged."""
    global _warned
    setup = telemetry_setup(config)
    if setup is None:
        return None
    try:
        from keel.trace.otel import SpanSink
    except ImportError:
        if not _warned:
            _warned = True
            print(f"keel: {setup.source} is set but OpenTelemetry is not installed; traces are not "
                  "exported (pip install 'keel[otel]')", file=sys.stderr)
        return None
    sink = SpanSink(setup.traces_url, setup.content)
    bus.subscribe(sink)
    return sink
