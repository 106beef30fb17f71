"""Wiring of the fan-out from settings: auth modes, origins, queue limits (no I/O: the engine never connects)."""

from __future__ import annotations

import math
from pathlib import Path

import pytest
from structlog.testing import capture_logs

from bridge.auth import mint_token
from bridge.config import Secret, Settings
from bridge.errors import AuthError
from bridge.fanout.service import FanoutPart, auth_secret
from bridge.store.db import make_engine

URL = "postgresql://u:p@127.0.0.1:1/none"


def fanout(tmp_path: Path, **kw: object) -> FanoutPart:
    settings = Settings(upstream_name="up", state_dir=tmp_path, **kw)  # type: ignore[arg-type]
    return FanoutPart(settings, make_engine(URL), URL, secret=auth_secret(settings))


def test_disabled_auth_is_logged_loudly_and_still_needs_a_token_of_a_per_start_secret(tmp_path: Path) -> None:
    with capture_logs() as logs:
        settings = Settings(upstream_name="up", state_dir=tmp_path, auth_disabled=True)
        secret, again = auth_secret(settings), auth_secret(settings)
        f = FanoutPart(settings, make_engine(URL), URL, secret=secret)
    assert any(e["event"] == "AUTH_PER_START_TOKEN" and e["log_level"] == "warning" for e in logs)
    assert secret != again and len(secret) >= 32  # a new one at every start, never stored
    assert not (tmp_path / "auth_secret").exists()
    with pytest.raises(AuthError) as e:
        f.service.authenticate(None)  # no token: refused, as in every mode
    assert e.value.code == "missing"
    claims = f.service.authenticate(mint_token(secret, "up", None, 60, "dev", scope="control"))
    assert claims.allows("ses_any") and not math.isinf(claims.expires_at)


def test_without_a_configured_secret_one_is_created_in_the_state_dir_and_used(tmp_path: Path) -> None:
    f = fanout(tmp_path)
    secret = (tmp_path / "auth_secret").read_text().strip()
    assert f.service.authenticate(mint_token(secret, "up", ["ses_a"])).sessions == frozenset({"ses_a"})
    with pytest.raises(AuthError) as e:
        f.service.authenticate(None)
    assert e.value.code == "missing"


def test_origins_and_queue_limits_come_from_settings(tmp_path: Path) -> None:
    f = fanout(tmp_path, auth_secret=Secret("k" * 40), allowed_origins=" https://a.example/, https://b.example ",
               ws_queue_max_messages=10, ws_queue_max_bytes=1000)
    assert f.service.allowed_origins == frozenset({"https://a.example", "https://b.example"})
    assert (f.service.limits.max_messages, f.service.limits.max_bytes) == (10, 1000)
    assert f.service.secret == "k" * 40
