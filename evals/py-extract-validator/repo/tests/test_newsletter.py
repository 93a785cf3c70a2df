import pytest

from shop.newsletter import subscribe, subscribers


def test_subscribe_normalises():
    assert subscribe("  Dan@Example.COM ") == "dan@example.com"
    assert "dan@example.com" in subscribers()


def test_subscribe_rejects_an_address_without_a_domain_suffix():
    with pytest.raises(ValueError):
        subscribe("dan@example")
