"""Pure parsing of the sync protocol's wire shapes into `Envelope`s (docs/upstream.md §14, §15).

Three shapes, besides the durable stream that `bridge.events.parse_frame` reads:

- a **sync-log item**, one element of the `POST /sync/history` answer:
  `{id, aggregate_id, seq, type: "<name>.<version>", data}`;
- a **`/global/event` frame** `{directory, project?, payload}`, whose payload is either a bus event
  `{id, type, properties}` or the *sync twin* of a persisted event
  `{type: "sync", id, syncEvent: {id, type: "<name>.<version>", seq, aggregateID, data}}`;
- a **legacy `/event` frame**, the same bus event `{id, type, properties}` on its own.

Identity is the same from every source: one event has one `id`, one `seq`, one type name and one schema
version on the durable stream, `/history`, the sync log and the sync twin (docs/upstream.md §14). The
version suffix of the sync types is split off, so `Envelope.type` is always the bare name
(`session.next.step.ended`) and `Envelope.version` the number (2), as `durable.version` gives them.

`Envelope.raw` is the payload to store, chosen so that the same event stores the same bytes whichever
source delivered it (the writer treats a same-seq row with another payload as a conflict):

- `session.next.*` from the sync log: the durable-stream envelope `{id, type, durable: {aggregateID,
  seq, version}, data}`, rebuilt from the item; its `data` is the durable stream's, byte for byte;
- every other persisted event (the legacy ones): the sync-log item `{id, aggregate_id, seq, type, data}`,
  as received; a twin of it is rewritten into that form (only the key `aggregateID` differs, `data` is
  the same);
- a twin of a `session.next.*` event carries `data.timestamp` as an ISO string where the durable stream
  and the sync log have epoch milliseconds, so it is *not* the stored payload: `GlobalFrame.exact` is
  False and the event is to be taken from the durable stream or the sync log.

Bus events carry no seq: they are live-only (deltas, status, permissions) or the bus copy of an event
whose twin follows with the same id.
"""

from __future__ import annotations

from collections.abc import Iterable
from dataclasses import dataclass
from typing import Any

from bridge.errors import BadFrame
from bridge.events.envelope import Envelope, a_nonempty_str, an_object
from bridge.events.fields import is_int
from bridge.perf.frozen import build
from bridge.perf.jsonload import strict_loads

DURABLE_PREFIX = "session.next."  # the only persisted events that also reach the durable stream


def decode_json(text: str | bytes) -> object:
    """Strict JSON (no NaN/Infinity, no float overflow), any failure as `BadFrame("bad_json")`."""
    try:
        return strict_loads(text)
    except (ValueError, RecursionError) as exc:  # JSONDecodeError and bad UTF-8 are ValueErrors
        raise BadFrame("bad_json", str(exc)[:200]) from None


def split_type(versioned: str) -> tuple[str, int | None]:
    """`"session.next.step.ended.2"` → `("session.next.step.ended", 2)`; no numeric suffix → `(type, None)`."""
    name, dot, suffix = versioned.rpartition(".")
    if dot and name and suffix.isascii() and suffix.isdigit() and len(suffix) <= 9:
        return name, int(suffix)
    return versioned, None


def _persisted(event_id: str, versioned: str, seq: object, aggregate_id: object, data: object,
               item: dict[str, Any] | None = None) -> Envelope:
    """The envelope of one persisted event, from the fields the sync item and the twin share; a sync `item`
    that is not a durable type is kept as its raw, exactly as received."""
    if not is_int(seq) or seq < 0:
        raise BadFrame("bad_sync", f"seq must be an integer >= 0, got {seq!r:.40}")
    if not isinstance(aggregate_id, str) or not aggregate_id:
        raise BadFrame("bad_sync", f"aggregate id must be a non-empty string, got {aggregate_id!r:.40}")
    data = an_object(data, "data")
    name, version = split_type(versioned)
    session_id = data.get("sessionID")
    raw: dict[str, Any]
    if name.startswith(DURABLE_PREFIX):
        durable: dict[str, Any] = {"aggregateID": aggregate_id, "seq": seq}
        if version is not None:
            durable["version"] = version
        raw = {"id": event_id, "type": name, "durable": durable, "data": data}
    elif item is not None:
        raw = item
    else:
        raw = {"id": event_id, "aggregate_id": aggregate_id, "seq": seq, "type": versioned, "data": data}
    # Envelope(id=…, …), without its __init__ (bridge.perf.frozen): one per event of every sync-log answer
    return build(Envelope, {"id": event_id, "type": name, "seq": seq, "version": version, "aggregate_id": aggregate_id,
                            "session_id": session_id if isinstance(session_id, str) else aggregate_id, "data": data,
                            "raw": raw})


