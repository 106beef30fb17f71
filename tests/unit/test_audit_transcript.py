"""The transcript is a pure function of stored rows (captures of the real server as input)."""

from __future__ import annotations

import json
import random
from pathlib import Path
from typing import Any

from bridge.audit.transcript import build_transcript
from bridge.events import kind_of

CAPTURES = Path(__file__).resolve().parents[2] / "fixtures" / "opencode-1.18.33"


def rows_of(scenario: str) -> list[dict[str, Any]]:
    out = []
    for line in (CAPTURES / scenario / "durable.sse").read_text().splitlines():
        if line.startswith("data: "):
            env = json.loads(line[6:])
            out.append({"seq": env["durable"]["seq"], "kind": kind_of(env["type"]), "payload": env})
    return out


def shape(entries: list[dict[str, Any]]) -> list[Any]:
    out: list[Any] = []
    for e in entries:
        if e["type"] == "assistant":
            out.append(("assistant", e["finish"], [(p["type"], p.get("tool") or p.get("text"), p.get("status"))
                                                   for p in e["parts"]]))
        else:
            out.append((e["type"], e.get("text")))
    return out


def test_tool_turn_capture_becomes_prompt_tool_steps_and_final_text() -> None:
    t = build_transcript(rows_of("b-tool-turn"))
    assert shape(t)[:4] == [
        ("user", "MOCK:tool Run echo, then read hello.txt. [022510]"),
        ("assistant", "tool-calls", [("tool", "bash", "success")]),
        ("assistant", "tool-calls", [("tool", "read", "success")]),
        ("assistant", "stop", [("text", "Done: the tool returned its output.", None)]),
    ]
    bash = t[1]["parts"][0]
    assert bash["input"] == {"command": "echo hi", "description": "Print hi"}
    assert bash["output_text"].startswith("hi\n")
    assert t[0]["delivery"] == "steer" and t[0]["started_seq"] == 2
    assert t[3]["tokens"]["output"] == 10 and t[3]["complete"]


def test_failing_tool_keeps_its_error() -> None:
    t = build_transcript(rows_of("b-tool-turn"))
    failed = [p for e in t if e["type"] == "assistant" for p in e["parts"] if p.get("status") == "failed"]
    assert len(failed) == 1 and failed[0]["error"]["type"] == "unknown" and failed[0]["error"]["message"]


def test_interrupt_during_a_tool_is_flagged() -> None:
    t = build_transcript(rows_of("d2-interrupt-tool"))
    steps = [e for e in t if e["type"] == "assistant"]
    assert steps[-1]["interrupted"] and steps[-1]["parts"][0]["interrupted"]


def test_interrupt_during_text_keeps_the_partial_text_and_the_error() -> None:
    t = build_transcript(rows_of("d1-interrupt-text"))
    last = [e for e in t if e["type"] == "assistant"][-1]
    assert last["finish"] == "error" and last["interrupted"]
    assert last["parts"][0]["complete"]


def test_reasoning_parts_are_kept() -> None:
    t = build_transcript(rows_of("b2-reasoning-turn"))
    kinds = [p["type"] for e in t if e["type"] == "assistant" for p in e["parts"]]
    assert "reasoning" in kinds and "text" in kinds


def test_same_rows_in_any_order_give_the_same_transcript() -> None:
    rows = rows_of("e1-steer-queue-during-tool")
    shuffled = rows[:]
    random.Random(7).shuffle(shuffled)
    assert build_transcript(shuffled) == build_transcript(rows)
    assert json.dumps(build_transcript(rows))  # JSON-serializable as is


def test_a_turn_left_open_by_a_restart_is_incomplete() -> None:
    rows = [r for r in rows_of("a-text-turn") if r["kind"] not in ("text:end", "step:end")]
    step = next(e for e in build_transcript(rows) if e["type"] == "assistant")
    assert not step["complete"] and step["parts"][0]["text"] is None


def test_read_tool_output_comes_from_structured_content() -> None:
    t = build_transcript(rows_of("b-tool-turn"))
    assert t[2]["parts"][0]["output_text"] == "hello from proj\n"
