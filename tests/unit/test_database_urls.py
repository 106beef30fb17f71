"""`to_async_url`: libpq's multi-host form becomes the list of hosts SQLAlchemy hands to asyncpg (a
replicated PostgreSQL, docs/scaling.md "Failover"); single-host URLs are untouched."""

from __future__ import annotations

import pytest
from sqlalchemy.dialects.postgresql.asyncpg import dialect
from sqlalchemy.engine import make_url

from bridge.store.db import to_async_url


def connect_args(url: str) -> dict[str, object]:
    return dict(dialect().create_connect_args(make_url(to_async_url(url)))[1])


def test_two_hosts_and_the_session_attribute_reach_asyncpg() -> None:
    args = connect_args("postgresql://bridge:pw@db1:5433,db2:5434/bridge?target_session_attrs=read-write")
    assert args["host"] == ["db1", "db2"] and args["port"] == [5433, 5434]
    assert args["target_session_attrs"] == "read-write"
    assert (args["user"], args["password"], args["database"]) == ("bridge", "pw", "bridge")


def test_a_host_without_a_port_gets_postgresql_s_default() -> None:
    assert connect_args("postgresql://u@a,b:7/db")["port"] == [5432, 7]


@pytest.mark.parametrize("url", [
    "postgresql://u:p@h:5432/db",
    "postgresql://postgres:@/bridge?host=/tmp/sock",  # the embedded server's unix socket
    "postgres://u@h/db?sslmode=require",
])
def test_single_host_urls_are_only_given_the_driver(url: str) -> None:
    assert to_async_url(url) == "postgresql+asyncpg://" + url.split("://", 1)[1]


@pytest.mark.parametrize("url", ["postgresql://u@a,,b/db", "postgresql://u@a:x,b:5/db"])
def test_a_malformed_host_list_is_refused(url: str) -> None:
    with pytest.raises(ValueError, match="multi-host"):
        to_async_url(url)
