import pytest

from client import request_options
from settings import load_settings


def write(tmp_path, body):
    path = tmp_path / "config.toml"
    path.write_text("[http]\nbase_url = \"https://api.test\"\n" + body)
    return path


def test_timeout_is_read(tmp_path):
    assert load_settings(write(tmp_path, "timeout_s = 2.5\n")).timeout_s == 2.5


def test_timeout_defaults_to_ten_seconds(tmp_path):
    assert load_settings(write(tmp_path, "")).timeout_s == 10


def test_timeout_must_be_positive(tmp_path):
    with pytest.raises(ValueError, match="timeout_s"):
        load_settings(write(tmp_path, "timeout_s = 0\n"))


def test_request_options_carry_the_timeout(tmp_path):
    settings = load_settings(write(tmp_path, "timeout_s = 7\n"))
    options = request_options(settings, "/v1/items")
    assert options["url"] == "https://api.test/v1/items"
    assert options["timeout"] == 7


def test_our_config_sets_five_seconds():
    assert load_settings("config.toml").timeout_s == 5
