"""Gregorian calendar rules."""


def is_leap_year(year):
    """Every fourth year is a leap year, except centuries, except every fourth century."""
    return year % 4 == 0 and (year % 100 != 0 or year % 400 == 0)


def days_in_year(year):
    return 366 if is_leap_year(year) else 365
