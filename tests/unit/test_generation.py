"""The serve's generation and the driver chosen for it (bridge.upstream.generation), exhaustively: every
combination of what the three probe routes can answer, every setting, every set of available drivers."""

from __future__ import annotations

import itertools
from typing import Any

import pytest
from hypothesis import given
from hypothesis import strategies as st

from bridge.upstream.generation import (
    GENERATION_SETTINGS,
    PROBE_ROUTES,
    Probe,
    Recognition,
    choose_driver,
    classify,
    major,
)

URL = "http://127.0.0.1:4096"
HTML = Probe("/api/info", 200, False)  # what 1.18.33 answers on /api/info (its web app's page)

# What each route can answer: nothing, an error status, HTML, JSON without a version, JSON with one.
ANSWERS: list[tuple[int | None, bool, Any]] = [
    (None, False, None), (401, True, {"_tag": "UnauthorizedError"}), (404, False, None), (500, True, {}),
    (200, False, None), (200, True, {"healthy": True}), (200, True, {"version": "1.18.33"}),
    (200, True, {"version": "2.0.17", "pid": 1}), (200, True, {"data": {"version": "2.1.0"}}),
    (200, True, {"version": 2}), (200, True, {"version": "unknown"}), (200, True, ["2.0.0"]),
]


def _expected(probes: list[Probe]) -> Recognition:
    """The rule, written out independently: the first route (in order) with a JSON object naming a version."""
    for route in PROBE_ROUTES:
        for p in probes:
            if p.route != route or p.status != 200 or not p.json or not isinstance(p.body, dict):
                continue
            body = p.body if "version" in p.body else p.body.get("data", {})
            v = body.get("version") if isinstance(body, dict) else None
            if isinstance(v, str) and v[:1].isdigit():
                return Recognition(max(int(v.split(".")[0]), 1), v, route)
    if any(p.status == 401 for p in probes):
        return Recognition(None, reason="unauthorized")
    if all(p.status is None for p in probes):
        return Recognition(None, reason="unreachable")
    return Recognition(None, reason="no version")


def test_classify_every_combination_of_answers() -> None:
    count = 0
    for combo in itertools.product(ANSWERS, repeat=len(PROBE_ROUTES)):
        probes = [Probe(route, status, js, body) for route, (status, js, body) in zip(PROBE_ROUTES, combo, strict=True)]
        for order in (probes, probes[::-1]):  # the order the answers arrive in does not matter
            got, want = classify(order), _expected(probes)
            assert (got.generation, got.version, got.route) == (want.generation, want.version, want.route)
            assert got.reason.startswith(want.reason)
            count += 1
    assert count == 2 * len(ANSWERS) ** 3


def test_the_real_answers() -> None:
    one = classify([HTML, Probe("/global/health", 200, True, {"healthy": True, "version": "1.18.33"}),
                    Probe("/api/health", 200, True, {"healthy": True})])
    assert one == Recognition(1, "1.18.33", "/global/health")
    assert one.describe() == "OpenCode 1.18.33 (1.x, from GET /global/health)"
    two = classify([Probe("/api/info", 200, True, {"version": "2.0.17", "pid": 7, "urls": [], "paths": {"tmp": "/t"}}),
                    Probe("/global/health", 200, False), Probe("/api/health", 200, True,
                                                                {"healthy": True, "version": "2.0.17", "pid": 7})])
    assert two == Recognition(2, "2.0.17", "/api/info")
    assert classify([]).reason == "unreachable"
    assert classify([Probe("/api/info", 404), Probe("/global/health", 404)]).describe().startswith(
        "not recognised (no version in any answer: /api/info 404, /global/health 404")


@given(st.integers(0, 9999), st.lists(st.integers(0, 999), max_size=3), st.sampled_from(["", "v", " "]))
def test_major_of_a_version(n: int, rest: list[int], prefix: str) -> None:
    assert major(prefix + ".".join(map(str, [n, *rest]))) == n


@given(st.text(max_size=12))
def test_major_of_anything_else_is_none(text: str) -> None:
    stripped = text.lstrip()
    stripped = stripped[1:] if stripped.startswith("v") else stripped
    digits = len(stripped) - len(stripped.lstrip("0123456789"))
    if not 1 <= digits <= 4:
        assert major(text) is None
    else:
        assert major(text) == int(stripped[:digits])
    assert major(None) is None and major(2) is None


@pytest.mark.parametrize("setting", GENERATION_SETTINGS)
@pytest.mark.parametrize("found", [None, 1, 2, 3])
@pytest.mark.parametrize("available", [frozenset({1}), frozenset({1, 2}), frozenset({2}), frozenset()])
def test_choose_driver_every_case(setting: str, found: int | None, available: frozenset[int]) -> None:
    rec = Recognition(found, f"{found}.0.5", "/api/info") if found else Recognition(None, reason="unreachable")
    choice = choose_driver(rec, setting, available, URL)
    wanted = None if setting == "auto" else int(setting)
    if found is None:
        assert (choice.generation, choice.refusal, choice.settled) == (wanted or 1, None, False)
        return
    assert choice.settled
    if (wanted is not None and wanted != found) or found not in available:
        assert choice.generation is None and choice.refusal is not None
        line = choice.refusal
        assert "\n" not in line and f"OpenCode {found}.0.5" in line and URL in line  # one line, names the version
        assert ("BRIDGE_UPSTREAM_GENERATION" in line) == (wanted is not None and wanted != found)
    else:
        assert (choice.generation, choice.refusal) == (found, None)


def test_refusal_lines_say_what_to_do() -> None:
    two = Recognition(2, "2.0.17", "/api/info")
    three = classify([Probe("/api/info", 200, True, {"version": "3.0.0"})])
    assert three.generation == 3
    off = choose_driver(three, "auto", frozenset({1, 2}), URL).refusal
    assert off == ("the upstream at http://127.0.0.1:4096 is OpenCode 3.0.0 (GET /api/info); this bridge has no "
                   "OpenCode 3.x driver (docs/upstream.md §24): point BRIDGE_UPSTREAM_URL at an opencode serve 1.x "
                   "(verified: 1.18.33) or 2.x")
    assert classify([Probe("/api/info", 200, True, {"version": "0.9"})]).generation == 1
    forced = choose_driver(two, "1", frozenset({1, 2}), URL).refusal
    assert forced is not None and "BRIDGE_UPSTREAM_GENERATION=1: set it to auto (or 2)" in forced
    with pytest.raises(ValueError, match="generation setting"):
        choose_driver(two, "3", frozenset({1}), URL)
