"""Lifecycle settings: defaults of docs/lifecycle.md "Settings", parsed from the environment, validated at start-up."""

from __future__ import annotations

import pytest

from bridge.config import load_settings
from bridge.errors import ConfigError


def test_lifecycle_defaults_give_the_20_second_adoption_target() -> None:
    s = load_settings({})
    assert (s.idle_ttl_s, s.lease_ttl_s, s.stall_timeout_s) == (600.0, 15.0, 30.0)
    assert s.lease_ttl_s + s.sweep_interval_s <= 20.0
    assert s.heartbeat_interval_s * 2 <= s.lease_ttl_s
    assert s.lease_pid_probe is True


def test_lifecycle_settings_are_read_from_the_environment() -> None:
    s = load_settings({"BRIDGE_IDLE_TTL_S": "3", "BRIDGE_LEASE_TTL_S": "4", "BRIDGE_HEARTBEAT_INTERVAL_S": "1",
                       "BRIDGE_SWEEP_INTERVAL_S": "0.5", "BRIDGE_STALL_TIMEOUT_S": "2",
                       "BRIDGE_LEASE_PID_PROBE": "false", "BRIDGE_ACTIVE_POLL_S": "0.2",
                       "BRIDGE_ACTIVE_POLL_IDLE_S": "2"})
    assert (s.idle_ttl_s, s.lease_ttl_s, s.heartbeat_interval_s, s.sweep_interval_s) == (3.0, 4.0, 1.0, 0.5)
    assert (s.stall_timeout_s, s.lease_pid_probe, s.active_poll_s, s.active_poll_idle_s) == (2.0, False, 0.2, 2.0)


@pytest.mark.parametrize(
    ("env", "named"),
    [
        ({"BRIDGE_LEASE_TTL_S": "0"}, "BRIDGE_LEASE_TTL_S"),
        ({"BRIDGE_IDLE_TTL_S": "-1"}, "BRIDGE_IDLE_TTL_S"),
        ({"BRIDGE_STALL_TIMEOUT_S": "soon"}, "BRIDGE_STALL_TIMEOUT_S"),
        ({"BRIDGE_LEASE_TTL_S": "6", "BRIDGE_HEARTBEAT_INTERVAL_S": "5"}, "BRIDGE_HEARTBEAT_INTERVAL_S"),
        ({"BRIDGE_ACTIVE_POLL_S": "20"}, "BRIDGE_ACTIVE_POLL_S"),
        ({"BRIDGE_LEASE_PID_PROBE": "maybe"}, "BRIDGE_LEASE_PID_PROBE"),
    ],
)
def test_a_bad_lifecycle_setting_stops_start_up_naming_the_variable(env: dict[str, str], named: str) -> None:
    with pytest.raises(ConfigError, match=named):
        load_settings(env)
