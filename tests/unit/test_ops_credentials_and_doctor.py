"""systemd credentials feed secrets; doctor's pure parts (clock verdict, rendering)."""

from __future__ import annotations

from pathlib import Path

from bridge.config import load_settings
from bridge.ops.doctor import Check, clock_check, render


def test_secrets_come_from_the_credentials_directory_when_the_variable_is_unset(tmp_path: Path) -> None:
    (tmp_path / "upstream-password").write_text("from-credential\n")
    (tmp_path / "auth-secret").write_text("a" * 40)
    s = load_settings({"CREDENTIALS_DIRECTORY": str(tmp_path)})
    assert s.upstream_password.value == "from-credential"
    assert s.auth_secret.value == "a" * 40
    assert "from-credential" not in repr(s.redacted())


def test_the_environment_wins_over_a_credential_and_empty_files_mean_unset(tmp_path: Path) -> None:
    (tmp_path / "upstream-password").write_text("from-credential")
    (tmp_path / "auth-secret").write_text("")
    s = load_settings({"CREDENTIALS_DIRECTORY": str(tmp_path), "BRIDGE_UPSTREAM_PASSWORD": "from-env"})
    assert s.upstream_password.value == "from-env"
    assert s.auth_secret.value == ""


def test_clock_skew_beyond_five_seconds_fails_with_a_fix() -> None:
    now = 1_800_000_000.0
    assert clock_check(now, 0.2, -0.9).ok
    bad = clock_check(now, 30, None)
    assert not bad.ok and "database +30.00 s" in bad.detail and "NTP" in bad.fix
    assert not clock_check(86400.0, None, None).ok  # a clock that was never set


def test_render_gives_one_line_per_check_and_a_fix_for_each_failure() -> None:
    text = render([Check("database", True, "reachable"), Check("upstream auth", False, "401", "set the password")])
    assert text.splitlines() == ["ok    database: reachable", "FAIL  upstream auth: 401", "      fix: set the password",
                                 "1 check(s) failed"]
