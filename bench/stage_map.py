"""Which stage of the ingest a sampled stack is in (pure): the mapping table of `bench.wire_stages`.

A sample is a stack of frames `(file, function)`, outermost first, as the sampler (py-spy's raw format)
gives it. It belongs to the stage of its **innermost** frame that a rule of `RULES` names: a sample in
`orjson.loads` called by `parse_frame` called by the durable follower is *parsing*, not *reading*; one in a
Prometheus counter called from the ingest is *metrics and logs*. A sample no rule names is *the rest*
(the event loop's own machinery, the stdlib, garbage collection that Python frames do not show, threads).

Per-stage µs per event = the stage's share of the phase's samples x the phase's measured CPU per event
(`/proc/<pid>/stat`), so the rows add up to the measured total by construction; the sampler only decides the
shares (docs: BENCHMARKS.md, "Where the CPU of an event goes").
"""

from __future__ import annotations

from collections import Counter
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass

Frame = tuple[str, str]  # (file path, function name)

# The stages in the order of an event's path; the table prints them in this order.
STAGES = ("reading", "framing", "peeking", "parsing", "normalizing", "preparing", "COPY", "commit",
          "fan-out notify", "ingest bookkeeping", "metrics and logs", "the rest")
REST = "the rest"


@dataclass(frozen=True)
class Rule:
    """Frames whose path contains `path` (and, when `functions` is set, whose function is one of them)."""

    stage: str
    path: str
    functions: frozenset[str] = frozenset()

    def matches(self, frame: Frame) -> bool:
        # py-spy names a method `Class.method`: a rule names the function alone
        return self.path in frame[0] and (not self.functions or frame[1].rsplit(".", 1)[-1] in self.functions)


def _r(stage: str, path: str, *functions: str) -> Rule:
    return Rule(stage, path, frozenset(functions))


# First match wins for one frame, so the specific rules come before the broad ones of the same files.
RULES: tuple[Rule, ...] = (
    # metrics and logs: wherever they are called from
    _r("metrics and logs", "/prometheus_client/"),
    _r("metrics and logs", "/structlog/"),
    _r("metrics and logs", "/logging/"),
    _r("metrics and logs", "/bridge/metrics.py"),
    _r("metrics and logs", "/bridge/perf/metric_batch.py"),
    _r("metrics and logs", "/bridge/log.py"),
    # framing: the SSE parser; peeking: /global/event frames looked at before any parse
    _r("framing", "/bridge/upstream/sse.py"),
    _r("peeking", "/bridge/events/global_peek.py"),
    _r("peeking", "/bridge/workers/live_tee.py"),
    # parsing: JSON text → an envelope (the durable stream, the sync log's answer, /global/event)
    _r("parsing", "/bridge/perf/jsonload.py"),
    _r("parsing", "/bridge/events/envelope.py"),
    _r("parsing", "/bridge/events/syncframes.py"),
    _r("parsing", "/bridge/upstream/sync_answer.py"),
    _r("parsing", "/bridge/upstream/sync_items.py"),
    _r("parsing", "/ijson/"),
    _r("parsing", "/json/"),
    # normalizing: an envelope → a ChatEvent (both runtimes), admission checks
    _r("normalizing", "/bridge/events/"),
    _r("normalizing", "/bridge/perf/frozen.py"),
    _r("normalizing", "/bridge/upstream/admit.py"),
    # preparing: a ChatEvent → the row (jsonb text, codecs, the hash chain's link)
    _r("preparing", "/bridge/store/writes/rows.py"),
    _r("preparing", "/bridge/store/writes/chain.py"),
    _r("preparing", "/bridge/store/jsonb_text.py"),
    _r("preparing", "/bridge/store/payload.py"),
    _r("preparing", "/bridge/store/codecs.py"),
    _r("preparing", "/bridge/store/hash_chain.py"),
    # COPY: the records sent (asyncpg's encoding runs in C under these frames)
    _r("COPY", "/bridge/store/writes/copy_in.py"),
    _r("COPY", "/asyncpg/connection.py", "copy_records_to_table", "_copy_in_records", "_copy_in",
       "_do_copy_in_records"),
    # fan-out notify: NOTIFY sent, the feed's LISTEN and reads, frames to clients
    _r("fan-out notify", "/bridge/store/notices.py"),
    _r("fan-out notify", "/bridge/store/reads/"),
    _r("fan-out notify", "/bridge/fanout/"),
    _r("fan-out notify", "/bridge/http/ws_send.py"),
    # commit: the write transaction's other statements and the group committer (asyncpg and SQLAlchemy are
    # named by no rule: their frames go to the bridge module that called them), and the database's replies
    # (asyncpg reads them through the loop's buffered-protocol callback; aiohttp never does)
    _r("commit", "/bridge/store/writes/"),
    _r("commit", "/asyncio/selector_events.py", "_read_ready__get_buffer"),
    # reading: upstream HTTP bodies (aiohttp, the transport seam, the readers' loops)
    _r("reading", "/aiohttp/"),
    _r("reading", "/bridge/upstream/transport.py"),
    _r("reading", "/bridge/upstream/http_base.py"),
    _r("reading", "/bridge/upstream/client.py"),
    _r("reading", "/bridge/upstream/live.py", "_read_once"),
    _r("reading", "/asyncio/selector_events.py", "_read_ready", "_read_ready__data_received"),
    # ingest bookkeeping: the followers, the ingest's cursor and shelf, the sessions' state
    _r("ingest bookkeeping", "/bridge/upstream/"),
    _r("ingest bookkeeping", "/bridge/sessions/"),
    _r("ingest bookkeeping", "/bridge/dispatch.py"),
    _r("ingest bookkeeping", "/bridge/perf/turnstile.py"),
    _r("ingest bookkeeping", "/bridge/store/chat_sessions/"),  # claims, leases, statuses of the sessions
    _r("ingest bookkeeping", "/bridge/store/commands_pending/"),
    _r("ingest bookkeeping", "/bridge/store/partition"),
    # bridge/store/db.py (the statements' helper) is named by no rule: its samples go to its caller
)


