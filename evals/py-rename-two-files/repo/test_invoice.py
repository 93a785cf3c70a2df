from invoice import render_invoice
from orders import order_total


def test_total_with_tax():
    assert order_total([(2, 500), (1, 250)]) == 1350


def test_total_without_tax():
    assert order_total([(2, 500)], tax=False) == 1000


def test_invoice_shows_total():
    text = render_invoice("Ada", [(2, 500), (1, 250)])
    assert text.splitlines()[0] == "Invoice for Ada"
    assert text.splitlines()[-1] == "Total: 13.50"
