import pytest

from kvparse import ParseError, parse


def test_key_value_pairs():
    assert parse("host = example.com\nport=8080\n") == {"host": "example.com", "port": "8080"}


def test_blank_and_comment_lines_are_skipped():
    text = "\n# a comment\n   # indented comment\n\nname = keel\n"
    assert parse(text) == {"name": "keel"}


def test_keys_are_lower_cased_and_stripped():
    assert parse("  Server_Name   =  web  ") == {"server_name": "web"}


def test_only_the_first_equals_splits():
    assert parse("url = http://x/?a=1&b=2") == {"url": "http://x/?a=1&b=2"}


def test_inline_comment_is_dropped_from_unquoted_values():
    assert parse("level = debug # verbose for now") == {"level": "debug"}


def test_hash_without_a_space_is_part_of_the_value():
    assert parse("color = #ff0000") == {"color": "#ff0000"}


def test_quoted_value_keeps_spaces_and_hashes():
    assert parse('motto = "  keep # this  "') == {"motto": "  keep # this  "}


def test_last_value_wins():
    assert parse("a = 1\nb = 2\na = 3") == {"a": "3", "b": "2"}


def test_empty_value_is_allowed():
    assert parse("empty =") == {"empty": ""}


def test_line_without_equals_reports_its_line_number():
    with pytest.raises(ParseError) as err:
        parse("a = 1\n# note\nnot a pair\n")
    assert err.value.lineno == 3
    assert "line 3" in str(err.value)


def test_empty_key_is_an_error():
    with pytest.raises(ParseError) as err:
        parse("= value")
    assert err.value.lineno == 1
