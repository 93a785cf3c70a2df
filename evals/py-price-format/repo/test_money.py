from money import format_price


def test_two_decimals():
    assert format_price(1050) == "$10.50"


def test_thousands_separator():
    assert format_price(123450) == "$1,234.50"


def test_negative_amount():
    assert format_price(-99) == "-$0.99"


def test_currency_without_symbol():
    assert format_price(700, currency="CHF") == "CHF 7.00"


def test_pound_symbol():
    assert format_price(1999, currency="GBP") == "\u00a319.99"
