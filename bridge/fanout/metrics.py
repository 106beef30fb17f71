"""Prometheus metrics of the WebSocket fan-out, on the bridge's registry (no session ids in labels)."""

from __future__ import annotations

from prometheus_client import Counter, Gauge, Histogram

from bridge.metrics import REGISTRY

WS_CONNECTIONS = Gauge("bridge_ws_connections", "Open /v1/ws connections",
                        multiprocess_mode="livesum", registry=REGISTRY)
WS_SUBSCRIPTIONS = Gauge("bridge_ws_subscriptions", "Session subscriptions over all connections",
                          multiprocess_mode="livesum", registry=REGISTRY)
WS_REFUSED = Counter("bridge_ws_refused_total", "Connections or subscriptions refused, by reason", ["reason"],
                     registry=REGISTRY)
WS_THROTTLED = Counter("bridge_ws_ops_throttled_total",
                       "Client ops held back by the per-connection rate limit (docs/security.md)", registry=REGISTRY)
WS_BAD_MESSAGES = Counter("bridge_ws_bad_messages_total", "Client frames answered with bad_message, by reason",
                          ["reason"], registry=REGISTRY)
WS_EVENTS_TRUNCATED = Counter("bridge_ws_events_truncated_total",
                              "Durable events too large for a client queue, sent as a reference", registry=REGISTRY)
WS_CLOSED = Counter("bridge_ws_closed_total", "Connections closed by the bridge, by close code", ["code"],
                    registry=REGISTRY)
WS_SENT = Counter("bridge_ws_messages_sent_total", "Messages written to clients, by message type", ["type"],
                  registry=REGISTRY)
WS_DELTAS_DROPPED = Counter("bridge_ws_deltas_dropped_total", "Deltas not queued for a client that is behind",
                            registry=REGISTRY)
FEED_READS = Counter("bridge_fanout_feed_reads_total", "Reads of committed events for live subscribers",
                     registry=REGISTRY)
NOTIFY_RECONNECTS = Counter("bridge_fanout_listen_reconnects_total", "Reconnects of the LISTEN connection",
                            registry=REGISTRY)
DELTA_QUEUE_SECONDS = Histogram(
    "bridge_ws_delta_queue_seconds", "From a delta reaching the hub to its write on a client socket",
    registry=REGISTRY, buckets=(0.0001, 0.00025, 0.0005, 0.001, 0.0025, 0.005, 0.01, 0.025, 0.05, 0.1, 0.5),
)
READ_QUEUE_DEPTH = Gauge("bridge_ws_read_queue_depth",
                         "WebSocket reads waiting for a turn on the read pool (bridge.fanout.read_queue)",
                         multiprocess_mode="livesum", registry=REGISTRY)
READ_QUEUE_WAIT_SECONDS = Histogram(
    "bridge_ws_read_queue_wait_seconds", "From a WebSocket read joining the queue to its turn", registry=REGISTRY,
    buckets=(0.001, 0.005, 0.01, 0.05, 0.1, 0.25, 0.5, 1.0, 2.5, 5.0, 10.0, 30.0),
)
READ_QUEUE_THROTTLED = Counter("bridge_ws_read_queue_throttled_total",
                               "Reads held back because their client already had its share waiting",
                               registry=REGISTRY)
SHARED_READS = Counter("bridge_ws_shared_reads_total", "Catch-up reads run for subscribers, by what they read",
                       ["read"], registry=REGISTRY)
SHARED_READ_HITS = Counter("bridge_ws_shared_read_hits_total",
                           "Subscribers served by a read another subscriber's turn ran (no read of their own)",
                           ["read"], registry=REGISTRY)
READ_RETRIES = Counter("bridge_ws_read_pool_retries_total",
                       "Admitted reads that found the read pool taken by other readers and ran again",
                       registry=REGISTRY)
WS_FRAMES_SENT = Counter("bridge_ws_frames_sent_total", "Frames written to client sockets", registry=REGISTRY)
WS_SOCKET_WRITES = Counter("bridge_ws_socket_writes_total",
                           "Writes to client sockets (several queued frames go out in one: bridge.http.ws_send)",
                           registry=REGISTRY)
