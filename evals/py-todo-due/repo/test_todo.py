import datetime

from parse import parse_line
from render import render

TODAY = datetime.date(2024, 5, 10)


def test_due_date_is_read_and_left_out_of_the_text():
    item = parse_line("(B) pay rent due:2024-05-01 +home")
    assert item.due == datetime.date(2024, 5, 1)
    assert item.text == "pay rent +home"


def test_no_due_date():
    assert parse_line("call mum").due is None


def test_overdue_items_are_marked():
    text = "(A) file taxes due:2024-05-09\nwater plants due:2024-05-10\nx old thing due:2024-01-01"
    assert render(text, today=TODAY) == (
        "[ ] (A) file taxes (overdue since 2024-05-09)\n"
        "[ ] water plants (due 2024-05-10)\n"
        "[x] old thing (due 2024-01-01)"
    )
