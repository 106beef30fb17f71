from __future__ import annotations

from pathlib import Path

import pytest

from bridge.config import ConfigError, load_settings


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
    ],
)
def test_a_bad_value_is_one_clear_error_naming_the_variable(env: dict[str, str], names: str) -> None:
    with pytest.raises(ConfigError) as e:
        load_settings(env)
    assert names in str(e.value)


def test_secrets_never_appear_in_the_redacted_view() -> None:
    s = load_settings({"BRIDGE_UPSTREAM_PASSWORD": "hunter2", "BRIDGE_DATABASE_URL": "postgresql://u:pw@h/db",
                       "BRIDGE_AUTH_SECRET": "sekrit" * 6})
    shown = repr(s.redacted()) + repr(s)
    assert "hunter2" not in shown and "pw@h" not in shown and "sekrit" not in shown
    assert s.upstream_password.value == "hunter2"


def test_toml_file_adds_to_the_environment_which_wins(tmp_path: Path) -> None:
    cfg = tmp_path / "bridge.toml"
    cfg.write_text('http_port = 9000\nupstream_url = "http://10.0.0.1:4096"\n')
    s = load_settings({"BRIDGE_CONFIG": str(cfg), "BRIDGE_HTTP_PORT": "9100"})
    assert s.http_port == 9100 and s.upstream_url == "http://10.0.0.1:4096"
    cfg.write_text("nonsense_key = 1\n")
    with pytest.raises(ConfigError, match="unknown key"):
        load_settings({"BRIDGE_CONFIG": str(cfg)})
