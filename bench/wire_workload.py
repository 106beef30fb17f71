"""The events of `bench.wire`'s fake serve, pre-encoded for every surface they appear on (pure, no I/O
but reading the captures once).

A session's sync log is gap-free from seq 0 (docs/upstream.md §14): `session.created.1` at seq 0, then
events mixing both runtimes — every `legacy_every`-th seq a legacy event (`session.updated`,
`message.updated`, `message.part.updated` of `fixtures/opencode-1.18.33/x9-sync-history`), the others the
v2 tool turn of `fixtures/opencode-1.18.33/b-tool-turn`, retargeted to the session. Each event is encoded
once, as:
- its sync-log item `{id, aggregate_id, seq, type: "<name>.<version>", data}` (§14);
- for a v2 event, its durable-stream frame `data: {id, type, durable, data}` and its `/history` item
  (§3; legacy events are never on either: the durable stream shows their seqs as gaps);
- its `/global/event` frames (§15): the bus event and its `sync` twin, v2 timestamps as ISO strings, and
  before every v2 `*.ended` a bus-only delta (deltas are never persisted).
"""

from __future__ import annotations

import asyncio
import bisect
import json
from dataclasses import dataclass, field
from functools import cache
from pathlib import Path
from typing import Any

from tests.support.serve_model.frames import dumps, global_frames, iso, sync_item

FIXTURES = Path("fixtures/opencode-1.18.33")
DIRECTORY = "/srv/agent/proj"
BASE_MS = 1796112175493  # the captures' time: data.timestamp of a v2 event, epoch ms


@dataclass(frozen=True)
class WireEvent:
    seq: int
    id: str
    log: bytes  # the sync-log item (JSON)
    globals: bytes  # every /global/event frame of it (`data: …\n\n`, bus event, twin, delta)
    durable: bytes | None  # the durable-stream frame (v2 only)
    history: bytes | None  # the /history item (JSON, v2 only)


def session_id(k: int) -> str:
    """`ses_` + 26 characters, like the upstream's (bridge.ids)."""
    return f"ses_wirebench{k:017d}"


def event_id(k: int, seq: int) -> str:
    """`evt_` + 26 characters, in seq order within a session (docs/upstream.md §2)."""
    return f"evt_{seq:09d}{k:08d}wirebench"


@cache
def _v2_templates() -> tuple[str, list[dict[str, Any]]]:
    lines = (FIXTURES / "b-tool-turn/durable.sse").read_text().splitlines()
    envs = [json.loads(line[6:]) for line in lines if line.startswith("data: ")]
    return envs[0]["durable"]["aggregateID"], envs


@cache
def _legacy_templates() -> tuple[str, dict[str, Any], list[dict[str, Any]]]:
    """(the capture's session id, its seq-0 `session.created.1`, its legacy sync-log items)."""
    whole = json.loads((FIXTURES / "x9-sync-history/06-sync-history-empty.json").read_text())["response"]["body"]
    legacy = [i for i in whole if i["seq"] > 0 and not i["type"].startswith("session.next.")]
    return whole[0]["aggregate_id"], whole[0], legacy


@cache
def _delta_template() -> tuple[str, dict[str, Any]]:
    for line in (FIXTURES / "x11-global-event-v2/global.sse").read_text().splitlines():
        if '"session.next.text.delta"' in line:
            frame = json.loads(line[6:])
            return frame["payload"]["properties"]["sessionID"], frame
    raise RuntimeError("no text delta in x11-global-event-v2/global.sse")


def _retarget(obj: Any, old: str, new: str) -> Any:
    return json.loads(json.dumps(obj).replace(old, new))


def _frames(frames: list[dict[str, Any]]) -> bytes:
    return b"".join(f"data: {dumps(f)}\n\n".encode() for f in frames)


