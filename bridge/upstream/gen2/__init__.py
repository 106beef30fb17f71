"""The OpenCode 2.x driver (docs/upstream.md "OpenCode 2.x"): written from 2.x's published source, not yet
run against a 2.x serve."""
