"""Sessions leaving the mirror, as operator commands (docs/lifecycle.md, "Erasure", "Archives", "Retention"):

    archive.py    one session as one gzip-compressed export file (the `opencode-bridge export` format)
    retention.py  a retention run: candidates, archive, delete, by batches; its report and metrics
    cli.py        `opencode-bridge erase | archive | retention`
"""