def created(k: int, live: bool = False) -> WireEvent:
    """Seq 0, `session.created.1`: in the sync log only (a pre-existing session's creation is long gone
    from the live stream; the durable stream and /history never carry it, §3.1). `live`: a session created
    now, whose creation `/global/event` carries too (its bus event and sync twin, §15)."""
    old, item, _ = _legacy_templates()
    sid = session_id(k)
    item = {**_retarget(item, old, sid), "id": event_id(k, 0), "seq": 0}
    frames = b""
    if live:
        name, _, version = item["type"].rpartition(".")
        env = {"id": item["id"], "type": name, "data": item["data"],
               "durable": {"aggregateID": sid, "seq": 0, "version": int(version)}}
        frames = _frames(global_frames(env, DIRECTORY))
    return WireEvent(0, item["id"], dumps(item).encode(), frames, None, None)


def event(k: int, seq: int, legacy_every: int) -> WireEvent:
    """Seq `seq` (>= 1) of session `k`: legacy when `legacy_every` divides it, else v2."""
    sid, eid = session_id(k), event_id(k, seq)
    if legacy_every and seq % legacy_every == 0:
        old, _, legacy = _legacy_templates()
        tpl = legacy[(seq // legacy_every) % len(legacy)]
        name, _, version = tpl["type"].rpartition(".")
        item = {"id": eid, "aggregate_id": sid, "seq": seq, "type": tpl["type"],
                "data": _retarget(tpl["data"], old, sid)}
        env = {"id": eid, "type": name, "data": item["data"],
               "durable": {"aggregateID": sid, "seq": seq, "version": int(version)}}
        return WireEvent(seq, eid, dumps(item).encode(), _frames(global_frames(env, DIRECTORY)), None, None)
    old, envs = _v2_templates()
    tpl = envs[seq % len(envs)]
    env = {"id": eid, "type": tpl["type"],
           "durable": {"aggregateID": sid, "seq": seq, "version": tpl["durable"]["version"]},
           "data": {**_retarget(tpl["data"], old, sid), "timestamp": BASE_MS + seq}}
    text = dumps(env)
    frames = global_frames(env, DIRECTORY)
    if env["type"].endswith(".ended"):
        dold, delta = _delta_template()
        delta = _retarget(delta, dold, sid)
        delta["payload"]["id"] = f"evt_{seq:09d}{k:08d}wiredelta"
        delta["payload"]["properties"]["timestamp"] = iso({"timestamp": BASE_MS + seq})["timestamp"]
        frames.insert(0, delta)
    return WireEvent(seq, eid, dumps(sync_item(env)).encode(), _frames(frames),
                     f"data: {text}\n\n".encode(), text.encode())


def session_item(k: int) -> dict[str, Any]:
    """The session as `GET /api/session` lists it (docs/upstream.md §6)."""
    return {"id": session_id(k), "projectID": "wirebench", "cost": 0,
            "tokens": {"input": 0, "output": 0, "reasoning": 0, "cache": {"read": 0, "write": 0}},
            "time": {"created": BASE_MS, "updated": BASE_MS}, "title": f"wirebench {k}",
            "location": {"directory": DIRECTORY}}


@dataclass
class WireSession:
    """One session upstream: its log, its v2 subset, and the durable streams waiting for more."""

    k: int
    id: str
    seqs: list[int] = field(default_factory=list)  # the log's seqs (gap-free from 0)
    log: list[bytes] = field(default_factory=list)
    ids: list[str] = field(default_factory=list)
    v2_seqs: list[int] = field(default_factory=list)
    durable: list[bytes] = field(default_factory=list)
    history: list[bytes] = field(default_factory=list)
    waiters: list[asyncio.Future[None]] = field(default_factory=list)

    def after(self, cutoff: int) -> list[bytes]:
        """Its sync-log items after `cutoff` (the log is in seq order)."""
        return self.log[bisect.bisect_right(self.seqs, cutoff):]

    def add(self, e: WireEvent) -> None:
        self.seqs.append(e.seq)
        self.log.append(e.log)
        self.ids.append(e.id)
        if e.durable is not None and e.history is not None:
            self.v2_seqs.append(e.seq)
            self.durable.append(e.durable)
            self.history.append(e.history)
        for f in self.waiters:
            if not f.done():
                f.set_result(None)
        self.waiters.clear()
