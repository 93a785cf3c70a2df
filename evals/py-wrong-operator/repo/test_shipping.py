from shipping import shipping_cost


def test_small_order_pays_flat_rate():
    assert shipping_cost(2000) == 499


def test_large_order_ships_free():
    assert shipping_cost(8000) == 0


def test_order_at_threshold_ships_free():
    assert shipping_cost(5000) == 0
