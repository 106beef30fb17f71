"""bench.stage_map: samples to stages (the per-stage table of BENCHMARKS.md must add up and name the right stage)."""

from __future__ import annotations

from hypothesis import given
from hypothesis import strategies as st

from bench.stage_map import REST, STAGES, parse_raw_line, stage_of, tabulate

ROOT = "/work/tree"
LOOP = ("/usr/lib/python3.11/asyncio/events.py", "Handle._run")


def f(path: str, func: str) -> tuple[str, str]:
    return (f"{ROOT}/{path}", func)


def test_innermost_named_frame_decides() -> None:
    durable = f("bridge/upstream/durable.py", "_read")
    parse = f("bridge/events/envelope.py", "parse_frame")
    jsonload = f("bridge/perf/jsonload.py", "strict_decode")
    assert stage_of([LOOP, durable]) == "ingest bookkeeping"
    assert stage_of([LOOP, durable, parse]) == "parsing"
    assert stage_of([LOOP, durable, parse, jsonload]) == "parsing"
    counter = f("venv/lib/python3.11/site-packages/prometheus_client/metrics.py", "inc")
    assert stage_of([LOOP, f("bridge/upstream/ingest.py", "_observe"), counter]) == "metrics and logs"
    tally = f("bridge/perf/metric_batch.py", "Tally.observe_one")
    assert stage_of([LOOP, f("bridge/upstream/ingest.py", "_observe"), tally]) == "metrics and logs"
    assert stage_of([LOOP, f("bridge/perf/metric_batch.py", "Tally.flush")]) == "metrics and logs"


def test_each_stage_of_the_path() -> None:
    cases = {
        "framing": f("bridge/upstream/sse.py", "feed"),
        "peeking": f("bridge/events/global_peek.py", "peek"),
        "normalizing": f("bridge/events/legacy.py", "normalize_legacy"),
        "preparing": f("bridge/store/jsonb_text.py", "jsonb_text"),
        "COPY": f("bridge/store/writes/copy_in.py", "copy_events"),
        "commit": f("bridge/store/writes/transaction.py", "write_group"),
        "fan-out notify": f("bridge/fanout/feed.py", "_on_notify"),
        "reading": f("venv/lib/python3.11/site-packages/aiohttp/streams.py", "read"),
    }
    for stage, frame in cases.items():
        assert stage_of([LOOP, frame]) == stage, frame


def test_the_driver_goes_to_its_caller_and_copy_is_named() -> None:
    execute = f("venv/site-packages/asyncpg/connection.py", "execute")
    copy = f("venv/site-packages/asyncpg/connection.py", "_copy_in_records")
    txn = f("bridge/store/writes/transaction.py", "write_group")
    claims = f("bridge/store/chat_sessions/claims.py", "claim_many")
    assert stage_of([LOOP, txn, execute]) == "commit"
    assert stage_of([LOOP, txn, f("bridge/store/writes/copy_in.py", "copy_events"), copy]) == "COPY"
    assert stage_of([LOOP, txn, copy]) == "COPY"
    assert stage_of([LOOP, claims, execute]) == "ingest bookkeeping"
    # the database's replies (buffered protocol) against an upstream body (data_received)
    assert stage_of([LOOP, ("/usr/lib/python3.11/asyncio/selector_events.py", "_read_ready__get_buffer")]) == "commit"
    assert stage_of([LOOP, ("/usr/lib/python3.11/asyncio/selector_events.py", "_read_ready__data_received")]) \
        == "reading"


def test_unnamed_is_the_rest() -> None:
    assert stage_of([LOOP, ("/usr/lib/python3.11/selectors.py", "select")]) == REST
    assert stage_of([]) == REST


def test_raw_lines() -> None:
    line = (f"<module> ({ROOT}/bridge/__main__.py:3);parse_frame ({ROOT}/bridge/events/envelope.py:40) 17\n")
    assert parse_raw_line(line) == ([(f"{ROOT}/bridge/__main__.py", "<module>"),
                                     (f"{ROOT}/bridge/events/envelope.py", "parse_frame")], 17)
    assert parse_raw_line("  \n") is None
    named = parse_raw_line('process 12:"python";main (a.py:1) 2')
    assert named == ([("", 'process 12:"python"'), ("a.py", "main")], 2)


@given(st.lists(st.tuples(st.sampled_from([
    "bridge/upstream/sse.py", "bridge/events/normalize.py", "bridge/store/writes/rows.py", "x/selectors.py",
    "bridge/fanout/hub.py", "aiohttp/streams.py"]), st.integers(1, 50)), max_size=30),
    st.floats(1.0, 500.0))
def test_rows_add_up_to_the_measured_total(samples: list[tuple[str, int]], cpu: float) -> None:
    lines = [f"run ({ROOT}/loop.py:1);g ({ROOT}/{path}:9) {n}" for path, n in samples]
    t = tabulate(lines, cpu)
    rows = t.rows()
    assert [r[0] for r in rows] == list(STAGES)
    assert t.total == sum(n for _, n in samples)
    if samples:
        assert abs(sum(us for *_, us in rows) - cpu) < 1e-6 * cpu
        assert abs(sum(share for _, _, share, _ in rows) - 1.0) < 1e-9
    else:
        assert all(us == 0.0 for *_, us in rows)


def test_methods_are_named_by_py_spy_with_their_class() -> None:
    transport = "/usr/lib/python3.11/asyncio/selector_events.py"
    assert stage_of([LOOP, (transport, "_SelectorSocketTransport._read_ready__data_received")]) == "reading"
    copy = f("venv/site-packages/asyncpg/connection.py", "Connection._copy_in_records")
    assert stage_of([LOOP, f("bridge/store/writes/transaction.py", "write_group"), copy]) == "COPY"
    assert stage_of([LOOP, (transport, "_SelectorSocketTransport.write")]) == REST


def test_the_deciding_frame_and_its_caller_are_kept() -> None:
    t = tabulate([f"run ({ROOT}/loop.py:1);_observe ({ROOT}/bridge/upstream/ingest.py:9);"
                  f"inc ({ROOT}/v/prometheus_client/metrics.py:3) 4"], 10.0)
    assert t.top["metrics and logs"] == [("_observe (upstream/ingest.py) < inc (prometheus_client/metrics.py)", 4)]


def test_the_statement_helper_goes_to_its_caller() -> None:
    rows = f("bridge/store/db.py", "fetch_rows")
    assert stage_of([LOOP, f("bridge/store/writes/transaction.py", "advance_and_notify"), rows]) == "commit"
    assert stage_of([LOOP, f("bridge/store/writes/copy_in.py", "chain_links"), rows]) == "COPY"
