"""bridge.perf.frozen: hot-path instances built without `__init__` are the instances `__init__` would build."""

from __future__ import annotations

import dataclasses
import pickle
from datetime import UTC, datetime
from typing import Any

import pytest

from bench.write_path_phases import frames
from bridge.events import ChatEvent, Envelope, normalize, parse_frame
from bridge.events.syncframes import parse_sync_item
from bridge.store.payload import StorableText, storable_json_text
from bridge.store.writes.rows import PreparedEvent, prepare_event
from bridge.upstream.sse import SSEParser

NOW = datetime(2026, 1, 2, 3, 4, 5, tzinfo=UTC)


def _same_as_init(obj: Any) -> None:
    cls = type(obj)
    names = [f.name for f in dataclasses.fields(cls)]
    assert sorted(vars(obj)) == sorted(names)  # every field, defaults included, and nothing else
    again = cls(**{n: getattr(obj, n) for n in names})
    assert obj == again and repr(obj) == repr(again) and vars(obj) == vars(again)
    if _hashable(again):
        assert hash(obj) == hash(again)
    with pytest.raises(dataclasses.FrozenInstanceError):
        obj.seq = 1
    assert dataclasses.replace(obj) == obj
    if _picklable(again):
        assert pickle.loads(pickle.dumps(obj)) == obj


def _hashable(obj: Any) -> bool:
    try:
        hash(obj)
    except TypeError:  # a dict field (data, raw): as unhashable as the __init__-built one
        return False
    return True


def _picklable(obj: Any) -> bool:
    try:
        pickle.dumps(obj)
    except (TypeError, pickle.PicklingError):
        return False
    return True


def test_hot_path_instances_are_the_instances_init_builds() -> None:
    for text in frames("ses_frozen", 20):
        ev = normalize(parse_frame(text))
        assert isinstance(ev, ChatEvent) and isinstance(ev.envelope, Envelope)
        _same_as_init(ev.envelope)
        _same_as_init(ev)
        prepared = prepare_event("u", "ses_frozen", ev, NOW)
        assert isinstance(prepared, PreparedEvent)
        _same_as_init(prepared)
        stored = storable_json_text(ev.envelope.raw)
        assert isinstance(stored, StorableText)
        _same_as_init(stored)


def test_sync_items_and_sse_events_are_the_instances_init_builds() -> None:
    legacy = {"id": "e1", "aggregate_id": "ses_f", "seq": 3, "type": "message.updated.1",
              "data": {"sessionID": "ses_f", "info": {}}}
    v2 = {"id": "e2", "aggregate_id": "ses_f", "seq": 4, "type": "session.next.step.ended.2", "data": {}}
    for item in (legacy, v2):
        env = parse_sync_item(item)
        _same_as_init(env)
    assert parse_sync_item(legacy).raw is legacy  # a legacy item is kept exactly as received
    assert parse_sync_item(v2).raw == {"id": "e2", "type": "session.next.step.ended",
                                       "durable": {"aggregateID": "ses_f", "seq": 4, "version": 2}, "data": {}}
    (event,) = SSEParser().feed(b"data: {}\n\n")
    _same_as_init(event)


def test_every_extractor_names_chat_event_fields_only() -> None:
    # normalize() hands the extractors' keys to ChatEvent's __dict__: a misspelt one would not fail there.
    from bridge.events.normalize import _EXTRACTORS

    names = {f.name for f in dataclasses.fields(ChatEvent)}
    full = {"error": {"type": "x", "message": "m"}, "tokens": {"cache": {}}, "model": {}, "source": {}, "prompt": {}}
    for extractor in _EXTRACTORS.values():
        assert set(extractor({})) <= names
        assert set(extractor(full)) <= names
