from kvparse import parse


def test_parses_something():
    assert parse("a = 1") == {"a": "1"}
