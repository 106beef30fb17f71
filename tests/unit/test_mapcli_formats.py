"""`opencode-bridge map` on the part-2 formats: a /sync/history array and a /global/event capture."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

from bridge.mapcli import run_map

FIXTURES = Path(__file__).resolve().parents[2] / "fixtures" / "opencode-1.18.33"


def run(path: Path, tmp_path: Path) -> tuple[int, list[dict[str, Any]]]:
    out = tmp_path / "out.jsonl"
    with out.open("w") as f:
        rc = run_map(str(path), f)
    return rc, [json.loads(line) for line in out.read_text().splitlines()]


def test_map_prints_one_line_per_item_of_a_sync_log_array(tmp_path: Path) -> None:
    exchange = json.loads((FIXTURES / "x9-sync-history" / "04-sync-history-sid-0.json").read_text())
    array = tmp_path / "sync.json"
    array.write_text(json.dumps(exchange["response"]["body"]))
    rc, lines = run(array, tmp_path)
    assert rc == 0
    assert [v["seq"] for v in lines] == list(range(1, 45))
    assert lines[-1] == {**lines[-1], "kind": "step:end", "type": "session.next.step.ended", "finish": "stop"}
    kinds = [v["kind"] for v in lines]
    assert kinds.count("prompt:admitted") == 2  # the legacy turn's prompt, then the v2 one
    assert {"tool:start", "tool:success", "text:end", "step:start"} <= set(kinds)
    # The captured exchange itself is accepted too and gives the same lines.
    assert run(FIXTURES / "x9-sync-history" / "04-sync-history-sid-0.json", tmp_path) == (0, lines)


def test_map_prints_one_line_per_global_event_frame_with_directory_and_twin(tmp_path: Path) -> None:
    path = FIXTURES / "x7-global-event-legacy" / "global.sse"
    rc, lines = run(path, tmp_path)
    assert rc == 0
    assert len(lines) == path.read_bytes().count(b"data: ")
    assert lines[0]["kind"] == "server:connected" and lines[0]["directory"] is None
    twins = [v for v in lines if v["twin"]]
    assert twins and all(v["seq"] is not None for v in twins)
    assert all(v["seq"] is None for v in lines if not v["twin"])
    assert {v["kind"] for v in twins} >= {"prompt:admitted", "step:start", "text:end", "step:end"}
    assert len({v["directory"] for v in twins}) == 2


def test_map_reports_bad_sync_items_and_rejects_json_that_is_no_sync_log(tmp_path: Path) -> None:
    bad = tmp_path / "bad.json"
    bad.write_text(json.dumps([{"id": "e", "type": "message.updated.1", "seq": "x", "aggregate_id": "s"}]))
    assert run(bad, tmp_path) == (0, [{"kind": "bad_frame", "reason": "bad_sync",
                                       "detail": "seq must be an integer >= 0, got 'x'"}])
    other = tmp_path / "other.json"
    other.write_text('{"data": []}')
    assert run(other, tmp_path) == (1, [])
