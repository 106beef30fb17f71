from __future__ import annotations

import pytest
from sqlalchemy.ext.asyncio import AsyncEngine

from bridge.store.events_store import EventStore

UPSTREAM = "it-upstream"


@pytest.fixture
def store(engine: AsyncEngine) -> EventStore:
    return EventStore(engine, UPSTREAM)
