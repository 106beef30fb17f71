from __future__ import annotations

from pathlib import Path

import jwt
import pytest

from bridge.auth import VerifiedTokens, bearer_token, load_or_create_secret, mint_token, verify_token
from bridge.errors import AuthError

NOW = 1_800_000_000.0
K = "k" * 64  # long enough for HS512 too: the HS512 case must fail on the algorithm, not on a warning
OTHER = "o" * 64


def test_a_token_for_listed_sessions_allows_only_those() -> None:
    tok = mint_token(K, "up", ["ses_A", "ses_B"], ttl_s=60, now=NOW)
    claims = verify_token(tok, K, "up", now=NOW + 1)
    assert claims.allows("ses_A") and claims.allows("ses_B") and not claims.allows("ses_C")
    with pytest.raises(AuthError) as e:
        claims.require("ses_C")
    assert e.value.code == "forbidden"


def test_a_token_without_sessions_allows_every_session_of_its_upstream() -> None:
    claims = verify_token(mint_token(K, "up", None, now=NOW), K, "up", now=NOW)
    assert claims.sessions is None and claims.allows("anything")


@pytest.mark.parametrize(
    ("token", "secret", "upstream", "now", "code"),
    [
        (None, K, "up", NOW, "missing"),
        ("", K, "up", NOW, "missing"),
        ("not.a.jwt", K, "up", NOW, "invalid"),
        (mint_token(OTHER, "up", now=NOW), K, "up", NOW, "invalid"),
        (mint_token(K, "up", ttl_s=10, now=NOW), K, "up", NOW + 10, "expired"),
        (mint_token(K, "up2", now=NOW), K, "up", NOW, "wrong_upstream"),
        (jwt.encode({"iss": "opencode-bridge", "upstream": "up", "exp": NOW + 5, "sessions": "ses_A"}, K),
         K, "up", NOW, "invalid"),
        (jwt.encode({"upstream": "up", "exp": NOW + 5}, K), K, "up", NOW, "invalid"),
        (jwt.encode({"iss": "opencode-bridge", "upstream": "up", "exp": NOW + 5}, K, algorithm="HS512"),
         K, "up", NOW, "invalid"),
    ],
)
def test_bad_tokens_are_refused_with_a_stable_code(token, secret, upstream, now, code) -> None:
    with pytest.raises(AuthError) as e:
        verify_token(token, secret, upstream, now=now)
    assert e.value.code == code


def test_bearer_header_wins_over_query_token() -> None:
    assert bearer_token({"Authorization": "Bearer abc"}, {"token": "xyz"}) == "abc"
    assert bearer_token({}, {"token": "xyz"}) == "xyz"
    assert bearer_token({"Authorization": "Basic abc"}, {}) is None


def test_generated_secret_is_kept_private_and_reused(tmp_path: Path) -> None:
    first = load_or_create_secret("", tmp_path / "state")
    assert load_or_create_secret("", tmp_path / "state") == first
    assert (tmp_path / "state" / "auth_secret").stat().st_mode & 0o077 == 0
    assert load_or_create_secret("configured", tmp_path / "state") == "configured"


def test_a_new_token_id_never_reads_as_a_command_line_option() -> None:
    from bridge.auth import new_jti

    ids = [new_jti() for _ in range(2000)]  # a url-safe id began with "-" one time in 64
    assert not any(i.startswith("-") for i in ids) and len(set(ids)) == len(ids)


# --- a missing `approve` claim (docs/security.md, "Tokens") ----------------------------------------------

@pytest.mark.parametrize("scope", ["read", "prompt", "control"])
def test_a_missing_approve_claim_means_the_cli_default_for_the_scope(scope: str) -> None:
    from bridge.auth import default_approve
    from bridge.cli import _parser

    payload = {"iss": "opencode-bridge", "upstream": "up", "iat": NOW, "exp": NOW + 60, "jti": "j1", "scope": scope,
               "sub": "backend"}
    claims = verify_token(jwt.encode(payload, K, algorithm="HS256"), K, "up", now=NOW)
    cli = _parser().parse_args(["token", "--scope", scope, "--subject", "backend"])
    assert cli.approve is None  # the CLI leaves it to mint_token: default_approve(scope), the same function
    assert claims.approve == default_approve(scope)
    assert claims.approve == ("none" if scope == "read" else "once")


@pytest.mark.parametrize(("scope", "approve"), [("read", "none"), ("prompt", "none"), ("prompt", "once"),
                                                ("control", "none"), ("control", "always")])
def test_a_minted_token_always_states_its_approve(scope: str, approve: str) -> None:
    token = mint_token(K, "up", None, 60, "backend", now=NOW, scope=scope, approve=approve)
    assert jwt.decode(token, options={"verify_signature": False})["approve"] == approve
    assert verify_token(token, K, "up", now=NOW).approve == approve


def test_a_cached_token_is_still_refused_once_expired_or_revoked() -> None:
    cache = VerifiedTokens()
    tok = mint_token(K, "up", ["ses_A"], ttl_s=60, now=NOW, jti="jcached")
    first = verify_token(tok, K, "up", now=NOW, cache=cache)
    assert len(cache) == 1 and verify_token(tok, K, "up", now=NOW + 30, cache=cache) is first  # not decoded again
    revoked = {"jcached"}
    with pytest.raises(AuthError) as e:
        verify_token(tok, K, "up", now=NOW + 30, revoked=revoked.__contains__, cache=cache)
    assert e.value.code == "revoked"
    with pytest.raises(AuthError) as e:
        verify_token(tok, K, "up", now=NOW + 60, cache=cache)
    assert e.value.code == "expired"


def test_refused_tokens_are_not_cached_and_another_secret_or_upstream_starts_afresh() -> None:
    cache = VerifiedTokens()
    for token, secret, upstream in ((mint_token(OTHER, "up", now=NOW), K, "up"), ("not.a.jwt", K, "up"),
                                    (mint_token(K, "up2", now=NOW), K, "up")):
        with pytest.raises(AuthError):
            verify_token(token, secret, upstream, now=NOW, cache=cache)
    assert len(cache) == 0
    tok = mint_token(K, "up", now=NOW)
    verify_token(tok, K, "up", now=NOW, cache=cache)
    with pytest.raises(AuthError) as e:  # the cached entry is not taken for a context with another secret
        verify_token(tok, OTHER, "up", now=NOW, cache=cache)
    assert e.value.code == "invalid" and len(cache) == 0
    with pytest.raises(AuthError) as e:
        verify_token(mint_token(K, "up", now=NOW), K, "up2", now=NOW, cache=cache)
    assert e.value.code == "wrong_upstream"


def test_a_full_cache_drops_the_expired_then_the_older_half() -> None:
    cache = VerifiedTokens(max_entries=4)
    short = [mint_token(K, "up", ttl_s=10, now=NOW, jti=f"jshort{i}") for i in range(2)]
    long = [mint_token(K, "up", ttl_s=600, now=NOW, jti=f"jlong{i}") for i in range(4)]
    for tok in [*short, *long[:2]]:
        verify_token(tok, K, "up", now=NOW, cache=cache)
    verify_token(long[2], K, "up", now=NOW + 20, cache=cache)  # full: the two expired go
    assert len(cache) == 3 and cache.get(short[0]) is None
    verify_token(long[3], K, "up", now=NOW + 20, cache=cache)
    verify_token(mint_token(K, "up", ttl_s=600, now=NOW, jti="jlast"), K, "up", now=NOW + 20, cache=cache)
    assert len(cache) == 3 and cache.get(long[0]) is None and cache.get(long[3]) is not None
