from checkout import receipt, total

CART = [(1999, 1), (450, 3)]   # 19.99 + 3 x 4.50 = 33.49


def test_total_without_a_code():
    assert total(CART) == 3349


def test_spring_discount_is_rounded_to_the_nearest_cent():
    # 15% of 33.49 is 5.0235 -> 5.02 off, 28.47 to pay
    assert total(CART, "SPRING15") == 2847


def test_staff_discount_receipt():
    # 30% of 33.49 is 10.047 -> 10.05 off
    assert receipt(CART, "STAFF30") == "Subtotal: 33.49\nDiscount (STAFF30): -10.05\nTotal: 23.44"
