import pytest

from inventory.orders import OrderError, OrderService
from inventory.stock import OutOfStock, Stock


@pytest.fixture
def service():
    return OrderService(Stock({"mug": 10, "tee": 4, "cap": 1}))


def test_place_reserves(service):
    service.place("o1", [("mug", 2), ("tee", 1)])
    assert (service.stock.available("mug"), service.stock.available("tee")) == (8, 3)


def test_failed_order_leaves_stock_untouched(service):
    with pytest.raises(OutOfStock):
        service.place("o1", [("mug", 2), ("tee", 1), ("cap", 2)])
    assert [service.stock.available(s) for s in ("mug", "tee", "cap")] == [10, 4, 1]


def test_cancel_releases_every_line(service):
    service.place("o1", [("mug", 2), ("tee", 3)])
    service.cancel("o1")
    assert (service.stock.available("mug"), service.stock.available("tee")) == (10, 4)
    assert service.orders["o1"].status == "cancelled"


def test_ship_then_cancel_is_refused(service):
    service.place("o1", [("mug", 1)])
    service.ship("o1")
    with pytest.raises(OrderError):
        service.cancel("o1")
    assert service.stock.on_hand("mug") == 9


def test_audit_log(service):
    service.place("o1", [("mug", 1)])
    service.place("o2", [("tee", 1)])
    service.cancel("o1")
    service.ship("o2")
    assert service.events.kinds() == ["placed", "placed", "cancelled", "shipped"]
