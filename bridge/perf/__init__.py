"""Performance helpers, apart from the domain: hot-path JSON decoding (jsonload), frozen dataclass
instances without `__setattr__` overhead (frozen), a burst's parsing spread over loop turns
(turnstile), GC tuning after start-up (runtime), metrics once per batch and loop turn (metric_batch). They
import nothing from the bridge."""
