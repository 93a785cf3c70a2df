from pagination import page_count


def test_page_count():
    assert page_count(list(range(10)), 3) == 4
