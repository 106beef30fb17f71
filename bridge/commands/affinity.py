"""Runtime affinity (docs/commands.md, "Runtime affinity"), pure: which upstream runtime a prompt goes
through so that the model sees the session's whole conversation.

The serve's two runtimes keep separate conversation stores in one session (docs/upstream.md §19): a
legacy turn is absent from a v2 model request and the other way round. So a prompt follows the runtime of
the session's latest turn (what the mirror stored); a session without a turn takes the runtime
OpenCode's own clients of that serve use, so that they can continue it with its memory: legacy on 1.x
(docs/upstream.md §13), v2 from 2.x on. `BRIDGE_PROMPT_RUNTIME` replaces that default (never the history:
forcing a runtime against a session's history would hide its earlier turns from the model).
"""

from __future__ import annotations

import re
from dataclasses import dataclass

RUNTIMES = ("legacy", "v2")
PROMPT_RUNTIME_SETTINGS = ("auto", *RUNTIMES)

# Why a runtime was chosen, as the command result's `runtime_basis`.
BASIS_HISTORY = "history"  # every turn of the session ran in this runtime
BASIS_MIXED = "mixed_history"  # turns of both runtimes: the latest one's, the other's turns stay unseen
BASIS_NEW = "no_turn"  # no turn yet: the runtime of the serve's own clients (or the configured one)

_VERSION = re.compile(r"\s*v?(\d+)(?:\.\d+)*")


@dataclass(frozen=True)
class TurnHistory:
    """What the mirror knows of a session's turns: the runtime of the latest one, and every runtime seen."""

    latest: str | None = None
    seen: frozenset[str] = frozenset()


@dataclass(frozen=True)
class RuntimeChoice:
    runtime: str
    basis: str

    @property
    def note(self) -> str | None:
        """A sentence for the result when the choice leaves turns out of the model's view."""
        if self.basis != BASIS_MIXED:
            return None
        other = "v2" if self.runtime == "legacy" else "legacy"
        return (f"this session has turns of both runtimes; the prompt continues the {self.runtime} "
                f"conversation (its latest turn), the model does not see the {other} turns")


def serve_major(version: str | None) -> int | None:
    """The major version of a serve's `/global/health` `version` (`"1.18.33"` → 1), None if unreadable."""
    m = _VERSION.match(version) if isinstance(version, str) else None
    return int(m.group(1)) if m else None


def native_runtime(version: str | None) -> str:
    """The runtime OpenCode's own clients (TUI, CLI, web app) of a serve of this version drive: legacy on
    1.x (docs/upstream.md §13), v2 from 2.0 on; an unknown version is taken as the one the bridge is
    verified against (1.x)."""
    major = serve_major(version)
    return "v2" if major is not None and major >= 2 else "legacy"


def choose_runtime(history: TurnHistory, setting: str, serve_version: str | None) -> RuntimeChoice:
    """The runtime of the next prompt of a session. `setting` is `BRIDGE_PROMPT_RUNTIME`."""
    if setting not in PROMPT_RUNTIME_SETTINGS:
        raise ValueError(f"prompt runtime setting must be one of {PROMPT_RUNTIME_SETTINGS}, not {setting!r}")
    if history.latest in RUNTIMES:
        assert history.latest is not None
        mixed = len(history.seen & set(RUNTIMES)) > 1
        return RuntimeChoice(history.latest, BASIS_MIXED if mixed else BASIS_HISTORY)
    default = native_runtime(serve_version) if setting == "auto" else setting
    return RuntimeChoice(default, BASIS_NEW)


def runtime_of_type(event_type: str) -> str:
    """The runtime that wrote a stored event, from its upstream type (`session.next.*` is v2's)."""
    return "v2" if event_type.startswith("session.next.") else "legacy"
