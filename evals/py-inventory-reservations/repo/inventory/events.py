"""An append-only audit log of what happened to orders."""

from dataclasses import dataclass, field


@dataclass(frozen=True)
class Event:
    kind: str
    order_id: str
    detail: dict = field(default_factory=dict)


class EventLog:
    def __init__(self):
        self._events = []

    def record(self, kind, order_id, **detail):
        self._events.append(Event(kind, order_id, detail))

    def kinds(self):
        return [e.kind for e in self._events]

    def for_order(self, order_id):
        return [e for e in self._events if e.order_id == order_id]
