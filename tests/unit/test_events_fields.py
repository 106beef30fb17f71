"""bridge.events.fields: the one set of typed reads the mapping layer uses (v2, legacy, sync frames)."""

from __future__ import annotations

import math

import pytest

from bridge.events.fields import (
    BIGINT_MAX,
    BIGINT_MIN,
    as_int,
    as_number,
    as_obj,
    as_str,
    is_int,
    location_directory,
)


def test_a_json_boolean_is_never_an_integer() -> None:
    assert not is_int(True) and as_int(False) is None
    assert as_number(True) is None


@pytest.mark.parametrize("value", ["x", 1, 1.5, None, [], {}])
def test_a_wrong_shape_reads_as_none_or_an_empty_object(value: object) -> None:
    assert as_str(value) == (value if isinstance(value, str) else None)
    assert as_obj(value) == (value if isinstance(value, dict) else {})


def test_one_overflow_rule_an_integer_is_a_number_when_a_double_holds_it() -> None:
    assert as_number(2**1023) == float(2**1023)  # the largest power of two a double holds
    assert as_number(2**1024) is None and as_number(-(10**400)) is None
    assert as_number(math.inf) is None and as_number(math.nan) is None
    assert as_number(7) == 7.0 and isinstance(as_number(7), float)


def test_the_bigint_bounds_are_postgresqls() -> None:
    assert (BIGINT_MIN, BIGINT_MAX) == (-(2**63), 2**63 - 1)


def test_a_directory_is_a_string_postgresql_can_hold() -> None:
    assert location_directory({"location": {"directory": "/srv/app"}}) == "/srv/app"
    assert location_directory({"location": {"directory": "/srv/\x00app"}}) is None
    assert location_directory({"location": "/srv"}) is None and location_directory([]) is None
