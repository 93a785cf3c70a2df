"""Options for calls to the upstream API, built from the settings."""


def request_options(settings, path):
    return {
        "url": settings.base_url + path,
        "retries": settings.retries,
        "headers": {"Accept": "application/json"},
    }
