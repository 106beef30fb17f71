"""Which OpenCode generation a serve is, and which upstream driver the bridge runs for it — pure.

A serve is recognised from what three routes answered (docs/upstream.md "OpenCode 2.x", "Recognition"):

- `GET /api/info` — 2.x's server identity `{version, pid, urls, paths}`; a 1.18.33 serve answers it with
  its web app's HTML page (200 `text/html`), which names no version;
- `GET /global/health` — 1.x's `{healthy, version}`; 2.x has no such route (its V1 routes answer HTML
  or 404);
- `GET /api/health` — `{healthy}` on 1.18.33, `{healthy, version, pid}` on 2.x: read last, only when
  neither of the others named a version.

The first JSON object with a string `version`, in that order, decides; its major number is the
generation (a 0.x version counts as 1). Nothing else is guessed: no version anywhere is "unknown", never
"1.x by default".
`choose_driver` turns a recognition and `BRIDGE_UPSTREAM_GENERATION` into the driver to run, or into the
one line that stops start-up.
"""

from __future__ import annotations

import re
from dataclasses import dataclass
from typing import Any

GENERATION_SETTINGS = ("auto", "1", "2")
# Tried in this order; the first that names a version decides.
PROBE_ROUTES = ("/api/info", "/global/health", "/api/health")
VERIFIED_1X = "1.18.33"

_VERSION = re.compile(r"v?([0-9]{1,4})(?![0-9])")


@dataclass(frozen=True)
class Probe:
    """What one route answered: no answer at all (`status` None: refused, reset, timed out), or a status,
    whether the body was JSON, and the decoded body (None when it was not JSON)."""

    route: str
    status: int | None
    json: bool = False
    body: Any = None


@dataclass(frozen=True)
class Recognition:
    """`generation` 1 or 2 (None: not recognised); `version` as the serve said it; `route` that said it;
    `reason` why it is not recognised (unreachable, unauthorized, no version)."""

    generation: int | None
    version: str | None = None
    route: str | None = None
    reason: str = ""

    @property
    def unauthorized(self) -> bool:
        return self.reason == "unauthorized"

    def describe(self) -> str:
        if self.generation is None:
            return f"not recognised ({self.reason})"
        return f"OpenCode {self.version} ({self.generation}.x, from GET {self.route})"


def major(version: Any) -> int | None:
    """`"2.0.17"` → 2, `"v1.18.33"` → 1; None when it does not start with a number."""
    m = _VERSION.match(version.lstrip()) if isinstance(version, str) else None
    return int(m.group(1)) if m else None


def _version_of(probe: Probe) -> str | None:
    if probe.status != 200 or not probe.json or not isinstance(probe.body, dict):
        return None
    body = probe.body
    if "version" not in body and isinstance(body.get("data"), dict):
        body = body["data"]  # tolerated: a `{data: …}` wrapper like most 1.x /api routes
    version = body.get("version")
    return version if isinstance(version, str) and major(version) is not None else None


def classify(probes: list[Probe]) -> Recognition:
    """The generation named by the first probe (in PROBE_ROUTES order) whose JSON body carries a version."""
    ordered = sorted(probes, key=lambda p: PROBE_ROUTES.index(p.route) if p.route in PROBE_ROUTES else 99)
    for probe in ordered:
        version = _version_of(probe)
        if version is not None:
            gen = major(version)
            assert gen is not None
            return Recognition(max(gen, 1), version, probe.route)
    if any(p.status == 401 for p in probes):
        return Recognition(None, reason="unauthorized")
    if not probes or all(p.status is None for p in probes):
        return Recognition(None, reason="unreachable")
    seen = ", ".join(f"{p.route} {p.status if p.status is not None else 'no answer'}"
                     + (" json" if p.json else "") for p in ordered)
    return Recognition(None, reason=f"no version in any answer: {seen}")


@dataclass(frozen=True)
class DriverChoice:
    """The driver to run (`generation`), or `refusal`: the one line that stops start-up. `settled` is False
    when the serve was not recognised yet (the driver is the configured or verified one, to be checked
    again once the serve answers)."""

    generation: int | None
    refusal: str | None = None
    settled: bool = True


def choose_driver(recognition: Recognition, setting: str, available: frozenset[int], upstream: str) -> DriverChoice:
    """The driver for this serve. `setting` is BRIDGE_UPSTREAM_GENERATION (auto | 1 | 2), `available` the
    generations this build has a driver for, `upstream` the serve's URL (without credentials)."""
    if setting not in GENERATION_SETTINGS:
        raise ValueError(f"generation setting must be one of {GENERATION_SETTINGS}, not {setting!r}")
    wanted = None if setting == "auto" else int(setting)
    found = recognition.generation
    if found is None:
        # Not recognised yet (down, or no password): the configured driver, else the verified one (1.x);
        # checked again when the serve answers.
        return DriverChoice(wanted or 1, settled=False)
    what = f"the upstream at {upstream} is OpenCode {recognition.version} (GET {recognition.route})"
    if wanted is not None and wanted != found:
        return DriverChoice(None, f"{what}, but BRIDGE_UPSTREAM_GENERATION={setting}: set it to auto (or "
                                  f"{found}), or point BRIDGE_UPSTREAM_URL at an OpenCode {setting}.x serve")
    if found not in available:
        return DriverChoice(None, f"{what}; this bridge has no OpenCode {found}.x driver (docs/upstream.md "
                                  f"§24): point BRIDGE_UPSTREAM_URL at an opencode serve 1.x (verified: "
                                  f"{VERIFIED_1X}) or 2.x")
    return DriverChoice(found)
