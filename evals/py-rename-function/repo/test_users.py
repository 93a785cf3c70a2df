from api import login, profile
from report import line
from users.store import find_user


def test_find_user():
    assert find_user(1)["name"] == "Ada"
    assert find_user(99) is None


def test_api_and_report_still_work():
    assert profile(2) == {"name": "Grace", "active": False}
    assert login("ADA@example.com") is True
    assert line() == "active: Ada, Linus"
