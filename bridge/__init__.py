"""opencode-bridge: mirrors `opencode serve` sessions into PostgreSQL."""

__version__ = "0.1.0"
