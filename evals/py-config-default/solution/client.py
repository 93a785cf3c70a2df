"""Options for calls to the upstream API, built from the settings."""


def request_options(settings, path):
    return {
        "url": settings.base_url + path,
        "retries": settings.retries,
        "timeout": settings.timeout_s,
        "headers": {"Accept": "application/json"},
    }
