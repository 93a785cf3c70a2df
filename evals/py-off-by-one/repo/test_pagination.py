import pytest

from pagination import page_count, paginate

ITEMS = list(range(1, 51))


def test_first_page():
    assert paginate(ITEMS, 1, 20) == list(range(1, 21))


def test_last_page_is_partial():
    assert paginate(ITEMS, 3, 20) == list(range(41, 51))


def test_past_the_end_is_empty():
    assert paginate(ITEMS, 4, 20) == []


def test_page_zero_is_rejected():
    with pytest.raises(ValueError):
        paginate(ITEMS, 0)


def test_page_count():
    assert page_count(50, 20) == 3
