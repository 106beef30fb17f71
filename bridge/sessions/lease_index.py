"""The keeper's two questions after each heartbeat, without a Python walk of every warm session (pure;
docs/lifecycle.md "Timers at 10,000 sessions").

The heartbeat answers with every lease it renewed ({session: epoch}, 10,000 at 10,000 warm sessions).
Comparing that with the warm sessions one by one in Python every 5 s was most of an idle daemon's own
work. Almost always nothing differs, and that is one comparison of two dict views in C; only when it
does are the differing sessions picked out.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping


def not_renewed(epochs: Mapping[str, int], held: Mapping[str, int]) -> list[str]:
    """Sessions we claimed (`epochs`) whose epoch the heartbeat did not renew (`held`)."""
    if epochs.items() <= held.items():
        return []
    return [sid for sid, epoch in epochs.items() if held.get(sid) != epoch]


def strays(warm: Mapping[str, object], held: Mapping[str, int]) -> Iterable[str]:
    """Leases the heartbeat renewed for sessions that are not warm here."""
    if held.keys() <= warm.keys():
        return []
    return [sid for sid in held if sid not in warm]