def parse_sync_item(obj: object) -> Envelope:
    """One item of a `POST /sync/history` answer, or `BadFrame`."""
    obj = an_object(obj, "sync item")
    event_id = a_nonempty_str(obj, "id")
    versioned = a_nonempty_str(obj, "type")
    return _persisted(event_id, versioned, obj.get("seq"), obj.get("aggregate_id"), obj.get("data", {}), obj)


def parse_sync_log(body: object) -> list[Envelope | BadFrame]:
    """A whole `/sync/history` answer: one result per item, in order (a bad item does not hide the rest)."""
    if not isinstance(body, list):
        raise BadFrame("bad_shape", f"sync log is a {type(body).__name__}, not an array")
    out: list[Envelope | BadFrame] = []
    for item in body:
        try:
            out.append(parse_sync_item(item))
        except BadFrame as exc:
            out.append(exc)
    return out


def parse_bus_event(obj: object) -> Envelope:
    """A bus event `{id, type, properties}` (legacy `/event` frame, `/global/event` payload); no seq."""
    obj = an_object(obj, "bus event")
    event_id = a_nonempty_str(obj, "id")
    event_type = a_nonempty_str(obj, "type")
    props = an_object(obj.get("properties", {}), "properties")
    session_id = props.get("sessionID")
    return Envelope(
        id=event_id,
        type=event_type,
        seq=None,
        version=None,
        aggregate_id=None,
        session_id=session_id if isinstance(session_id, str) else None,
        data=props,
        raw=obj,
    )


@dataclass(frozen=True)
class GlobalFrame:
    """One `/global/event` frame: where it happened, and the event it carries."""

    directory: str | None  # a directory, "global", or None (server.connected)
    project: str | None
    envelope: Envelope
    twin: bool  # a sync twin: persisted, carries the sync log's seq
    exact: bool  # envelope.raw is the payload the sync log / durable stream gives for this event
    raw: dict[str, Any]  # the whole frame as received


def parse_global_frame(data: str | bytes) -> GlobalFrame:
    """The `data:` text of one `/global/event` SSE event, or `BadFrame`."""
    return parse_global_object(decode_json(data))


def parse_global_object(obj: object) -> GlobalFrame:
    obj = an_object(obj, "global frame")
    payload = obj.get("payload")
    if not isinstance(payload, dict):
        raise BadFrame("bad_shape", "missing or non-object payload")
    directory, project = obj.get("directory"), obj.get("project")
    twin = payload.get("type") == "sync"
    env = _twin(payload) if twin else parse_bus_event(payload)
    return GlobalFrame(
        directory=directory if isinstance(directory, str) else None,
        project=project if isinstance(project, str) else None,
        envelope=env,
        twin=twin,
        exact=twin and not env.type.startswith(DURABLE_PREFIX),
        raw=obj,
    )


def _twin(payload: dict[str, Any]) -> Envelope:
    sync = payload.get("syncEvent")
    if not isinstance(sync, dict):
        raise BadFrame("bad_sync", "sync frame without a syncEvent object")
    event_id = a_nonempty_str(sync, "id", "bad_sync")
    versioned = a_nonempty_str(sync, "type", "bad_sync")
    return _persisted(event_id, versioned, sync.get("seq"), sync.get("aggregateID"), sync.get("data", {}))


@dataclass(frozen=True)
class ContiguousRun:
    """What a follower at `cursor` may store next from some persisted envelopes of one session."""

    events: list[Envelope]  # seq cursor+1, cursor+2, … without a hole, in seq order
    skipped: int  # at or below the cursor (already stored), or repeated: benign
    missing_from: int | None  # the first seq absent before a later one: repair from /sync/history


def contiguous_run(cursor: int, envelopes: Iterable[Envelope]) -> ContiguousRun:
    """The next gap-free run after `cursor` (the sync log is contiguous per aggregate, docs/upstream.md §14).

    For a `/sync/history` answer this is normally all of it; for sync twins, a `missing_from` means the
    live stream lost something and the log must be read from `cursor`. Envelopes without a seq are ignored.
    """
    by_seq: dict[int, Envelope] = {}
    skipped = 0
    for env in envelopes:
        if env.seq is None:
            continue
        if env.seq <= cursor or env.seq in by_seq:
            skipped += 1
            continue
        by_seq[env.seq] = env
    run: list[Envelope] = []
    while cursor + 1 + len(run) in by_seq:
        run.append(by_seq[cursor + 1 + len(run)])
    missing = cursor + 1 + len(run) if len(run) < len(by_seq) else None
    return ContiguousRun(events=run, skipped=skipped, missing_from=missing)
