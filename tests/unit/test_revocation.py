"""The in-memory revocation list (bridge.revocation): what a refresh loads is what checks see; a failed
refresh keeps the last list and is counted. Pure apart from the injected loader."""

from __future__ import annotations

import asyncio

import pytest

from bridge import metrics
from bridge.auth import mint_token, verify_token
from bridge.errors import AuthError
from bridge.revocation import RevocationList

K = "k" * 40


async def test_a_refresh_is_what_every_check_sees_and_a_failed_one_keeps_the_last_list() -> None:
    answers: list[frozenset[str] | Exception] = [frozenset({"gone"}), OSError("database away")]

    async def load() -> frozenset[str]:
        got = answers.pop(0)
        if isinstance(got, Exception):
            raise got
        return got

    revocations = RevocationList(load)
    assert not revocations.revoked("gone")  # nothing loaded yet
    await revocations.refresh()
    token = mint_token(K, "up", None, 60, "alice", scope="prompt", jti="gone")
    with pytest.raises(AuthError) as e:
        verify_token(token, K, "up", revoked=revocations.revoked)
    assert e.value.code == "revoked"
    assert verify_token(mint_token(K, "up", jti="kept"), K, "up", revoked=revocations.revoked).jti == "kept"
    with pytest.raises(OSError):
        await revocations.refresh()
    assert revocations.revoked("gone")  # the list only grows: a failure never un-revokes


async def test_the_background_loop_counts_failures_and_goes_on(monkeypatch: pytest.MonkeyPatch) -> None:
    calls = 0

    async def load() -> frozenset[str]:
        nonlocal calls
        calls += 1
        if calls == 1:
            raise OSError("database away")
        if calls == 2:
            return frozenset({"late"})
        raise asyncio.CancelledError  # how the daemon ends the loop (not an Exception: never counted)

    revocations = RevocationList(load, refresh_s=0.0)
    before = metrics.REVOCATION_REFRESH_FAILURES._value.get()
    with pytest.raises(asyncio.CancelledError):
        await revocations.run()
    assert metrics.REVOCATION_REFRESH_FAILURES._value.get() == before + 1
    assert revocations.revoked("late") and calls == 3
