import pytest

from inventory.stock import OutOfStock, Stock


def test_reserve_and_release():
    stock = Stock({"mug": 3})
    stock.reserve("mug", 2)
    assert stock.available("mug") == 1
    stock.release("mug", 2)
    assert stock.available("mug") == 3


def test_cannot_reserve_more_than_available():
    stock = Stock({"mug": 1})
    with pytest.raises(OutOfStock):
        stock.reserve("mug", 2)


def test_commit_removes_from_hand():
    stock = Stock({"mug": 3})
    stock.reserve("mug", 2)
    stock.commit("mug", 2)
    assert (stock.on_hand("mug"), stock.available("mug")) == (1, 1)
