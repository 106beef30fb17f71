"""The file-system side of prompt attachments (docs/commands.md, "Attachments"): a `path` must name a
regular file inside the session's directory once every symlink is resolved (a symlink pointing out of
the directory is refused like a path outside it), and the files' sizes count towards the 10 MiB bound.

The serve reads the file itself (a `file://` part, docs/upstream.md §21), so the bridge and the serve must
share the file system: true of the one-host deployment the bridge is made for (docs/operations.md).
"""

from __future__ import annotations

import os
from collections.abc import Mapping, Sequence
from typing import Any

from bridge.commands.attachments import MAX_TOTAL_BYTES, AttachmentError, data_url_bytes, data_url_text, is_text


def resolve_paths(files: Sequence[Mapping[str, Any]], directory: str) -> dict[str, str]:
    """`{path: resolved absolute path}` for every `path` file; AttachmentError for a file outside the
    directory, missing, not a regular file, or files larger than 10 MiB in all."""
    root = os.path.realpath(directory)
    out: dict[str, str] = {}
    total = sum(data_url_bytes(f["url"]) for f in files if "url" in f)
    for f in files:
        if "path" not in f:
            continue
        raw = str(f["path"])
        full = os.path.realpath(os.path.join(root, raw))  # an absolute `raw` replaces root
        if os.path.commonpath([root, full]) != root or full == root:
            raise AttachmentError(f"file {raw!r} is not inside the session's directory")
        try:
            st = os.stat(full)
        except OSError:
            raise AttachmentError(f"file {raw!r} does not exist") from None
        if not os.path.isfile(full):
            raise AttachmentError(f"file {raw!r} is not a regular file")
        total += st.st_size
        out[raw] = full
    if total > MAX_TOTAL_BYTES:
        raise AttachmentError("the files are larger than 10 MiB in all")
    return out


def text_contents(files: Sequence[Mapping[str, Any]], resolved: Mapping[str, str]) -> dict[int, str]:
    """The text of every text file (by index), read from the disk or decoded from its `data:` URL, for the
    v2 runtime, which takes text files in the prompt's text (bridge.commands.attachments.v2_text)."""
    out: dict[int, str] = {}
    for i, f in enumerate(files):
        if not is_text(str(f["mime"])):
            continue
        if "url" in f:
            out[i] = data_url_text(str(f["url"]))
            continue
        try:
            with open(resolved[f["path"]], encoding="utf-8", errors="replace") as fh:
                out[i] = fh.read(MAX_TOTAL_BYTES)
        except OSError as e:
            raise AttachmentError(f"file {f['path']!r} cannot be read: {e.strerror}") from None
    return out
