"""`BRIDGE_WORKERS` processes on one host: the parent (parent.py), what a worker takes from it (child.py), the
one `/global/event` reader of the host (live_tee.py), the workers' notifications (notify.py), the pure
decisions (policy.py) — docs/operations.md "Workers"."""