def deciding(stack: Sequence[Frame], rules: Sequence[Rule] = RULES) -> tuple[str, int]:
    """The stage of a sample and the index of the frame that decided it (its innermost frame a rule names;
    `REST` and the leaf's index when none does)."""
    for i in range(len(stack) - 1, -1, -1):
        for rule in rules:
            if rule.matches(stack[i]):
                return rule.stage, i
    return REST, len(stack) - 1


def stage_of(stack: Sequence[Frame], rules: Sequence[Rule] = RULES) -> str:
    """The stage of a sample: its innermost frame that a rule names; `REST` when none does."""
    return deciding(stack, rules)[0]


def _short(frame: Frame) -> str:
    return f"{frame[1]} ({'/'.join(frame[0].split('/')[-2:])})"


def parse_raw_line(line: str) -> tuple[list[Frame], int] | None:
    """One line of py-spy's raw (collapsed) output, `f (file:line);g (file:line) COUNT` outermost first;
    None for a blank line. A frame without `(file:line)` (a thread or process name) has an empty file."""
    line = line.rstrip("\n")
    if not line.strip():
        return None
    stack_text, _, count = line.rpartition(" ")
    frames: list[Frame] = []
    for part in stack_text.split(";"):
        name, sep, where = part.partition(" (")
        file = where.rsplit(":", 1)[0] if sep else ""
        frames.append((file, name.strip()))
    return frames, int(count)


@dataclass(frozen=True)
class StageTable:
    """A phase's samples by stage and its measured CPU per event."""

    samples: Mapping[str, int]
    cpu_us_per_event: float
    top: Mapping[str, Sequence[tuple[str, int]]]  # per stage: "caller < deciding frame", most sampled first

    @property
    def total(self) -> int:
        return sum(self.samples.values())

    def us_per_event(self, stage: str) -> float:
        """The stage's share of the samples times the measured CPU per event."""
        return self.samples.get(stage, 0) / self.total * self.cpu_us_per_event if self.total else 0.0

    def rows(self) -> list[tuple[str, int, float, float]]:
        """(stage, samples, share, µs per event) in `STAGES` order; the µs add up to the measured total."""
        t = self.total or 1
        return [(s, self.samples.get(s, 0), self.samples.get(s, 0) / t, self.us_per_event(s)) for s in STAGES]


def tabulate(lines: Iterable[str], cpu_us_per_event: float, rules: Sequence[Rule] = RULES) -> StageTable:
    """Bucket a phase's raw samples into stages."""
    by_stage: Counter[str] = Counter()
    frames: dict[str, Counter[str]] = {}
    for line in lines:
        parsed = parse_raw_line(line)
        if parsed is None:
            continue
        stack, n = parsed
        stage, i = deciding(stack, rules)
        by_stage[stage] += n
        if stack:
            where = _short(stack[i]) if i < 1 else f"{_short(stack[i - 1])} < {_short(stack[i])}"
            frames.setdefault(stage, Counter())[where] += n
    return StageTable(dict(by_stage), cpu_us_per_event, {s: c.most_common(8) for s, c in frames.items()})
