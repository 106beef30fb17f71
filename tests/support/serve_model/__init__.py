"""One model of `opencode serve` 1.18.33 for every fake (docs/testing.md "The serve model").

The model (model.py: sessions, durable events, sync logs, seqs, pending requests, live subscribers, a
fault plan) is pure state; the rules of reading it (rules.py: the sync-log rule, /history pages) and the
wire vocabulary (frames.py) are written once. Two adapters serve it: fake_upstream.py on a real socket
on 127.0.0.1 (integration tests, benches) and model_transport.py behind `MockTransport` (unit tests). The
benches' pre-encoded serves (bench/wire_serve.py, bench/churn_serve.py) answer through the same rules and
frames. clock.py is the one test clock.

It lives under tests/support because bench/ already imports tests.support (both run from the checkout;
neither is in the wheel).
"""

from tests.support.serve_model.clock import Clock
from tests.support.serve_model.faults import FaultPlan
from tests.support.serve_model.model import FakeSession, ServeModel

__all__ = ["Clock", "FakeSession", "FaultPlan", "ServeModel"]
