"""Reads config.ini; every key has a default so a partial file still starts the service."""

import configparser
from dataclasses import dataclass

DEFAULTS = {"host": "127.0.0.1", "port": 8000, "workers": 1}


@dataclass(frozen=True)
class ServerSettings:
    host: str
    port: int
    workers: int


def load_server_settings(path="config.ini"):
    parser = configparser.ConfigParser()
    parser.read(path)
    section = parser["server"] if parser.has_section("server") else {}
    return ServerSettings(
        host=section.get("host", DEFAULTS["host"]),
        port=int(section.get("port", DEFAULTS["port"])),
        workers=int(section.get("workers", DEFAULTS["workers"])),
    )
