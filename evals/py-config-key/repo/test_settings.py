from settings import load_server_settings


def test_port_from_config():
    assert load_server_settings().port == 8080


def test_other_keys_unchanged():
    settings = load_server_settings()
    assert (settings.host, settings.workers) == ("0.0.0.0", 4)
