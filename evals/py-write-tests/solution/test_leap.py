import pytest

from leap import days_in_year, is_leap_year


@pytest.mark.parametrize("year", [1996, 2004, 2024])
def test_every_fourth_year_is_leap(year):
    assert is_leap_year(year)


@pytest.mark.parametrize("year", [2021, 2022, 2023, 2026])
def test_other_years_are_not(year):
    assert not is_leap_year(year)


@pytest.mark.parametrize("year", [1700, 1800, 1900, 2100])
def test_centuries_are_not_leap(year):
    assert not is_leap_year(year)


@pytest.mark.parametrize("year", [1600, 2000, 2400])
def test_every_fourth_century_is_leap(year):
    assert is_leap_year(year)


def test_days_in_year():
    assert (days_in_year(2024), days_in_year(2023)) == (366, 365)
