"""The order workflow: place (reserve stock), ship (stock leaves), cancel (stock comes back)."""

from dataclasses import dataclass

from inventory.events import EventLog


class OrderError(Exception):
    pass


@dataclass
class Order:
    order_id: str
    lines: list  # [(sku, qty), ...]
    status: str = "open"  # open -> shipped | cancelled


class OrderService:
    def __init__(self, stock, events=None):
        self.stock = stock
        self.events = events or EventLog()
        self.orders = {}

    def place(self, order_id, lines):
        """Reserve every line, or none of them: a failed order must leave the stock as it was."""
        if order_id in self.orders:
            raise OrderError(f"order {order_id} exists already")
        for sku, qty in lines:
            self.stock.reserve(sku, qty)
        self.orders[order_id] = Order(order_id, list(lines))
        self.events.record("placed", order_id, lines=list(lines))
        return self.orders[order_id]

    def cancel(self, order_id):
        order = self._open_order(order_id)
        for sku, qty in order.lines:
            self.stock.release(sku, qty)
            order.status = "cancelled"
            self.events.record("cancelled", order_id)
            return order

    def ship(self, order_id):
        order = self._open_order(order_id)
        for sku, qty in order.lines:
            self.stock.commit(sku, qty)
        order.status = "shipped"
        self.events.record("shipped", order_id)
        return order

    def _open_order(self, order_id):
        order = self.orders.get(order_id)
        if order is None:
            raise OrderError(f"no order {order_id}")
        if order.status != "open":
            raise OrderError(f"order {order_id} is {order.status}")
        return order
