"""keel's event stream as OpenTelemetry spans, one trace per run (the ``keel[otel]`` extra).

A subscriber of the event bus: each event becomes a span or a span's attributes when it is emitted,
with the times the event records (a model call ends at its event and began ``latency_s`` before), so
no call site knows about tracing. Names and attributes follow the OpenTelemetry GenAI semantic
conventions (gen_ai.*, Development status): the run is an ``invoke_agent keel`` span, each model call
a ``chat {model}`` span, each tool call an ``execute_tool {name}`` span. keel adds what shows why a
run was called complete (``keel.*``): the policy's decision and the sandbox tier on command spans,
the prefix reuse of each model call, a ``verify`` span with one child per check (command, exit code,
digest of the workspace it judged), ``compaction`` and ``candidate`` spans, and the stop reason and
cost on the run span. docs/telemetry.md lists them all.

The exporter sends in a background thread; when the run stops, its spans are flushed for at most
FLUSH_S, and not at all when the endpoint did not answer a connection attempt made at the start.
"""

from __future__ import annotations

import atexit
import logging
import socket
import threading
from typing import Any
from urllib.parse import urlsplit

from opentelemetry import trace
from opentelemetry.exporter.otlp.proto.http.trace_exporter import OTLPSpanExporter
from opentelemetry.sdk.resources import Resource
from opentelemetry.sdk.trace import TracerProvider
from opentelemetry.sdk.trace.export import BatchSpanProcessor
from opentelemetry.trace import Span, SpanKind, Status, StatusCode

from keel.core.events import Event
from keel.engine.provenance import keel_version
from keel.trace.otel_attrs import (
    chat_attributes,
    check_attributes,
    command_attributes,
    run_attributes,
    stop_attributes,
    tool_attributes,
)

FLUSH_S = 3.0
CONNECT_PROBE_S = 0.5
_EXPORT_TIMEOUT_S = 3.0
_providers: dict[str, tuple[TracerProvider, BatchSpanProcessor]] = {}
_lock = threading.Lock()


def _ns(seconds: float) -> int:
    return int(seconds * 1e9)


def _provider(url: str) -> tuple[TracerProvider, BatchSpanProcessor]:
    """One provider per endpoint per process (keel acp and mcp-serve run many sessions)."""
    with _lock:
        if url not in _providers:
            # the exporter's own retry warnings would print into the user's terminal on every batch
            logging.getLogger("opentelemetry.exporter.otlp.proto.http").setLevel(logging.CRITICAL)
            # shutdown at exit is ours: the SDK's own would wait out retries against a dead endpoint
            provider = TracerProvider(resource=Resource.create({"service.name": "keel",
                                                                "service.version": keel_version()}),
                                      shutdown_on_exit=False)
            processor = BatchSpanProcessor(OTLPSpanExporter(endpoint=url, timeout=_EXPORT_TIMEOUT_S),
                                           schedule_delay_millis=1000)
            provider.add_span_processor(processor)
            _providers[url] = (provider, processor)
            atexit.register(lambda: provider.shutdown() if _reachable.get(url, True) else None)
        return _providers[url]


_reachable: dict[str, bool] = {}


def _probe(url: str) -> None:
    """Does anything accept connections at the endpoint? Asked once, in the background."""
    parts = urlsplit(url)
    address = (parts.hostname or "127.0.0.1", parts.port or (443 if parts.scheme == "https" else 80))
    try:
        with socket.create_connection(address, timeout=CONNECT_PROBE_S):
            _reachable[url] = True
    except OSError:
        _reachable[url] = False


