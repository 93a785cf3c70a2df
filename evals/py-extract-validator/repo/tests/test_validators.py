import pytest

from shop.validators import is_valid_email


@pytest.mark.parametrize("address", ["ann@example.com", "first.last+news@mail.example.co.uk", "x_y@a-b.io"])
def test_valid(address):
    assert is_valid_email(address)


@pytest.mark.parametrize("address", ["", "plainaddress", "ann@", "@example.com", "ann@example",
                                     "ann@exa mple.com", "ann@@example.com"])
def test_invalid(address):
    assert not is_valid_email(address)
