"""The [http] section of config.toml, validated once at start-up."""

import tomllib
from dataclasses import dataclass


@dataclass(frozen=True)
class HttpSettings:
    base_url: str
    retries: int = 3


def load_settings(path="config.toml"):
    with open(path, "rb") as fh:
        http = tomllib.load(fh).get("http", {})
    base_url = http.get("base_url")
    if not isinstance(base_url, str) or not base_url:
        raise ValueError(f"{path}: [http] base_url must be a non-empty string")
    retries = http.get("retries", 3)
    if not isinstance(retries, int) or isinstance(retries, bool) or retries < 0:
        raise ValueError(f"{path}: [http] retries must be a whole number >= 0")
    return HttpSettings(base_url=base_url.rstrip("/"), retries=retries)
