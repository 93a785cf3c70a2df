from leap import days_in_year


def test_common_year_has_365_days():
    assert days_in_year(2023) == 365
