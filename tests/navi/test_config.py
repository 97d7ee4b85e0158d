"""Settings read from the environment (navi/config.py): the edge's settings."""

from __future__ import annotations

import pytest

from navi.config import Settings, SettingsError


def test_the_edge_defaults() -> None:
    settings = Settings.from_env({})
    assert settings.allowed_hosts == () and settings.allowed_origins == ()
    assert settings.max_body_bytes == 1024 * 1024 and settings.max_import_mb == 64


def test_hosts_and_origins_are_comma_separated_lists() -> None:
    settings = Settings.from_env(
        {
            "NAVI_ALLOWED_HOSTS": " Navi.Example.org, *.lan ,192.168.1.20,[fe80::1],",
            "NAVI_ALLOWED_ORIGINS": "https://navi.example.org/, http://localhost:3000",
            "NAVI_MAX_BODY_BYTES": "2048",
            "NAVI_MAX_IMPORT_MB": "5",
        }
    )
    assert settings.allowed_hosts == ("navi.example.org", "*.lan", "192.168.1.20", "[fe80::1]")
    assert settings.allowed_origins == ("https://navi.example.org", "http://localhost:3000")
    assert settings.max_body_bytes == 2048 and settings.max_import_mb == 5


@pytest.mark.parametrize(
    "hosts", ["https://navi.example.org", "navi.example.org:8000", "navi/x", "a@b"]
)
def test_a_host_with_a_scheme_port_or_path_is_refused(hosts: str) -> None:
    with pytest.raises(SettingsError, match="NAVI_ALLOWED_HOSTS"):
        Settings.from_env({"NAVI_ALLOWED_HOSTS": hosts})


@pytest.mark.parametrize(
    "origin", ["navi.example.org", "ftp://x.org", "https://x.org/app", "null", "http://x:port"]
)
def test_an_origin_that_browsers_would_never_send_is_refused(origin: str) -> None:
    with pytest.raises(SettingsError, match="NAVI_ALLOWED_ORIGINS"):
        Settings.from_env({"NAVI_ALLOWED_ORIGINS": origin})
