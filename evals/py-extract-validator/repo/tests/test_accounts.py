import pytest

from shop.accounts import register


def test_register():
    assert register("bob@example.com", "Bob") == {"email": "bob@example.com", "name": "Bob"}


def test_register_rejects_bad_email():
    with pytest.raises(ValueError):
        register("bob@example")


def test_register_rejects_duplicates():
    register("carol@example.com")
    with pytest.raises(ValueError):
        register("Carol@example.com")
