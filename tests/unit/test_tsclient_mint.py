"""`mintToken` of `@opencode-bridge/client/server` (clients/typescript/src/server/) against the bridge's own
claim rules: over a matrix of scope, approve, sessions, subject and lifetime, the package mints exactly the
tokens the bridge's `mint_token` mints and `verify_token` accepts, with the same claims, and refuses every
other combination."""

from __future__ import annotations

import itertools
import time
from typing import Any

from bridge.auth import MAX_TTL_S, mint_token, verify_token
from bridge.errors import AuthError
from tests.support.tsclient import PACKAGE, run_node

SECRET = "s" * 40
UPSTREAM = "127.0.0.1:4096"


def _cases() -> list[dict[str, Any]]:
    cases = []
    for scope, approve, sessions, subject in itertools.product(
        ("read", "prompt", "control"), (None, "none", "once", "always", "sometimes"),
        (None, [], ["ses_A", "ses_B", "ses_A"], ["ses_ok", "../etc"]),
        ("", "alice", " alice", "a\nb", "x" * 200, "x" * 201, "zoë 🙂"),
    ):
        case: dict[str, Any] = {"secret": SECRET, "upstream": UPSTREAM, "scope": scope, "subject": subject}
        if approve is not None:
            case["approve"] = approve
        if sessions is not None:
            case["sessions"] = sessions
        cases.append(case)
    base = {"secret": SECRET, "upstream": UPSTREAM, "scope": "prompt", "subject": "alice"}
    cases += [{**base, "ttlS": t} for t in (0, -5, 0.5, 1, 60, MAX_TTL_S, MAX_TTL_S + 1)]
    return cases


def _bridge_accepts(case: dict[str, Any], now: float) -> bool:
    try:
        token = mint_token(SECRET, UPSTREAM, case.get("sessions"), case.get("ttlS", 3600), case["subject"], now=now,
                           scope=case["scope"], approve=case.get("approve"))
        verify_token(token, SECRET, UPSTREAM, now=now)
    except (ValueError, AuthError):
        return False
    return True


def test_the_package_mints_exactly_what_the_bridge_accepts() -> None:
    now = float(int(time.time()))
    cases = [{**c, "now": now} for c in _cases()]
    results = run_node(PACKAGE / "test" / "node" / "mint.mjs", cases)
    assert len(results) == len(cases)
    minted = 0
    for case, result in zip(cases, results, strict=True):
        want = _bridge_accepts(case, now)
        assert ("token" in result) == want, (case, result)
        if not want:
            continue
        minted += 1
        claims = verify_token(result["token"], SECRET, UPSTREAM, now=now)
        expected = verify_token(mint_token(SECRET, UPSTREAM, case.get("sessions"), case.get("ttlS", 3600),
                                           case["subject"], now=now, scope=case["scope"],
                                           approve=case.get("approve")), SECRET, UPSTREAM, now=now)
        assert (claims.sessions, claims.scope, claims.approve, claims.subject, claims.expires_at) == (
            expected.sessions, expected.scope, expected.approve, expected.subject, expected.expires_at), case
    assert 30 < minted < len(cases) - 100  # both sides of the rules are exercised


def test_a_token_for_another_secret_or_upstream_is_refused() -> None:
    [result] = run_node(PACKAGE / "test" / "node" / "mint.mjs",
                        [{"secret": "t" * 40, "upstream": "other:1", "scope": "control", "subject": "ops"}])
    for secret, upstream in ((SECRET, "other:1"), ("t" * 40, UPSTREAM)):
        try:
            verify_token(result["token"], secret, upstream)
        except AuthError:
            continue
        raise AssertionError("accepted")
    assert verify_token(result["token"], "t" * 40, "other:1").approve == "once"  # the CLI's default for control