class SpanSink:
    """Event bus subscriber: builds the spans of the runs on one bus."""

    def __init__(self, traces_url: str, content: bool) -> None:
        self.traces_url, self.content = traces_url, content
        self.provider, self.processor = _provider(traces_url)
        self.tracer = self.provider.get_tracer("keel", keel_version())
        self._probe = threading.Thread(target=_probe, args=(traces_url,), daemon=True)
        self._probe.start()
        self.run: Span | None = None
        self.start: Event = {}
        self._approvals: dict[int, list[Event]] = {}

    def __call__(self, event: Event) -> None:
        handler = getattr(self, "_on_" + event["type"], None)
        if handler is None or (self.run is None and event["type"] != "session_start"):
            return
        try:
            handler(event)
        except Exception as exc:  # noqa: BLE001 - tracing must never end a run
            logging.getLogger(__name__).debug("span for %s failed: %s", event["type"], exc)

    # ---- the run ------------------------------------------------------------------------------

    def _on_session_start(self, e: Event) -> None:
        if self.run is not None:
            self.run.end(_ns(e["ts"]))
        self.start = e
        self.run = self.tracer.start_span(f"invoke_agent {run_attributes(e, False)['gen_ai.agent.name']}",
                                          context=trace.set_span_in_context(trace.INVALID_SPAN),
                                          kind=SpanKind.INTERNAL, start_time=_ns(e["ts"]),
                                          attributes=run_attributes(e, self.content))

    def _on_stop(self, e: Event) -> None:
        assert self.run is not None
        self.run.set_attributes(stop_attributes(e))
        if e.get("status") == "error":
            self.run.set_status(Status(StatusCode.ERROR, str(e.get("error") or e.get("reason"))[:200]))
        self.run.end(_ns(e["ts"]))
        self.run = None
        self.flush()

    def flush(self) -> bool:
        """Send what is buffered, for at most FLUSH_S; skipped when the endpoint refused to connect."""
        self._probe.join(CONNECT_PROBE_S + 0.5)
        if not _reachable.get(self.traces_url, False):
            return False
        return self.processor.force_flush(int(FLUSH_S * 1000))

    def _child(self, name: str, start: float, end: float, attributes: dict[str, Any],
               kind: SpanKind = SpanKind.INTERNAL, parent: Span | None = None) -> Span:
        span = self.tracer.start_span(name, context=trace.set_span_in_context(parent or self.run),  # type: ignore[arg-type]
                                      kind=kind, start_time=_ns(start), attributes=attributes)
        span.end(_ns(max(end, start)))
        return span

    def _event(self, name: str, e: Event, **attributes: Any) -> None:
        assert self.run is not None
        self.run.add_event(name, {k: v for k, v in attributes.items() if v is not None}, timestamp=_ns(e["ts"]))

    # ---- model and tool calls -----------------------------------------------------------------

    def _on_model_call(self, e: Event) -> None:
        attrs = chat_attributes(e, self.start, self.content)
        begin = e["ts"] - float(e.get("latency_s") or 0.0)
        parent = None
        if variant := e.get("variant"):   # a re-sampled candidate for a reply keel turned down
            parent = self._child("candidate", begin, e["ts"], {
                "keel.candidate.n": variant.get("n"), "keel.candidate.why": variant.get("why"),
                **({"keel.candidate.temperature": variant["temperature"]} if variant.get("temperature") is not None else {}),
                **({"keel.candidate.seed": variant["seed"]} if variant.get("seed") is not None else {})})
        self._child(f"chat {e.get('model') or ''}".strip(), begin, e["ts"], attrs, SpanKind.CLIENT, parent)

    def _on_change_request(self, e: Event) -> None:
        attrs = chat_attributes({**e, "tool_calls": 0}, self.start, self.content)
        attrs.update({"keel.purpose": "change_file", "keel.change.path": e.get("path")})
        begin = e["ts"] - float(e.get("latency_s") or 0.0)
        self._child(f"chat {self.start.get('model') or ''}".strip(), begin, e["ts"], attrs, SpanKind.CLIENT)

    def _on_approval(self, e: Event) -> None:
        self._approvals.setdefault(int(e.get("step") or 0), []).append(e)

    def _on_tool_call(self, e: Event) -> None:
        attrs = tool_attributes(e, self.content)
        approvals = self._approvals.pop(int(e.get("step") or 0), [])
        if e.get("name") in COMMAND_TOOLS:
            attrs.update(command_attributes(e, approvals, self.start, self.content))
        begin = e["ts"] - float(e.get("elapsed_ms") or 0.0) / 1000
        span = self._child(f"execute_tool {e.get('name')}", begin, e["ts"], attrs)
        if not e.get("ok", True):
            span.set_status(Status(StatusCode.ERROR))

    def _on_hook(self, e: Event) -> None:
        begin = e["ts"] - float(e.get("elapsed_ms") or 0.0) / 1000
        self._child(f"hook {e.get('event')}", begin, e["ts"], {
            "keel.hook.event": e.get("event"), "keel.hook.source": e.get("source"),
            "keel.command": e.get("command"), "keel.hook.outcome": e.get("outcome"),
            **({"keel.exit_code": e["exit_code"]} if e.get("exit_code") is not None else {}),
            "keel.sandbox.tier": self.start.get("sandbox")})

    # ---- verification, compaction, decisions -------------------------------------------------

    def _on_verification(self, e: Event) -> None:
        checks = e.get("checks") or []
        total = sum(float(c.get("duration_s") or 0.0) for c in checks)
        begin = e["ts"] - total
        verify = self._child("verify", begin, e["ts"], {
            "keel.verify.status": e.get("status"), "keel.verify.problem": e.get("problem") or "",
            "keel.verify.digest": e.get("digest"), "keel.verify.unchanged": bool(e.get("unchanged")),
            "keel.verify.tampered": list(e.get("tampered") or []),
            "keel.verify.preexisting_failures": list(e.get("preexisting_failures") or []),
            "keel.verify.checks": len(checks), "keel.step": e.get("step", 0)})
        at = begin
        for check in checks:
            took = float(check.get("duration_s") or 0.0)
            attrs = check_attributes(check, e, self.start)
            span = self._child(f"check {check.get('category')}", at, at + took, attrs, parent=verify)
            if not check.get("passed"):
                span.set_status(Status(StatusCode.ERROR, "refused" if check.get("refused") else "failed"))
            at += took

    def _on_compaction(self, e: Event) -> None:
        self._child("compaction", e["ts"], e["ts"], {
            "keel.compaction.trigger": e.get("trigger"), "keel.compaction.ok": bool(e.get("ok")),
            "keel.compaction.tokens_before": e.get("tokens_before"), "keel.compaction.tokens_after": e.get("tokens_after"),
            "keel.compaction.summarizer": e.get("summarizer") or "", "keel.compaction.error": e.get("error") or "",
            "keel.step": e.get("step", 0)})

    def _on_decision(self, e: Event) -> None:
        self._event("keel.decision", e, **{"keel.verdict": e.get("verdict"), "keel.reason": e.get("reason"),
                                           "keel.pushback_kind": e.get("pushback_kind"), "keel.step": e.get("step")})

    def _on_verification_plan(self, e: Event) -> None:
        self._event("keel.verification_plan", e, **{"keel.checks": [str(c.get("command")) for c in e.get("checks") or []],
                                                     "keel.skipped": len(e.get("skipped") or [])})

    def _on_cache_break(self, e: Event) -> None:
        self._event("keel.cache_break", e, **{"keel.cause": e.get("cause"), "keel.prefix_reuse": e.get("prefix_reuse")})


# Tools that run a command in the shell: their spans carry the policy's decision and the sandbox tier.
COMMAND_TOOLS = frozenset({"run_shell"})

