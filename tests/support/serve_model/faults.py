"""A fault plan: what a test makes the serve do wrong, read by every adapter the same way.

Route names: "list", "history", "durable", "permission", "question", "live" (the live reader's route,
whichever stream it reads), "global", "sync".
"""

from __future__ import annotations

from dataclasses import dataclass, field

from tests.support.serve_model.frames import Answer, injected


@dataclass
class FaultPlan:
    fail_status: dict[str, int] = field(default_factory=dict)  # route name -> status to answer with
    sync_drop_next: int = 0  # the next N `POST /sync/history` have their connection cut, unanswered
    global_paused: bool = False  # True: /global/event frames are lost (as while a reader is away)
    hung: set[int] = field(default_factory=set)  # durable streams (by request id) gone silent forever

    def failure(self, *routes: str) -> Answer | None:
        """The injected error of the first of `routes` that has one."""
        for route in routes:
            if status := self.fail_status.get(route):
                return injected(status, route)
        return None

    def drop_sync(self) -> bool:
        """True when this `POST /sync/history` is to be cut (and counts it)."""
        if self.sync_drop_next <= 0:
            return False
        self.sync_drop_next -= 1
        return True
