from __future__ import annotations

from pathlib import Path

import pytest

from bridge.config import load_settings
from bridge.errors import ConfigError


def test_defaults_follow_the_design_contract() -> None:
    s = load_settings({})
    assert s.upstream_url == "http://127.0.0.1:4096"
    assert s.upstream_name == "127.0.0.1:4096"
    assert (s.http_host, s.http_port) == ("127.0.0.1", 8765)
    assert s.state_dir == Path("./.state")
    assert s.embedded_database


@pytest.mark.parametrize(
    ("env", "names"),
    [
        ({"BRIDGE_HTTP_PORT": "abc"}, "BRIDGE_HTTP_PORT"),
        ({"BRIDGE_HTTP_PORT": "70000"}, "BRIDGE_HTTP_PORT"),
        ({"BRIDGE_UPSTREAM_URL": "ftp://x"}, "BRIDGE_UPSTREAM_URL"),
        ({"BRIDGE_DATABASE_URL": "mysql://x/y"}, "BRIDGE_DATABASE_URL"),
        ({"BRIDGE_RECONNECT_MIN_S": "-1"}, "BRIDGE_RECONNECT_MIN_S"),
        ({"BRIDGE_LOG_FORMAT": "xml"}, "BRIDGE_LOG_FORMAT"),
        ({"BRIDGE_AUTH_DISABLED": "maybe"}, "BRIDGE_AUTH_DISABLED"),
        ({"BRIDGE_AUTH_SECRET": "short"}, "BRIDGE_AUTH_SECRET"),
        ({"BRIDGE_DATABASE_URL": "postgresql://h/db", "BRIDGE_READ_DATABASE_URL": "mysql://x/y"},
         "BRIDGE_READ_DATABASE_URL"),
        ({"BRIDGE_READ_DATABASE_URL": "postgresql://standby/db"}, "BRIDGE_READ_DATABASE_URL"),  # no primary
    ],
)
def test_a_bad_value_is_one_clear_error_naming_the_variable(env: dict[str, str], names: str) -> None:
    with pytest.raises(ConfigError) as e:
        load_settings(env)
    assert names in str(e.value)


def test_secrets_never_appear_in_the_redacted_view() -> None:
    s = load_settings({"BRIDGE_UPSTREAM_PASSWORD": "hunter2", "BRIDGE_DATABASE_URL": "postgresql://u:pw@h/db",
                       "BRIDGE_AUTH_SECRET": "sekrit" * 6, "BRIDGE_READ_DATABASE_URL": "postgresql://u:rpw@s/db"})
    shown = repr(s.redacted()) + repr(s)
    assert "hunter2" not in shown and "pw@h" not in shown and "sekrit" not in shown and "rpw@s" not in shown
    assert s.upstream_password.value == "hunter2"


def test_toml_file_adds_to_the_environment_which_wins(tmp_path: Path) -> None:
    cfg = tmp_path / "bridge.toml"
    cfg.write_text('http_port = 9000\nupstream_url = "http://10.0.0.1:4096"\n')
    s = load_settings({"BRIDGE_CONFIG": str(cfg), "BRIDGE_HTTP_PORT": "9100"})
    assert s.http_port == 9100 and s.upstream_url == "http://10.0.0.1:4096"
    cfg.write_text("nonsense_key = 1\n")
    with pytest.raises(ConfigError, match="unknown key"):
        load_settings({"BRIDGE_CONFIG": str(cfg)})


def test_heartbeat_and_sweep_keep_5_s_at_the_default_lease_ttl() -> None:
    s = load_settings({})
    assert (s.lease_ttl_s, s.heartbeat_interval_s, s.sweep_interval_s) == (15.0, 5.0, 5.0)


@pytest.mark.parametrize(("ttl", "derived"), [("5", 5 / 3), ("6", 2.0), ("30", 10.0), ("0.9", 0.3)])
def test_heartbeat_and_sweep_follow_the_lease_ttl_unless_set(ttl: str, derived: float) -> None:
    s = load_settings({"BRIDGE_LEASE_TTL_S": ttl})
    assert s.heartbeat_interval_s == pytest.approx(derived)
    assert s.sweep_interval_s == pytest.approx(derived)
    assert s.heartbeat_interval_s * 2 <= s.lease_ttl_s  # the derived value always passes validation


def test_a_set_interval_is_kept_and_the_other_still_follows_the_ttl() -> None:
    s = load_settings({"BRIDGE_LEASE_TTL_S": "30", "BRIDGE_HEARTBEAT_INTERVAL_S": "4"})
    assert (s.heartbeat_interval_s, s.sweep_interval_s) == (4.0, 10.0)
    s = load_settings({"BRIDGE_LEASE_TTL_S": "30", "BRIDGE_SWEEP_INTERVAL_S": "1"})
    assert (s.heartbeat_interval_s, s.sweep_interval_s) == (10.0, 1.0)


def test_the_lease_ttl_from_the_toml_file_derives_the_intervals_too(tmp_path: Path) -> None:
    cfg = tmp_path / "bridge.toml"
    cfg.write_text("lease_ttl_s = 9\n")
    s = load_settings({"BRIDGE_CONFIG": str(cfg)})
    assert (s.heartbeat_interval_s, s.sweep_interval_s) == (3.0, 3.0)


def test_a_heartbeat_too_long_for_the_ttl_is_one_line_naming_both_and_a_value_that_works() -> None:
    with pytest.raises(ConfigError) as e:
        load_settings({"BRIDGE_LEASE_TTL_S": "6", "BRIDGE_HEARTBEAT_INTERVAL_S": "5"})
    msg = str(e.value)
    assert "\n" not in msg
    assert "BRIDGE_HEARTBEAT_INTERVAL_S=5" in msg and "BRIDGE_LEASE_TTL_S=6" in msg
    assert "try BRIDGE_HEARTBEAT_INTERVAL_S=2 " in msg and "BRIDGE_LEASE_TTL_S=15" in msg
    # the suggested values do work
    load_settings({"BRIDGE_LEASE_TTL_S": "6", "BRIDGE_HEARTBEAT_INTERVAL_S": "2"})
    load_settings({"BRIDGE_LEASE_TTL_S": "15", "BRIDGE_HEARTBEAT_INTERVAL_S": "5"})
