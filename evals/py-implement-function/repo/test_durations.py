import pytest

from durations import format_duration, parse_duration


def test_hours_and_minutes():
    assert parse_duration("1h30m") == 5400


def test_seconds_only():
    assert parse_duration("90s") == 90


def test_spaces_between_parts():
    assert parse_duration("2h 15s") == 7215


def test_round_trip():
    for seconds in (0, 59, 61, 3600, 86399):
        assert parse_duration(format_duration(seconds)) == seconds


@pytest.mark.parametrize("text", ["", "10", "5d", "1h30"])
def test_rejects_malformed(text):
    with pytest.raises(ValueError):
        parse_duration(text)
